"""searchsorted and bucketize: for each value, the index where it would be inserted into a
sorted sequence (per row of the sequence's leading dims, or one 1-d sequence for all values).

Each output runs torch's binary search (Bucketization.cpp) unrolled: ceil(log2(M + 1)) steps
of `mid = (lo + hi) // 2; if !(seq[mid] >= v) lo = mid + 1 else hi = mid` (right: `>`), so a
NaN value, a NaN in the sequence or an unsorted sequence lands where torch's lands. Every read
of the sequence (and of `sorter`) is clamped into it: no read is out of bounds.
"""
from __future__ import annotations

import schedlang as sl

from .common import compute, static
from .promote import result_type
from .registry import Unsupported, register_lowering


def _search(ctx, seq, values, out_int32: bool, right: bool, sorter, op: str):
    if seq.ndim == 0:
        raise ValueError(f"{op}: the sorted sequence must have at least one dim")
    m = static(seq.shape[-1], f"{op}: the sequence's length")
    scalar = not isinstance(values, sl.Tensor)
    if not scalar and seq.ndim > 1 and list(seq.shape[:-1]) != list(values.shape[:-1]):
        raise ValueError(f"{op}: the sequence's leading dims {list(seq.shape[:-1])} must be the values' "
                         f"{list(values.shape[:-1])}")
    if scalar and seq.ndim > 1:
        raise ValueError(f"{op}: a scalar value needs a 1-d sequence")
    if (not scalar and str(values.dtype) == "bool") or str(seq.dtype) == "bool":
        raise Unsupported(f"{op} of bool tensors is not lowered")
    calc = result_type(seq, values)
    out = "int32" if out_int32 else "int64"
    steps = m.bit_length()                     # ceil(log2(m + 1)): the search's iterations
    i32 = lambda v: sl.const(v, "int32")       # noqa: E731

    def body(idx):
        row = tuple(idx[:-1]) if seq.ndim > 1 else ()
        v = sl.const(values, calc) if scalar else sl.cast(calc, values[tuple(idx)])
        lo, hi = i32(0), i32(m)
        for _ in range(steps):
            mid = sl.floordiv(lo + hi, 2)
            at = sl.min(mid, i32(m - 1))
            if sorter is not None:
                at = sl.min(sl.max(sl.cast("int32", sorter[row + (at,)]), i32(0)), i32(m - 1))
            s = sl.cast(calc, seq[row + (at,)])
            stay = (s > v) if right else (s >= v)     # false for a NaN: the search moves right
            active = lo < hi
            lo = sl.select(sl.all(active, sl.bitwise_not(stay)), mid + 1, lo)
            hi = sl.select(sl.all(active, stay), mid, hi)
        return sl.cast(out, lo)
    shape = () if scalar else tuple(values.shape)
    return compute(shape, body, ctx.name())


@register_lowering("aten.searchsorted.Tensor")
def searchsorted(ctx, seq, values, *, out_int32=False, right=False, side=None, sorter=None):
    return _search(ctx, seq, values, out_int32, bool(right) or side == "right", sorter, "searchsorted")


@register_lowering("aten.searchsorted.Scalar")
def searchsorted_scalar(ctx, seq, value, *, out_int32=False, right=False, side=None, sorter=None):
    return _search(ctx, seq, value, out_int32, bool(right) or side == "right", sorter, "searchsorted")


@register_lowering("aten.bucketize.Tensor")
def bucketize(ctx, values, boundaries, *, out_int32=False, right=False):
    if boundaries.ndim != 1:
        raise ValueError(f"bucketize: boundaries must be 1-d, got {boundaries.ndim}-d")
    return _search(ctx, boundaries, values, out_int32, bool(right), None, "bucketize")
