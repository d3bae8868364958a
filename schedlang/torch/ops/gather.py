"""Reads at computed or guarded coordinates: constant_pad_nd, embedding, index_select.

Pads read their input under a guard (sl.if_then_else: the out-of-range read is never
evaluated). Gathers read rows named by an index tensor, which may hold anything: the
kernel clamps every index into the table, so that no read is out of bounds, and the
lowering adds a guard (`LowerContext.guard`): a bool flag, computed in the same part,
that is true when some index was out of range; the compiled module then raises
IndexError, as eager torch does, instead of returning the clamped rows.
"""
from __future__ import annotations

import schedlang as sl

from .common import compute, norm_dim, static
from .reduce import any_reducer, reduction
from .registry import LowerContext, Unsupported, register_lowering


# ---------------------------------------------------------------- pad

@register_lowering("aten.constant_pad_nd.default")
def constant_pad_nd(ctx: LowerContext, x, pad, value=0):
    """x padded with value: pad = (before, after) pairs from the last dimension back; a
    negative amount crops."""
    pad = [static(p, "pad amount") for p in pad]
    ndim = len(x.shape)
    if len(pad) % 2 or len(pad) > 2 * ndim:
        raise ValueError(f"constant_pad_nd: pad {pad} must have an even length of at most {2 * ndim} "
                         f"for a {ndim}-d tensor")
    before = [0] * ndim
    after = [0] * ndim
    for k in range(len(pad) // 2):
        before[ndim - 1 - k], after[ndim - 1 - k] = pad[2 * k], pad[2 * k + 1]
    shape = []
    for d, e in enumerate(x.shape):
        n = e + before[d] + after[d]
        if isinstance(n, int) and n <= 0:
            if n < 0:
                raise ValueError(f"constant_pad_nd: dimension {d} of size {e} padded by {before[d]}, {after[d]} "
                                 "is negative")
            raise Unsupported("an empty pad result (schedlang tensors have positive extents)")
        shape.append(n)
    dt = sl.dtype(str(x.dtype))
    if dt.is_bool:
        fill = sl.const(bool(value), "bool")
    else:
        fill = sl.const(int(value) if dt.is_int else value, str(dt))

    def body(i):
        src, inside = [], []
        for d, e in enumerate(x.shape):
            s = i[d] - before[d] if before[d] else i[d]
            src.append(s)
            if before[d] > 0:
                inside.append(s >= 0)
            if after[d] > 0:
                inside.append(s < e)
        read = x[tuple(src)]
        return sl.if_then_else(sl.all(*inside), read, fill) if inside else read
    return compute(shape, body, ctx.name())


# ---------------------------------------------------------------- gathers

def _clamped(index, rows):
    """index clamped into [0, rows) as an int64 expression (rows: int or size expression)."""
    i = sl.cast("int64", index)
    hi = sl.cast("int64", rows) - sl.const(1, "int64") if not isinstance(rows, int) else sl.const(rows - 1, "int64")
    return sl.select(i < sl.const(0, "int64"), sl.const(0, "int64"), sl.select(i > hi, hi, i))


def _guard_indices(ctx: LowerContext, indices: sl.Tensor, rows, op: str) -> None:
    """Ask for a runtime IndexError when some index is outside [0, rows)."""
    def outside(index):
        i = sl.cast("int64", indices[tuple(index)])
        return sl.any(i < sl.const(0, "int64"), i >= sl.cast("int64", sl.const(rows) if isinstance(rows, int)
                                                               else rows))
    dims = tuple(range(len(indices.shape)))
    flag = reduction(indices.shape, dims, False, any_reducer, outside, ctx.name("out_of_range"))
    ctx.guard(flag, f"{op}: index out of range (the table has {rows} rows; node {ctx.node})")


def _check_index_dtype(op: str, indices) -> None:
    if str(indices.dtype) not in ("int32", "int64"):
        raise TypeError(f"{op}: indices must be an int32 or int64 tensor, got {indices.dtype}")


@register_lowering("aten.embedding.default")
def embedding(ctx: LowerContext, weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    """weight[indices]: out[..., d] = weight[indices[...], d] (padding_idx only affects the
    gradient). Indices are clamped in the kernel and checked by the guard."""
    _check_index_dtype("embedding", indices)
    if len(weight.shape) != 2:
        raise ValueError(f"embedding: the weight must be 2-d, got shape {tuple(weight.shape)}")
    rows = weight.shape[0]
    _guard_indices(ctx, indices, rows, "embedding")
    n = len(indices.shape)

    def body(i):
        return weight[_clamped(indices[tuple(i[:n])], rows), i[n]]
    return compute(tuple(indices.shape) + (weight.shape[1],), body, ctx.name())


@register_lowering("aten.index_select.default")
def index_select(ctx: LowerContext, x, dim, index):
    """x's slices along dim at the positions in index (a 1-d or 0-d tensor)."""
    _check_index_dtype("index_select", index)
    if len(index.shape) > 1:
        raise ValueError(f"index_select: index must be 0-d or 1-d, got shape {tuple(index.shape)}")
    if not x.shape:
        raise Unsupported("index_select of a 0-d tensor")
    d = norm_dim(dim, len(x.shape))
    rows = x.shape[d]
    _guard_indices(ctx, index, rows, "index_select")
    shape = list(x.shape)
    shape[d] = index.shape[0] if index.shape else 1

    def body(i):
        at = index[(i[d],)] if index.shape else index[()]
        return x[tuple(i[:d]) + (_clamped(at, rows),) + tuple(i[d + 1:])]
    return compute(shape, body, ctx.name())
