"""Tuning tasks per kernel: each kernel (fuse.Group) of a lowered part becomes a program of
its own, and the compiled part uses that program's tuning records in place of the
kernel's default schedule.

A kernel's program (`group_program`): the stages the kernel computes (its anchor, the
reductions attached to it, the injective stages inlined into them) with every tensor it
reads from another kernel turned into a placeholder; its outputs are the anchor's (or the
padded copy of it the kernel writes, fuse.Group.pad). Its canonical copy
(tune.canonical_program: inputs in0, in1 ... in the order the program first reads them,
ops t0, t1 ..., variables v0, v1 ...) is the tuning task, so the same kernel in
two places of a model, or in two models, has one workload key and one set of records.

Using a record (`apply_group_record`): the record's steps name the canonical copy's stages
and axes; they are renamed back to the kernel's own (a name token in0/tK/vK becomes the
real op or variable name; derived names such as `v3.outer` or `t2.local` keep their
suffixes) and replayed on the whole part's schedule, where the kernel's stages are the same
operations. Why replay rather than build a tuned kernel as a module of its own: the part
stays one module with one set of buffers and one call, as untuned (the runtime, the
on-disk cache and the fallback accounting see no difference); only the loops of that
kernel change. A record that does not replay there (a step on an inlined stage another
kernel also reads, a name clash) is skipped for the next one, and a kernel with none
keeps its default schedule. A record of the default schedule (tune.py's sketch "default")
is not replayed: the kernel gets today's default for the compile target. A replayed record
tuned for fewer threads than the target's gets the parallel loops it lacks, and one whose
parallel loop is too narrow for the target's threads a wider one (replay_record). Records
timed at the target's threads come first (RecordIndex); torch/revalidate.py re-times a log's
chosen records against today's defaults at those threads.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Dict, List, NamedTuple, Optional, Tuple

from ..autoschedule import records
from ..autoschedule.task import default_args
from ..schedule.dataflow import replace_reads_op
from ..schedule.steps import Step
from ..tensor.op import ComputeOp, PlaceholderOp, placeholder
from ..tensor.reduce import Reduce
from ..tensor.serialize import workload_key
from .attention_schedule import is_attention
from .fuse import is_matmul
from .tune import DEFAULT, canonical_names, canonical_program
from .winograd_schedules import placed_inside, placed_stage

# Step fields (schedule/steps.py) that name stages, and those that name axes.
STAGE_FIELDS = ("stage", "target", "tensor")
AXIS_FIELDS = ("axis", "x", "y")
AXES_FIELDS = ("axes",)


@dataclass
class GroupProgram:
    """A kernel as a program of its own: the canonical copy's inputs and outputs, and the
    map from each canonical name (in0, t3, v7) to the kernel's real name in the part."""

    inputs: List
    outputs: List
    names: Dict[str, str]
    members: frozenset          # the ops of the part this kernel computes
    shared_inline: frozenset    # inlined members that another kernel reads too


def kind_of(group) -> str:
    """The kernel's kind, as schedule_group dispatches on it: attention, conv, matmul, rows, pointwise."""
    if is_attention(group.anchor):
        return "attention"
    if group.convs:
        return "conv"
    if is_matmul(group.anchor) or group.matmuls:
        return "matmul"
    if group.attached or isinstance(group.anchor.op.body, Reduce):
        return "rows"
    return "pointwise"


def _members(s, group) -> Tuple[set, set]:
    """(ops the kernel computes, the inlined ones among them): the anchor, its attached
    reductions, the Winograd stages its schedule computes inside it (winograd_schedules.
    placed_inside), and the inlined stages they read through chains of inlined stages."""
    live = [group.anchor] + list(group.attached) + ([group.pad] if group.pad is not None else []) \
        + placed_inside(s, group)
    members = {st.op for st in live}
    inlined: set = set()
    stack = list(live)
    while stack:
        st = stack.pop()
        for inp in s.inputs_of(st):
            if isinstance(inp.op, ComputeOp) and inp.attach_type == "inline" and inp.op not in members:
                members.add(inp.op)
                inlined.add(inp.op)
                stack.append(inp)
    return members, inlined


def group_program(s, group) -> Optional[GroupProgram]:
    """The kernel's program (module docstring), or None when it cannot be a task of its own:
    a Winograd stage computed inside another kernel (winograd_schedules.placed_stage), a
    symbolic shape, an operation of several outputs read across the kernel's edge, or a member
    that is not a compute stage (scan, extern). Built from the kernel's own stages
    only (the rest of the model is never walked)."""
    if placed_stage(group):
        return None             # computed inside its reader's kernel, part of that one's task
    members, inlined = _members(s, group)
    anchor = (group.pad if group.pad is not None else group.anchor).op     # the kernel's result
    if not all(isinstance(e, int) for e in anchor.shape) or not all(isinstance(op, ComputeOp) for op in members):
        return None
    mapping: Dict[object, object] = {}

    def rebuild(op):
        """op (a member) reading placeholders for the kernel's inputs, producers rebuilt first."""
        if op in mapping:
            return mapping[op]
        for t in op.input_tensors:
            src = t.op
            if src in members:
                rebuild(src)
            elif src not in mapping and not isinstance(src, PlaceholderOp):
                out = src.output(0)
                if src.num_outputs != 1 or not all(isinstance(e, int) for e in out.shape):
                    raise _NotATask
                mapping[src] = placeholder(out.shape, out.dtype, name=src.name)
        mapping[op] = replace_reads_op(op, mapping)
        return mapping[op]
    try:
        new_anchor = rebuild(anchor)
    except _NotATask:
        return None
    outs = [new_anchor.output(k) for k in range(anchor.num_outputs)]
    args = default_args(outs)
    ins = args[:len(args) - len(outs)]
    if not all(isinstance(e, int) for t in args for e in t.shape):
        return None
    c_ins, c_outs = canonical_program(ins, outs)
    readers = _readers(s)
    shared = frozenset(op for op in inlined if any(r not in members for r in readers.get(op, ())))
    return GroupProgram(c_ins, c_outs, canonical_names(ins, outs), frozenset(members), shared)


class _NotATask(Exception):
    """A kernel that group_program cannot make a program of its own."""


def _readers(s) -> Dict[object, List[object]]:
    out: Dict[object, List[object]] = {}
    for st in s.stages:
        for inp in s.inputs_of(st):
            out.setdefault(inp.op, []).append(st.op)
    return out


def rename_steps(steps: List[dict], names: Dict[str, str]) -> List[dict]:
    """Step JSON (the canonical copy's names) with every name token renamed by `names`."""
    def rename(text: str) -> str:
        return ".".join(names.get(tok, tok) for tok in text.split("."))
    out = []
    for step in steps:
        step = dict(step)
        for f in STAGE_FIELDS + AXIS_FIELDS:
            if isinstance(step.get(f), str):
                step[f] = rename(step[f])
        for f in AXES_FIELDS + ("readers",):
            if isinstance(step.get(f), list):
                step[f] = [rename(a) for a in step[f]]
        out.append(step)
    return out


def _replay(s, prog: GroupProgram, steps: List[dict]) -> None:
    """Replay renamed steps on the part's schedule s. The kernel's private inlined stages are
    computed at the root first (the record says where each goes); an inlined stage another
    kernel also reads stays inlined: a record that moves it raises ValueError."""
    shared = {op.name for op in prog.shared_inline}
    private = [op for op in prog.members if op.name not in shared and s[op].attach_type == "inline"]
    for op in private:
        s[op].compute_root()
    for data in steps:
        step = Step.from_json(data)
        stage = data.get("stage", data.get("tensor"))
        if stage in shared:
            if data["primitive"] == "compute_inline":
                continue            # inlined already, for every kernel that reads it
            raise ValueError(f"the record moves '{stage}', an inlined stage another kernel reads too")
        step.apply(s)


def apply_group_record(s, group, target, index: "RecordIndex") -> bool:
    """Schedule the kernel `group` of the part's schedule s with the best record of its
    program that replays there; False (s unchanged) when there is none, or when the best is
    a record of the task's default schedule (sketch "default"): then the caller builds
    today's default for this target, not the steps the default had when the log was tuned
    (the rules improve; a log keeps working and never pins an older default). A replayed
    record gets a parallel loop on each of the kernel's root stages that has none or one too
    narrow for the target's threads (replay_record) where the target runs more than one thread:
    a log tuned at one thread (CPU time on a loaded machine) holds candidates drawn without
    one, or with a loop of one iteration, which would run on one core at two."""
    return replay_best(s, group, target, index).replayed


class Replayed(NamedTuple):
    """What replay_best did with a kernel: the rank (in RecordIndex.ranked) of the record
    that decided it and that record (None, None: no record), whether its steps were replayed
    (not for a default record), how many parallel loops were added to them, and how many of
    their parallel loops were too narrow for the target's threads and drawn again wider."""

    rank: Optional[int]
    record: Optional[dict]
    replayed: bool
    parallel_added: int
    parallel_widened: int = 0


def replay_best(s, group, target, index: "RecordIndex") -> Replayed:
    """apply_group_record, saying which record decided the kernel (benchmarks/tune_log_report.py)."""
    prog = group_program(s, group)
    if prog is None:
        return Replayed(None, None, False, 0)
    recs = index.ranked(workload_key(default_args(prog.outputs)), target)
    for rank, rec in enumerate(recs):
        if rec.get("sketch") == DEFAULT:
            index.used(rec, target)
            return Replayed(rank, rec, False, 0)
        try:
            with s.all_or_nothing():
                added, widened = replay_record(s, prog, rename_steps(rec["steps"]["steps"], prog.names), target)
            index.used(rec, target)
            return Replayed(rank, rec, True, added, widened)
        except (ValueError, TypeError, KeyError):        # ScheduleError is a ValueError
            pass
    return Replayed(None, None, False, 0)


def replay_record(s, prog: GroupProgram, steps: List[dict], target) -> Tuple[int, int]:
    """Replay a record's renamed steps on the kernel prog of s for target; (parallel loops
    added, parallel loops widened). A record drawn for fewer threads than the target's may
    parallelize a loop of fewer iterations than the target's threads want (a draw for one
    thread fuses up to MAX_PAR_FUSE outer loops, and tile sizes may leave them one iteration
    each: BERT's FFN-down record of the Dec 3 log ran its whole 128 x 768 output in a parallel
    loop of ONE iteration, so on one core at two threads, 1.96x the default's time there);
    the steps are then replayed again without that stage's parallel step, and the stage gets
    the parallel loop the target's draw would give it (sketch_cpu.parallelize: its outer
    loops fused until PAR_PER_THREAD iterations a thread). A stage with none gets one too."""
    from ..autoschedule.sketch_cpu import parallelize
    threads = records.target_threads(target) or 1      # 1: not a CPU target
    before = {id(st): st.op for st in s.stages}
    saved = s.snapshot()
    _replay(s, prog, steps)
    narrow = {st.name for st in kernel_stages(s, prog, before) if _narrow_parallel(st, threads)}
    if narrow:
        s.restore(saved)
        saved = s.snapshot()
        _replay(s, prog, [d for d in steps if not (d["primitive"] == "parallel" and d.get("stage") in narrow)])
        widened = [st for st in kernel_stages(s, prog, before) if st.name in narrow and parallelize(s, st, threads)]
        if len(widened) < len(narrow):      # a stage the draw cannot parallelize: the record's own loop then
            s.restore(saved)
            _replay(s, prog, steps)
            narrow = set()
        else:
            s.release(saved)
    else:
        s.release(saved)
    if threads < 2:
        return 0, 0
    return sum(parallelize(s, st, threads) for st in kernel_stages(s, prog, before)), len(narrow)


def kernel_stages(s, prog: GroupProgram, before: Dict[int, object]) -> List:
    """The stages of s that compute the kernel prog after a record replayed on it: its
    members' and those the replay made (cache stages, rfactor partials); `before` maps each
    stage (by id) to its operation before the replay (a cache_write gives a member's stage a
    new operation)."""
    return [st for st in s.stages
            if id(st) not in before or before[id(st)] in prog.members or st.op in prog.members]


def _narrow_parallel(st, threads: int) -> bool:
    """Whether st, a root stage, has a parallel loop of fewer static iterations than threads
    x PAR_PER_THREAD (what a draw for `threads` asks of it, sketch_cpu._parallel_count)."""
    from ..autoschedule.sketch_cpu import PAR_PER_THREAD
    from ..schedule.legal import is_parallel
    if threads < 2 or st.attach_type != "root":
        return False
    ext = st.static_extents()
    return any(is_parallel(st, a) and isinstance(ext.get(a), int) and ext[a] < PAR_PER_THREAD * threads
               for a in st.leaf_iter_vars)


class RecordIndex:
    """A log's records by workload and target string, loaded once per build (a part has many
    kernels). Ranked for a target as records.choose ranks a CPU group: those timed at the
    target's threads first, then those of no recorded count (older logs), then the others
    (records.thread_tiers); the first kernel built from one of the others warns once."""

    def __init__(self, log: str):
        self._by_key: Dict[Tuple[str, str], List[dict]] = {}
        for rec in records.load(log):
            self._by_key.setdefault((rec["workload"], rec["target"]), []).append(rec)
        self.warned = False

    def ranked(self, key: str, target) -> List[dict]:
        """The records of workload key for target (a Target, or a target string: its -num-cores
        counts as its threads), in the order replay_best tries them."""
        recs = self._by_key.get((key, str(target)), [])
        return [rec for tier in records.thread_tiers(recs, records.target_threads(target))
                for rec in records.ranked(tier)]

    def used(self, rec: dict, target) -> None:
        """rec decides a kernel for target: a warning, the first time, when it was timed at
        another thread count (api.OtherThreadsWarning)."""
        if not self.warned and records.other_threads(rec, target):
            from ..autoschedule.api import OtherThreadsWarning, other_threads_text
            self.warned = True
            warnings.warn(other_threads_text("schedlang.torch", [rec], target), OtherThreadsWarning, stacklevel=5)


def similarity_tag(kind: str, flops: float) -> str:
    """Ansor's similarity tag: tasks of one kernel kind within a factor of 1.618 in FLOPs
    share an optimistic estimate in the gradient scheduler ('' for kinds that share none:
    TVM tags only its conv and dense ops, here conv and matmul)."""
    if kind not in ("conv", "matmul"):
        return ""
    return f"{kind}_{int(math.log(flops + 1, 1.618))}"
