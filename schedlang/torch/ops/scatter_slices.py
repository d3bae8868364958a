"""What torch.export makes of in-place writes to slices (`x[:, 1:3] = y`, `x[0] = v`, the
circular padding of F.pad), each a new tensor: copy (src broadcast into self's shape and
dtype), slice_scatter and select_scatter (input with src in a slice or at an index of one
dim), and empty (zeros: its values are unspecified in torch, and a kernel must not read
memory nothing wrote).
"""
from __future__ import annotations

import torch

import schedlang as sl

from ..dtypes import to_sl
from .common import compute, norm_dim, read_broadcast, replaced, static
from .index import _clip
from .registry import LowerContext, Unsupported, register_lowering


@register_lowering("aten.copy.default")
def copy(ctx: LowerContext, x, src, non_blocking=False):
    shape = tuple(x.shape)
    return compute(shape, lambda i: sl.cast(str(x.dtype), read_broadcast(src, shape, i)), ctx.name())


@register_lowering("aten.slice_scatter.default")
def slice_scatter(ctx: LowerContext, x, src, dim=0, start=None, end=None, step=1):
    """x with src in x[..., start:end:step, ...] along dim."""
    d = norm_dim(dim, len(x.shape), "slice_scatter: dim")
    size = static(x.shape[d], "slice_scatter: the scattered dim")
    step = static(step, "slice_scatter: step")
    if step <= 0:
        raise ValueError(f"slice_scatter: step must be positive, got {step}")
    lo, hi = _clip(start, size, 0), _clip(end, size, size)
    length = max(0, -(-(hi - lo) // step))
    if len(src.shape) != len(x.shape) or static(src.shape[d], "slice_scatter: src") != length:
        raise ValueError(f"slice_scatter: src of shape {list(src.shape)} does not fit the slice {lo}:{hi}:{step} "
                         f"of dim {d} of {list(x.shape)}")

    def body(i):
        pos = i[d] - lo
        inside = [i[d] >= lo, i[d] < hi] + ([sl.floormod(pos, step) == 0] if step > 1 else [])
        at = replaced(i, d, sl.floordiv(pos, step) if step > 1 else pos)
        return sl.if_then_else(sl.all(*inside), sl.cast(str(x.dtype), src[at]), x[tuple(i)])
    return compute(tuple(x.shape), body, ctx.name())


@register_lowering("aten.select_scatter.default")
def select_scatter(ctx: LowerContext, x, src, dim, index):
    """x with src at index of dim (src has that dim dropped)."""
    d = norm_dim(dim, len(x.shape), "select_scatter: dim")
    size = static(x.shape[d], "select_scatter: the scattered dim")
    index = static(index, "select_scatter: index")
    if not -size <= index < size:
        raise IndexError(f"select_scatter: index {index} is out of range for dim {d} of size {size}")
    index %= size
    if len(src.shape) != len(x.shape) - 1:
        raise ValueError(f"select_scatter: src of shape {list(src.shape)} for an index of dim {d} of "
                         f"{list(x.shape)}")

    def body(i):
        at = tuple(i[:d]) + tuple(i[d + 1:])
        return sl.if_then_else(i[d] == index, sl.cast(str(x.dtype), src[at]), x[tuple(i)])
    return compute(tuple(x.shape), body, ctx.name())


@register_lowering("aten.empty_permuted.default")
def empty_permuted(ctx: LowerContext, size, physical_layout, dtype=None, layout=None, device=None,
                   pin_memory=None):
    """An uninitialised tensor (its values are unspecified, so zeros); the physical layout only
    orders its strides."""
    return empty(ctx, size, dtype)


@register_lowering("aten.empty.memory_format")
def empty(ctx: LowerContext, size, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    shape = [static(e, "empty: size") if not isinstance(e, sl.expr.nodes.Expr) else e for e in size]
    if any(isinstance(e, int) and e <= 0 for e in shape):
        raise Unsupported("an empty tensor (schedlang tensors have positive extents)")
    dt = to_sl(dtype if dtype is not None else torch.get_default_dtype())
    return compute(tuple(shape), lambda i: sl.const(0, dt), ctx.name())
