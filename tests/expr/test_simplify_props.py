"""Properties of the expression simplifier on random integer and float trees: it keeps the
value (numpy's, bit for bit: wrap-around integers, IEEE floats with signed zeros and nan),
never raises, and is idempotent."""
from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schedlang.expr.equality import key
from schedlang.expr.nodes import Binary, Buffer, Const, Load, Var
from schedlang.expr.simplify import simplify
from schedlang.dtypes import dtype as parse_dtype

from .exprgen import Vars, evaluate, same_value, trees

# 50 trees per case, 8 cases (each tree checked at 4 points): the bugs these properties found are
# kept below as regression tests, so the count is not what guards them
PROPS = settings(max_examples=50, derandomize=True, deadline=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
RANGES = {"small": (0, 15), "wide": (-2**20, 2**20), "edge": (2**31 - 16, 2**31 - 1)}


@functools.lru_cache(maxsize=None)
def atoms_and_trees(dt: str):
    """One Vars and one tree strategy per dtype, reused by every example: hypothesis validates a
    strategy (a recursive one: most of a case's CPU time) once per strategy object, so a new one
    per example paid it 50 times. The draws are the same (the strategies are equal)."""
    atoms = Vars(dt)
    return atoms, trees(atoms)


def check(dt: str, data: st.DataObject, range_name: str = "small"):
    atoms, tree = atoms_and_trees(dt)
    e = data.draw(tree, label="expr")
    lo, hi = RANGES[range_name]
    if atoms.dt.is_int:
        lo, hi = max(lo, atoms.dt.min_int), min(hi, atoms.dt.max_int)
    ranges = {v: (lo, hi) for v in atoms.loops}
    simple = simplify(e, ranges)
    assert key(simplify(simple, ranges)) == key(simple), f"not idempotent: {e} -> {simple}"
    for _ in range(4):
        env = {v: data.draw(st.integers(lo, hi), label=v.name) for v in atoms.loops}
        for load in atoms.data:
            if atoms.dt.is_int:
                edges = [atoms.dt.min_int, atoms.dt.max_int, atoms.dt.max_int - 1, atoms.dt.max_int // 4 + 1, 0, -1]
                value = data.draw(st.one_of(st.sampled_from([v for v in edges if v >= atoms.dt.min_int]),
                                            st.integers(atoms.dt.min_int, atoms.dt.max_int)), label=load.buffer.name)
            else:
                value = data.draw(st.one_of(st.floats(width=atoms.dt.bits), st.sampled_from([0.0, -0.0, 1.0])),
                                  label=load.buffer.name)
            env[load.buffer] = value
        want, got = evaluate(e, env), evaluate(simple, env)
        assert same_value(got, want), f"{e}  ->  {simple}: {got!r} != {want!r} at {env}"


@pytest.mark.parametrize("dt,range_name", [("int32", "small"), ("int32", "wide"), ("int8", "small"),
                                           ("uint8", "small"), ("int64", "wide")])
@PROPS
@given(data=st.data())
def test_simplify_keeps_integer_values(dt, range_name, data):
    check(dt, data, range_name)


@PROPS
@given(data=st.data())
def test_simplify_keeps_integer_values_near_int_max(data):
    check("int32", data, "edge")


@pytest.mark.parametrize("dt", ["float32", "float64"])
@PROPS
@given(data=st.data())
def test_simplify_keeps_float_values_bit_for_bit(dt, data):
    check(dt, data)


# ---- the regressions these properties found or guard ------------------------------------

def test_float_identities_are_ieee_exact():
    x = Load(Buffer("x", (1,), parse_dtype("float32")), (Const(0),))
    f32 = parse_dtype("float32")
    for op, c in (("mul", 1.0), ("div", 1.0), ("sub", 0.0), ("add", -0.0)):
        assert simplify(Binary(op, x, Const(c, f32))) is x
    kept = simplify(Binary("add", x, Const(0.0, f32)))       # -0.0 + 0.0 is +0.0, not x
    assert isinstance(kept, Binary)


def test_wrapping_integer_rewrites_need_proof():
    i32 = parse_dtype("int32")
    d = Load(Buffer("d", (1,), i32), (Const(0),))
    # (d * 4) // 4 is not d when d * 4 wraps; x + 1 > x is false at INT_MAX.
    assert isinstance(simplify(Binary("floordiv", Binary("mul", d, Const(4, i32)), Const(4, i32))), Binary)
    from schedlang.expr.nodes import Compare
    assert not isinstance(simplify(Compare("gt", Binary("add", d, Const(1, i32)), d)), Const)
    # Index arithmetic over loop ranges still simplifies.
    i = Var("i", i32)
    assert simplify(Binary("floordiv", Binary("mul", i, Const(4, i32)), Const(4, i32)), {i: (0, 99)}) is i
    assert simplify(Compare("gt", Binary("add", i, Const(1, i32)), i), {i: (0, 99)}).value is True


def test_large_coefficients_wrap_instead_of_overflowing_the_dtype():
    i32 = parse_dtype("int32")
    d = Load(Buffer("d", (1,), i32), (Const(0),))
    e = Binary("mul", Binary("mul", d, Const(2**20, i32)), Const(2**20, i32))
    s = simplify(e)
    for v in (1, 3, -7, 2**31 - 1):
        env = {d.buffer: v}
        assert same_value(evaluate(s, env), evaluate(e, env))
    for c in _consts(s):
        assert i32.min_int <= c <= i32.max_int


def _consts(e):
    if isinstance(e, Const):
        yield int(e.value)
    elif isinstance(e, Binary):
        yield from _consts(e.a)
        yield from _consts(e.b)


def test_integer_constant_folding_follows_numpy():
    i32 = parse_dtype("int32")
    imin = Const(-2**31, i32)
    assert simplify(Binary("floordiv", imin, Const(-1, i32))).value == -2**31
    assert simplify(Binary("floormod", Const(7, i32), Const(0, i32))).value == 0
    assert simplify(Binary("floordiv", Const(7, i32), Const(0, i32))).value == 0
    assert np.int32(simplify(Binary("add", Const(2**31 - 1, i32), Const(1, i32))).value) == np.int32(-2**31)



def _lane_case(name: str):
    """(index, bounds of its variables, divisor, the quotient simplify should give) of a lane
    under a block index: index = k * A + B with B in [0, k), k dividing the divisor."""
    i32 = parse_dtype("int32")
    cb, b, l = (Var(n, i32) for n in ("cb", "b", "l"))
    c = lambda v: Const(v, i32)                                     # noqa: E731
    cases = {    # a grouped convolution's group over blocked channels (16 lanes, groups of 48)
        "group": (Binary("add", Binary("mul", cb, c(16)), l), {cb: (0, 40), l: (0, 15)}, 48, "cb // 3"),
        # two terms under the block: 8 * b + l < 32
        "two": (Binary("add", Binary("add", Binary("mul", cb, c(32)), Binary("mul", b, c(8))), l),
                {cb: (0, 40), b: (0, 3), l: (0, 7)}, 64, "cb // 2"),
        # a constant beside the lane: 16 * cb + l + 3 with l + 3 < 16
        "const": (Binary("add", Binary("add", Binary("mul", cb, c(16)), l), c(3)), {cb: (0, 40), l: (0, 12)}, 32,
                  "cb // 2"),
        # the lane can reach the block: nothing drops out
        "reach": (Binary("add", Binary("mul", cb, c(16)), l), {cb: (0, 31), l: (0, 16)}, 48, None),
    }
    return cases[name]


@pytest.mark.parametrize("name", ["group", "two", "const", "reach"])
def test_a_lane_under_a_block_index_drops_out_of_floordiv(name):
    """(k * A + B) // d == A // (d / k) and (k * A + B) % d == k * (A % (d / k)) + B for B in
    [0, k): no lane left in the quotient (a broadcast where A is a block index); both keep
    their values."""
    i32 = parse_dtype("int32")
    index, bounds, div, want = _lane_case(name)
    q = simplify(Binary("floordiv", index, Const(div, i32)), bounds)
    r = simplify(Binary("floormod", index, Const(div, i32)), bounds)
    if want is None:
        assert "l" in str(q), q
    else:
        assert str(q) == want, q
    rng = np.random.default_rng(0)
    for _ in range(50):
        env = {v: int(rng.integers(lo, hi + 1)) for v, (lo, hi) in bounds.items()}
        value = evaluate(index, env)
        assert evaluate(q, env) == value // div and evaluate(r, env) == value % div, (q, r, env)
