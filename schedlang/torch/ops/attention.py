"""The pieces of attention that torch.export keeps: _safe_softmax (scaled_dot_product_attention's
softmax, which gives 0, not NaN, for a row masked entirely to -inf)."""
from __future__ import annotations

import schedlang as sl

from .accum import dtype_arg, is_float
from .common import compute, norm_dim
from .norm import softmax_of
from .reduce import all_reducer, reduced_index, reduction
from .registry import LowerContext, Unsupported, register_lowering


@register_lowering("aten._safe_softmax.default")
def safe_softmax(ctx: LowerContext, x, dim, dtype=None):
    """softmax over dim (`<name>_softmax...` stages), then 0 where the whole row is -inf
    (`<name>_masked`, an all-reduction), as torch's decomposition computes it."""
    out = dtype_arg(dtype, "_safe_softmax") or str(x.dtype)
    if not (is_float(out) and is_float(x.dtype)):
        raise Unsupported(f"_safe_softmax of {x.dtype} into {out}: floating point only")
    d = norm_dim(dim, x.ndim, "_safe_softmax: dim")
    soft = softmax_of(LowerContext(ctx.name("softmax"), ctx.target), x, d, out, False, "_safe_softmax")
    dims = (d,) if x.ndim else ()
    ninf = sl.const(float("-inf"), str(x.dtype))
    masked = reduction(x.shape, dims, True, all_reducer, lambda idx: x[tuple(idx)] == ninf, ctx.name("masked"))
    zero = sl.const(0.0, out)
    return compute(x.shape, lambda idx: sl.select(masked[reduced_index(idx, dims, True)], zero, soft[tuple(idx)]),
                   ctx.name())
