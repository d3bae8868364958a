"""Normalization by statistics of the input itself. Group normalization (aten.native_group_norm:
nn.GroupNorm, F.group_norm) as reductions over each group's channels and every spatial
position, then an elementwise stage:

    <name>_sum[n, g]    = sum of x over the group        <name>_mean = sum / count
    <name>_sqsum[n, g]  = sum of (x - mean)^2            <name>_rstd = rsqrt(sqsum / count + eps)
    <name>[n, c, ...]   = (x - mean[n, c // Cg]) * rstd[n, c // Cg] * weight[c] + bias[c]

(the centred second pass, as layer_norm's, in float32 for float16/bfloat16); the results are
(out, mean [N, G], rstd [N, G]) as torch's, the statistics computed only where read. Batch
normalization with the batch's statistics and no running ones (_native_batch_norm_legit.no_stats,
training=True: what nn.InstanceNorm becomes) alike, per channel over the batch and positions.
"""
from __future__ import annotations

import schedlang as sl

from .accum import acc_and_result_names, acc_dtype, cast_stage, require_float
from .common import compute, same_extent, static
from .norm import weight_and_bias
from .reduce import count_of, reduction
from .registry import Unsupported, register_lowering


def _group_sum(x, groups: int, value, name: str) -> sl.Tensor:
    """[N, groups]: the sum of value(n, channel, spatial index) over each group."""
    cg = x.shape[1] // groups
    spatial = x.shape[2:]

    def body(idx):
        n, g = idx
        rc = sl.reduce_axis((0, cg), name="rc")
        rs = [sl.reduce_axis((0, e), name=f"rs{d}") for d, e in enumerate(spatial)]
        return sl.sum(value(n, g * cg + rc, rs), axis=[rc, *rs])
    return compute((x.shape[0], groups), body, name)


@register_lowering("aten.native_group_norm.default")
def native_group_norm(ctx, x, weight, bias, N, C, HxW, group, eps):
    require_float("group_norm", x)
    if x.ndim < 2:
        raise ValueError(f"group_norm: the input needs a channel dim, got shape {list(x.shape)}")
    groups = static(group, "group_norm: groups")
    channels = static(x.shape[1], "group_norm: channels")
    if groups < 1 or channels % groups:
        raise ValueError(f"group_norm: {channels} channels are not divisible into {groups} groups")
    for p in (weight, bias):
        if p is not None and (p.ndim != 1 or not same_extent(p.shape[0], channels)):
            raise ValueError(f"group_norm: a weight or bias of shape {list(p.shape)} for {channels} channels")
        if p is not None and str(p.dtype) != str(x.dtype):
            raise Unsupported(f"group_norm: a {p.dtype} weight or bias with a {x.dtype} input is not lowered")
    if isinstance(eps, bool) or not isinstance(eps, (int, float)):
        raise Unsupported(f"group_norm: eps={eps!r} is not a number")
    out, acc = str(x.dtype), acc_dtype(x.dtype)
    cg = channels // groups
    count = sl.const(float(cg), acc)
    for e in x.shape[2:]:
        count = count * (sl.const(float(e), acc) if isinstance(e, int) else sl.cast(acc, e))

    def read(n, c, rs):
        return sl.cast(acc, x[(n, c, *rs)])
    total = _group_sum(x, groups, read, ctx.name("sum"))
    mean_name, mean_out = acc_and_result_names(ctx.name("mean"), acc, out)
    mean = compute(total.shape, lambda idx: total[tuple(idx)] / count, mean_name)

    def centered(n, c, rs):
        return read(n, c, rs) - mean[n, c // cg]
    sqsum = _group_sum(x, groups, lambda n, c, rs: centered(n, c, rs) * centered(n, c, rs), ctx.name("sqsum"))
    rstd_name, rstd_out = acc_and_result_names(ctx.name("rstd"), acc, out)
    rstd = compute(sqsum.shape, lambda idx: sl.rsqrt(sqsum[tuple(idx)] / count + sl.const(float(eps), acc)),
                   rstd_name)

    def normalized(idx):
        n, c, rs = idx[0], idx[1], idx[2:]
        return sl.cast(out, weight_and_bias(centered(n, c, rs) * rstd[n, c // cg], weight, bias, (c,), acc))
    result = compute(x.shape, normalized, ctx.name())
    return result, cast_stage(mean, out, mean_out), cast_stage(rstd, out, rstd_out)


@register_lowering("aten._native_batch_norm_legit.no_stats")
def batch_norm_batch_stats(ctx, x, weight, bias, training, momentum, eps):
    """(out, mean [C], rstd [C]): x normalized per channel (dim 1) by its own mean and biased
    variance over every other dim (computed in float32 for float16/bfloat16; the returned
    statistics in x's dtype, as torch returns them)."""
    require_float("batch_norm", x)
    if not training:
        raise Unsupported("batch_norm in eval mode without running statistics")
    if x.ndim < 2:
        raise ValueError(f"batch_norm: expected an input with a channel dim, got {x.ndim}-d")
    for p in (weight, bias):
        if p is not None and (p.ndim != 1 or not same_extent(p.shape[0], x.shape[1])):
            raise ValueError(f"batch_norm: a weight or bias of shape {list(p.shape)} for {x.shape[1]} channels")
    if isinstance(eps, bool) or not isinstance(eps, (int, float)):
        raise Unsupported(f"batch_norm: eps={eps!r} is not a number")
    out, acc = str(x.dtype), acc_dtype(x.dtype)
    dims = (0,) + tuple(range(2, x.ndim))
    count = count_of(x.shape, dims, acc)
    total = reduction(x.shape, dims, False, sl.sum, lambda idx: sl.cast(acc, x[tuple(idx)]), ctx.name("sum"))
    mean_name, mean_out = acc_and_result_names(ctx.name("mean"), acc, out)
    mean = compute(total.shape, lambda idx: total[tuple(idx)] / count, mean_name)

    def centered(idx):
        return sl.cast(acc, x[tuple(idx)]) - mean[idx[1]]
    sqsum = reduction(x.shape, dims, False, sl.sum, lambda idx: centered(idx) * centered(idx), ctx.name("sqsum"))
    rstd_name, rstd_out = acc_and_result_names(ctx.name("rstd"), acc, out)
    rstd = compute(sqsum.shape, lambda idx: sl.rsqrt(sqsum[tuple(idx)] / count + sl.const(float(eps), acc)),
                   rstd_name)

    def normalized(idx):
        return sl.cast(out, weight_and_bias(centered(idx) * rstd[idx[1]], weight, bias, (idx[1],), acc))
    return compute(x.shape, normalized, ctx.name()), cast_stage(mean, out, mean_out), cast_stage(rstd, out, rstd_out)
