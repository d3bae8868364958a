"""histc: counts of the input's values in `bins` equal bins over [min, max], as torch's CPU
kernel bins them (HistogramKernel.cpp, linear interpolation): a value v in range goes to bin
int((v - min) * bins / (max - min)), computed in the input's dtype in that order, max itself
to the last bin; values outside [min, max] and NaNs are not counted.

Lowered in gather form: each bin is a sum over the input of "v falls here", bins x numel
compares, which is cheap for the few bins a mixture-of-experts layer counts its rows' experts
into (transformers' grouped experts call histc for the groups' offsets). More compares than
GATHER_MAX_COMPARES (ops/common.py) run in torch, as does min == max (torch then takes the
data's own range).
"""
from __future__ import annotations

import math

import schedlang as sl

from .common import GATHER_MAX_COMPARES, compute, static
from .registry import Unsupported, register_lowering

def _number(value, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Unsupported(f"histc: {what}={value!r} is not a number known at compile time")
    return float(value)


@register_lowering("aten.histc.default")
def histc(ctx, x, bins=100, min=0, max=0):
    dtype = str(x.dtype)
    if dtype not in ("float32", "float64"):
        raise Unsupported(f"histc of {dtype} is not lowered (float32 and float64 are)")
    bins = static(bins, "histc: bins")
    if bins <= 0:
        raise ValueError(f"histc: bins must be > 0, got {bins}")
    lo, hi = _number(min, "min"), _number(max, "max")
    if lo == hi:
        raise Unsupported("histc with min == max (the data's own range) is not lowered")
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise ValueError(f"histc: range of [{lo}, {hi}] is not finite")
    if lo > hi:
        raise ValueError("histc: max must be larger than min")
    shape = [static(e, "histc: the input's shape") for e in x.shape]
    n = math.prod(shape)
    if n * bins > GATHER_MAX_COMPARES:
        raise Unsupported(f"histc of {n} values into {bins} bins is more than the gather form's "
                          f"{GATHER_MAX_COMPARES} compares")
    axes = [sl.reduce_axis((0, e), name=f"r{d}") for d, e in enumerate(shape)]
    left, right = sl.const(lo, dtype), sl.const(hi, dtype)

    def body(idx):
        v = x[tuple(axes)] if axes else x[()]
        pos = sl.cast("int64", ((v - left) * sl.const(float(bins), dtype)) / (right - left))
        pos = sl.min(pos, sl.const(bins - 1, "int64"))          # max itself: the last bin, closed
        hit = sl.all(sl.all(v >= left, v <= right), pos == sl.cast("int64", idx[0]))
        count = sl.cast(dtype, hit)
        return sl.sum(count, axis=axes) if axes else count
    return compute((bins,), body, ctx.name())
