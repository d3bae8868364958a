"""cumsum, cumprod, logcumsumexp, cummax and cummin along one dim, as reductions over the prefix:

    out[..., i, ...] = sum over j of x[..., j, ...] where j <= i

(the whole dim as the reduction's domain, the points after i left out by its condition).
That is quadratic in the dim's extent where a scan is linear, but it is a plain reduction
every schedule and target already handles. cumsum and cumprod of a longer dim (over
DIRECT_EXTENT) are computed in blocks of BLOCK, as a parallel scan is: each block's total, the
prefix of the totals (the same way, recursively), and each element's prefix within its block
combined with the totals before its block: about (BLOCK / 2 + 2) terms per element at any
length. logcumsumexp, cummax and cummin keep the direct form; dims longer than MAX_EXTENT stay
in torch. Integers and bool accumulate to int64, as in torch; float16/bfloat16 in float32.
"""
from __future__ import annotations

import schedlang as sl

from .accum import acc_and_result_names, acc_dtype, cast_stage, dtype_arg, is_float
from .common import compute, norm_dim, replaced
from .registry import Unsupported, register_lowering

MAX_EXTENT = 4096     # a longer direct prefix (16M terms per row) runs in torch
DIRECT_EXTENT = 64    # cumsum/cumprod of a longer static dim are computed in blocks
BLOCK = 8             # ... of this many elements


def _prefix(read, shape, d: int, reducer, name: str) -> sl.Tensor:
    """out[..., i, ...] = reducer of read(index with j at d) over j <= i: directly (a reduction
    over the whole prefix) up to DIRECT_EXTENT or for a symbolic extent, else in blocks of BLOCK
    (the blocks' totals, their prefix by _prefix again, and the prefix within each block);
    every read is in bounds, the short last block's too."""
    n = shape[d]
    if not isinstance(n, int) or n <= DIRECT_EXTENT:
        j = sl.reduce_axis((0, n), name="r")     # (not a name of the compute's axes)
        return compute(shape, lambda idx: reducer(read(replaced(idx, d, j)), axis=j, where=j <= idx[d]), name)
    blocks = -(-n // BLOCK)

    def total(idx):
        j = sl.reduce_axis((0, BLOCK), name="r")
        at = idx[d] * BLOCK + j
        return reducer(read(replaced(idx, d, sl.min(at, n - 1))), axis=j, where=at < n)
    totals = compute(replaced(shape, d, blocks), total, f"{name}_blocks")
    before = _prefix(lambda idx: totals[idx], totals.shape, d, reducer, f"{name}_blocks_prefix")

    def within(idx):
        j = sl.reduce_axis((0, BLOCK), name="r")
        start = idx[d] // BLOCK * BLOCK
        return reducer(read(replaced(idx, d, sl.min(start + j, n - 1))), axis=j, where=j <= idx[d] - start)
    inner = compute(shape, within, f"{name}_in_block")

    def body(idx):
        block = idx[d] // BLOCK
        here = inner[tuple(idx)]
        return sl.select(block > 0, reducer(before[replaced(idx, d, sl.max(block - 1, 0))], here), here)
    return compute(shape, body, name)


def _cumulative(ctx, x, dim, dtype, reducer, op: str) -> sl.Tensor:
    out = dtype_arg(dtype, op) or (str(x.dtype) if is_float(x.dtype) else "int64")
    acc = acc_dtype(out)
    if x.ndim == 0:                       # (a new tensor: the input is not a result)
        return compute((), lambda idx: sl.cast(out, x[()]), ctx.name())
    d = norm_dim(dim, x.ndim, f"{op}: dim")
    acc_name, name = acc_and_result_names(ctx.name(), acc, out)
    return cast_stage(_prefix(lambda idx: sl.cast(acc, x[idx]), x.shape, d, reducer, acc_name), out, name)


@register_lowering("aten.cumsum.default")
def cumsum(ctx, x, dim, *, dtype=None):
    return _cumulative(ctx, x, dim, dtype, sl.sum, "cumsum")


@register_lowering("aten.cumprod.default")
def cumprod(ctx, x, dim, *, dtype=None):
    return _cumulative(ctx, x, dim, dtype, sl.prod, "cumprod")


@register_lowering("aten.logcumsumexp.default")
def logcumsumexp(ctx, x, dim):
    """log(cumsum(exp(x))) without overflow: the prefix max m, then log(sum exp(x - m)) + m
    (m itself where it is infinite: all -inf so far, or an inf)."""
    if not is_float(x.dtype):
        raise TypeError(f"logcumsumexp needs a floating-point tensor, got {x.dtype}")
    out, acc = str(x.dtype), acc_dtype(str(x.dtype))
    if x.ndim == 0:
        return compute((), lambda idx: x[()], ctx.name())
    d = norm_dim(dim, x.ndim, "logcumsumexp: dim")
    n = x.shape[d]
    if isinstance(n, int) and n > MAX_EXTENT:
        raise Unsupported(f"logcumsumexp over {n} elements (more than {MAX_EXTENT})")
    j, k = sl.reduce_axis((0, n), name="r"), sl.reduce_axis((0, n), name="r2")
    read = lambda idx, r: sl.cast(acc, x[replaced(idx, d, r)])     # noqa: E731
    m = compute(x.shape, lambda idx: sl.max(read(idx, j), axis=j, where=j <= idx[d]), ctx.name("max"))
    s = compute(x.shape, lambda idx: sl.sum(sl.exp(read(idx, k) - m[tuple(idx)]), axis=k, where=k <= idx[d]),
                ctx.name("sum"))

    def body(idx):
        top = m[tuple(idx)]
        return sl.cast(out, sl.select(sl.isinf(top), top, sl.log(s[tuple(idx)]) + top))
    return compute(x.shape, body, ctx.name())


def _cumulative_extreme(ctx, x, dim, reducer, op: str):
    """(values, indices) of cummax/cummin: the running extreme, and the last index at or
    before each position holding it (a NaN is the extreme from its position on, its index the
    last NaN's), as torch's scan gives them."""
    if str(x.dtype) == "bool":
        raise Unsupported(f"{op} of a bool tensor is not lowered")
    if x.ndim == 0:
        return (compute((), lambda idx: x[()], ctx.name("values")),
                compute((), lambda idx: sl.const(0, "int64"), ctx.name("indices")))
    d = norm_dim(dim, x.ndim, f"{op}: dim")
    n = x.shape[d]
    if isinstance(n, int) and n > MAX_EXTENT:
        raise Unsupported(f"{op} over {n} elements (more than {MAX_EXTENT})")
    acc = acc_dtype(str(x.dtype))
    j, k = sl.reduce_axis((0, n), name="r"), sl.reduce_axis((0, n), name="r2")
    read = lambda idx, r: sl.cast(acc, x[replaced(idx, d, r)])     # noqa: E731
    best = compute(x.shape, lambda idx: reducer(read(idx, j), axis=j, where=j <= idx[d]), ctx.name("best"))

    def last_index(idx):
        v, b = read(idx, k), best[tuple(idx)]
        hit = v == b
        if is_float(x.dtype):
            hit = sl.any(hit, sl.all(sl.isnan(v), sl.isnan(b)))
        return sl.max(sl.select(hit, sl.cast("int64", k), sl.const(-1, "int64")), axis=k, where=k <= idx[d])
    values = compute(x.shape, lambda idx: sl.cast(str(x.dtype), best[tuple(idx)]), ctx.name("values"))
    return values, compute(x.shape, last_index, ctx.name("indices"))


@register_lowering("aten.cummax.default")
def cummax(ctx, x, dim):
    return _cumulative_extreme(ctx, x, dim, sl.max, "cummax")


@register_lowering("aten.cummin.default")
def cummin(ctx, x, dim):
    return _cumulative_extreme(ctx, x, dim, sl.min, "cummin")
