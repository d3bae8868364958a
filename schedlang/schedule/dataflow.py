"""The dataflow primitives, which add stages to a schedule and rewire its reads: cache_read,
cache_write (TVM's CacheWriteWithReLayout) and rfactor. Schedule's methods of the same
names delegate here; replace_reads rewrites which tensors an expression reads."""
from __future__ import annotations

import re
import warnings
from typing import TYPE_CHECKING, Dict

from ..errors import ScheduleError
from ..expr.functor import rewrite_post_order, substitute
from ..expr.nodes import Expr, Var, const, logical, select
from ..tensor.axis import DATA_PAR, REDUCE, IterVar, Range
from ..tensor.op import ComputeOp, Operation, Tensor, TensorRead
from ..tensor.reduce import CommReducer, Reduce
from . import scan as scan_rules, steps as steps_mod
from .placement import SCOPES
from .relations import SplitRel, is_reduce_relation, pass_down_values, pass_up_values, split_overshoots
from .stage import Stage

if TYPE_CHECKING:
    from .schedule import Schedule


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



def _stage_arg(s: "Schedule", primitive: str, x) -> Stage:
    try:
        return s[x]
    except ScheduleError:
        what = f"'{x.name}'" if isinstance(x, (Tensor, Operation, Stage)) else repr(x)
        raise ScheduleError(primitive, None, f"{what} is not a tensor or stage of this schedule",
                            choices=[st.name for st in s.stages],
                            hint="pass a tensor of the scheduled program, its op, or a stage name") from None


def _unique_name(s: "Schedule", base: str) -> str:
    names = {st.name for st in s.stages}
    name, n = base, 1
    while name in names:
        n += 1
        name = f"{base}{n}"
    return name


def _check_scope(s: "Schedule", primitive: str, stage: Stage, scope: str) -> None:
    if scope not in SCOPES:
        raise ScheduleError(primitive, stage.name, f"unknown memory scope {scope!r}", choices=SCOPES)



def cache_read(s: "Schedule", tensor, scope: str, readers) -> Tensor:
    """Schedule.cache_read: copy tensor into a new stage in scope; the given readers read the copy."""
    tensor = _output_by_name(s, tensor)
    src = _stage_arg(s, "cache_read", tensor)
    _check_scope(s, "cache_read", src, scope)
    readers = [readers] if not isinstance(readers, (list, tuple)) else list(readers)
    reader_stages = [_stage_arg(s, "cache_read", r) for r in readers]
    scan_rules.check_dataflow("cache_read", src, reader_stages)
    if not reader_stages:
        raise ScheduleError("cache_read", src.name, "needs at least one reader stage",
                            choices=[c.name for c in s._consumers(src)])
    for r in reader_stages:
        if src not in s.inputs_of(r):
            raise ScheduleError("cache_read", src.name, f"stage '{r.name}' does not read '{src.name}'",
                                choices=[c.name for c in s._consumers(src)],
                                hint="readers are the stages that should read the cached copy")
        if r.attach_type == "inline":
            raise ScheduleError("cache_read", src.name, f"reader '{r.name}' is inlined; it has no reads of its own",
                                hint="list the stage it is inlined into as the reader")
    if src.attach_type == "at":
        raise ScheduleError("cache_read", src.name, f"is computed at loop '{src.attach_ivar.name}' of "
                            f"'{src.attach_stage.name}', so a copy made outside that loop has nothing to copy",
                            hint="call cache_read before compute_at, or compute the stage at the root")
    src_tensor = tensor if isinstance(tensor, Tensor) and tensor.op in s._by_op else src.op.output(0)
    src_tensor = src.op.output(src_tensor.value_index)
    shape = src.op.shape
    names = [a.name for a in src.op.axis] if isinstance(src.op, ComputeOp) else [f"ax{d}" for d in range(len(shape))]
    axes = tuple(IterVar(Var(n), Range(0, ext), DATA_PAR) for n, ext in zip(names, shape))
    cache_op = ComputeOp(_unique_name(s, f"{src.name}.{scope}"), axes,
                         TensorRead(src_tensor, tuple(a.var for a in axes)))
    cache = Stage(s, cache_op, cache_op.name, scope)
    first = min(s.stages.index(r) for r in reader_stages)
    s._insert(cache, s.stages[first])
    mapping = {op.output(src_tensor.value_index): cache_op.output(0)
               for op, st in s._by_op.items() if st is src}
    for r in reader_stages:
        s._set_op(r, replace_reads_op(r.op, mapping), keep_schedule=True)
    s._record(steps_mod.CacheRead(src_tensor.name if src.op.num_outputs > 1 else src.name, scope,
                                     tuple(r.name for r in reader_stages)))
    return cache_op.output(0)


def _output_by_name(s: "Schedule", x):
    """'T.v1', the name of output 1 of the multi-output stage T, as that tensor (how a
    recorded step names it); anything else unchanged."""
    match = re.fullmatch(r"(.+)\.v(\d+)", x) if isinstance(x, str) else None
    if match is None or any(st.name == x for st in s.stages):
        return x
    for st in s.stages:
        if st.name == match.group(1) and int(match.group(2)) < st.op.num_outputs:
            return st.op.output(int(match.group(2)))
    return x


def _combiner_at(combiner: CommReducer, vmap) -> CommReducer:
    """combiner with vmap substituted into its result and identity: a custom reducer may read
    the stage's own loop variables (TVM allows max(x + y, n) with n an axis of the compute),
    which the cache stage renames. combiner itself when it reads none of them."""
    result = tuple(substitute(r, vmap) for r in combiner.result)
    identity = tuple(substitute(x, vmap) for x in combiner.identity)
    if all(a is b for a, b in zip(result + identity, combiner.result + combiner.identity)):
        return combiner
    return CommReducer(combiner.name, combiner.lhs, combiner.rhs, result, identity)


def _axis_at(axis: IterVar, vmap) -> IterVar:
    """A reduction axis whose domain reads the stage's loop variables (TVM's sum over
    reduce_axis((0, n)) with n an axis of the compute), with vmap substituted there; axis
    itself otherwise. The variable stays: the sources read it."""
    lo, extent = (substitute(b, vmap) if isinstance(b, Expr) else b for b in (axis.dom.min, axis.dom.extent))
    if lo is axis.dom.min and extent is axis.dom.extent:
        return axis
    return IterVar(axis.var, Range(lo, extent), axis.kind, axis.thread_tag)


def cache_write(s: "Schedule", tensor, scope: str):
    """Schedule.cache_write (its docstring says what the cache stage is): compute tensor
    into a new stage in scope; the original stage copies the result out."""
    many = isinstance(tensor, (list, tuple))
    st = _cache_write_stage(s, tensor)
    _check_scope(s, "cache_write", st, scope)
    st._require_schedulable("cache_write")
    scan_rules.check_dataflow("cache_write", st)
    op = st.op
    derived = [a.name for a in st.leaf_iter_vars if a.kind == REDUCE and not any(a is r for r in op.reduce_axis)]
    if derived:
        raise ScheduleError("cache_write", st.name, f"its reduction axes are already split or fused "
                            f"(loops: {st.loops_str()}); the cache can only be re-laid out along "
                            "data-parallel loops", axis=derived[0],
                            hint="call cache_write first, then split the reduction axes of the cache stage")
    attached = [s.name for s in s.stages if s.attach_stage is st]
    if attached:
        raise ScheduleError("cache_write", st.name, f"stages {', '.join(attached)} are computed at its loops, "
                            "but their reader becomes the cache stage, which runs outside them",
                            hint="call cache_write first, then compute_at the producers into the cache stage")
    if st.annotations or st.pragmas:
        warnings.warn(f"cache_write: the annotations of stage '{st.name}' ({st.loops_str()}) are dropped, as in "
                      "TVM: the stage becomes a plain copy of the cache; annotate it after cache_write",
                      stacklevel=3)
    axes, values, cond = _relayout(st)
    vmap = {a.var: values[a] for a in op.axis}
    bodies = []
    first = op.body
    if isinstance(first, Reduce):      # every output is a value of this one reduction: share its parts
        red_cond = None if first.condition is None else substitute(first.condition, vmap)
        rcond = red_cond if cond is None else (cond if red_cond is None else logical("and", cond, red_cond))
        sources = tuple(substitute(x, vmap) for x in first.source)
        inits = tuple(substitute(x, vmap) for x in first.init)
        combiner, raxes = _combiner_at(first.combiner, vmap), tuple(_axis_at(a, vmap) for a in first.axis)
        bodies = [Reduce(combiner, sources, raxes, rcond, b.value_index, inits) for b in op.bodies]
    else:
        for body in op.bodies:
            body = substitute(body, vmap)
            if cond is not None:   # the tail of a non-dividing split computes nothing (TVM: select(pred, body, 0))
                body = select(cond, body, const(0, body.dtype), guarded=True)
            bodies.append(body)
    cache_op = ComputeOp(_unique_name(s, f"{st.name}.{scope}"), axes, bodies[0], more_bodies=tuple(bodies[1:]))
    cache = Stage(s, cache_op, cache_op.name, scope)
    s._insert(cache, st)
    index = pass_down_values({a: a.var for a in op.axis}, st.relations, st.static_extents())
    leaves = tuple(index[a] for a in st.leaf_iter_vars if a.kind != REDUCE)
    copy = op.with_bodies([TensorRead(cache_op.output(i), leaves) for i in range(op.num_outputs)])
    s._set_op(st, copy, keep_schedule=False)
    s._record(steps_mod.CacheWrite(st.name, scope))
    outs = [cache_op.output(i) for i in range(cache_op.num_outputs)]
    return outs if many else outs[0]


def _cache_write_stage(s: "Schedule", tensor) -> Stage:
    """The stage cache_write works on: of one tensor, or of a list of all outputs of one op."""
    if not isinstance(tensor, (list, tuple)):
        st = _stage_arg(s, "cache_write", tensor)
        if isinstance(tensor, Tensor) and isinstance(st.op, ComputeOp) and st.op.num_outputs > 1:
            names = ", ".join(st.op.output(i).name for i in range(st.op.num_outputs))
            raise ScheduleError("cache_write", st.name, f"'{tensor.name}' is one of {st.op.num_outputs} outputs "
                                "of one compute, which are computed together",
                                hint=f"pass the list of all of them: s.cache_write([{names}], ...)")
        return st
    if not tensor:
        raise ScheduleError("cache_write", None, "the list of tensors is empty",
                            hint="pass the outputs of one compute")
    stages = [_stage_arg(s, "cache_write", t) for t in tensor]
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


def rfactor(s: "Schedule", tensor, axis: IterVar, factor_axis: int = 0) -> Tensor:
    """Schedule.rfactor: factor a reduction into a stage of partial results indexed by the
    reduction loop `axis`, which the original stage then reduces."""
    st = _stage_arg(s, "rfactor", tensor)
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
    lost = [s.name for s in s.stages if s.attach_stage is st
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
    if any(s.attach_stage is st and s.attach_ivar.kind == REDUCE for s in s.stages):
        raise ScheduleError("rfactor", st.name, "stages are computed at its reduction loops, which rfactor replaces",
                            axis=axis.name, hint="call rfactor before compute_at")
    if any(a.kind != REDUCE for a in st.leaf_iter_vars if not any(a is r for r in op.axis)) or st.pragmas or \
            any(a.kind != REDUCE for a in st.annotations):
        # TVM's meaning: both the factored stage and the reduced stage start from plain loops.
        warnings.warn(f"rfactor: the data-parallel loop transformations and annotations of stage '{st.name}' "
                      f"({st.loops_str()}) are discarded, as in TVM: schedule the stages after rfactor",
                      stacklevel=3)
    triangle = [r for r in op.reduce_axis if op.axes_read_by(r)]
    if triangle:
        raise ScheduleError("rfactor", st.name, f"the domain {triangle[0].dom} of reduction axis '{triangle[0].name}' "
                            "reads the stage's own axes; the factored stage would make it a data-parallel axis "
                            "whose extent varies", axis=axis.name,
                            hint="split the reduction and reorder its loops instead")
    factored, new_c = _rfactor_ops(s, st, axis, factor_axis)
    fstage = Stage(s, factored, factored.name)
    s._insert(fstage, st)
    s._set_op(st, new_c, keep_schedule=False)
    s._record(steps_mod.RFactor(st.name, axis.name, factor_axis))
    outs = [factored.output(i) for i in range(factored.num_outputs)]
    return outs if len(outs) > 1 else outs[0]


def _rfactor_ops(s: "Schedule", st: Stage, axis: IterVar, factor_axis: int):
    """The factored op (partials indexed by axis at factor_axis) and st's op rebuilt to reduce them."""
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
    factored = ComputeOp(_unique_name(s, f"{st.name}.rf"), tuple(f_axes), bodies[0],
                         more_bodies=tuple(bodies[1:]))
    rv = IterVar(Var(axis.name), Range(0, ext[axis]), REDUCE)
    idx = [a.var for a in op.axis]
    idx.insert(factor_axis, rv.var)
    partials = tuple(TensorRead(factored.output(i), tuple(idx)) for i in range(n))
    new_c = op.with_bodies([Reduce(red.combiner, partials, (rv,), None, i, red.init) for i in range(n)])
    return factored, new_c
