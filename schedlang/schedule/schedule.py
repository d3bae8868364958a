"""The schedule: one stage per operation, in dataflow order, and the step list that prints,
serialises and replays. The dataflow primitives (cache_read, cache_write, rfactor) are
methods here and live in dataflow.py."""
from __future__ import annotations

import contextlib
from types import MappingProxyType
from typing import Dict, Iterable, List, Mapping, Optional, Sequence

from ..errors import InternalError, ScheduleError
from ..expr.functor import free_vars
from ..expr.nodes import Expr, Var
from ..tensor.axis import IterVar, has_axis
from ..tensor.graph import post_order
from ..tensor.op import ComputeOp, Operation, PlaceholderOp, Tensor
from ..tensor.scan import ScanOp
from . import dataflow, scan as scan_rules, steps as steps_mod
from .dataflow import replace_reads_op
from .placement import SCOPES  # noqa: F401  (re-exported by the package)
from .stage import Stage


def create_schedule(ops) -> "Schedule":
    """A schedule for the operations ops (one or a list; tensors are accepted too)."""
    return Schedule(ops)


def _as_op(x) -> Operation:
    if isinstance(x, Tensor):
        return x.op
    if isinstance(x, Operation):
        return x
    raise TypeError(f"create_schedule takes operations or tensors (C.op or C), got {x!r}")


class Schedule:
    """How to compute a set of output operations: a stage each, in dataflow order."""

    def __init__(self, ops):
        ops = [ops] if isinstance(ops, (Operation, Tensor)) else list(ops)
        if not ops:
            raise ValueError("create_schedule needs at least one output operation")
        self._user_outputs = [_as_op(o) for o in ops]
        self.stages: List[Stage] = []
        self._by_op: Dict[Operation, Stage] = {}
        self.steps: List[steps_mod.Step] = []
        self._recording = True
        self._size_vars: Dict[str, Var] = {}     # size variables the schedule uses (split factors), by name
        self._undo: List[UndoPoint] = []     # open undo points, oldest first (snapshot)
        renamed = self._unique_ops(post_order(self._user_outputs))
        for user_op, op in renamed.items():
            stage = Stage(self, op, op.name)
            self.stages.append(stage)
            self._by_op[op] = self._by_op[user_op] = stage
        self.outputs = [self._by_op[o].op for o in self._user_outputs]
        for o in self._user_outputs:
            self._by_op[o].is_output = True
        # The scan stages, fixed from here: the dataflow primitives make compute stages only and
        # refuse scans. The scan rules ask per primitive; a scan of all stages each time made
        # scheduling a model quadratic in its size.
        self.scan_stages = tuple(st for st in self.stages if isinstance(st.op, ScanOp))
        scan_rules.attach_cells(self)

    @staticmethod
    def _unique_ops(ops: Sequence[Operation]) -> Dict[Operation, Operation]:
        """Give every operation a unique name (stages are named after them); duplicates get
        a suffix, and readers are rebuilt to read the renamed operations."""
        taken, mapping = set(), {}
        for op in ops:
            name, n = op.name, 0
            while name in taken:
                n += 1
                name = f"{op.name}_{n}"
            taken.add(name)
            reads = {old: new for old, new in mapping.items() if new is not old}
            if isinstance(op, PlaceholderOp):
                new = op if name == op.name else PlaceholderOp(name, op.shape, op.dtype)
            elif not isinstance(op, ComputeOp):     # scan, extern: rebuilt over the renamed inputs
                changed = name != op.name or any(t.op in reads for t in op.input_tensors) \
                    or any(t.op in reads for t in getattr(op, "state_placeholder", ()))
                new = op.replace_inputs(reads, name) if changed else op
            else:
                new = replace_reads_op(op, reads)
                new = new if name == op.name else new.with_bodies(new.bodies, name=name)
            mapping[op] = new
        return mapping

    def normalize(self) -> "Schedule":
        """TVM's Schedule.normalize, which rebases every loop to start at 0 before its
        InferBound and ScheduleOps. Nothing to do here: lowering takes axes with any start
        (a scan's steps start at its init's rows). Returns the schedule itself, so TVM code
        that calls `s = s.normalize()` runs unchanged."""
        return self

    # ---- lookup ------------------------------------------------------------------------
    @property
    def stage_map(self) -> Mapping[Operation, Stage]:
        """Each operation's stage, read-only: the stages' own ops, and the ops given to
        create_schedule where making names unique replaced them."""
        return MappingProxyType(self._by_op)

    @property
    def user_outputs(self) -> List[Operation]:
        """The output operations as given to create_schedule (self.outputs holds their stages'
        ops, renamed where two had one name)."""
        return list(self._user_outputs)

    def __getitem__(self, key) -> Stage:
        if isinstance(key, Stage):
            if key.schedule is self:
                return key
        elif isinstance(key, str):
            for st in self.stages:
                if st.name == key:
                    return st
        elif isinstance(key, (Tensor, Operation)):
            op = key.op if isinstance(key, Tensor) else key
            if op in self._by_op:
                return self._by_op[op]
        what = f"'{key.name}'" if isinstance(key, (Tensor, Operation, Stage)) else repr(key)
        raise ScheduleError("s[...]", None, f"{what} is not a stage of this schedule: the schedule's outputs "
                            "neither compute nor read it", choices=[st.name for st in self.stages],
                            hint="index the schedule with a tensor, its op, or a stage name; "
                                 "a tensor made after create_schedule() is not in it")

    def _owner_of(self, ivar: IterVar) -> Optional[Stage]:
        for st in self.stages:
            if has_axis(st.all_iter_vars, ivar):
                return st
        return None

    def inputs_of(self, stage: Stage) -> List[Stage]:
        """The stages whose results this stage reads."""
        if isinstance(stage.op, PlaceholderOp):
            return []
        out: List[Stage] = []
        for t in stage.op.input_tensors:
            st = self._by_op[t.op]
            if st not in out:
                out.append(st)
        return out

    def _consumers(self, stage: Stage) -> List[Stage]:
        return [st for st in self.stages if stage in self.inputs_of(st)]

    def _reads_transitively(self, reader: Stage, producer: Stage) -> bool:
        stack, seen = [reader], set()
        while stack:
            st = stack.pop()
            for inp in self.inputs_of(st):
                if inp is producer:
                    return True
                if id(inp) not in seen:
                    seen.add(id(inp))
                    stack.append(inp)
        return False

    # ---- the step list -------------------------------------------------------------------
    def _record(self, step: steps_mod.Step) -> None:
        if self._recording:
            self.steps.append(step)

    def apply_steps(self, step_list: Iterable[steps_mod.Step]) -> "Schedule":
        """Replay steps (from another schedule, JSON or a tuning log) on this schedule. All or
        nothing: when a step fails, the schedule is restored to what it was before the replay."""
        with self.all_or_nothing():
            for st in step_list:
                st.apply(self)
        return self

    def _register_size_var(self, primitive: str, stage: str, v: Var) -> None:
        """Remember a size variable a primitive uses, so that its recorded step (which names
        it) replays with the same variable; two different variables of one name are refused."""
        known = self._size_vars.get(v.name)
        if known is None:
            known = self._program_size_vars().get(v.name)
        if known is not None and known is not v:
            raise ScheduleError(primitive, stage, f"another size variable is also called '{v.name}', so the "
                                "recorded step could not tell them apart", hint="give each size variable its own name")
        self._size_vars[v.name] = v

    def _program_size_vars(self) -> Dict[str, Var]:
        """The size variables of the program's shapes and axis extents, by name."""
        found: Dict[str, Var] = {}
        for st in self.stages:
            extents = list(getattr(st.op, "shape", ())) + [a.dom.extent for a in st.op.root_axes]
            for e in extents:
                if isinstance(e, Expr):
                    found.update((v.name, v) for v in free_vars(e))
        return found

    def size_var_named(self, name: str) -> Var:
        """The size variable a replayed step names: one the schedule or the program already
        uses, else a new int32 variable (registered, so later steps share it)."""
        v = self._size_vars.get(name)
        if v is None:
            v = self._program_size_vars().get(name)
        if v is None:
            v = Var(name)
        self._size_vars[name] = v
        return v

    # ---- undo points -------------------------------------------------------------------
    # A journal, not a copy: snapshot() copies only the schedule's own lists and dicts (a few,
    # copied at C speed) and opens a journal; a stage saves its state into every open journal
    # the first time it changes after that (Stage._touch, called by Stage.__setattr__ and
    # before the primitives' in-place edits of its lists and dicts). A snapshot thus costs what
    # the primitives since it touched, not the size of the schedule: the torch frontend opens
    # one per kernel, and copying every stage each time made default_schedule quadratic in the
    # model's size (0.4 of ResNet-50's 0.6 s).
    def snapshot(self) -> "UndoPoint":
        """An undo point: hand it to restore() to undo the primitives applied since, or to
        release() to keep them (apply_steps and the torch frontend's default schedules try a
        group of primitives all or nothing; all_or_nothing() does both). Undo points nest; one
        that is neither restored nor released stays open, correct but costing a copy of each
        stage that changes until the schedule is dropped."""
        point = UndoPoint(_copy_state(self, skip="_undo"))
        self._undo.append(point)
        return point

    def restore(self, saved: "UndoPoint") -> None:
        """Put the schedule and its stages back to the state at snapshot() (which returned saved),
        and close that undo point with the ones opened after it."""
        at = self._open_index(saved, "restore")
        undo = self._undo[:at]
        vars(self).clear()
        vars(self).update(_copy_state_of(saved.schedule))
        self._undo = undo
        for st, st_state in saved.stages.values():
            vars(st).clear()       # a copy: saved is also the state an older open point holds
            vars(st).update(_copy_state_of(st_state))

    def release(self, saved: "UndoPoint") -> None:
        """Keep the primitives applied since snapshot() returned saved: close that undo point (and
        the ones opened after it; older ones still undo everything since they were opened)."""
        del self._undo[self._open_index(saved, "release"):]

    @contextlib.contextmanager
    def all_or_nothing(self):
        """with s.all_or_nothing(): ... -- when the block raises, the schedule is restored to what
        it was before it and the exception goes on; otherwise its primitives are kept."""
        saved = self.snapshot()
        try:
            yield self
        except BaseException:
            self.restore(saved)
            raise
        self.release(saved)

    def _open_index(self, saved: "UndoPoint", verb: str) -> int:
        for i, point in enumerate(self._undo):
            if point is saved:
                return i
        raise InternalError(f"Schedule.{verb}: not an open undo point of this schedule (already restored or "
                            "released, or another schedule's)")

    def _touch(self, stage: Stage) -> None:
        """Save stage's state into the open undo points that lack it (before it changes)."""
        undo = self._undo
        if undo and id(stage) not in undo[-1].stages:      # in the newest one: in every older one too
            entry = (stage, _copy_state(stage))
            for point in undo:
                point.stages.setdefault(id(stage), entry)

    def to_json(self) -> str:
        return steps_mod.steps_to_json(self.steps)

    def apply_json(self, text: str) -> "Schedule":
        return self.apply_steps(steps_mod.steps_from_json(text))

    def to_python(self) -> str:
        """The schedule as Python source that rebuilds it from `s = sl.create_schedule(...)`."""
        fresh = Schedule(self._user_outputs)

        def state(stage_name: str):
            st = fresh[stage_name]
            if not isinstance(st.op, ComputeOp):      # a scan's axis prints as s[...].axis(name)
                return [], []
            return [a.name for a in st.op.axis], [a.name for a in st.op.reduce_axis]

        names = steps_mod.PythonNames(state, lambda stage_name: [a.name for a in fresh[stage_name].all_iter_vars])
        lines: List[str] = []
        for step in self.steps:
            text = step.to_python(names)
            lines += names.prelude + [text]
            step.apply(fresh)
            names.step_done()
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.to_python() or "# (no schedule steps)"

    # ---- dataflow primitives -------------------------------------------------------------
    def _insert(self, stage: Stage, before: Stage) -> None:
        self.stages.insert(self.stages.index(before), stage)
        self._by_op[stage.op] = stage

    def _set_op(self, stage: Stage, op: Operation, keep_schedule: bool) -> None:
        if keep_schedule:
            stage.op = op
        else:
            stage._reset(op)
        self._by_op[op] = stage

    def cache_read(self, tensor, scope: str, readers) -> Tensor:
        """Copy tensor into a new stage in scope; the given readers read the copy."""
        return dataflow.cache_read(self, tensor, scope, readers)

    def cache_write(self, tensor, scope: str):
        """Compute tensor into a new stage in scope; the original stage copies the result out.

        As TVM's cache_write (CacheWriteWithReLayout): the cache stage's axes are the
        original stage's data-parallel loops at the time of the call ('<loop>.c'), so a
        split or reorder made before cache_write re-lays the cache buffer out to follow
        it; its reduction axes are the original's own, so s[CC].split(k, ...) works with
        the k the algorithm was written with. The original stage becomes a plain copy.
        For an operation with several outputs pass the list of all of them (as TVM); the
        result is then the list of cache tensors."""
        return dataflow.cache_write(self, tensor, scope)

    def rfactor(self, tensor, axis: IterVar, factor_axis: int = 0) -> Tensor:
        """Factor a reduction: a new stage computes partial results indexed by the reduction
        loop `axis`; the original stage then reduces over those partials."""
        return dataflow.rfactor(self, tensor, axis, factor_axis)


class UndoPoint:
    """What Schedule.snapshot() returns: the schedule's own state then, and the state each stage
    had before its first change since (by id; Stage._touch fills it)."""
    __slots__ = ("schedule", "stages")

    def __init__(self, schedule_state: dict):
        self.schedule = schedule_state
        self.stages: Dict[int, tuple] = {}


def _copy(v):
    """A list or dict copied two levels deep (a stage's pragmas are lists in a dict); anything
    else (ops, axes, relations, steps: immutable) shared."""
    if isinstance(v, list):
        return list(v)
    if not isinstance(v, dict):
        return v
    out = dict(v)
    for k, x in v.items():
        if isinstance(x, (list, dict)):
            out[k] = _copy(x)
    return out


def _copy_state_of(state: dict, skip: str = "") -> dict:
    return {k: _copy(v) for k, v in state.items() if k != skip}


def _copy_state(obj, skip: str = "") -> dict:
    return _copy_state_of(vars(obj), skip)
