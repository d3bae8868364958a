"""More elementwise ATen ops, on elementwise.py's `pointwise`: inverse trigonometric and
hyperbolic functions, log2/log10/exp2, atan2, hypot, copysign, logaddexp, fmod, round to
decimals, the float classifications (isnan, isinf, isfinite, isposinf, isneginf, signbit),
nan_to_num and the bitwise and/or/xor of integers and bools."""
from __future__ import annotations

import math

import torch

import schedlang as sl

from ..dtypes import to_torch
from .elementwise import _unary_float, pointwise
from .promote import float_result, is_bool, is_float, is_int, result_type
from .registry import LowerContext, Unsupported, register_lowering

asin = _unary_float("asin", sl.asin)
acos = _unary_float("acos", sl.acos)
atan = _unary_float("atan", sl.atan)
asinh = _unary_float("asinh", sl.asinh)
acosh = _unary_float("acosh", sl.acosh)
atanh = _unary_float("atanh", sl.atanh)
sinh = _unary_float("sinh", sl.sinh)
cosh = _unary_float("cosh", sl.cosh)
tan = _unary_float("tan", sl.tan)
log2 = _unary_float("log2", sl.log2)
log10 = _unary_float("log10", sl.log10)
exp2 = _unary_float("exp2", sl.exp2)


def _binary_float(name: str, fn, overloads=("default",)):
    """Register aten.<name>.<overload> for each of overloads: a float op of two operands."""
    @register_lowering(*(f"aten.{name}.{o}" for o in overloads))
    def lower(ctx: LowerContext, a, b):
        return pointwise(ctx.name(), fn, (a, b), float_result(result_type(a, b)))
    lower.__name__ = name
    return lower


atan2 = _binary_float("atan2", sl.atan2)
hypot = _binary_float("hypot", sl.hypot)
copysign = _binary_float("copysign", sl.copysign, ("Tensor", "Scalar"))   # (.default: two numbers)


def _logaddexp(a, b):
    """log(exp(a) + exp(b)) without overflow; a == b == +-inf gives a (torch's special case)."""
    top = sl.max(a, b)
    rest = top + sl.log1p(sl.exp(-sl.abs(a - b)))
    return sl.select(sl.all(sl.isinf(a), a == b), a, rest)


logaddexp = _binary_float("logaddexp", _logaddexp)


@register_lowering("aten.fmod.Tensor", "aten.fmod.Scalar")
def fmod(ctx: LowerContext, a, b):
    dt = result_type(a, b)
    if is_float(dt):
        return pointwise(ctx.name(), sl.fmod, (a, b), dt)
    if isinstance(b, int) and not isinstance(b, bool) and b != 0:    # torch.roll's index arithmetic
        return pointwise(ctx.name(), sl.truncmod, (a, b), dt)
    # a tensor divisor may hold 0, which raises in torch; a kernel must not trap on it
    raise Unsupported(f"fmod of {dt} by a tensor (integer fmod by a tensor runs in torch)")


@register_lowering("aten.round.decimals")
def round_decimals(ctx: LowerContext, x, *, decimals=0):
    """Half to even at 10**-decimals, as torch: x * 10**d rounded, then divided by 10**d
    (for negative d: x / 10**-d rounded, then multiplied)."""
    if not is_float(x.dtype):
        raise Unsupported(f"round(decimals=) of {x.dtype}")
    if isinstance(decimals, bool) or not isinstance(decimals, int):
        raise Unsupported(f"round: decimals={decimals!r} is not an int")
    scale = 10.0 ** abs(decimals)

    def fn(v):
        k = sl.const(scale, v.dtype)
        if decimals >= 0:
            return sl.nearbyint(v * k) / k
        return sl.nearbyint(v / k) * k
    return pointwise(ctx.name(), fn, (x,), x.dtype)


def _classify(name: str, on_float, on_int: bool):
    """Register aten.<name>.default: a float classification, on_int for every integer/bool."""
    @register_lowering(f"aten.{name}.default")
    def lower(ctx: LowerContext, x):
        if is_float(x.dtype):
            return pointwise(ctx.name(), on_float, (x,), "bool", calc_dtype=str(x.dtype))
        return pointwise(ctx.name(), lambda v: sl.const(on_int, "bool"), (x,), "bool", calc_dtype=str(x.dtype))
    lower.__name__ = name
    return lower


isnan = _classify("isnan", sl.isnan, False)
isinf = _classify("isinf", sl.isinf, False)
isfinite = _classify("isfinite", sl.isfinite, True)
isposinf = _classify("isposinf", lambda v: v == sl.const(math.inf, v.dtype), False)
isneginf = _classify("isneginf", lambda v: v == sl.const(-math.inf, v.dtype), False)


@register_lowering("aten.signbit.default")
def signbit(ctx: LowerContext, x):
    if is_float(x.dtype):       # -0.0 and -nan too: the sign bit, as copysign reads it
        fn = lambda v: sl.copysign(sl.const(1, v.dtype), v) < sl.const(0, v.dtype)   # noqa: E731
    elif is_bool(x.dtype):
        fn = lambda v: sl.const(False, "bool")   # noqa: E731
    else:
        fn = lambda v: v < sl.const(0, v.dtype)   # noqa: E731
    return pointwise(ctx.name(), fn, (x,), "bool", calc_dtype=str(x.dtype))


@register_lowering("aten.nan_to_num.default")
def nan_to_num(ctx: LowerContext, x, nan=0.0, posinf=None, neginf=None):
    if not is_float(x.dtype):
        return pointwise(ctx.name(), lambda v: v, (x,), x.dtype)
    dt = sl.dtype(str(x.dtype))
    finfo = torch.finfo(to_torch(str(x.dtype)))      # (sl.max_value of a float is inf)

    def fn(v):
        big = sl.const(finfo.max if posinf is None else posinf, dt)
        small = sl.const(finfo.min if neginf is None else neginf, dt)
        v = sl.select(sl.isnan(v), sl.const(0.0 if nan is None else nan, dt), v)
        v = sl.select(v == sl.const(math.inf, dt), big, v)
        return sl.select(v == sl.const(-math.inf, dt), small, v)
    return pointwise(ctx.name(), fn, (x,), x.dtype, calc_dtype=str(x.dtype))


def _bitwise(name: str, on_int, on_bool):
    @register_lowering(f"aten.{name}.Tensor", f"aten.{name}.Scalar")
    def lower(ctx: LowerContext, a, b):
        dt = result_type(a, b)
        if is_bool(dt):
            return pointwise(ctx.name(), on_bool, (a, b), "bool", calc_dtype="bool")
        if not is_int(dt):
            raise TypeError(f"{name} is only defined for integer and bool tensors, got {dt}")
        return pointwise(ctx.name(), on_int, (a, b), dt)
    lower.__name__ = name
    return lower


bitwise_and = _bitwise("bitwise_and", sl.bitwise_and, sl.all)
bitwise_or = _bitwise("bitwise_or", sl.bitwise_or, sl.any)
bitwise_xor = _bitwise("bitwise_xor", sl.bitwise_xor, lambda x, y: x != y)


def _shift(name: str, dunder: str, fn):
    @register_lowering(f"aten.{name}.Tensor", f"aten.{name}.Tensor_Scalar", f"aten.{name}.Scalar_Tensor",
                       f"aten.{dunder}.Tensor", f"aten.{dunder}.Scalar")
    def lower(ctx: LowerContext, a, b):
        dt = result_type(a, b)
        if not is_int(dt) or is_bool(dt):
            raise TypeError(f"{name} is only defined for integer tensors, got {dt}")
        return pointwise(ctx.name(), fn, (a, b), dt)
    lower.__name__ = name
    return lower


# torch's shifts: an amount outside [0, bits) gives 0 (the sign fill for >> of a negative),
# as the generated code's shifts give (numpy's results)
bitwise_left_shift = _shift("bitwise_left_shift", "__lshift__", sl.shift_left)
bitwise_right_shift = _shift("bitwise_right_shift", "__rshift__", sl.shift_right)
