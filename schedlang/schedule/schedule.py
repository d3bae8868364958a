"""The schedule: one stage per operation, the dataflow primitives (cache_read,
cache_write, rfactor), and the step list that prints, serialises and replays."""
from __future__ import annotations

import re
import warnings
from types import MappingProxyType
from typing import Dict, Iterable, List, Mapping, Optional, Sequence

from ..errors import ScheduleError
from ..expr.functor import rewrite_post_order, substitute
from ..expr.nodes import Expr, Var, const, logical, select
from ..tensor.axis import DATA_PAR, REDUCE, IterVar, Range
from ..tensor.graph import post_order
from ..tensor.op import ComputeOp, Operation, PlaceholderOp, Tensor, TensorRead
from ..tensor.reduce import Reduce
from . import scan as scan_rules, steps as steps_mod
from .relations import SplitRel, is_reduce_relation, pass_down_values, pass_up_values, split_overshoots
from .placement import SCOPES
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


def replace_reads(e: Expr, mapping: Dict[object, object]) -> Expr:
    """Rewrite reads of the tensors (or of any output of the operations) in mapping to
    read the mapped tensors instead; an operation mapped to an operation keeps the output
    index of each read."""
    if not mapping:
        return e

    def post(node: Expr) -> Expr:
        if isinstance(node, TensorRead):
            target = mapping.get(node.tensor, mapping.get(node.tensor.op))
            if isinstance(target, Operation):
                target = target.output(node.tensor.value_index)
            if target is not None:
                return TensorRead(target, node.indices)
        return node

    return rewrite_post_order(e, post)


def replace_reads_op(op: ComputeOp, mapping: Dict[object, object]) -> ComputeOp:
    """op with replace_reads applied to every body; op itself when nothing changed."""
    bodies = [replace_reads(b, mapping) for b in op.bodies]
    return op if all(a is b for a, b in zip(bodies, op.bodies)) else op.with_bodies(bodies)


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
        renamed = self._unique_ops(post_order(self._user_outputs))
        for user_op, op in renamed.items():
            stage = Stage(self, op, op.name)
            self.stages.append(stage)
            self._by_op[op] = self._by_op[user_op] = stage
        self.outputs = [self._by_op[o].op for o in self._user_outputs]
        for o in self._user_outputs:
            self._by_op[o].is_output = True
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
            if ivar in st.all_iter_vars:
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
        saved = self.snapshot()
        try:
            for st in step_list:
                st.apply(self)
        except BaseException:
            self.restore(saved)
            raise
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
        from ..expr.functor import free_vars
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

    def snapshot(self):
        """The mutable state of the schedule and its stages, to hand back to restore() to undo
        the primitives applied in between (apply_steps and the torch frontend's default
        schedules try a group of primitives all or nothing). Their lists and dicts are copied two
        levels deep (a stage's pragmas are lists in a dict); ops, axes and relations are
        immutable and shared."""
        def copy(v):
            if isinstance(v, list):
                return list(v)
            return {k: copy(x) for k, x in v.items()} if isinstance(v, dict) else v

        def copy_state(obj):
            return {k: copy(v) for k, v in vars(obj).items()}
        return copy_state(self), [(st, copy_state(st)) for st in self.stages]

    def restore(self, saved) -> None:
        """Put the schedule and its stages back to the state snapshot() returned."""
        state, stages = saved
        vars(self).clear()
        vars(self).update(state)
        for st, st_state in stages:
            vars(st).clear()
            vars(st).update(st_state)

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
    def _stage_arg(self, primitive: str, x) -> Stage:
        try:
            return self[x]
        except ScheduleError:
            what = f"'{x.name}'" if isinstance(x, (Tensor, Operation, Stage)) else repr(x)
            raise ScheduleError(primitive, None, f"{what} is not a tensor or stage of this schedule",
                                choices=[st.name for st in self.stages],
                                hint="pass a tensor of the scheduled program, its op, or a stage name") from None

    def _unique_name(self, base: str) -> str:
        names = {st.name for st in self.stages}
        name, n = base, 1
        while name in names:
            n += 1
            name = f"{base}{n}"
        return name

    def _check_scope(self, primitive: str, stage: Stage, scope: str) -> None:
        if scope not in SCOPES:
            raise ScheduleError(primitive, stage.name, f"unknown memory scope {scope!r}", choices=SCOPES)

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
        tensor = self._output_by_name(tensor)
        src = self._stage_arg("cache_read", tensor)
        self._check_scope("cache_read", src, scope)
        readers = [readers] if not isinstance(readers, (list, tuple)) else list(readers)
        reader_stages = [self._stage_arg("cache_read", r) for r in readers]
        scan_rules.check_dataflow("cache_read", src, reader_stages)
        if not reader_stages:
            raise ScheduleError("cache_read", src.name, "needs at least one reader stage",
                                choices=[c.name for c in self._consumers(src)])
        for r in reader_stages:
            if src not in self.inputs_of(r):
                raise ScheduleError("cache_read", src.name, f"stage '{r.name}' does not read '{src.name}'",
                                    choices=[c.name for c in self._consumers(src)],
                                    hint="readers are the stages that should read the cached copy")
            if r.attach_type == "inline":
                raise ScheduleError("cache_read", src.name, f"reader '{r.name}' is inlined; it has no reads of its own",
                                    hint="list the stage it is inlined into as the reader")
        if src.attach_type == "at":
            raise ScheduleError("cache_read", src.name, f"is computed at loop '{src.attach_ivar.name}' of "
                                f"'{src.attach_stage.name}', so a copy made outside that loop has nothing to copy",
                                hint="call cache_read before compute_at, or compute the stage at the root")
        src_tensor = tensor if isinstance(tensor, Tensor) and tensor.op in self._by_op else src.op.output(0)
        src_tensor = src.op.output(src_tensor.value_index)
        shape = src.op.shape
        names = [a.name for a in src.op.axis] if isinstance(src.op, ComputeOp) else [f"ax{d}" for d in range(len(shape))]
        axes = tuple(IterVar(Var(n), Range(0, ext), DATA_PAR) for n, ext in zip(names, shape))
        cache_op = ComputeOp(self._unique_name(f"{src.name}.{scope}"), axes,
                             TensorRead(src_tensor, tuple(a.var for a in axes)))
        cache = Stage(self, cache_op, cache_op.name, scope)
        first = min(self.stages.index(r) for r in reader_stages)
        self._insert(cache, self.stages[first])
        mapping = {op.output(src_tensor.value_index): cache_op.output(0)
                   for op, st in self._by_op.items() if st is src}
        for r in reader_stages:
            self._set_op(r, replace_reads_op(r.op, mapping), keep_schedule=True)
        self._record(steps_mod.CacheRead(src_tensor.name if src.op.num_outputs > 1 else src.name, scope,
                                         tuple(r.name for r in reader_stages)))
        return cache_op.output(0)

    def _output_by_name(self, x):
        """'T.v1', the name of output 1 of the multi-output stage T, as that tensor (how a
        recorded step names it); anything else unchanged."""
        match = re.fullmatch(r"(.+)\.v(\d+)", x) if isinstance(x, str) else None
        if match is None or any(st.name == x for st in self.stages):
            return x
        for st in self.stages:
            if st.name == match.group(1) and int(match.group(2)) < st.op.num_outputs:
                return st.op.output(int(match.group(2)))
        return x

    def cache_write(self, tensor, scope: str):
        """Compute tensor into a new stage in scope; the original stage copies the result out.

        As TVM's cache_write (CacheWriteWithReLayout): the cache stage's axes are the
        original stage's data-parallel loops at the time of the call ('<loop>.c'), so a
        split or reorder made before cache_write re-lays the cache buffer out to follow
        it; its reduction axes are the original's own, so s[CC].split(k, ...) works with
        the k the algorithm was written with. The original stage becomes a plain copy.
        For an operation with several outputs pass the list of all of them (as TVM); the
        result is then the list of cache tensors."""
        many = isinstance(tensor, (list, tuple))
        st = self._cache_write_stage(tensor)
        self._check_scope("cache_write", st, scope)
        st._require_schedulable("cache_write")
        scan_rules.check_dataflow("cache_write", st)
        op = st.op
        derived = [a.name for a in st.leaf_iter_vars if a.kind == REDUCE and not any(a is r for r in op.reduce_axis)]
        if derived:
            raise ScheduleError("cache_write", st.name, f"its reduction axes are already split or fused "
                                f"(loops: {st.loops_str()}); the cache can only be re-laid out along "
                                "data-parallel loops", axis=derived[0],
                                hint="call cache_write first, then split the reduction axes of the cache stage")
        attached = [s.name for s in self.stages if s.attach_stage is st]
        if attached:
            raise ScheduleError("cache_write", st.name, f"stages {', '.join(attached)} are computed at its loops, "
                                "but their reader becomes the cache stage, which runs outside them",
                                hint="call cache_write first, then compute_at the producers into the cache stage")
        if st.annotations or st.pragmas:
            warnings.warn(f"cache_write: the annotations of stage '{st.name}' ({st.loops_str()}) are dropped, as in "
                          "TVM: the stage becomes a plain copy of the cache; annotate it after cache_write",
                          stacklevel=2)
        axes, values, cond = self._relayout(st)
        vmap = {a.var: values[a] for a in op.axis}
        bodies = []
        first = op.body
        if isinstance(first, Reduce):      # every output is a value of this one reduction: share its parts
            red_cond = None if first.condition is None else substitute(first.condition, vmap)
            rcond = red_cond if cond is None else (cond if red_cond is None else logical("and", cond, red_cond))
            sources = tuple(substitute(x, vmap) for x in first.source)
            inits = tuple(substitute(x, vmap) for x in first.init)
            bodies = [Reduce(first.combiner, sources, first.axis, rcond, b.value_index, inits) for b in op.bodies]
        else:
            for body in op.bodies:
                body = substitute(body, vmap)
                if cond is not None:   # the tail of a non-dividing split computes nothing (TVM: select(pred, body, 0))
                    body = select(cond, body, const(0, body.dtype), guarded=True)
                bodies.append(body)
        cache_op = ComputeOp(self._unique_name(f"{st.name}.{scope}"), axes, bodies[0], more_bodies=tuple(bodies[1:]))
        cache = Stage(self, cache_op, cache_op.name, scope)
        self._insert(cache, st)
        index = pass_down_values({a: a.var for a in op.axis}, st.relations, st.static_extents())
        leaves = tuple(index[a] for a in st.leaf_iter_vars if a.kind != REDUCE)
        copy = op.with_bodies([TensorRead(cache_op.output(i), leaves) for i in range(op.num_outputs)])
        self._set_op(st, copy, keep_schedule=False)
        self._record(steps_mod.CacheWrite(st.name, scope))
        outs = [cache_op.output(i) for i in range(cache_op.num_outputs)]
        return outs if many else outs[0]

    def _cache_write_stage(self, tensor) -> Stage:
        """The stage cache_write works on: of one tensor, or of a list of all outputs of one op."""
        if not isinstance(tensor, (list, tuple)):
            st = self._stage_arg("cache_write", tensor)
            if isinstance(tensor, Tensor) and isinstance(st.op, ComputeOp) and st.op.num_outputs > 1:
                names = ", ".join(st.op.output(i).name for i in range(st.op.num_outputs))
                raise ScheduleError("cache_write", st.name, f"'{tensor.name}' is one of {st.op.num_outputs} outputs "
                                    "of one compute, which are computed together",
                                    hint=f"pass the list of all of them: s.cache_write([{names}], ...)")
            return st
        if not tensor:
            raise ScheduleError("cache_write", None, "the list of tensors is empty",
                                hint="pass the outputs of one compute")
        stages = [self._stage_arg("cache_write", t) for t in tensor]
        st = stages[0]
        if any(x is not st for x in stages):
            raise ScheduleError("cache_write", st.name, "the tensors belong to different stages "
                                f"({', '.join(x.name for x in stages)}); a list must hold the outputs of one compute",
                                hint="call cache_write once per stage")
        given = sorted({t.value_index for t in tensor if isinstance(t, Tensor)})
        if isinstance(st.op, ComputeOp) and given != list(range(st.op.num_outputs)):
            raise ScheduleError("cache_write", st.name, f"the list holds outputs {given} of {st.op.num_outputs}; "
                                "the outputs of one compute are computed together",
                                hint="pass every output of the compute, in any order")
        return st

    @staticmethod
    def _relayout(st: Stage):
        """The cache stage's axes (one per data-parallel loop of st), the value of each root
        axis of st in terms of them, and the condition that excludes a split's tail."""
        ext = st.static_extents()
        leaves = [a for a in st.leaf_iter_vars if a.kind != REDUCE]
        doms = [a.dom if any(a is r for r in st.op.axis) else Range(0, ext[a]) for a in leaves]
        axes = tuple(IterVar(Var(a.name + ".c"), dom, DATA_PAR) for a, dom in zip(leaves, doms))
        values = pass_up_values({a: c.var for a, c in zip(leaves, axes)}, st.relations, ext)
        cond = None
        for rel in st.relations:
            if isinstance(rel, SplitRel) and split_overshoots(rel, ext):
                tail = values[rel.parent] < ext[rel.parent]
                cond = tail if cond is None else logical("and", cond, tail)
        return axes, values, cond

    def rfactor(self, tensor, axis: IterVar, factor_axis: int = 0) -> Tensor:
        """Factor a reduction: a new stage computes partial results indexed by the reduction
        loop `axis`; the original stage then reduces over those partials."""
        st = self._stage_arg("rfactor", tensor)
        st._require_schedulable("rfactor")
        scan_rules.check_dataflow("rfactor", st)
        op = st.op
        if not isinstance(op.body, Reduce):
            raise ScheduleError("rfactor", st.name, "the stage is not a reduction", axis=getattr(axis, "name", None),
                                hint="rfactor applies to sum/max/min/... stages")
        st._require_leaf("rfactor", axis)
        if axis.kind != REDUCE:
            raise ScheduleError("rfactor", st.name, "the axis is not a reduction loop", axis=axis.name,
                                choices=[a.name for a in st.leaf_iter_vars if a.kind == REDUCE])
        annotated = [a.name for a in st.leaf_iter_vars if a.kind == REDUCE and a in st.annotations]
        if annotated:
            raise ScheduleError("rfactor", st.name, f"the reduction loop '{annotated[0]}' is annotated "
                                f"({st.annotations[st.axis(annotated[0])]}), but rfactor replaces the reduction loops",
                                axis=axis.name, hint="rfactor first, then annotate the loops of the new stages")
        lost = [s.name for s in self.stages if s.attach_stage is st
                and not any(s.attach_ivar is a for a in op.axis) and s.attach_ivar.kind != REDUCE]
        if lost:
            raise ScheduleError("rfactor", st.name, f"stages {', '.join(lost)} are computed at its split or fused "
                                "data-parallel loops, which rfactor discards", axis=axis.name,
                                hint="call rfactor before compute_at")
        n = len(op.axis)
        if isinstance(factor_axis, bool) or not isinstance(factor_axis, int) or not -(n + 1) <= factor_axis <= n:
            raise ScheduleError("rfactor", st.name, f"factor_axis must be an int in [0, {n}] (or [-{n + 1}, -1], "
                                f"counted from the end), got {factor_axis!r}", axis=axis.name,
                                hint=f"factor_axis is where the factored axis goes among the {n} axes of the new stage")
        factor_axis = factor_axis if factor_axis >= 0 else n + 1 + factor_axis
        if any(s.attach_stage is st and s.attach_ivar.kind == REDUCE for s in self.stages):
            raise ScheduleError("rfactor", st.name, "stages are computed at its reduction loops, which rfactor replaces",
                                axis=axis.name, hint="call rfactor before compute_at")
        if any(a.kind != REDUCE for a in st.leaf_iter_vars if not any(a is r for r in op.axis)) or st.pragmas or \
                any(a.kind != REDUCE for a in st.annotations):
            # TVM's meaning: both the factored stage and the reduced stage start from plain loops.
            warnings.warn(f"rfactor: the data-parallel loop transformations and annotations of stage '{st.name}' "
                          f"({st.loops_str()}) are discarded, as in TVM: schedule the stages after rfactor",
                          stacklevel=2)
        factored, new_c = self._rfactor_ops(st, axis, factor_axis)
        fstage = Stage(self, factored, factored.name)
        self._insert(fstage, st)
        self._set_op(st, new_c, keep_schedule=False)
        self._record(steps_mod.RFactor(st.name, axis.name, factor_axis))
        outs = [factored.output(i) for i in range(factored.num_outputs)]
        return outs if len(outs) > 1 else outs[0]

    def _rfactor_ops(self, st: Stage, axis: IterVar, factor_axis: int):
        op, red = st.op, st.op.body
        ext = st.static_extents()
        reduce_leaves = [a for a in st.leaf_iter_vars if a.kind == REDUCE]
        fresh = {a: IterVar(Var(a.name), Range(0, ext[a]), DATA_PAR if a is axis else REDUCE) for a in reduce_leaves}
        data = {a: IterVar(Var(a.name), a.dom, DATA_PAR) for a in op.axis}
        values = pass_up_values({a: fresh[a].var for a in reduce_leaves},
                                [r for r in st.relations if is_reduce_relation(r)], ext)
        vmap = {a.var: data[a].var for a in op.axis}
        vmap.update({a.var: values[a] for a in red.axis})
        cond = None if red.condition is None else substitute(red.condition, vmap)
        for rel in st.relations:   # a split that overshoots its parent must not count the tail
            if isinstance(rel, SplitRel) and rel.parent.kind == REDUCE and split_overshoots(rel, ext):
                tail = values[rel.parent] < ext[rel.parent]
                cond = tail if cond is None else logical("and", cond, tail)
        sources = tuple(substitute(x, vmap) for x in red.source)
        rest = tuple(fresh[a] for a in reduce_leaves if a is not axis)
        f_axes = [data[a] for a in op.axis]
        f_axes.insert(factor_axis, fresh[axis])
        n = len(sources)
        if rest:
            bodies = [Reduce(red.combiner, sources, rest, cond, i) for i in range(n)]
        else:
            bodies = [x if cond is None else select(cond, x, ident, guarded=True)
                      for x, ident in zip(sources, red.combiner.identity)]
        factored = ComputeOp(self._unique_name(f"{st.name}.rf"), tuple(f_axes), bodies[0],
                             more_bodies=tuple(bodies[1:]))
        rv = IterVar(Var(axis.name), Range(0, ext[axis]), REDUCE)
        idx = [a.var for a in op.axis]
        idx.insert(factor_axis, rv.var)
        partials = tuple(TensorRead(factored.output(i), tuple(idx)) for i in range(n))
        new_c = op.with_bodies([Reduce(red.combiner, partials, (rv,), None, i, red.init) for i in range(n)])
        return factored, new_c
