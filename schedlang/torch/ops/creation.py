"""Tensors made from a value: full, full_like, scalar_tensor (ones/zeros decompose to full),
arange."""
from __future__ import annotations

import math

import torch

import schedlang as sl
from schedlang.expr.simplify import simplify

from ..dtypes import to_sl, to_torch
from .common import compute
from .promote import scalar_dtype
from .registry import LowerContext, NeedsStaticShape, Unsupported, register_lowering


def _filled(name: str, shape, value, dtype: str) -> sl.Tensor:
    if any(isinstance(e, int) and e == 0 for e in shape):
        raise Unsupported("an empty tensor (schedlang tensors have positive extents)")
    if isinstance(value, sl.expr.nodes.Expr):      # a size Dynamo computed (dynamic shapes)
        return compute(tuple(shape), lambda i: sl.cast(dtype, value), name)
    if sl.dtype(dtype).is_int and isinstance(value, float) and not value.is_integer():
        value = int(value)                 # torch truncates a float fill of an integer tensor
    if sl.dtype(dtype).is_float and math.isfinite(value) and abs(value) > torch.finfo(to_torch(dtype)).max:
        # torch refuses it too ("value cannot be converted to type c10::Half without overflow")
        raise ValueError(f"the fill value {value} does not fit dtype {dtype} (it would be inf)")
    return compute(tuple(shape), lambda i: sl.const(value, dtype), name)


@register_lowering("aten.full.default")
def full(ctx: LowerContext, size, fill_value, dtype=None, layout=None, device=None, pin_memory=None):
    if not isinstance(fill_value, (bool, int, float, sl.expr.nodes.Expr)):      # (Expr: made from sizes)
        raise Unsupported(f"full with a fill value of type {type(fill_value).__name__}")
    dt = to_sl(dtype) if dtype is not None else scalar_dtype(fill_value)
    return _filled(ctx.name(), list(size), fill_value, dt)


@register_lowering("aten.full_like.default")
def full_like(ctx: LowerContext, x, fill_value, dtype=None, layout=None, device=None, pin_memory=None,
              memory_format=None):
    if not isinstance(fill_value, (bool, int, float, sl.expr.nodes.Expr)):      # (Expr: made from sizes)
        raise Unsupported(f"full_like with a fill value of type {type(fill_value).__name__}")
    dt = to_sl(dtype) if dtype is not None else str(x.dtype)
    return _filled(ctx.name(), list(x.shape), fill_value, dt)


@register_lowering("aten.scalar_tensor.default")
def scalar_tensor(ctx: LowerContext, s, dtype=None, layout=None, device=None, pin_memory=None):
    # torch's default: the default float dtype, for an int value too
    dt = to_sl(dtype) if dtype is not None else scalar_dtype(1.0)
    return _filled(ctx.name(), [], s, dt)


# ---------------------------------------------------------------- arange

def _arange_length(start, end, step):
    """torch's length ceil((end - start) / step): an int, or a size expression when end is
    one (a dynamic sequence length; start and step must then be ints, step positive)."""
    if isinstance(end, sl.expr.nodes.Expr):
        if not (isinstance(start, int) and isinstance(step, int) and step > 0):
            raise NeedsStaticShape("arange to a symbolic end needs an integer start and a positive integer step")
        return simplify(sl.floordiv(end - start + (step - 1), step))
    if isinstance(start, sl.expr.nodes.Expr) or isinstance(step, sl.expr.nodes.Expr):
        raise NeedsStaticShape("arange with a symbolic start or step")
    if step == 0:
        raise ValueError("arange: step must be nonzero")
    if (end - start) / step < 0:
        raise ValueError(f"arange: upper bound and larger bound inconsistent with step sign "
                         f"(start={start}, end={end}, step={step})")
    return math.ceil((end - start) / step)


@register_lowering("aten.arange.start_step")
def arange(ctx: LowerContext, start, end, step=1, dtype=None, layout=None, device=None, pin_memory=None):
    """start + i * step for i in range(length); computed as torch's CPU kernel does (in
    float64 for float32/float64, float32 for float16/bfloat16, int64 for integers) and cast
    to the result dtype: int64 when start, end and step are all integers, else the default
    float dtype, unless dtype= is given."""
    for v in (start, end, step):
        if not isinstance(v, (int, float, sl.expr.nodes.Expr)) or isinstance(v, bool):
            raise Unsupported(f"arange with a bound of type {type(v).__name__}")
    length = _arange_length(start, end, step)
    if isinstance(length, int) and length <= 0:
        raise Unsupported("an empty arange (schedlang tensors have positive extents)")
    if dtype is not None:
        out = to_sl(dtype)
    elif any(isinstance(v, float) for v in (start, end, step)):
        out = to_sl(torch.get_default_dtype())
    else:
        out = "int64"
    acc = "int64" if sl.dtype(out).is_int else "float32" if out in ("float16", "bfloat16") else "float64"
    if sl.dtype(acc).is_int:
        start, step = int(start), int(step)      # torch truncates float bounds of an integer arange

    def body(i):
        first = sl.cast(acc, start) if isinstance(start, sl.expr.nodes.Expr) else sl.const(start, acc)
        return sl.cast(out, first + sl.cast(acc, i[0]) * sl.const(step, acc))
    return compute((length,), body, ctx.name())


@register_lowering("aten.arange.start")
def arange_start(ctx: LowerContext, start, end, dtype=None, layout=None, device=None, pin_memory=None):
    return arange(ctx, start, end, 1, dtype=dtype)


@register_lowering("aten.arange.default")
def arange_end(ctx: LowerContext, end, dtype=None, layout=None, device=None, pin_memory=None):
    return arange(ctx, 0, end, 1, dtype=dtype)
