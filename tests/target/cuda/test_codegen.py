"""The CUDA C renderer: parentheses only where C's precedence needs them; literals of every dtype."""
import math

import pytest

import schedlang as sl
from schedlang.expr.nodes import Var, binary, cast, logical, select
from schedlang.dtypes import dtype
from schedlang.target.cuda.codegen import CUDARenderer, literal


@pytest.fixture
def render():
    r = CUDARenderer()
    a, b, c = Var("a"), Var("b"), Var("c")
    for v in (a, b, c):
        r.define(v, v.name)
        r.ranges.enter(v, 100)      # in [0, 100): + - * cannot wrap, so they stay C's operators
    return r.expr, a, b, c


def test_precedence_keeps_the_tree(render):
    expr, a, b, c = render
    assert expr(binary("sub", a, binary("sub", b, c))) == "a - (b - c)"
    assert expr(binary("sub", binary("sub", a, b), c)) == "a - b - c"
    assert expr(binary("mul", binary("add", a, b), c)) == "(a + b) * c"
    assert expr(binary("add", a, binary("mul", b, c))) == "a + b * c"
    assert expr(binary("bitand", a, b) == c) == "(a & b) == c"
    assert expr(logical("or", logical("and", a < b, b < c), a == c)) == "(a < b && b < c) || a == c"
    assert expr(logical("and", a < b, logical("or", b < c, a == c))) == "a < b && (b < c || a == c)"
    assert expr(binary("add", select(a < b, a, b), c)) == "(a < b ? a : b) + c"
    assert expr(binary("mul", cast("float32", a), sl.const(2.0))) == "(float)a * 2.0f"
    assert expr(cast("float32", binary("add", a, b))) == "(float)(a + b)"
    assert expr(binary("floordiv", binary("add", a, b), c)) == "sl_floordiv<int, unsigned>(a + b, c)"


@pytest.mark.parametrize("value, dt, text", [
    (1.5, "float32", "1.5f"), (-2.0, "float64", "(-2.0)"), (1e-5, "float32", "1e-05f"),
    (math.inf, "float32", "__int_as_float(0x7f800000)"),
    (-math.inf, "float64", "(-__longlong_as_double(0x7ff0000000000000ll))"),
    (-2 ** 31, "int32", "(-2147483647 - 1)"), (5, "int64", "5ll"), (7, "uint32", "7u"), (3, "int8", "((signed char)3)"),
    (True, "bool", "true")])
def test_literals(value, dt, text):
    assert literal(value, dtype(dt)) == text


def test_floor_division_of_counters_by_a_positive_constant_is_plain_c(render):
    """Loop and launch variables are never negative: C's / and % give the floor results."""
    expr, a, b, c = render
    r = CUDARenderer()
    i = Var("i")
    r.define(i, "i")
    r.counters.add(id(i))
    r.ranges.enter(i, 1000)
    assert r.expr(binary("floordiv", binary("add", i * 8, 3), sl.const(4))) == "(i * 8 + 3) / 4"
    assert r.expr(binary("mul", sl.const(30), binary("floormod", i, sl.const(8)))) == "30 * (i % 8)"
    assert r.expr(binary("floordiv", binary("sub", i, 3), sl.const(4))) == "sl_floordiv<int, unsigned>(i - 3, 4)"
    assert expr(binary("floordiv", a, sl.const(4))) == "sl_floordiv<int, unsigned>(a, 4)"     # a may be negative


def test_arithmetic_that_may_wrap_or_trap_calls_the_defined_helpers():
    """Unbounded int32 + - *, division by a variable, shifts by a variable and float -> int
    conversion go through the prelude's helpers (C leaves them undefined); narrow types compute
    in int, where + cannot overflow."""
    r = CUDARenderer()
    x, y = Var("x"), Var("y")
    for v in (x, y):
        r.define(v, v.name)
    assert r.expr(binary("add", x, binary("mul", y, sl.const(3)))) == \
        "sl_add<int, unsigned>(x, sl_mul<int, unsigned>(y, 3))"
    assert r.expr(binary("truncmod", x, y)) == "sl_truncmod<int, unsigned>(x, y)"
    assert r.expr(binary("shl", x, sl.const(3))) == "sl_shl<int, unsigned>(x, 3)"      # x may be negative
    assert r.expr(binary("shr", x, sl.const(3))) == "x >> 3"
    assert r.expr(cast("int64", cast("float32", x))) == \
        "sl_f2i<long long, float>((float)x, (-9.223372036854776e+18f), 9.223372036854776e+18f)"
    b = Var("b", "int8")
    r.define(b, "b")
    assert r.expr(binary("add", b, sl.const(1, "int8"))) == "(signed char)(b + ((signed char)1))"


def test_a_failed_header_search_is_tried_again(monkeypatch):
    """The CUDA header search keeps what it found, not a failure (one failed search under
    load must not fail every later float16 build of the process)."""
    import cuda.pathfinder
    from schedlang.target.cuda import nvrtc
    monkeypatch.setattr(nvrtc, "_FOUND_INCLUDE_DIRS", None)
    real = cuda.pathfinder.find_nvidia_header_directory
    monkeypatch.setattr(cuda.pathfinder, "find_nvidia_header_directory", lambda name: None)
    assert nvrtc._include_dirs() == ()
    monkeypatch.setattr(cuda.pathfinder, "find_nvidia_header_directory", real)
    want = real("cudart")
    found = nvrtc._include_dirs()
    assert found == ((want,) if want else ())
    if want:
        assert nvrtc._include_dirs() is found          # kept once found
