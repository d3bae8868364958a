"""cumsum, cumprod, logcumsumexp, cummax and cummin along one dim, as reductions over the prefix:

    out[..., i, ...] = sum over j of x[..., j, ...] where j <= i

(the whole dim as the reduction's domain, the points after i left out by its condition).
That is quadratic in the dim's extent where a scan is linear, but it is a plain reduction
every schedule and target already handles; dims longer than MAX_EXTENT stay in torch.
Integers and bool accumulate to int64, as in torch; float16/bfloat16 in float32.
"""
from __future__ import annotations

import schedlang as sl

from .accum import acc_and_result_names, acc_dtype, cast_stage, dtype_arg, is_float
from .common import compute, norm_dim, replaced
from .registry import Unsupported, register_lowering

MAX_EXTENT = 4096     # a longer prefix sum (16M terms per row) runs in torch


def _cumulative(ctx, x, dim, dtype, reducer, op: str) -> sl.Tensor:
    out = dtype_arg(dtype, op) or (str(x.dtype) if is_float(x.dtype) else "int64")
    acc = acc_dtype(out)
    if x.ndim == 0:                       # (a new tensor: the input is not a result)
        return compute((), lambda idx: sl.cast(out, x[()]), ctx.name())
    d = norm_dim(dim, x.ndim, f"{op}: dim")
    n = x.shape[d]
    if isinstance(n, int) and n > MAX_EXTENT:
        raise Unsupported(f"{op} over {n} elements (more than {MAX_EXTENT}: its prefix reduction is quadratic)")
    j = sl.reduce_axis((0, n), name="r")     # (not a name of the compute's axes)

    def body(idx):
        return reducer(sl.cast(acc, x[replaced(idx, d, j)]), axis=j, where=j <= idx[d])
    acc_name, name = acc_and_result_names(ctx.name(), acc, out)
    return cast_stage(compute(x.shape, body, acc_name), out, name)


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
