"""Math intrinsics and helpers of the algorithm language, named as in TVM's te/tir."""
from __future__ import annotations

import functools

from ..dtypes import dtype as parse_dtype
from ..expr.nodes import (NEG, Call, Const, Expr, as_expr, binary, cast as _cast, const as _const,
                          logical, select as _select, Var)
from . import reduce as _reduce
from .axis import REDUCE, IterVar

# name -> number of arguments; every one is computed in the argument's float dtype.
MATH_INTRINSICS = {"exp": 1, "log": 1, "sqrt": 1, "rsqrt": 1, "tanh": 1, "sigmoid": 1, "erf": 1,
                   "abs": 1, "floor": 1, "ceil": 1, "round": 1, "pow": 2, "exp2": 1, "log2": 1,
                   "sin": 1, "cos": 1, "trunc": 1,
                   # TVM's tir math that the CPU computes with libm (per lane in vectors)
                   "exp10": 1, "log10": 1, "log1p": 1, "tan": 1, "atan": 1, "atan2": 2, "cosh": 1,
                   "sinh": 1, "acos": 1, "asin": 1, "acosh": 1, "asinh": 1, "atanh": 1, "fmod": 2,
                   "hypot": 2, "nextafter": 2, "copysign": 2, "nearbyint": 1}
# Float predicates (bool result) and integer bit counts (result of the argument's dtype).
FLOAT_PREDICATES = ("isnan", "isinf", "isfinite")
BIT_COUNTS = ("popcount", "clz")
EXTERN_PREFIX = "extern:"   # Call name of call_pure_extern: "extern:expf"
# Every Call name of the algorithm language but call_pure_extern's: each target has a rule for
# each, on every dtype it takes (tests/target/test_intrinsic_table.py builds and runs them all).
INTRINSICS = (*MATH_INTRINSICS, "ldexp", *FLOAT_PREDICATES, *BIT_COUNTS, NEG)


def call(name: str, *args) -> Expr:
    """Apply math intrinsic `name`; integer arguments are converted to float32 (abs keeps ints)."""
    exprs = [as_expr(a) for a in args]
    if len(exprs) != MATH_INTRINSICS[name]:
        raise TypeError(f"{name} takes {MATH_INTRINSICS[name]} argument(s), got {len(exprs)}")
    if name == "abs" and exprs[0].dtype.is_int:
        x = exprs[0]
        return _select(x < 0, -x, x)
    if len(exprs) == 2:
        a, b = exprs
        target = a.dtype if a.dtype.is_float else b.dtype if b.dtype.is_float else parse_dtype("float32")
        exprs = [_cast(target, a), _cast(target, b)]
        if name == "nextafter" and target.bits == 16:
            # computed in float32 as every 16-bit operation is, float32's neighbour would round
            # back to x: numpy's float16 nextafter steps in float16
            raise TypeError(f"nextafter of {target} values is not supported (it would step in float32 and "
                            f"round back); cast the operands to float32 or float64 first")
    elif not exprs[0].dtype.is_float:
        exprs = [_cast("float32", exprs[0])]
    return Call(name, tuple(exprs), exprs[0].dtype)


def _unary(name):
    def fn(x):
        return call(name, x)
    fn.__name__ = name
    fn.__doc__ = f"Elementwise {name}(x), computed in x's float dtype."
    return fn


exp, log, sqrt, rsqrt, tanh, sigmoid, erf = (_unary(n) for n in ("exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf"))
floor, ceil, round, trunc, exp2, log2, sin, cos = (_unary(n) for n in ("floor", "ceil", "round", "trunc", "exp2", "log2", "sin", "cos"))
abs = _unary("abs")  # noqa: A001 - the TVM name
exp10, log10, log1p, tan, atan, cosh, sinh, acos, asin, acosh, asinh, atanh, nearbyint = (
    _unary(n) for n in ("exp10", "log10", "log1p", "tan", "atan", "cosh", "sinh", "acos", "asin", "acosh",
                        "asinh", "atanh", "nearbyint"))


def _binary_math(name):
    def fn(x, y):
        return call(name, x, y)
    fn.__name__ = name
    fn.__doc__ = f"Elementwise {name}(x, y), computed in the operands' float dtype (C's {name})."
    return fn


atan2, fmod, hypot, nextafter, copysign = (_binary_math(n) for n in ("atan2", "fmod", "hypot", "nextafter", "copysign"))


def ldexp(x, exponent) -> Expr:
    """x * 2**exponent (C's ldexp), in x's float dtype; exponent is rounded toward zero to an int."""
    x = as_expr(x)
    x = x if x.dtype.is_float else _cast("float32", x)
    return Call("ldexp", (x, _cast("int32", exponent)), x.dtype)


def _float_predicate(name):
    def fn(x):
        x = as_expr(x)
        if x.dtype.is_int or x.dtype.is_bool:   # integers are never nan or inf, as in TVM
            return Const(name == "isfinite", parse_dtype("bool"))
        return Call(name, (x,), parse_dtype("bool").with_lanes(x.dtype.lanes))
    fn.__name__ = name
    fn.__doc__ = f"Elementwise {name}(x): a bool."
    return fn


isnan, isinf, isfinite = (_float_predicate(n) for n in FLOAT_PREDICATES)


def _bit_count(name, what):
    def fn(x):
        x = as_expr(x)
        if not x.dtype.is_int:
            raise TypeError(f"{name} counts the bits of an integer; got '{x}' of dtype {x.dtype}")
        return Call(name, (x,), x.dtype)
    fn.__name__ = name
    fn.__doc__ = f"Elementwise {what} of an integer, in its dtype."
    return fn


popcount = _bit_count("popcount", "number of set bits")
clz = _bit_count("clz", "number of leading zero bits (the bit width for 0)")


def call_pure_extern(dtype, func_name: str, *args) -> Expr:
    """A call of the C function func_name (a libm symbol such as "expf") returning dtype,
    as TVM's tir.call_pure_extern. The CPU build declares and calls the symbol (vectors
    call it per lane); the reference evaluator knows the libm functions."""
    if not isinstance(func_name, str) or not func_name.isidentifier():
        raise ValueError(f"call_pure_extern: the function name must be a C identifier, got {func_name!r}")
    dt = parse_dtype(dtype)
    if dt.lanes != 1 or not (dt.is_float or dt.is_int):
        raise TypeError(f"call_pure_extern: the result dtype must be a scalar float or int, got {dt}")
    exprs = tuple(as_expr(a) for a in args)
    for a in exprs:
        if not (a.dtype.is_float or a.dtype.is_int) or a.dtype.lanes != 1:
            raise TypeError(f"call_pure_extern('{func_name}'): argument '{a}' of dtype {a.dtype} is not a scalar "
                            "float or int")
    return Call(EXTERN_PREFIX + func_name, exprs, dt)


def power(x, y) -> Expr:
    """x ** y elementwise."""
    return call("pow", x, y)


pow = power  # noqa: A001


def if_then_else(cond, true_value, false_value) -> Expr:
    """cond ? true_value : false_value, where the branch not taken is never evaluated
    (so it may index out of bounds, as for padding)."""
    return _select(cond, true_value, false_value, guarded=True)


def select(cond, true_value, false_value) -> Expr:
    """cond ? true_value : false_value; both sides may be evaluated."""
    return _select(cond, true_value, false_value, guarded=False)


def all(*conds) -> Expr:  # noqa: A001
    """Logical and of all conditions."""
    if not conds:
        return Const(True, parse_dtype("bool"))
    return functools.reduce(lambda a, b: logical("and", a, b), conds)


def any(*conds) -> Expr:  # noqa: A001
    """Logical or of all conditions."""
    if not conds:
        return Const(False, parse_dtype("bool"))
    return functools.reduce(lambda a, b: logical("or", a, b), conds)


def const(value, dtype=None) -> Const:
    """A constant; dtype defaults to int32 for ints and float32 for floats."""
    return _const(value, dtype)


def var(name: str = "v", dtype="int32") -> Var:
    """A scalar variable, e.g. a symbolic extent: placeholder((n,)) with n = var("n")."""
    return Var(name, parse_dtype(dtype))


def size_var(name: str = "n", dtype="int32") -> Var:
    """A symbolic size, known to be >= 0 (TVM's te.size_var)."""
    dt = parse_dtype(dtype)
    if not dt.is_int or dt.lanes != 1:
        raise TypeError(f"size_var '{name}' must have a scalar integer dtype, got {dt}")
    return Var(name, dt, nonnegative=True)


def min_value(dtype) -> Const:
    """The smallest value of dtype (-inf for floats)."""
    return _reduce.min_value(parse_dtype(dtype))


def max_value(dtype) -> Const:
    """The largest value of dtype (+inf for floats)."""
    return _reduce.max_value(parse_dtype(dtype))


def floordiv(a, b) -> Expr:
    """a // b rounded toward minus infinity (Python's //)."""
    return binary("floordiv", a, b)


def floormod(a, b) -> Expr:
    """a - b * floordiv(a, b): the sign of b (Python's %)."""
    return binary("floormod", a, b)


indexdiv, indexmod = floordiv, floormod


def div(a, b) -> Expr:
    """a / b as in C (TVM's tir.div): truncdiv for integers, true division for floats."""
    a, b = as_expr(a), as_expr(b)
    if a.dtype.is_float or b.dtype.is_float:
        return binary("div", a, b)
    return truncdiv(a, b)


def _binary_fn(name: str, op: str, what: str):
    """TVM's function form of a binary operator (tir.<name>)."""
    def fn(a, b) -> Expr:
        return binary(op, a, b)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"{what}, as TVM's tir.{name}."
    return fn


bitwise_and = _binary_fn("bitwise_and", "bitand", "a & b")
bitwise_or = _binary_fn("bitwise_or", "bitor", "a | b")
bitwise_xor = _binary_fn("bitwise_xor", "bitxor", "a ^ b")
# (an amount outside [0, bits) gives numpy's and torch's result: 0, or the sign fill for >>)
shift_left = _binary_fn("shift_left", "shl", "a << b")
shift_right = _binary_fn("shift_right", "shr", "a >> b (arithmetic for signed types)")
add = _binary_fn("add", "add", "a + b")
subtract = _binary_fn("subtract", "sub", "a - b")
multiply = _binary_fn("multiply", "mul", "a * b")


def bitwise_not(a) -> Expr:
    return ~as_expr(a)


def truncdiv(a, b) -> Expr:
    """a / b rounded toward zero, as C's integer division (TVM's truncdiv); integers only."""
    return _trunc_div_mod("truncdiv", a, b)


def truncmod(a, b) -> Expr:
    """a - b * truncdiv(a, b): the sign of a, as C's % (TVM's truncmod); integers only."""
    return _trunc_div_mod("truncmod", a, b)


def _trunc_div_mod(op: str, a, b) -> Expr:
    e = binary(op, a, b)
    if not e.dtype.is_int:
        raise TypeError(f"{op} takes integers, got '{e.a}' and '{e.b}' of dtype {e.dtype}; "
                        "use fmod for floats")
    return e


def sum(expr, axis=None, where=None, init=None):  # noqa: A001
    """Sum reduction over axis (a reduce_axis or list of them), as te.sum; init= is the
    value the sum starts from instead of 0."""
    return _reduce.sum_reducer(expr, axis, where, init)


def prod(expr, axis=None, where=None, init=None):
    """Product reduction over axis."""
    return _reduce.prod_reducer(expr, axis, where, init)


def max(expr, axis=None, where=None, init=None):  # noqa: A001
    """max(expr, axis=k) is a reduction; max(a, b) is the elementwise maximum, as in TVM."""
    return _max_min("max", _reduce.max_reducer, expr, axis, where, init)


def min(expr, axis=None, where=None, init=None):  # noqa: A001
    """min(expr, axis=k) is a reduction; min(a, b) is the elementwise minimum, as in TVM."""
    return _max_min("min", _reduce.min_reducer, expr, axis, where, init)


def _max_min(op: str, reducer, expr, axis, where, init):
    is_axis = isinstance(axis, IterVar) and axis.kind == REDUCE or (
        isinstance(axis, (list, tuple)) and axis and isinstance(axis[0], IterVar))
    if axis is None or not is_axis:
        if axis is None:
            raise TypeError(f"{op}(x) needs axis= for a reduction, or a second operand for the elementwise {op}")
        if where is not None or init is not None:
            raise TypeError(f"elementwise {op}(a, b) takes no where= or init=")
        return binary(op, expr, axis)
    return reducer(expr, axis, where, init)


def cast(dtype, value) -> Expr:
    return _cast(dtype, value)
