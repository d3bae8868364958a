"""aten._trilinear (what nn.Bilinear becomes): three tensors, each with size-1 dims inserted at
its expand list to one common rank, multiplied with broadcasting and summed over sumdim (those
dims dropped): one reduction, accumulated in float32 for float16/bfloat16.
"""
from __future__ import annotations

import schedlang as sl

from .accum import acc_dtype, require_float
from .common import broadcast_shape, compute, static
from .registry import register_lowering


def _expanded(t, expand, total: int):
    """(t's shape with extent-1 dims at expand, of total dims; the dims t's own dims become)."""
    inserted = sorted(d % total for d in expand)
    dims = [d for d in range(total) if d not in inserted]
    shape = [1] * total
    for k, d in enumerate(dims):
        shape[d] = t.shape[k]
    return tuple(shape), dims


@register_lowering("aten._trilinear.default")
def trilinear(ctx, i1, i2, i3, expand1, expand2, expand3, sumdim, unroll_dim=1):
    require_float("_trilinear", i1, i2, i3)
    total = i1.ndim + len(expand1)
    parts = [_expanded(t, e, total) for t, e in ((i1, expand1), (i2, expand2), (i3, expand3))]
    for t, e in ((i2, expand2), (i3, expand3)):
        if t.ndim + len(e) != total:
            raise ValueError(f"_trilinear: inputs of {i1.ndim}, {i2.ndim} and {i3.ndim} dims do not expand to one rank")
    full = broadcast_shape(*(shape for shape, _ in parts))
    summed = sorted({d % total for d in sumdim})
    out, acc = str(i1.dtype), acc_dtype(i1.dtype)
    kept = [d for d in range(total) if d not in summed]

    def body(idx):
        axes = {d: sl.reduce_axis((0, static(full[d], "_trilinear: a summed extent")), name=f"r{d}") for d in summed}
        at = [None] * total
        for k, d in enumerate(kept):
            at[d] = idx[k]
        for d in summed:
            at[d] = axes[d]
        value = sl.const(1, acc)
        for t, (shape, dims) in zip((i1, i2, i3), parts):     # a broadcast dim (extent 1) reads 0
            value = value * sl.cast(acc, t[tuple(at[d] if shape[d] != 1 else 0 for d in dims)])
        return sl.sum(value, axis=list(axes.values())) if axes else value
    result = compute(tuple(full[d] for d in kept), body, ctx.name("sum") if acc != out else ctx.name())
    return result if acc == out else compute(result.shape, lambda idx: sl.cast(out, result[tuple(idx)]), ctx.name())
