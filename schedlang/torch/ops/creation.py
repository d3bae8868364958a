"""Tensors made from a value: full, full_like, scalar_tensor (ones/zeros decompose to full)."""
from __future__ import annotations

import math

import torch

import schedlang as sl

from ..dtypes import to_sl, to_torch
from .common import compute
from .promote import scalar_dtype
from .registry import LowerContext, Unsupported, register_lowering


def _filled(name: str, shape, value, dtype: str) -> sl.Tensor:
    if any(isinstance(e, int) and e == 0 for e in shape):
        raise Unsupported("an empty tensor (schedlang tensors have positive extents)")
    if sl.dtype(dtype).is_int and isinstance(value, float) and not value.is_integer():
        value = int(value)                 # torch truncates a float fill of an integer tensor
    if sl.dtype(dtype).is_float and math.isfinite(value) and abs(value) > torch.finfo(to_torch(dtype)).max:
        # torch refuses it too ("value cannot be converted to type c10::Half without overflow")
        raise ValueError(f"the fill value {value} does not fit dtype {dtype} (it would be inf)")
    return compute(tuple(shape), lambda i: sl.const(value, dtype), name)


@register_lowering("aten.full.default")
def full(ctx: LowerContext, size, fill_value, dtype=None, layout=None, device=None, pin_memory=None):
    if not isinstance(fill_value, (bool, int, float)):
        raise Unsupported(f"full with a fill value of type {type(fill_value).__name__}")
    dt = to_sl(dtype) if dtype is not None else scalar_dtype(fill_value)
    return _filled(ctx.name(), list(size), fill_value, dt)


@register_lowering("aten.full_like.default")
def full_like(ctx: LowerContext, x, fill_value, dtype=None, layout=None, device=None, pin_memory=None,
              memory_format=None):
    if not isinstance(fill_value, (bool, int, float)):
        raise Unsupported(f"full_like with a fill value of type {type(fill_value).__name__}")
    dt = to_sl(dtype) if dtype is not None else str(x.dtype)
    return _filled(ctx.name(), list(x.shape), fill_value, dt)


@register_lowering("aten.scalar_tensor.default")
def scalar_tensor(ctx: LowerContext, s, dtype=None, layout=None, device=None, pin_memory=None):
    dt = to_sl(dtype) if dtype is not None else scalar_dtype(float(s))
    return _filled(ctx.name(), [], s, dt)
