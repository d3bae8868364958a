"""Features and kernel hashes of candidates whose fixed loop nests are lowered once per task.

A program's Tile IR is a sequence of loop nests, one per stage computed at the root (a
StageNest, the stages computed at it inside), and a candidate's features pool the rows of its
stores (sum and max) and its allocations' bytes (features.py), so they add up nest by nest.
The nests of stages a fixed rule shapes (SketchRule.fixed: the Winograd transforms, which take
topi.winograd's hand schedules) are the same in most candidates: their rows are kept, keyed on
the nest's steps (an unroll pragma annotate draws for them is part of the key), and a
candidate is lowered without them: the program of the other nests' stages alone, every tensor
a fixed nest makes read as an input of its name (a placeholder), with the candidate's steps on
those stages. The whole program is lowered only when a fixed nest's steps are new, and its
rows are kept then. A candidate's kernel hash is made the same way: the fixed nests' steps and
the Kernel IR of the rest.

Exact (tests/autoschedule/test_fixed_nests.py checks it against a whole lowering) where a nest
depends on its own steps only: a root stage computes its whole domain, which its readers read
(a fixed nest's root as the rest's placeholder, and the rest's output as a root buffer of the
whole), and no nest inlines a stage of another. Not so where the whole computes less of a rest
root than its domain: the Winograd bgemm's tile rows padded to the register tile's, which the
inverse never reads, are computed in the rest's program alone (2 of 198 tiles at 56 x 56), so
its features count them; the same for every candidate, as the bgemm's own task in whole-model
tuning counts them. A candidate where the parts cannot be told apart (a step names stages of
both) is lowered whole.

Why: a candidate of the Winograd conv2d 64 -> 64, 56 x 56 took ~160 ms CPU to lower for its
features on a Zen 3 (2/3 of it bound inference over the unrolled transforms, the same for every
candidate), and ~0.7 s more for its kernel hash when picked; the search measured 24 candidates
in 5 minutes (results-tune-zen1-avx2.txt, results-tune-zen3-avx2.txt).
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from typing import Dict, FrozenSet, List, Optional, Tuple

import numpy as np

from ..driver import check_before_lowering, lower_tile_to_kernel
from ..errors import LoweringError, ScheduleError
from ..loop.nodes import Allocate, Func, Seq, StageNest
from ..schedule import create_schedule, legal
from ..schedule.dataflow import replace_reads_op
from ..schedule.steps import Step
from ..target.registry import get_backend
from ..tensor.graph import post_order
from ..tensor.op import ComputeOp, PlaceholderOp, placeholder
from .features import pooled_features, stmt_rows, target_features, tile_ir
from .task import SearchTask, default_args

NAME_FIELDS = ("stage", "target", "tensor")       # step fields that name a stage (schedule/steps.py)


class NotSplit(Exception):
    """The candidate cannot be lowered in two parts: lower it whole."""


@dataclass
class Lowered:
    """A candidate lowered in parts: its features, the keys of its fixed nests, and the rest
    as a schedule of a program of its own with that program's arguments and Tile IR (None
    when every nest is fixed)."""

    features: np.ndarray
    keys: Tuple[str, ...]
    rest: Optional[Tuple[object, list, Func]]

    def kernel_hash(self, target) -> str:
        """sha256 of the fixed nests' keys and the rest's Kernel IR (search.kernel_hash's job)."""
        text = "\n".join(self.keys)
        if self.rest is not None:
            s, _, tile = self.rest
            kernel = lower_tile_to_kernel(tile, s, target)
            get_backend(target.kind).check_launch(kernel, target)
            text += "\n" + str(kernel)
        return hashlib.sha256(text.encode()).hexdigest()


class FixedNests:
    """The kept rows of a task's fixed nests and the programs of its other stages."""

    def __init__(self, task: SearchTask, fixed: FrozenSet[str], plain: FrozenSet[str]):
        self.task = task
        self.fixed = fixed            # stages a fixed rule shapes (in every sketch)
        self.plain = plain            # stages every sketch leaves plain (a fixed rule may shape them: Y's reader)
        self.rows: Dict[str, Tuple[list, list]] = {}       # nest key -> (its store rows, its allocations)
        self.programs: Dict[FrozenSet[str], Tuple[list, list]] = {}   # stages lowered -> (outputs, args)
        self.ops = {op.name: op for op in post_order([t.op for t in task.outputs])}
        self.args = {t.op.name for t in task.args}
        self.whole = 0                # candidates lowered whole (a fixed nest's steps new, or no split)

    @staticmethod
    def of(task: SearchTask, sketches) -> Optional["FixedNests"]:
        """FixedNests of a task some stage of which a fixed rule shapes in every sketch; None
        otherwise, or where the target adds features of the whole function (cuda)."""
        if target_features(task.target).names or not sketches:
            return None
        per_sketch = [dict(sk.rule_names) for sk in sketches]
        rules = {stage: rule for sk in sketches for stage, rule in sk.rules}
        fixed = frozenset(n for n in per_sketch[0] if getattr(rules[n], "fixed", False)
                          and all(getattr(dict(sk.rules)[n], "fixed", False) for sk in sketches))
        plain = frozenset(n for n in per_sketch[0] if all(r.get(n) == "plain" for r in per_sketch))
        return FixedNests(task, fixed, plain) if fixed else None

    # ---- a candidate ---------------------------------------------------------------------

    def lower(self, s) -> Optional[Lowered]:
        """The candidate schedule s lowered in parts (None: lower it whole, it has no fixed
        nest or cannot be split). Raises what tile_ir raises for an illegal schedule."""
        check_before_lowering(s)
        nests = _nests(s)
        fixed = [root for root, members in nests.items() if self._is_fixed(members)]
        if not fixed:
            return None
        steps = json.loads(s.to_json())["steps"]
        keys = {root: _nest_key(s, root, nests[root], steps) for root in fixed}
        rest = [root for root in nests if root not in keys]
        try:
            if any(keys[root] not in self.rows for root in fixed):
                self._keep_whole(s, keys)
            part = self._rest(s, nests, rest, steps) if rest else None
        except NotSplit:
            return None
        rows, allocs = [], []
        rest_rows = _nest_rows(part[2]) if part is not None else {}
        for root in nests:
            nest_rows, nest_allocs = self.rows[keys[root]] if root in keys else rest_rows[root]
            rows += nest_rows
            allocs += nest_allocs
        allocs += self._root_buffers(s, nests)
        return Lowered(pooled_features(rows, allocs), tuple(keys[root] for root in fixed), part)

    def _is_fixed(self, members) -> bool:
        names = {st.name for st in members}
        return bool(names & self.fixed) and names <= self.fixed | self.plain

    def _keep_whole(self, s, keys) -> None:
        """Lower s whole and keep its fixed nests' rows under their keys."""
        self.whole += 1
        by_root = _nest_rows(tile_ir(s, self.task.args))
        for root, key in keys.items():
            if root in by_root:
                self.rows[key] = by_root[root]

    def _root_buffers(self, s, nests) -> List[int]:
        """The bytes of the buffers the whole program allocates at its root: every output of a
        root stage that is no argument (its whole domain)."""
        out = []
        for root in nests:
            op = s[root].op
            if op.name in self.args:
                continue
            for k in range(op.num_outputs):
                t = op.output(k)
                out.append(math.prod(int(e) for e in t.shape) * t.dtype_obj.bytes)
        return out

    def _rest(self, s, nests, rest: List[str], steps: List[dict]) -> Tuple[object, list, Func]:
        """(schedule, args, Tile IR) of the rest: the program of its nests' stages with the
        candidate's steps on them."""
        names = frozenset(st.name for root in rest for st in nests[root]) | _inlined_reads(s, nests, rest)
        if names not in self.programs:
            self.programs[names] = self._program(names)
        outputs, args = self.programs[names]
        sub = create_schedule([t.op for t in outputs])
        mine = {st.name for st in sub.stages if isinstance(st.op, ComputeOp)}
        for data in steps:
            if not _belongs(data, mine):
                continue
            before = {st.name for st in sub.stages}
            try:
                Step.from_json(data).apply(sub)
            except (ValueError, TypeError, KeyError) as err:     # (ScheduleError is a ValueError)
                raise NotSplit(str(err)) from err
            mine |= {st.name for st in sub.stages} - before
        try:
            return sub, args, tile_ir(sub, args)
        except (ScheduleError, LoweringError) as err:      # the whole lowering decides
            raise NotSplit(str(err)) from err

    def _program(self, names: FrozenSet[str]) -> Tuple[list, list]:
        """(outputs, args) of a program of the task's stages named in names (those of them
        not in the task: stages the steps make), every other stage they read a placeholder."""
        members = [op for name, op in self.ops.items() if name in names and isinstance(op, ComputeOp)]
        if not members:
            raise NotSplit("no stage of the task")
        mapping: Dict[object, object] = {}
        for op in members:               # post order: producers first
            for t in op.input_tensors:
                src = t.op
                if src not in mapping and src.name not in names and not isinstance(src, PlaceholderOp):
                    out = src.output(0)
                    mapping[src] = placeholder(out.shape, out.dtype, name=src.name)
            mapping[op] = replace_reads_op(op, mapping)
        readers = {t.op.name for op in self.ops.values() if op.name not in names and isinstance(op, ComputeOp)
                   for t in op.input_tensors}
        outs = [mapping[op].output(0) for op in members
                if op.name in readers or op.name in {t.op.name for t in self.task.outputs}]
        if not outs:
            raise NotSplit("the rest has no output")
        return outs, default_args(outs)


# ---- nests ---------------------------------------------------------------------------------

def _nests(s) -> Dict[str, list]:
    """Root stage name -> the live stages of its nest (itself and those computed inside it), the
    roots in the schedule's order (the Tile IR's)."""
    live = [st for st in s.stages if legal.is_live(st)]
    out: Dict[str, list] = {st.name: [] for st in live if st.attach_type == "root"}
    for st in live:
        root = st
        while root.attach_type == "at":
            root = root.attach_stage
        out[root.name].append(st)
    return out


def _names(data: dict) -> List[str]:
    """The stages a step (JSON) names."""
    found = [data[f] for f in NAME_FIELDS if isinstance(data.get(f), str)]
    return found + [r for r in data.get("readers", ()) if isinstance(r, str)]


def _belongs(data: dict, mine: set) -> bool:
    """Whether a step shapes the stages of mine (cache_read: of its readers); NotSplit where it
    names stages of both sides."""
    if data.get("primitive") == "cache_read":
        subject = list(data.get("readers", ()))
    else:
        subject = [data.get("stage", data.get("tensor"))]
    inside = [n in mine for n in subject]
    if not any(inside):
        return False
    if not all(inside) or (isinstance(data.get("target"), str) and data["target"] not in mine):
        raise NotSplit(f"a step names stages of both parts: {data}")
    return True


def _inlined_reads(s, nests, roots: List[str]) -> FrozenSet[str]:
    """The inlined stages the nests of roots read (through chains of inlined stages)."""
    found, stack = set(), [st for root in roots for st in nests[root]]
    while stack:
        st = stack.pop()
        for inp in s.inputs_of(st):
            if legal.is_compute(inp) and inp.attach_type == "inline" and inp.name not in found:
                found.add(inp.name)
                stack.append(inp)
    return frozenset(found)


def _nest_key(s, root: str, members, steps: List[dict]) -> str:
    """What decides a nest's code: its root and every step naming its stages or the inlined
    stages it reads."""
    names = {st.name for st in members} | _inlined_reads(s, {root: members}, [root])
    mine = [d for d in steps if any(n in names for n in _names(d))]
    return root + ":" + json.dumps(mine, sort_keys=True)


def _nest_rows(func: Func) -> Dict[str, Tuple[list, list]]:
    """Root stage name -> (store rows, allocation bytes) of each nest of a Tile IR function
    (features.stmt_rows); the function's root allocations are left out (FixedNests adds them).
    NotSplit where the function is not allocations around a sequence of nests."""
    out: Dict[str, Tuple[list, list]] = {}
    body = func.body
    while isinstance(body, Allocate):
        body = body.body
    for stmt in (body.stmts if isinstance(body, Seq) else (body,)):
        if not isinstance(stmt, StageNest):
            raise NotSplit(f"a {type(stmt).__name__} among the root nests")
        out[stmt.stage] = stmt_rows(stmt)
    return out
