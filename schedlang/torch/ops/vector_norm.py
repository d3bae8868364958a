"""torch.linalg.vector_norm (what F.normalize, torch.norm and x.norm(p) become) as one
reduction over the dims and, for p other than inf/-inf/0/1, a root stage after it:

    ord 2:      sqrt(sum |x|^2)        ord 1:   sum |x|          ord 0: count of x != 0
    ord inf:    max |x|                ord -inf: min |x|         ord p: (sum |x|^p)^(1/p)

computed in float32 for float16/bfloat16 (or in dtype= when given), the result in x's dtype.
"""
from __future__ import annotations

import math

import schedlang as sl

from .accum import acc_and_result_names, acc_dtype, cast_stage, dtype_arg, is_float, norm_dims
from .common import compute
from .reduce import reduction
from .registry import Unsupported, register_lowering


@register_lowering("aten.linalg_vector_norm.default")
def linalg_vector_norm(ctx, x, ord=2, dim=None, keepdim=False, *, dtype=None):
    if not is_float(x.dtype):
        raise TypeError(f"linalg.vector_norm needs a floating-point input, got {x.dtype}")
    if isinstance(ord, bool) or not isinstance(ord, (int, float)):
        raise Unsupported(f"linalg.vector_norm: ord={ord!r} is not a number")
    out = dtype_arg(dtype, "linalg.vector_norm") or str(x.dtype)
    acc = acc_dtype(out)
    dims = norm_dims(dim, x.ndim, "linalg.vector_norm") if x.ndim else ()
    p = float(ord)

    def mag(idx):
        return sl.abs(sl.cast(acc, x[tuple(idx)]))
    root_name, name = acc_and_result_names(ctx.name(), acc, out)
    if p == math.inf or p == -math.inf:
        total = reduction(x.shape, dims, keepdim, sl.max if p > 0 else sl.min, mag, root_name)
        return cast_stage(total, out, name)
    zero, one = sl.const(0, acc), sl.const(1, acc)
    if p == 0:
        source = lambda idx: sl.select(mag(idx) != zero, one, zero)   # noqa: E731
    elif p == 1:
        source = mag
    elif p == 2:
        source = lambda idx: mag(idx) * mag(idx)   # noqa: E731
    else:
        source = lambda idx: sl.power(mag(idx), sl.const(p, acc))   # noqa: E731
    if p in (0, 1):
        return cast_stage(reduction(x.shape, dims, keepdim, sl.sum, source, root_name), out, name)
    total = reduction(x.shape, dims, keepdim, sl.sum, source, ctx.name("sum"))
    root = (lambda v: sl.sqrt(v)) if p == 2 else (lambda v: sl.power(v, sl.const(1.0 / p, acc)))
    return cast_stage(compute(total.shape, lambda idx: root(total[tuple(idx)]), root_name), out, name)
