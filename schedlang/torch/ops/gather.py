"""Reads at computed or guarded coordinates: constant_pad_nd, embedding, index_select,
gather and index.Tensor (x[idx] with integer index tensors).

Pads read their input under a guard (sl.if_then_else: the out-of-range read is never
evaluated). Gathers read rows named by an index tensor, which may hold anything: the
kernel clamps every index into the table, so that no read is out of bounds, and the
lowering adds a guard (`LowerContext.guard`): a bool flag, computed in the same part,
that is true when some index was out of range; the compiled module then raises the
error eager torch raises (IndexError; RuntimeError for gather) instead of returning the
clamped rows.
"""
from __future__ import annotations

import schedlang as sl

from .common import broadcast_shape, compute, norm_dim, read_broadcast, static
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

def _int64(extent):
    return sl.const(extent, "int64") if isinstance(extent, int) else sl.cast("int64", extent)


def clamped_index(index, rows, wrap: bool = False):
    """index clamped into [0, rows) as an int64 expression (rows: int or size expression);
    with wrap, a negative index counts from the end first (x[-1])."""
    i, zero, n = sl.cast("int64", index), sl.const(0, "int64"), _int64(rows)
    if wrap:
        i = sl.select(i < zero, i + n, i)
    return sl.select(i < zero, zero, sl.select(i > n - sl.const(1, "int64"), n - sl.const(1, "int64"), i))


def _guard_indices(ctx: LowerContext, indices: sl.Tensor, rows, message: str, wrap: bool = False,
                   error: type = IndexError, suffix: str = "") -> None:
    """Ask for a runtime error when some index is outside [0, rows) ([-rows, rows) with wrap);
    the flag is the stage `<name>_out_of_range<suffix>`."""
    n = _int64(rows)
    low = -n if wrap else sl.const(0, "int64")

    def outside(index):
        i = sl.cast("int64", indices[tuple(index)])
        return sl.any(i < low, i >= n)
    dims = tuple(range(len(indices.shape)))
    flag = reduction(indices.shape, dims, False, any_reducer, outside, ctx.name(f"out_of_range{suffix}"))
    ctx.guard(flag, f"{message} (node {ctx.node})", error)


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
    _guard_indices(ctx, indices, rows, f"embedding: index out of range (the table has {rows} rows)")
    n = len(indices.shape)

    def body(i):
        return weight[clamped_index(indices[tuple(i[:n])], rows), i[n]]
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
    _guard_indices(ctx, index, rows, f"index_select: index out of range for dimension {d} of size {rows}")
    shape = list(x.shape)
    shape[d] = index.shape[0] if index.shape else 1

    def body(i):
        at = index[(i[d],)] if index.shape else index[()]
        return x[tuple(i[:d]) + (clamped_index(at, rows),) + tuple(i[d + 1:])]
    return compute(shape, body, ctx.name())


@register_lowering("aten.gather.default")
def gather(ctx: LowerContext, x, dim, index, sparse_grad=False):
    """out[i] = x[i with dim replaced by index[i]]; index has x's number of dims."""
    _check_index_dtype("gather", index)
    if len(index.shape) != len(x.shape):
        raise ValueError(f"gather: index has {len(index.shape)} dims, the tensor {len(x.shape)}")
    if not x.shape:
        raise Unsupported("gather of a 0-d tensor")
    d = norm_dim(dim, len(x.shape))
    rows = x.shape[d]
    _guard_indices(ctx, index, rows, f"gather: index out of bounds for dimension {d} with size {rows}",
                   error=RuntimeError)

    def body(i):
        return x[tuple(i[:d]) + (clamped_index(index[tuple(i)], rows),) + tuple(i[d + 1:])]
    return compute(tuple(index.shape), body, ctx.name())


@register_lowering("aten.index.Tensor")
def index_tensor(ctx: LowerContext, x, indices):
    """x[..., idx, ...] with integer index tensors (None: a whole dim), as numpy's advanced
    indexing: the index tensors broadcast together; their dims replace the indexed dims in
    place when those are adjacent, else they come first. Negative indices count from the end."""
    idx = list(indices)
    if len(idx) > len(x.shape):
        raise IndexError(f"index: {len(idx)} indices for a tensor of {len(x.shape)} dims")
    idx += [None] * (len(x.shape) - len(idx))
    adv = [d for d, t in enumerate(idx) if t is not None]
    if not adv:
        raise Unsupported("index with no index tensor")
    for d in adv:
        if str(idx[d].dtype) in ("bool", "uint8"):
            raise Unsupported("indexing with a mask (the result's shape depends on the data)")
        _check_index_dtype("index", idx[d])
    bshape = broadcast_shape(*(idx[d].shape for d in adv))
    rest = [d for d in range(len(x.shape)) if d not in adv]
    in_place = adv == list(range(adv[0], adv[-1] + 1))
    before = [d for d in rest if d < adv[0]] if in_place else []
    after = [d for d in rest if d not in before]
    for d in adv:
        _guard_indices(ctx, idx[d], x.shape[d], f"index: an index is out of bounds for dimension {d} with size "
                       f"{x.shape[d]}", wrap=True, suffix=str(d))
    nb, nB = len(before), len(bshape)

    def body(i):
        src = [None] * len(x.shape)
        for k, d in enumerate(before):
            src[d] = i[k]
        for k, d in enumerate(after):
            src[d] = i[nb + nB + k]
        for d in adv:
            src[d] = clamped_index(read_broadcast(idx[d], bshape, i[nb:nb + nB]), x.shape[d], wrap=True)
        return x[tuple(src)]
    return compute([x.shape[d] for d in before] + list(bshape) + [x.shape[d] for d in after], body, ctx.name())
