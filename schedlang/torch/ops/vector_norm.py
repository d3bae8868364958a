"""torch.linalg.vector_norm (what F.normalize, torch.norm and x.norm(p) become) as one
reduction over the dims and, for p other than inf/-inf/0/1, a root stage after it:

    ord 2:      sqrt(sum |x|^2)        ord 1:   sum |x|          ord 0: count of x != 0
    ord inf:    max |x|                ord -inf: min |x|         ord p: (sum |x|^p)^(1/p)

computed in float32 for float16/bfloat16 (or in dtype= when given), the result in x's dtype.
torch.cdist is the same p-norm of every row difference of its two inputs, one reduction
over the feature dim (the differences directly: torch's matrix-product shortcut for p = 2,
|a|^2 + |b|^2 - 2 a.b, is faster but cancels).
"""
from __future__ import annotations

import math

import schedlang as sl

from .accum import acc_and_result_names, acc_dtype, cast_stage, dtype_arg, is_float, norm_dims
from .common import broadcast_shape, compute, read_broadcast, same_extent
from .reduce import reduction
from .registry import Unsupported, register_lowering


def _p_norm_parts(p: float, acc: str):
    """(the summand of |d| for a p-norm, the reducer, the root applied to the total or None)."""
    zero, one = sl.const(0, acc), sl.const(1, acc)
    if p == math.inf or p == -math.inf:
        return (lambda m: m), (sl.max if p > 0 else sl.min), None
    if p == 0:
        return (lambda m: sl.select(m != zero, one, zero)), sl.sum, None
    if p == 1:
        return (lambda m: m), sl.sum, None
    if p == 2:
        return (lambda m: m * m), sl.sum, sl.sqrt
    return (lambda m: sl.power(m, sl.const(p, acc))), sl.sum, (lambda v: sl.power(v, sl.const(1.0 / p, acc)))


@register_lowering("aten._cdist_forward.default")
def cdist(ctx, x1, x2, p, compute_mode=None):
    """[..., P, R]: the p-norm of x1[..., i, :] - x2[..., j, :] (batch dims broadcast)."""
    if not is_float(x1.dtype) or str(x1.dtype) != str(x2.dtype):
        raise TypeError(f"cdist needs two floating-point inputs of one dtype, got {x1.dtype} and {x2.dtype}")
    if x1.ndim < 2 or x2.ndim < 2 or not same_extent(x1.shape[-1], x2.shape[-1]):
        raise ValueError(f"cdist: inputs {list(x1.shape)} and {list(x2.shape)} need one feature dim (the last)")
    if isinstance(p, bool) or not isinstance(p, (int, float)) or p < 0:
        raise ValueError(f"cdist: p={p!r} must be a non-negative number")
    out, acc = str(x1.dtype), acc_dtype(x1.dtype)
    batch = broadcast_shape(tuple(x1.shape[:-2]), tuple(x2.shape[:-2]))
    shape = batch + (x1.shape[-2], x2.shape[-2])
    summand, reducer, root = _p_norm_parts(float(p), acc)
    k = sl.reduce_axis((0, x1.shape[-1]), name="k")
    nb = len(batch)

    def body(idx):
        a = read_broadcast(x1, batch + tuple(x1.shape[-2:]), list(idx[:nb]) + [idx[nb], k])
        b = read_broadcast(x2, batch + tuple(x2.shape[-2:]), list(idx[:nb]) + [idx[nb + 1], k])
        return reducer(summand(sl.abs(sl.cast(acc, a) - sl.cast(acc, b))), axis=k)
    root_name, name = acc_and_result_names(ctx.name(), acc, out)
    if root is None:
        return cast_stage(compute(shape, body, root_name), out, name)
    total = compute(shape, body, ctx.name("sum"))
    return cast_stage(compute(shape, lambda idx: root(total[tuple(idx)]), root_name), out, name)


@register_lowering("aten.linalg_vector_norm.default")
def linalg_vector_norm(ctx, x, ord=2, dim=None, keepdim=False, *, dtype=None):
    if not is_float(x.dtype):
        raise TypeError(f"linalg.vector_norm needs a floating-point input, got {x.dtype}")
    if isinstance(ord, bool) or not isinstance(ord, (int, float)):
        raise Unsupported(f"linalg.vector_norm: ord={ord!r} is not a number")
    out = dtype_arg(dtype, "linalg.vector_norm") or str(x.dtype)
    acc = acc_dtype(out)
    dims = norm_dims(dim, x.ndim, "linalg.vector_norm") if x.ndim else ()
    summand, reducer, root = _p_norm_parts(float(ord), acc)

    def source(idx):
        return summand(sl.abs(sl.cast(acc, x[tuple(idx)])))
    root_name, name = acc_and_result_names(ctx.name(), acc, out)
    if root is None:
        return cast_stage(reduction(x.shape, dims, keepdim, reducer, source, root_name), out, name)
    total = reduction(x.shape, dims, keepdim, reducer, source, ctx.name("sum"))
    return cast_stage(compute(total.shape, lambda idx: root(total[tuple(idx)]), root_name), out, name)
