"""Elementwise ATen ops: arithmetic with torch's promotion and division semantics,
comparisons, logic, where/clamp, casts and activations.

Every op is one Elementwise stage (silu is five, as the seed's Tensor IR shows it).
Operands broadcast as in torch; each is cast to the op's compute dtype (float16 computes
in float32) and the result is cast to torch's result dtype.
"""
from __future__ import annotations

import math
from typing import Callable, Optional, Sequence

import schedlang as sl
from schedlang.expr.nodes import Expr

from ..dtypes import to_sl
from .common import broadcast_shape, compute, read_broadcast
from .promote import compute_dtype, float_result, is_bool, is_float, is_int, is_tensor, result_type
from .registry import LowerContext, NeedsStaticShape, Unsupported, register_lowering


def _value(operand, index, shape, dtype: str, wrap: bool = False) -> Expr:
    """An operand (tensor or scalar) at index, cast to dtype. wrap: an int scalar beyond an
    integer dtype's range wraps around into it, as torch's arithmetic and comparisons cast
    their Python scalars (int32 `x + 2**40` is `x + 0`); else it is refused (ValueError, as
    torch refuses it in where, clamp and full)."""
    if is_tensor(operand):
        v = read_broadcast(operand, shape, index)
    elif isinstance(operand, Expr):
        v = operand
    else:
        if wrap and sl.dtype(dtype).is_int and isinstance(operand, int) and not isinstance(operand, bool):
            operand = _wrapped(operand, sl.dtype(dtype))
        v = sl.const(operand, dtype)
    if sl.dtype(dtype).is_bool and not v.dtype.is_bool:
        return v != sl.const(0, v.dtype)          # torch: nonzero is True (a cast would truncate)
    return sl.cast(dtype, v)


def _wrapped(value: int, dtype) -> int:
    """value modulo 2**bits, in dtype's range (two's complement for a signed dtype)."""
    bits = dtype.bits
    value &= (1 << bits) - 1
    if dtype.min_int < 0 and value >= 1 << (bits - 1):
        value -= 1 << bits
    return value


def pointwise(name: str, fn: Callable, operands: Sequence, out_dtype: str,
              calc_dtype: Optional[str] = None, wrap: bool = True) -> sl.Tensor:
    """One Elementwise stage: out = fn(*operands) over their broadcast shape, with each
    operand cast to calc_dtype (default: the compute dtype of out_dtype); int scalars out
    of its range wrap around unless wrap is False (_value)."""
    calc = calc_dtype or compute_dtype(out_dtype)
    shape = broadcast_shape(*(o.shape for o in operands if is_tensor(o)))

    def body(index):
        out = fn(*(_value(o, index, shape, calc, wrap) for o in operands))
        return to_dtype(out, out_dtype)
    return compute(shape, body, name)


def to_dtype(value: Expr, dtype: str) -> Expr:
    """value cast to dtype with torch's semantics (to bool: nonzero)."""
    if sl.dtype(dtype).is_bool and not value.dtype.is_bool:
        return value != sl.const(0, value.dtype)
    return sl.cast(dtype, value)


# ---------------------------------------------------------------- arithmetic

@register_lowering("aten.add.Tensor", "aten.add.Scalar")
def add(ctx: LowerContext, a, b, alpha=1):
    dt = result_type(a, b)
    if is_bool(dt):
        return pointwise(ctx.name(), lambda x, y: sl.any(x, y), (a, b), dt)
    one = alpha is None or (not isinstance(alpha, bool) and alpha == 1)
    return pointwise(ctx.name(), lambda x, y: x + (y if one else y * _alpha(alpha, x.dtype)), (a, b), dt)


def _alpha(alpha, dtype) -> Expr:
    if is_int(dtype) and isinstance(alpha, float) and not alpha.is_integer():
        raise TypeError(f"alpha {alpha} is not an integer, for an integer add/sub")
    return sl.const(alpha, dtype)


@register_lowering("aten.sub.Tensor", "aten.sub.Scalar")
def sub(ctx: LowerContext, a, b, alpha=1):
    dt = result_type(a, b)
    if is_bool(dt):
        raise TypeError("subtraction of bool tensors is not supported by torch; use logical_xor")
    one = alpha is None or (not isinstance(alpha, bool) and alpha == 1)
    return pointwise(ctx.name(), lambda x, y: x - (y if one else y * _alpha(alpha, x.dtype)), (a, b), dt)


@register_lowering("aten.rsub.Tensor", "aten.rsub.Scalar")
def rsub(ctx: LowerContext, a, b, alpha=1):
    return sub(ctx, b, a, alpha=alpha)


@register_lowering("aten.mul.Tensor", "aten.mul.Scalar")
def mul(ctx: LowerContext, a, b):
    dt = result_type(a, b)
    if is_bool(dt):
        return pointwise(ctx.name(), lambda x, y: sl.all(x, y), (a, b), dt)
    return pointwise(ctx.name(), lambda x, y: x * y, (a, b), dt)


def _floor_div_float(x: Expr, y: Expr) -> Expr:
    """torch's div(..., rounding_mode="floor") for floats (Python's float //): from fmod,
    so that the quotient is exact where floor(x / y) would round up."""
    zero = sl.const(0, x.dtype)
    mod = sl.fmod(x, y)
    q = (x - mod) / y
    q = sl.select(sl.all(mod != zero, (y < zero) != (mod < zero)), q - sl.const(1, x.dtype), q)
    fl = sl.floor(q)
    fl = sl.select(q - fl > sl.const(0.5, x.dtype), fl + sl.const(1, x.dtype), fl)
    res = sl.select(q != zero, fl, sl.copysign(zero, x / y))
    return sl.select(y == zero, x / y, res)


@register_lowering("aten.div.Tensor", "aten.div.Scalar", "aten.div.Tensor_mode", "aten.div.Scalar_mode",
                   "aten.true_divide.Tensor", "aten.true_divide.Scalar")
def div(ctx: LowerContext, a, b, rounding_mode=None):
    dt = result_type(a, b)
    if rounding_mode is None:
        out = float_result(dt)
        return pointwise(ctx.name(), lambda x, y: x / y, (a, b), out)
    if is_bool(dt):
        raise TypeError(f"div with rounding_mode={rounding_mode!r} on bool tensors")
    if rounding_mode == "trunc":
        fn = (lambda x, y: sl.trunc(x / y)) if is_float(dt) else sl.truncdiv
    elif rounding_mode == "floor":
        fn = _floor_div_float if is_float(dt) else sl.floordiv
    else:
        raise ValueError(f"div: rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}")
    return pointwise(ctx.name(), fn, (a, b), dt)


@register_lowering("aten.floor_divide.default", "aten.floor_divide.Scalar")
def floor_divide(ctx: LowerContext, a, b):
    return div(ctx, a, b, rounding_mode="floor")


@register_lowering("aten.remainder.Tensor", "aten.remainder.Scalar")
def remainder(ctx: LowerContext, a, b):
    dt = result_type(a, b)
    if is_float(dt):
        def fn(x, y):
            m = sl.fmod(x, y)
            zero = sl.const(0, x.dtype)
            return sl.select(sl.all(m != zero, (m < zero) != (y < zero)), m + y, m)
        return pointwise(ctx.name(), fn, (a, b), dt)
    return pointwise(ctx.name(), sl.floormod, (a, b), dt)


def _pow_scalar_exponent(x: Expr, e) -> Expr:
    """x ** e for a Python exponent, with torch's special cases (x*x for 2, sqrt for 0.5 ...)."""
    one = sl.const(1, x.dtype)
    if e == 1:
        return x
    if e == 2:
        return x * x
    if e == 3:
        return x * x * x
    if x.dtype.is_float:
        if e == 0.5:
            return sl.sqrt(x)
        if e == -0.5:
            return sl.rsqrt(x)
        if e == -1:
            return one / x
        if e == -2:
            return one / (x * x)
        return sl.power(x, sl.const(e, x.dtype))
    if e == 0:
        return one
    if isinstance(e, int) and 0 < e <= 8:
        out = x
        for _ in range(e - 1):
            out = out * x
        return out
    raise Unsupported(f"integer pow with exponent {e}")


@register_lowering("aten.pow.Tensor_Scalar")
def pow_tensor_scalar(ctx: LowerContext, x, exponent):
    dt = result_type(x, exponent)
    if is_bool(dt):
        raise Unsupported("pow of bool")
    if isinstance(exponent, Expr):
        raise NeedsStaticShape("pow with a symbolic exponent")
    return pointwise(ctx.name(), lambda v: _pow_scalar_exponent(v, exponent), (x,), dt)


@register_lowering("aten.pow.Tensor_Tensor", "aten.pow.Scalar")
def pow_tensor(ctx: LowerContext, x, exponent):
    dt = result_type(x, exponent)
    if not is_float(dt):
        raise Unsupported("integer pow with a tensor exponent")
    return pointwise(ctx.name(), sl.power, (x, exponent), dt)


# ---------------------------------------------------------------- unary math

def _unary_float(name: str, fn: Callable):
    """Register aten.<name>: a float op (integer inputs give the default float dtype)."""
    @register_lowering(f"aten.{name}.default")
    def lower(ctx: LowerContext, x):
        return pointwise(ctx.name(), fn, (x,), float_result(x.dtype))
    lower.__name__ = name
    return lower


exp = _unary_float("exp", sl.exp)
log = _unary_float("log", sl.log)
sqrt = _unary_float("sqrt", sl.sqrt)
rsqrt = _unary_float("rsqrt", sl.rsqrt)
tanh = _unary_float("tanh", sl.tanh)
erf = _unary_float("erf", sl.erf)
sin = _unary_float("sin", sl.sin)
cos = _unary_float("cos", sl.cos)
log1p = _unary_float("log1p", sl.log1p)
reciprocal = _unary_float("reciprocal", lambda v: sl.const(1, v.dtype) / v)
sigmoid = _unary_float("sigmoid", lambda v: sl.const(1, v.dtype) / (sl.const(1, v.dtype) + sl.exp(-v)))


@register_lowering("aten.neg.default")
def neg(ctx: LowerContext, x):
    if is_bool(x.dtype):
        raise TypeError("negation of a bool tensor is not supported by torch; use logical_not")
    return pointwise(ctx.name(), lambda v: -v, (x,), x.dtype)


@register_lowering("aten.abs.default")
def abs_(ctx: LowerContext, x):
    if is_bool(x.dtype):
        return pointwise(ctx.name(), lambda v: v, (x,), x.dtype)
    return pointwise(ctx.name(), sl.abs, (x,), x.dtype)


def _rounding(name: str, fn: Callable):
    @register_lowering(f"aten.{name}.default")
    def lower(ctx: LowerContext, x):
        if not is_float(x.dtype):          # integers are already whole
            return pointwise(ctx.name(), lambda v: v, (x,), x.dtype)
        return pointwise(ctx.name(), fn, (x,), x.dtype)
    lower.__name__ = name
    return lower


floor = _rounding("floor", sl.floor)
ceil = _rounding("ceil", sl.ceil)
trunc = _rounding("trunc", sl.trunc)
round_ = _rounding("round", sl.nearbyint)


@register_lowering("aten.relu.default")
def relu(ctx: LowerContext, x):
    if is_bool(x.dtype):
        raise Unsupported("relu of bool")
    # A select, not max(x, 0): NaN stays NaN, as in torch.
    return pointwise(ctx.name(), lambda v: sl.select(v < sl.const(0, v.dtype), sl.const(0, v.dtype), v),
                     (x,), x.dtype)


@register_lowering("aten.gelu.default")
def gelu(ctx: LowerContext, x, approximate="none"):
    if not is_float(x.dtype):
        raise TypeError(f"gelu needs a floating tensor, got {x.dtype}")

    def exact(v):
        c = lambda f: sl.const(f, v.dtype)   # noqa: E731
        return c(0.5) * v * (c(1.0) + sl.erf(v * c(math.sqrt(0.5))))

    def tanh_form(v):
        c = lambda f: sl.const(f, v.dtype)   # noqa: E731
        inner = c(math.sqrt(2.0 / math.pi)) * (v + c(0.044715) * v * v * v)
        return c(0.5) * v * (c(1.0) + sl.tanh(inner))
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return pointwise(ctx.name(), exact if approximate == "none" else tanh_form, (x,), x.dtype)


@register_lowering("aten.silu.default")
def silu(ctx: LowerContext, x):
    """silu(x) = x * 1 / (1 + exp(-x)), one stage per primitive as the seed shows it:
    silu_neg, silu_exp, silu_denom, silu_sigmoid, silu (computed in the compute dtype)."""
    if not is_float(x.dtype):
        raise TypeError(f"silu needs a floating tensor, got {x.dtype}")
    calc = compute_dtype(x.dtype)
    one = sl.const(1, calc)
    neg_ = pointwise(ctx.name("neg"), lambda v: -v, (x,), calc)
    exp_ = pointwise(ctx.name("exp"), sl.exp, (neg_,), calc)
    denom = pointwise(ctx.name("denom"), lambda v: one + v, (exp_,), calc)
    sig = pointwise(ctx.name("sigmoid"), lambda v: one / v, (denom,), calc)
    return pointwise(ctx.name(), lambda v, s: v * s, (x, sig), x.dtype)


# ---------------------------------------------------------------- comparisons and logic

def _compare(op: str):
    @register_lowering(f"aten.{op}.Tensor", f"aten.{op}.Scalar")
    def lower(ctx: LowerContext, a, b):
        calc = result_type(a, b)
        fn = {"eq": lambda x, y: x == y, "ne": lambda x, y: x != y, "lt": lambda x, y: x < y,
              "le": lambda x, y: x <= y, "gt": lambda x, y: x > y, "ge": lambda x, y: x >= y}[op]
        return pointwise(ctx.name(), fn, (a, b), "bool", calc_dtype=compute_dtype(calc))
    lower.__name__ = op
    return lower


eq, ne, lt, le, gt, ge = (_compare(op) for op in ("eq", "ne", "lt", "le", "gt", "ge"))


def _logical(name: str, fn: Callable):
    @register_lowering(f"aten.{name}.default")
    def lower(ctx: LowerContext, a, b):
        return pointwise(ctx.name(), fn, (a, b), "bool", calc_dtype="bool")
    lower.__name__ = name
    return lower


logical_and = _logical("logical_and", sl.all)
logical_or = _logical("logical_or", sl.any)
logical_xor = _logical("logical_xor", lambda x, y: x != y)


@register_lowering("aten.logical_not.default")
def logical_not(ctx: LowerContext, x):
    return pointwise(ctx.name(), lambda v: v == sl.const(False, "bool"), (x,), "bool", calc_dtype="bool")


@register_lowering("aten.bitwise_not.default")
def bitwise_not(ctx: LowerContext, x):
    if is_float(x.dtype):
        raise TypeError("bitwise_not needs an integer or bool tensor")
    if is_bool(x.dtype):
        return logical_not(ctx, x)
    return pointwise(ctx.name(), sl.bitwise_not, (x,), x.dtype)


@register_lowering("aten.where.self", "aten.where.ScalarOther", "aten.where.ScalarSelf", "aten.where.Scalar")
def where(ctx: LowerContext, cond, a, b):
    dt = result_type(a, b)
    if not (is_tensor(cond) and cond.dtype in ("bool", "uint8")):
        raise TypeError(f"where: the condition must be a bool tensor, got {getattr(cond, 'dtype', cond)}")
    calc = compute_dtype(dt)
    shape = broadcast_shape(*(o.shape for o in (cond, a, b) if is_tensor(o)))

    def body(index):
        c = _value(cond, index, shape, "bool")
        return to_dtype(sl.select(c, _value(a, index, shape, calc), _value(b, index, shape, calc)), dt)
    return compute(shape, body, ctx.name())


def clamp_value(v: Expr, lo: Optional[Expr], hi: Optional[Expr]) -> Expr:
    """v clamped to [lo, hi] (None: unbounded). Selects, not min/max: NaN passes through,
    and lo > hi gives hi, as torch."""
    if lo is not None:
        v = sl.select(v < lo, lo, v)
    if hi is not None:
        v = sl.select(v > hi, hi, v)
    return v


@register_lowering("aten.clamp.default", "aten.clamp.Tensor")
def clamp(ctx: LowerContext, x, min=None, max=None):   # noqa: A002
    if min is None and max is None:
        raise ValueError("clamp: at least one of min and max must be given")
    dt = result_type(x, min, max) if (is_tensor(min) or is_tensor(max)) else x.dtype
    if is_bool(dt):
        raise Unsupported("clamp of bool")
    if not (is_tensor(min) or is_tensor(max)) and is_int(dt) and any(isinstance(v, float) for v in (min, max)):
        dt = result_type(x, *(v for v in (min, max) if v is not None))
    ops = [x] + [v for v in (min, max) if v is not None]

    def fn(v, *bounds):
        it = iter(bounds)
        lo = next(it) if min is not None else None
        hi = next(it) if max is not None else None
        return clamp_value(v, lo, hi)
    return pointwise(ctx.name(), fn, ops, dt, wrap=False)


@register_lowering("aten.clamp_min.default", "aten.clamp_min.Tensor")
def clamp_min(ctx: LowerContext, x, min):   # noqa: A002
    return clamp(ctx, x, min=min)


@register_lowering("aten.clamp_max.default", "aten.clamp_max.Tensor")
def clamp_max(ctx: LowerContext, x, max):   # noqa: A002
    return clamp(ctx, x, max=max)


def _extremum(name: str, bigger: bool):
    @register_lowering(f"aten.{name}.default")
    def lower(ctx: LowerContext, a, b):
        def fn(x, y):
            pick = sl.select(x > y if bigger else x < y, x, y)
            if x.dtype.is_float:      # NaN in either operand gives NaN, as torch
                pick = sl.select(sl.isnan(x), x, pick)
            return pick
        return pointwise(ctx.name(), fn, (a, b), result_type(a, b))
    lower.__name__ = name
    return lower


maximum = _extremum("maximum", True)
minimum = _extremum("minimum", False)


# ---------------------------------------------------------------- casts

def cast(ctx: LowerContext, x, dtype) -> sl.Tensor:
    """x as dtype (a torch dtype or a schedlang dtype string)."""
    target = dtype if isinstance(dtype, str) else to_sl(dtype)
    return pointwise(ctx.name(), lambda v: v, (x,), target, calc_dtype=x.dtype)


@register_lowering("aten._to_copy.default")
def to_copy(ctx: LowerContext, x, dtype=None, layout=None, device=None, pin_memory=None,
            non_blocking=False, memory_format=None):
    return cast(ctx, x, x.dtype if dtype is None else dtype)


@register_lowering("aten.to.dtype")
def to_dtype_op(ctx: LowerContext, x, dtype, non_blocking=False, copy=False, memory_format=None):
    return cast(ctx, x, dtype)


@register_lowering("prims.convert_element_type.default")
def convert_element_type(ctx: LowerContext, x, dtype):
    return cast(ctx, x, dtype)
