"""Lowering of s[stage].tensorize(axis, intrin): the loops from axis inwards become the
intrinsic's statements (TVM's MakeTensorize, VerifyTensorizeLoopNest, MatchTensorizeBody).

1. The region: each loop under axis must be the whole inner part of one root axis of the
   stage (root = base(outer loops) + loop), with no thread binding or stage computed inside.
2. The match (match.py): the region's extents, tail-aligned, are the intrinsic's axes; the
   stage's computation with each root axis replaced by base + the intrinsic's axis, and each
   read's indices taken relative to the read's base, must be the intrinsic's computation.
3. The binding: each handle of the intrinsic stands for the region of the real buffer it
   matched: elem_offset = the flat offset of the region's base in the real buffer, strides the
   real buffer's (declared Vars take them; declared ints or dense handles must agree),
   offset_factor checked where elem_offset is static. A handle access at flat offset f
   becomes an access of the real buffer at elem_offset + f (Tile IR writes it as the last
   index with zeros before: flatten_buffers makes it the flat index).
4. The nest: a reduction wholly inside the region takes the intrinsic's body; one whose
   outer reduction loops stay takes reset where the init was and update in the loops. Where
   the region has a tail (a split that overshoots), the intrinsic runs on whole tiles and the
   stage's own loops, guarded, on the rest.
"""
from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

from ..errors import ScheduleError
from ..expr.functor import rewrite_post_order, substitute, uses_var
from ..expr.nodes import Buffer, Const, Expr, Load, Ramp, Var, binary, logical
from ..expr.simplify import simplify
from ..schedule.annotate import BIND, PARALLEL
from ..tensor.axis import REDUCE, IterVar
from ..tensor.op import TensorRead
from ..tensor.reduce import Reduce
from .functor import StmtMutator
from .nodes import IfThen, Stmt, Store, seq
from .tensor_intrin import DeclBuffer, TensorIntrin
from .tensorize_match import Match, match_compute


def tensorized_nest(builder, plan, value: Dict[IterVar, Expr], ranges, buffers: List[Buffer], store_idx,
                    vmap, guards: List[Expr]) -> Stmt:
    """The nest of a tensorized stage (called by loop/build.py's stage_nest)."""
    ivar, intrin = plan.tensorize
    leaves = list(plan.leaves)
    t = next(i for i, a in enumerate(leaves) if a is ivar)
    inner = leaves[t:]

    def fail(problem: str, hint: str = None) -> ScheduleError:
        return ScheduleError("tensorize", plan.name, f"with {intrin.name}: {problem}", axis=ivar.name, hint=hint)

    _check_region_loops(builder, plan, inner, fail)
    ext = builder.extents[plan.name]
    parts = _inner_parts(plan, value, ranges, inner, ext, fail)
    m = match_compute(plan, intrin, parts, ranges, fail)
    inner_vars = [a.var for a in inner]
    stmts = _bind(builder, plan, intrin, m, buffers, store_idx, inner_vars, ranges, fail)
    tail = [g for g in guards if any(uses_var(g, v) for v in inner_vars)]
    outer_guards = [g for g in guards if not any(uses_var(g, v) for v in inner_vars)]
    tile = _TailSplit(inner, ext, ranges)
    if not isinstance(plan.op.body, Reduce):
        stmt = tile.choose(stmts["body"], tail, lambda: builder.nest(
            plan, inner, builder.plain_stores(plan, buffers, store_idx, vmap), tail, attach=False))
        return builder.nest(plan, leaves[:t], stmt, outer_guards, attach=True)
    update, init = builder.reduction_update(plan, plan.op.body, buffers, store_idx, vmap)
    first = next(i for i, a in enumerate(leaves) if a.kind == REDUCE)
    if t <= first:      # the whole reduction is inside the region
        if stmts["body"] is None:
            raise fail("the region holds the whole reduction, and the intrinsic gives no body",
                       hint="return (body, reset, update) from the intrinsic's function")
        stmt = tile.choose(stmts["body"], tail, lambda: builder.reduction_nest(plan, update, init, tail, loops=inner))
        return builder.nest(plan, leaves[:t], stmt, outer_guards, attach=True)
    if stmts["update"] is None:
        outside = ", ".join(a.name for a in leaves[first:t] if a.kind == REDUCE)
        raise fail(f"the reduction loop(s) {outside} stay outside the region, so the intrinsic must give "
                   f"(body, reset, update); it gives only a body",
                   hint="tensorize an axis outside every reduction loop, or declare reset and update")
    reduce_vars = [a.var for a in leaves if a.kind == REDUCE]
    init_tail = [g for g in tail if not any(uses_var(g, v) for v in reduce_vars)]
    spatial = [a for a in inner if a.kind != REDUCE]
    reset = None if stmts["reset"] is None else tile.choose(
        stmts["reset"], init_tail, lambda: builder.nest(plan, spatial, init, init_tail, attach=False))
    tiled_update = tile.choose(stmts["update"], tail, lambda: builder.nest(plan, inner, update, tail, attach=False))
    return _split_reduction(builder, plan, leaves, first, t, reset, tiled_update, init, outer_guards, init_tail)


class _TailSplit:
    """Where the region has a tail (a guard on its loops), the intrinsic runs on whole tiles and
    the stage's own loops on the others. Each guard bounds base + loop (one loop per axis, with
    coefficient 1), so a tile is whole when the guards hold at its first and its last corner."""

    def __init__(self, inner, ext, ranges):
        self.corners = ({a.var: Const(0, a.var.dtype) for a in inner},
                        {a.var: Const(ext[a] - 1, a.var.dtype) for a in inner})
        self.ranges = ranges

    def choose(self, whole: Stmt, tail: List[Expr], scalar) -> Stmt:
        """whole where every guard of tail holds on the whole tile, else scalar()."""
        conds = [simplify(substitute(g, corner), self.ranges) for g in tail for corner in self.corners]
        conds = [c for c in conds if not (isinstance(c, Const) and c.value)]
        if not conds:
            return whole
        cond = conds[0]
        for c in conds[1:]:
            cond = logical("and", cond, c)
        return IfThen(cond, whole, scalar())


def _check_region_loops(builder, plan, inner: Sequence[IterVar], fail) -> None:
    for a in inner:
        ann = plan.annotation(a)
        if ann is not None and ann.kind in (PARALLEL, BIND):
            raise fail(f"loop '{a.name}' inside the region is {ann}; the intrinsic replaces those loops",
                       hint="bind or parallelize loops outside the tensorized axis")
        if builder.children.get((plan.name, id(a))):
            child = builder.children[(plan.name, id(a))][0].name
            raise fail(f"stage '{child}' is computed at loop '{a.name}' inside the region",
                       hint="compute it at the tensorized axis or outside")


def _inner_parts(plan, value, ranges, inner, ext, fail) -> Dict[IterVar, Tuple[object, Expr, int]]:
    """Per root axis: (its loop inside the region or None, its base from the outer loops,
    the region's extent along it)."""
    zero = {a.var: Const(0, a.var.dtype) for a in inner}
    parts, used = {}, set()
    for r in plan.roots:
        base = simplify(substitute(value[r], zero), ranges)
        diff = simplify(binary("sub", value[r], base), ranges)
        if isinstance(diff, Const) and diff.value == 0:
            parts[r] = (None, base, 1)
            continue
        loop = next((a for a in inner if diff is a.var), None)
        if loop is None or id(loop) in used:
            raise fail(f"axis '{r.name}' varies as {diff} inside the region; each loop of the region must be the "
                       "whole inner part of one axis",
                       hint="split each axis once so that its inner loop is the intrinsic's extent, reorder the "
                            "inner loops after the tensorized axis, and do not fuse them")
        used.add(id(loop))
        parts[r] = (loop, base, ext[loop])
    for a in inner:
        if id(a) not in used:
            raise fail(f"loop '{a.name}' inside the region is not the inner part of one axis")
    return parts


def _bind(builder, plan, intrin: TensorIntrin, m: Match, buffers, store_idx, inner_vars, ranges,
          fail) -> Dict[str, Stmt]:
    """The intrinsic's statements with each handle bound to its real buffer region."""
    zero = {v: Const(0, v.dtype) for v in inner_vars}
    bindings: Dict[Buffer, Tuple[Buffer, Expr]] = {}
    var_values: Dict[Var, Expr] = {}
    regions = []
    for handle, (tensor, base) in zip(intrin.buffers, m.input_bases):
        load = builder.lower_reads(TensorRead(tensor, tuple(base)))
        regions.append((handle, load.buffer, load.indices, tensor.op.name))
    out_base = [simplify(substitute(i, zero), ranges) for i in store_idx]
    regions.append((intrin.buffers[-1], buffers[0], out_base, plan.name))
    for handle, real, base, what in regions:
        offset = _bind_one(handle, real, base, what, var_values, ranges, fail)
        bindings[handle.data] = (real, offset)
    rewrite = _Rebind(bindings, var_values)
    return {k: (None if s is None else rewrite.visit(s))
            for k, s in (("body", intrin.body), ("reset", intrin.reset), ("update", intrin.update))}


def _bind_one(handle: DeclBuffer, real: Buffer, base, what: str, var_values, ranges, fail) -> Expr:
    """Bind handle to the region of real starting at base: its elem_offset and strides."""
    strides = real.dense_strides()
    offset: Expr = Const(0)
    for i, s in zip(base, strides):
        offset = binary("add", offset, binary("mul", i, s))
    offset = simplify(offset, ranges)
    if handle.scope and handle.scope != real.scope:
        raise fail(f"buffer '{handle.name}' must be in '{handle.scope}' memory; '{real.name}' is {real.scope}",
                   hint=f"stage '{what}' through cache_read/cache_write into scope '{handle.scope}'")
    dims = len(handle.shape)
    aligned = strides[len(strides) - dims:]
    declared = handle.stride_exprs()
    for d, (want, have) in enumerate(zip(declared, aligned)):
        if handle.shape[d] == 1:
            continue
        if isinstance(want, Var):
            var_values[want] = have if isinstance(have, Expr) else Const(have, want.dtype)
        elif not (isinstance(have, int) and have == want):
            layout = "declared" if handle.strides is not None else "dense"
            raise fail(f"buffer '{handle.name}' has {layout} strides {tuple(map(str, declared))}, but the region of "
                       f"'{what}' it binds lies in '{real.name}' with strides {tuple(map(str, aligned))}",
                       hint="declare the intrinsic's buffer with stride variables "
                            "(decl_buffer(..., strides=[sl.var('s'), 1])) or pack the data densely")
    if handle.offset_factor > 1:
        rem = simplify(binary("floormod", offset, Const(handle.offset_factor, offset.dtype)), ranges)
        if isinstance(rem, Const) and rem.value != 0:
            raise fail(f"buffer '{handle.name}' needs its start to be a multiple of offset_factor="
                       f"{handle.offset_factor} elements; the region of '{what}' starts at {offset}",
                       hint="align the tiles (split factors, storage_align) to the offset factor")
    if isinstance(handle.elem_offset, Var):
        var_values[handle.elem_offset] = offset
    elif not (isinstance(offset, Const) and offset.value == handle.elem_offset):
        raise fail(f"buffer '{handle.name}' is declared at elem_offset={handle.elem_offset}; the region of "
                   f"'{what}' starts at {offset}")
    return offset


class _Rebind(StmtMutator):
    """Handle accesses -> real buffer accesses; the handles' variables -> their values."""

    def __init__(self, bindings, var_values):
        self.bindings = bindings
        self.var_values = var_values

    def index(self, buffer: Buffer, flat: Expr) -> Tuple[Buffer, Tuple[Expr, ...]]:
        real, offset = self.bindings[buffer]
        if isinstance(flat, Ramp):     # kept a ramp: a contiguous vector access
            flat = Ramp(simplify(binary("add", offset, flat.base)), flat.stride, flat.lanes)
        else:
            flat = simplify(binary("add", offset, flat))
        return real, (Const(0, flat.dtype.element()),) * (len(real.shape) - 1) + (flat,)

    def visit_expr(self, e: Expr) -> Expr:
        def post(node: Expr) -> Expr:
            if isinstance(node, Load) and node.buffer in self.bindings:
                real, idx = self.index(node.buffer, node.indices[0])
                return Load(real, idx, node.predicate)
            return node
        return rewrite_post_order(substitute(e, self.var_values), post)

    def visit_Store(self, s: Store) -> Stmt:
        value = self.visit_expr(s.value)
        flat = self.visit_expr(s.indices[0])
        if s.buffer not in self.bindings:
            return Store(s.buffer, (flat,), value, s.predicate)
        real, idx = self.index(s.buffer, flat)
        return Store(real, idx, value, None if s.predicate is None else self.visit_expr(s.predicate))


def _split_reduction(builder, plan, leaves, first: int, t: int, reset, update, init, guards, init_tail) -> Stmt:
    """Reduction loops outside the region: reset where the init was (or, without one, the
    stage's own init over the region's loops), update inside them."""
    pos = {a.var: i for i, a in enumerate(leaves)}

    def depth(g: Expr) -> int:
        return max((pos[v] for v in pos if uses_var(g, v)), default=-1)

    inner_guards = [g for g in guards if depth(g) >= first]
    outer_guards = [g for g in guards if depth(g) < first]
    reduce_vars = [a.var for a in leaves[first:] if a.kind == REDUCE]
    init_guards = [g for g in inner_guards if not any(uses_var(g, v) for v in reduce_vars)]
    if reset is not None:
        init_nest = builder.nest(plan, [a for a in leaves[first:t] if a.kind != REDUCE], reset, init_guards,
                                 attach=False)
    else:
        init_nest = builder.nest(plan, [a for a in leaves[first:] if a.kind != REDUCE], init,
                                 init_guards + init_tail, attach=False)
    update_nest = builder.nest(plan, leaves[first:t], update, inner_guards, attach=True)
    return builder.nest(plan, leaves[:first], seq(init_nest, update_nest), outer_guards, attach=True)
