"""Extents of symbolic shapes: exact evaluation for given sizes (Python ints, no wrap-around),
and ceil_div, the one rounding-up division of the project (for ints and extents alike)."""
from __future__ import annotations

import math
import operator
from typing import Mapping, Union

import numpy as np

from ..dtypes import dtype as parse_dtype

from .nodes import Binary, Call, Cast, Const, Expr, Var, binary
from .linear import linear_form
from .simplify import ROUNDINGS, simplify

Extent = Union[int, Expr]     # an int, or an int32 expression of size variables

_OPS = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
        "floordiv": lambda a, b: a // b if b else 0, "floormod": lambda a, b: a % b if b else 0,
        "min": min, "max": max}


def ceil_div(a: Extent, b: Extent) -> Extent:
    """ceil(a / b) for positive b. Plain numbers (ints, numpy ints and
    arrays) divide exactly; an expression becomes floordiv(a + b - 1, b), simplified."""
    if not isinstance(a, Expr) and not isinstance(b, Expr):
        return -(-a // b)
    return simplify(binary("floordiv", binary("add", a, binary("sub", b, 1)), b))


def evaluate_extent(e, values: Mapping[Var, int]) -> int:
    """The value of an extent (an int, or an expression of size variables) for the given sizes."""
    if isinstance(e, int):
        return e
    if isinstance(e, Const):
        return int(e.value)
    if isinstance(e, Var):
        if e not in values:
            raise ValueError(f"no value for the size variable '{e.name}'")
        return values[e]
    if isinstance(e, Cast) and e.dtype.is_int:
        if e.value.dtype.is_float:           # a size scaled by a float (interpolate's scale factor)
            v = _float_value(e.value, values)
            if not math.isfinite(v):
                raise ValueError(f"the extent '{e}' is {v} for these sizes")
            return int(v)                    # toward zero, as the cast in the generated code
        return evaluate_extent(e.value, values)
    if isinstance(e, Binary) and e.op in _OPS:
        return _OPS[e.op](evaluate_extent(e.a, values), evaluate_extent(e.b, values))
    raise ValueError(f"cannot evaluate the extent '{e}' from the sizes")


_FLOAT_OPS = {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": operator.truediv,
              "min": min, "max": max}


def _float_value(e, values: Mapping[Var, int]) -> float:
    """The value of a float part of an extent, rounded to its dtype at each step as the
    generated code computes it (float64: Python's floats; float32 through numpy)."""
    if isinstance(e, Const):
        v = float(e.value)
    elif isinstance(e, Cast) and not e.value.dtype.is_float:
        v = float(evaluate_extent(e.value, values))
    elif isinstance(e, Cast):
        v = _float_value(e.value, values)
    elif isinstance(e, Binary) and e.op in _FLOAT_OPS:
        a, b = _float_value(e.a, values), _float_value(e.b, values)
        v = _FLOAT_OPS[e.op](a, b) if not (e.op == "div" and b == 0) else math.copysign(math.inf, a) if a else math.nan
    elif isinstance(e, Call) and e.name in ROUNDINGS and len(e.args) == 1:
        x = _float_value(e.args[0], values)
        v = float(ROUNDINGS[e.name](x)) if math.isfinite(x) else x
    else:
        raise ValueError(f"cannot evaluate the extent '{e}' from the sizes")
    return float(np.float32(v)) if e.dtype.bits == 32 else v


def linear_in_one(e):
    """(v, a, b) when the extent e is a * v + b with a > 0 (a size that can be solved
    from e's value), else None."""
    if not isinstance(e, Expr) or isinstance(e, Var):
        return None
    terms, const = linear_form(e)
    if len(terms) == 1 and isinstance(terms[0][0], Var) and terms[0][1] > 0:
        return terms[0][0], terms[0][1], const
    return None


def first_overflow(e, values: Mapping[Var, int]):
    """The first subexpression of e whose exact value leaves the range of its integer dtype
    for the given sizes (its arithmetic would wrap there), or None. A term that lowering
    widened to int64 (kernel/widen.py) is checked against int64."""
    if not isinstance(e, Expr) or e.dtype.is_float:
        return None                          # a float part: its cast to int saturates, never wraps
    if isinstance(e, (Binary, Cast)):
        for child in ((e.a, e.b) if isinstance(e, Binary) else (e.value,)):
            bad = first_overflow(child, values)
            if bad is not None:
                return bad
    value = evaluate_extent(e, values)
    return e if e.dtype.is_int and not e.dtype.min_int <= value <= e.dtype.max_int else None


def extent_to_json(e, var_ids: dict):
    """An extent (int, or an expression of size variables with the operations
    evaluate_extent knows) as JSON data; var_ids numbers the variables (filled in here)."""
    if isinstance(e, int):
        return e
    if isinstance(e, Const):
        value = float(e.value) if e.dtype.is_float else int(e.value)
        return {"const": value, "dtype": str(e.dtype)}
    if isinstance(e, Var):
        return {"var": var_ids.setdefault(e, len(var_ids))}
    if isinstance(e, Cast):
        return {"cast": str(e.dtype), "value": extent_to_json(e.value, var_ids)}
    if isinstance(e, Binary) and (e.op in _OPS or e.dtype.is_float and e.op in _FLOAT_OPS):
        return {"op": e.op, "a": extent_to_json(e.a, var_ids), "b": extent_to_json(e.b, var_ids)}
    if isinstance(e, Call) and e.name in ROUNDINGS and len(e.args) == 1:
        return {"call": e.name, "dtype": str(e.dtype), "args": [extent_to_json(e.args[0], var_ids)]}
    raise ValueError(f"cannot write the extent '{e}' (only size variables, constants, {', '.join(_OPS)}, "
                     f"and float arithmetic rounded by {', '.join(ROUNDINGS)})")


def extent_from_json(data, variables):
    """The extent extent_to_json wrote; variables[i] is the variable numbered i."""
    if isinstance(data, int):
        return data
    if "const" in data:
        dt = parse_dtype(data["dtype"])
        return Const(float(data["const"]) if dt.is_float else int(data["const"]), dt)
    if "var" in data:
        return variables[data["var"]]
    if "cast" in data:
        return Cast(parse_dtype(data["cast"]), extent_from_json(data["value"], variables))
    if "call" in data:
        args = tuple(extent_from_json(a, variables) for a in data["args"])
        return Call(data["call"], args, parse_dtype(data["dtype"]))
    return Binary(data["op"], extent_from_json(data["a"], variables), extent_from_json(data["b"], variables))
