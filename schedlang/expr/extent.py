"""Extents of symbolic shapes: exact evaluation for given sizes (Python ints, no wrap-around),
and ceil_div, the one rounding-up division of the project (for ints and extents alike)."""
from __future__ import annotations

from typing import Mapping, Union

from ..dtypes import dtype as parse_dtype

from .nodes import Binary, Cast, Const, Expr, Var, binary
from .linear import linear_form
from .simplify import simplify

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
        return evaluate_extent(e.value, values)
    if isinstance(e, Binary) and e.op in _OPS:
        return _OPS[e.op](evaluate_extent(e.a, values), evaluate_extent(e.b, values))
    raise ValueError(f"cannot evaluate the extent '{e}' from the sizes")


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
    if not isinstance(e, Expr):
        return None
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
        return {"const": int(e.value), "dtype": str(e.dtype)}
    if isinstance(e, Var):
        return {"var": var_ids.setdefault(e, len(var_ids))}
    if isinstance(e, Cast) and e.dtype.is_int:
        return {"cast": str(e.dtype), "value": extent_to_json(e.value, var_ids)}
    if isinstance(e, Binary) and e.op in _OPS:
        return {"op": e.op, "a": extent_to_json(e.a, var_ids), "b": extent_to_json(e.b, var_ids)}
    raise ValueError(f"cannot write the extent '{e}' (only size variables, constants and {', '.join(_OPS)})")


def extent_from_json(data, variables):
    """The extent extent_to_json wrote; variables[i] is the variable numbered i."""
    if isinstance(data, int):
        return data
    if "const" in data:
        return Const(int(data["const"]), parse_dtype(data["dtype"]))
    if "var" in data:
        return variables[data["var"]]
    if "cast" in data:
        return Cast(parse_dtype(data["cast"]), extent_from_json(data["value"], variables))
    return Binary(data["op"], extent_from_json(data["a"], variables), extent_from_json(data["b"], variables))
