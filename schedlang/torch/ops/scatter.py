"""Writes at positions named by an index tensor, in gather form: every output element looks
for the index entries that name it (a reduction over the index, so the work is the output's
size times the index's extent along the written dim):

    scatter_add  out[p] = self[p] + sum over i of src[p, i along dim]     where index[p, i] == p[dim]
    scatter      out[p] = src[p, i along dim] (or a value) of the last i with index[p, i] == p[dim],
                 else self[p] (torch's CPU kernel writes in index order: the last write stays)
    index_add    out[p] = self[p] + alpha * sum over i of source[.., i, ..] where index[i] == p[dim]
    index_put    out[p] = values[.., i, ..] of the last i with index[i] == p[dim], else self[p]
                 (accumulate=True: self[p] + the sum of them)

index_put takes one index tensor (1-d, at any dim, the other indices None: x[:, idx] = v and
the flattened writes of max_unpool); a negative index counts from the end there, as in torch.
An index out of range is never followed (the match simply fails) and raises eager torch's
error after the call (a LowerContext guard, as gather.py's).
"""
from __future__ import annotations

import math

import schedlang as sl

from .common import GATHER_MAX_COMPARES, compute, norm_dim, read_broadcast, replaced, static
from .gather import _guard_indices
from .promote import is_float
from .registry import LowerContext, Unsupported, register_lowering


@register_lowering("aten.scatter_add.default")
def scatter_add(ctx: LowerContext, x, dim, index, src):
    d = norm_dim(dim, len(x.shape), "scatter_add: dim")
    if len(index.shape) != len(x.shape) or len(src.shape) != len(x.shape):
        raise ValueError(f"scatter_add: self {list(x.shape)}, index {list(index.shape)} and src {list(src.shape)} "
                         "need the same number of dims")
    ishape = [static(e, "scatter_add: index extents") for e in index.shape]
    _guard_indices(ctx, index, x.shape[d], f"scatter_add: index out of bounds for dimension {d} of size "
                   f"{x.shape[d]}", error=RuntimeError)
    r = sl.reduce_axis((0, ishape[d]), name="ri")

    def body(p):
        covered = [p[k] < ishape[k] for k in range(len(p))
                   if k != d and ishape[k] < static(x.shape[k], "scatter_add: self's extents")]
        q = replaced(p, d, r)
        hit = sl.cast("int64", index[q]) == sl.cast("int64", p[d])
        value = sl.select(hit, sl.cast(str(x.dtype), src[q]), sl.const(0, str(x.dtype)))
        if covered:         # index (and src) smaller than self along other dims: read only inside
            value = sl.if_then_else(sl.all(*covered), value, sl.const(0, str(x.dtype)))
        return sl.sum(value, axis=r)
    total = compute(tuple(x.shape), body, ctx.name("sum"))
    return compute(tuple(x.shape), lambda p: x[tuple(p)] + total[tuple(p)], ctx.name())


@register_lowering("aten.scatter.value", "aten.scatter.src")
def scatter(ctx: LowerContext, x, dim, index, src):
    d = norm_dim(dim, len(x.shape), "scatter: dim")
    tensor_src = isinstance(src, sl.Tensor)
    if len(index.shape) != len(x.shape) or (tensor_src and len(src.shape) != len(x.shape)):
        raise ValueError(f"scatter: self {list(x.shape)}, index {list(index.shape)}"
                         + (f" and src {list(src.shape)}" if tensor_src else "") + " need the same number of dims")
    if not isinstance(src, (sl.Tensor, int, float, bool)):
        raise Unsupported(f"scatter of a {type(src).__name__} value is not lowered")
    ishape = [static(e, "scatter: index extents") for e in index.shape]
    if all(isinstance(e, int) for e in x.shape) and math.prod(x.shape) * ishape[d] > GATHER_MAX_COMPARES:
        raise Unsupported(f"scatter into {list(x.shape)} from {ishape[d]} positions along dim {d} is more than the "
                          f"gather form's {GATHER_MAX_COMPARES} compares")
    _guard_indices(ctx, index, x.shape[d], f"scatter: index out of bounds for dimension {d} of size "
                   f"{x.shape[d]}", error=RuntimeError)
    dt = str(x.dtype)
    covered = [k for k in range(len(x.shape))
               if k != d and ishape[k] < static(x.shape[k], "scatter: self's extents")]

    def hit(p, i):
        q = replaced(p, d, i)
        found = sl.cast("int64", index[q]) == sl.cast("int64", p[d])
        if covered:         # index smaller than self along other dims: read only inside it
            found = sl.if_then_else(sl.all(*(p[k] < ishape[k] for k in covered)), found, sl.const(False, "bool"))
        return found

    def value(p, i):
        if tensor_src:
            return sl.cast(dt, src[replaced(p, d, i)])
        return sl.const(bool(src) if dt == "bool" else src if is_float(dt) else int(src), dt)
    return _written_last(ctx, x, _last_hit(ctx, x.shape, ishape[d], hit), value)


def _last_hit(ctx: LowerContext, shape, n: int, hit) -> sl.Tensor:
    """`<name>_last`: per element p, the last i < n with hit(p, i), else -1 (the write that stays
    where torch's CPU loop writes in index order)."""
    r = sl.reduce_axis((0, n), name="ri")
    return compute(tuple(shape), lambda p: sl.max(sl.select(hit(p, r), sl.cast("int32", r), sl.const(-1, "int32")),
                                                  axis=r), ctx.name("last"))


def _written_last(ctx: LowerContext, x, last: sl.Tensor, value) -> sl.Tensor:
    """x with value(p, last[p]) where an index entry names p (last[p] >= 0)."""
    def body(p):
        i = last[tuple(p)]
        return sl.if_then_else(i >= 0, value(p, sl.max(i, sl.const(0, "int32"))), x[tuple(p)])
    return compute(tuple(x.shape), body, ctx.name())


@register_lowering("aten.index_add.default")
def index_add(ctx: LowerContext, x, dim, index, source, *, alpha=1):
    d = norm_dim(dim, len(x.shape), "index_add: dim")
    if len(index.shape) > 1 or len(source.shape) != len(x.shape):
        raise ValueError(f"index_add: a 1-d index and a source of self's dims, got index {list(index.shape)}, "
                         f"source {list(source.shape)}, self {list(x.shape)}")
    n = static(index.shape[0], "index_add: index length") if index.shape else 1
    _guard_indices(ctx, index, x.shape[d], "index_add: index out of range in self")
    r = sl.reduce_axis((0, n), name="ri")
    dt = str(x.dtype)

    def body(p):
        at = index[(r,)] if index.shape else index[()]
        hit = sl.cast("int64", at) == sl.cast("int64", p[d])
        return sl.sum(sl.select(hit, sl.cast(dt, source[replaced(p, d, r)]), sl.const(0, dt)), axis=r)
    total = compute(tuple(x.shape), body, ctx.name("sum"))
    scale = sl.const(alpha if is_float(dt) else int(alpha), dt)

    def added(p):
        return x[tuple(p)] + (total[tuple(p)] if alpha == 1 else total[tuple(p)] * scale)
    return compute(tuple(x.shape), added, ctx.name())


@register_lowering("aten.index_put.default")
def index_put(ctx: LowerContext, x, indices, values, accumulate=False):
    given = [(k, t) for k, t in enumerate(indices) if t is not None]
    if len(given) != 1 or len(given[0][1].shape) != 1 or str(given[0][1].dtype) not in ("int32", "int64"):
        raise Unsupported("index_put with other than one 1-d integer index tensor (x[..., idx, ...] = v)")
    d, index = given[0]
    n = static(index.shape[0], "index_put: index length")
    size = x.shape[d]
    _guard_indices(ctx, index, size, f"index_put: index out of bounds for dimension {d} of size {size}",
                   wrap=True)
    vshape = list(x.shape)
    vshape[d] = n                       # values broadcast to x[..., idx, ...]
    dt = str(x.dtype)
    r = sl.reduce_axis((0, n), name="ri")

    def hit(p, i):
        at = sl.cast("int64", index[(i,)])
        at = sl.select(at < sl.const(0, "int64"), at + sl.cast("int64", size), at)
        return at == sl.cast("int64", p[d])

    def value(p, i):
        return sl.cast(dt, read_broadcast(values, tuple(vshape), list(replaced(p, d, i))))
    if accumulate:
        total = compute(tuple(x.shape), lambda p: sl.sum(sl.select(hit(p, r), value(p, r), sl.const(0, dt)), axis=r),
                        ctx.name("sum"))
        return compute(tuple(x.shape), lambda p: x[tuple(p)] + total[tuple(p)], ctx.name())
    return _written_last(ctx, x, _last_hit(ctx, x.shape, n, hit), value)
