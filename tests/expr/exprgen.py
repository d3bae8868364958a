"""Random expression trees for property tests, and an independent numpy evaluator of them.

Integer trees mix loop variables (with ranges: index arithmetic) and loads of data (any
value of the dtype); float trees mix loads, constants with awkward values (signed zeros,
inf, nan, 2**23-scale magic numbers) and every float operator. The evaluator gives numpy's
scalar results: wrap-around for integers, x // 0 == x % 0 == 0, IEEE for floats.
"""
from __future__ import annotations

from typing import Dict

import numpy as np
from hypothesis import strategies as st

from schedlang.dtypes import dtype as parse_dtype
from schedlang.expr.nodes import Binary, Buffer, Cast, Compare, Const, Expr, Load, Select, Var

INT_OPS = ("add", "sub", "mul", "floordiv", "floormod", "min", "max", "bitand", "bitor", "bitxor", "shl", "shr")
FLOAT_OPS = ("add", "sub", "mul", "div", "floordiv", "floormod", "min", "max")
COMPARES = ("lt", "le", "gt", "ge", "eq", "ne")
FLOAT_SPECIALS = (0.0, -0.0, 1.0, -1.0, 0.5, 3.0, 1.5 * 2**23, -1.5 * 2**23, 1e8, 1e-8, 2.0**-24,
                  float("inf"), float("-inf"), float("nan"))


class Vars:
    """The atoms of one dtype: two ranged loop variables and two data loads."""

    def __init__(self, dt: str):
        self.dt = parse_dtype(dt)
        self.loops = [Var("i", self.dt), Var("j", self.dt)] if self.dt.is_int else []
        self.data = [Load(Buffer(name, (4,), self.dt), (Const(k, parse_dtype("int32")),))
                     for k, name in enumerate(("d0", "d1"))]


def int_const(dt) -> st.SearchStrategy:
    edges = [0, 1, -1, 2, 3, 4, 7, 8, 16, dt.min_int, dt.max_int, dt.min_int + 1, dt.max_int - 1]
    edges = [v for v in edges if dt.min_int <= v <= dt.max_int]
    return st.one_of(st.sampled_from(edges), st.integers(dt.min_int, dt.max_int)).map(lambda v: Const(v, dt))


def float_const(dt) -> st.SearchStrategy:
    values = st.one_of(st.sampled_from(FLOAT_SPECIALS), st.floats(-1e6, 1e6, width=dt.bits))
    return values.map(lambda v: Const(float(dt.numpy.type(v)), dt))


def trees(atoms: Vars, max_leaves: int = 8) -> st.SearchStrategy:
    dt = atoms.dt
    leaves = st.one_of(st.sampled_from(atoms.loops + atoms.data),
                       int_const(dt) if dt.is_int else float_const(dt))
    ops = INT_OPS if dt.is_int else FLOAT_OPS

    small = st.sampled_from([2, 3, 4, 8]).map(lambda v: Const(v, dt) if dt.is_int else Const(float(v), dt))

    def extend(children):
        binary = st.builds(Binary, st.sampled_from(ops), children, children)
        select = st.builds(lambda op, a, b, t, f: Select(Compare(op, a, b), t, f),
                           st.sampled_from(COMPARES), children, children, children, children)
        # Shapes that invite rewrites true only without wrap-around or rounding:
        # (a * c) // c, (a * c) % c, a + c > a, min(a + c, a), (a + c) - c.
        scaled = st.builds(lambda op, a, c: Binary(op, Binary("mul", a, c), c),
                           st.sampled_from(["floordiv", "floormod"]), children, small)
        shifted = st.builds(lambda op, a, c, t, f: Select(Compare(op, Binary("add", a, c), a), t, f),
                            st.sampled_from(COMPARES), children, small, children, children)
        bounded = st.builds(lambda op, a, c: Binary(op, Binary("add", a, c), a),
                            st.sampled_from(["min", "max", "sub"]), children, small)
        return st.one_of(binary, binary, binary, select, scaled, shifted, bounded)

    return st.recursive(leaves, extend, max_leaves=max_leaves)


def evaluate(e: Expr, env: Dict[object, object]):
    """numpy's scalar result of e; env maps Vars and load buffers to values."""
    with np.errstate(all="ignore"):
        return _eval(e, env)


_NP = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
       "floordiv": np.floor_divide, "floormod": np.remainder, "min": np.minimum, "max": np.maximum,
       "bitand": np.bitwise_and, "bitor": np.bitwise_or, "bitxor": np.bitwise_xor,
       "shl": np.left_shift, "shr": np.right_shift}
_CMP = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
        "eq": np.equal, "ne": np.not_equal}


def _eval(e: Expr, env):
    if isinstance(e, Const):
        return e.dtype.numpy.type(e.value)
    if isinstance(e, Var):
        return e.dtype.numpy.type(env[e])
    if isinstance(e, Load):
        return e.dtype.numpy.type(env[e.buffer])
    if isinstance(e, Binary):
        t = e.dtype.numpy.type
        return t(_NP[e.op](t(_eval(e.a, env)), t(_eval(e.b, env))))
    if isinstance(e, Compare):
        return np.bool_(_CMP[e.op](_eval(e.a, env), _eval(e.b, env)))
    if isinstance(e, Select):
        return _eval(e.true_value, env) if _eval(e.cond, env) else _eval(e.false_value, env)
    if isinstance(e, Cast):
        return np.asarray(_eval(e.value, env)).astype(e.dtype.numpy)[()]
    raise TypeError(f"the test evaluator has no rule for {type(e).__name__}")


def same_value(a, b) -> bool:
    """Bit for bit equal (any nan equals any nan)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype:
        return False
    if a.dtype.kind == "f":
        if np.isnan(a) and np.isnan(b):
            return True
        return a.tobytes() == b.tobytes()
    return a.tobytes() == b.tobytes()
