"""Activations of CNNs and MLPs: hardtanh/ReLU6, hardsigmoid, hardswish, leaky_relu, elu,
softplus, mish, sign (softshrink decomposes to it), and expm1 (which celu and selu decompose to); relu, gelu, silu, sigmoid
and tanh are in elementwise.py.

Each is one Elementwise stage, computed in float32 for float16/bfloat16 as torch's CPU
kernels do, written as those kernels are (hardswish is x * clamp(x + 3, 0, 6) / 6, not
x * hardsigmoid(x)), so that results round alike. Comparisons are selects, so NaN
passes through as in torch.
"""
from __future__ import annotations

from typing import Optional

import schedlang as sl
from schedlang.expr.nodes import Expr

from .elementwise import clamp_value, pointwise
from .promote import float_result, is_bool, is_float
from .common import compute
from .registry import LowerContext, Unsupported, register_lowering


def _float_only(op: str, x) -> None:
    if not is_float(x.dtype):
        raise TypeError(f"{op} needs a floating tensor, got {x.dtype} (torch has no integer kernel either)")


def _clamp(v: Expr, lo: Optional[float], hi: Optional[float]) -> Expr:
    """v clamped to the constants [lo, hi] (clamp_value: NaN passes through)."""
    return clamp_value(v, None if lo is None else sl.const(lo, v.dtype), None if hi is None else sl.const(hi, v.dtype))


@register_lowering("aten.hardtanh.default")
def hardtanh(ctx: LowerContext, x, min_val=-1.0, max_val=1.0):
    """clamp(x, min_val, max_val); integer tensors too, as torch (F.relu6 is hardtanh(x, 0, 6))."""
    if is_bool(x.dtype):
        raise TypeError("hardtanh of a bool tensor is not supported by torch")
    if not is_float(x.dtype):          # torch casts the bounds to the tensor's integer type
        min_val, max_val = int(min_val), int(max_val)
    return pointwise(ctx.name(), lambda v: _clamp(v, min_val, max_val), (x,), x.dtype)


@register_lowering("aten.relu6.default")
def relu6(ctx: LowerContext, x):
    return hardtanh(ctx, x, 0, 6)


def _relu6_of_plus3(v: Expr) -> Expr:
    return _clamp(v + sl.const(3.0, v.dtype), 0.0, 6.0)


@register_lowering("aten.hardsigmoid.default")
def hardsigmoid(ctx: LowerContext, x):
    """min(max(x + 3, 0), 6) / 6."""
    _float_only("hardsigmoid", x)
    return pointwise(ctx.name(), lambda v: _relu6_of_plus3(v) / sl.const(6.0, v.dtype), (x,), x.dtype)


@register_lowering("aten.hardswish.default")
def hardswish(ctx: LowerContext, x):
    """x * min(max(x + 3, 0), 6) / 6."""
    _float_only("hardswish", x)
    return pointwise(ctx.name(), lambda v: v * _relu6_of_plus3(v) / sl.const(6.0, v.dtype), (x,), x.dtype)


@register_lowering("aten.leaky_relu.default")
def leaky_relu(ctx: LowerContext, x, negative_slope=0.01):
    """x > 0 ? x : x * negative_slope."""
    _float_only("leaky_relu", x)
    return pointwise(ctx.name(), lambda v: sl.select(v > sl.const(0.0, v.dtype), v,
                                                     v * sl.const(negative_slope, v.dtype)), (x,), x.dtype)


@register_lowering("aten.rrelu_with_noise_functional.default")
def rrelu_eval(ctx: LowerContext, x, noise, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):
    """nn.RReLU in eval mode: a leaky ReLU of slope (lower + upper) / 2; the noise unchanged."""
    if training:
        raise Unsupported("rrelu in training draws a random slope per element")
    _float_only("rrelu", x)
    slope = (float(lower) + float(upper)) / 2
    out = pointwise(ctx.name(), lambda v: sl.select(v > sl.const(0.0, v.dtype), v, v * sl.const(slope, v.dtype)),
                    (x,), x.dtype)
    kept = compute(tuple(noise.shape), lambda i: noise[tuple(i)], ctx.name("noise"))
    return out, kept


@register_lowering("aten.elu.default")
def elu(ctx: LowerContext, x, alpha=1.0, scale=1.0, input_scale=1.0):
    """x <= 0 ? (exp(x * input_scale) - 1) * alpha * scale : x * scale (celu and selu
    decompose to it)."""
    _float_only("elu", x)

    def fn(v):
        c = lambda f: sl.const(f, v.dtype)   # noqa: E731
        neg = expm1_value(v * c(input_scale) if input_scale != 1 else v) * c(alpha * scale)
        return sl.select(v <= c(0.0), neg, v * c(scale))
    return pointwise(ctx.name(), fn, (x,), x.dtype)


def _softplus(v: Expr, beta: float = 1.0, threshold: float = 20.0) -> Expr:
    """x * beta > threshold ? x : log1p(exp(x * beta)) / beta."""
    c = lambda f: sl.const(f, v.dtype)   # noqa: E731
    scaled = v * c(beta) if beta != 1 else v
    soft = sl.log1p(sl.exp(scaled))
    return sl.select(scaled > c(threshold), v, soft / c(beta) if beta != 1 else soft)


@register_lowering("aten.softplus.default")
def softplus(ctx: LowerContext, x, beta=1.0, threshold=20.0):
    _float_only("softplus", x)
    return pointwise(ctx.name(), lambda v: _softplus(v, beta, threshold), (x,), x.dtype)


@register_lowering("aten.mish.default")
def mish(ctx: LowerContext, x):
    """x * tanh(log1p(exp(x))) (torch's kernel has no softplus threshold: exp overflows to
    inf and tanh(inf) is 1)."""
    _float_only("mish", x)
    return pointwise(ctx.name(), lambda v: v * sl.tanh(sl.log1p(sl.exp(v))), (x,), x.dtype)


@register_lowering("aten.sign.default")
def sign(ctx: LowerContext, x):
    """1, -1 or 0 by the sign of x; 0 for NaN and -0, as torch (softshrink decomposes to it)."""
    if is_bool(x.dtype):
        return pointwise(ctx.name(), lambda v: v, (x,), x.dtype)

    def fn(v):
        c = lambda f: sl.const(f, v.dtype)   # noqa: E731
        return sl.select(v > c(0), c(1), sl.select(v < c(0), c(0) if v.dtype.kind == "uint" else c(-1), c(0)))
    return pointwise(ctx.name(), fn, (x,), x.dtype)


def expm1_value(v: Expr) -> Expr:
    """exp(v) - 1 to full precision near 0 (Kahan's: (u - 1) * (v / log(u)) with u = exp(v)
    corrects the rounding of u), exact at 0, -1 far below it and inf at inf."""
    c = lambda f: sl.const(f, v.dtype)   # noqa: E731
    u = sl.exp(v)
    um1 = u - c(1.0)
    fixed = um1 * (v / sl.log(u))         # v / log(u) is about 1: no overflow near exp's limit
    fixed = sl.select(um1 == c(-1.0), c(-1.0), sl.select(u == c(float("inf")), u, fixed))
    return sl.select(u == c(1.0), v, fixed)


@register_lowering("aten.expm1.default")
def expm1(ctx: LowerContext, x):
    return pointwise(ctx.name(), expm1_value, (x,), float_result(x.dtype))
