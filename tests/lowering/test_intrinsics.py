"""TVM's integer and math intrinsics: truncdiv/truncmod (C semantics), popcount/clz, the
libm functions of tir, float predicates, call_pure_extern; built scalar and vectorized,
checked against numpy and the reference evaluator."""
import math

import numpy as np
import pytest

import schedlang as sl
from schedlang.expr.simplify import simplify
from tests.helpers import assert_matches_reference

N = 37   # not a multiple of the vector width: tails run too


def _build_run(fn, inputs, out_dtype, vectorize):
    phs = [sl.placeholder(x.shape, dtype=str(x.dtype), name=f"x{i}") for i, x in enumerate(inputs)]
    B = sl.compute((N,), lambda i: fn(*(p[i] for p in phs)), name="B")
    assert B.dtype == out_dtype
    s = sl.create_schedule(B.op)
    if vectorize:
        xo, xi = s[B].split(B.op.axis[0], factor=8)
        s[B].vectorize(xi)
    out = np.zeros(N, B.dtype)
    sl.build(s, phs + [B])(*inputs, out)
    ref = sl.reference([B], dict(zip(phs, inputs)))[0]
    return out, ref


def _ints(dtype, lo=-1000, hi=1000, seed=0):
    return np.random.default_rng(seed).integers(lo, hi, size=N).astype(dtype)


@pytest.mark.parametrize("vectorize", [False, True])
@pytest.mark.parametrize("dtype", ["int32", "int8", "int64"])
def test_truncdiv_truncmod_follow_c(dtype, vectorize):
    lo, hi = (-100, 100) if dtype == "int8" else (-1000, 1000)
    a = _ints(dtype, lo, hi)
    b = np.where(np.arange(N) % 3 == 0, -7, 3).astype(dtype)
    want_div = np.trunc(a.astype("float64") / b).astype(dtype)
    want_mod = np.fmod(a, b)
    for fn, want in ((sl.truncdiv, want_div), (sl.truncmod, want_mod)):
        got, ref = _build_run(fn, [a, b], dtype, vectorize)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(ref, want)
    # they differ from floordiv/floormod exactly where the signs differ
    got, _ = _build_run(sl.floordiv, [a, b], dtype, vectorize)
    np.testing.assert_array_equal(got, a // b)


def test_truncdiv_constant_folding_and_errors():
    assert simplify(sl.truncdiv(sl.const(-7), sl.const(2))).value == -3
    assert simplify(sl.truncmod(sl.const(-7), sl.const(2))).value == -1
    assert simplify(sl.floordiv(sl.const(-7), sl.const(2))).value == -4
    assert str(sl.truncdiv(sl.var("x"), 4)) == "truncdiv(x, 4)"
    with pytest.raises(TypeError, match="truncdiv takes integers"):
        sl.truncdiv(sl.const(1.5), 2.0)


@pytest.mark.parametrize("vectorize", [False, True])
@pytest.mark.parametrize("dtype", ["int32", "uint8", "int64", "int16"])
def test_popcount_and_clz(dtype, vectorize):
    info = np.iinfo(dtype)
    x = np.random.default_rng(1).integers(info.min, info.max, size=N, endpoint=True).astype(dtype)
    x[:3] = [0, 1, info.max]
    bits = np.dtype(dtype).itemsize * 8
    unsigned = [int(v) % (1 << bits) for v in x]
    got, ref = _build_run(sl.popcount, [x], dtype, vectorize)
    want = np.array([bin(u).count("1") for u in unsigned], dtype)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(ref, want)
    got, ref = _build_run(sl.clz, [x], dtype, vectorize)
    want = np.array([bits - u.bit_length() for u in unsigned], dtype)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(ref, want)
    with pytest.raises(TypeError, match="popcount counts the bits of an integer"):
        sl.popcount(sl.const(1.0))


UNARY = [("exp10", lambda x: 10.0 ** x, (-5, 5)), ("log10", np.log10, (0.01, 100)),
         ("log1p", np.log1p, (-0.9, 10)), ("tan", np.tan, (-1.5, 1.5)), ("atan", np.arctan, (-10, 10)),
         ("cosh", np.cosh, (-5, 5)), ("sinh", np.sinh, (-5, 5)), ("acos", np.arccos, (-1, 1)),
         ("asin", np.arcsin, (-1, 1)), ("acosh", np.arccosh, (1, 10)), ("asinh", np.arcsinh, (-10, 10)),
         ("atanh", np.arctanh, (-0.99, 0.99))]
BINARY = [("atan2", np.arctan2), ("fmod", np.fmod), ("hypot", np.hypot)]


@pytest.mark.parametrize("vectorize", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_libm_functions(dtype, vectorize):
    rng = np.random.default_rng(2)
    rtol = 1e-6 if dtype == "float32" else 1e-13
    for name, np_fn, (lo, hi) in UNARY:
        x = rng.uniform(lo, hi, size=N).astype(dtype)
        got, ref = _build_run(getattr(sl, name), [x], dtype, vectorize)
        want = np_fn(x.astype("float64"))
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol, err_msg=name)
        np.testing.assert_allclose(ref, want, rtol=rtol, atol=rtol, err_msg=name)
    for name, np_fn in BINARY:
        x, y = rng.uniform(-10, 10, size=(2, N)).astype(dtype)
        got, ref = _build_run(getattr(sl, name), [x, y], dtype, vectorize)
        want = np_fn(x.astype("float64"), y.astype("float64"))
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * 10, err_msg=name)
        np.testing.assert_allclose(ref, want, rtol=rtol, atol=rtol * 10, err_msg=name)


@pytest.mark.parametrize("vectorize", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_exact_functions(dtype, vectorize):
    rng = np.random.default_rng(3)
    x, y = rng.uniform(-10, 10, size=(2, N)).astype(dtype)
    x[:4] = [0.5, 1.5, 2.5, -0.5]   # nearbyint rounds halves to even
    e = rng.integers(-20, 20, size=N).astype("int32")
    cases = [(sl.nextafter, [x, y], np.nextafter(x, y)), (sl.copysign, [x, y], np.copysign(x, y)),
             (sl.nearbyint, [x], np.rint(x)), (sl.ldexp, [x, e], np.ldexp(x, e))]
    for fn, inputs, want in cases:
        got, ref = _build_run(fn, inputs, dtype, vectorize)
        np.testing.assert_array_equal(got, want, err_msg=fn.__name__)
        np.testing.assert_array_equal(ref, want, err_msg=fn.__name__)


@pytest.mark.parametrize("vectorize", [False, True])
def test_float_predicates(vectorize):
    x = np.random.default_rng(4).uniform(-1, 1, size=N).astype("float32")
    x[:5] = [np.nan, np.inf, -np.inf, 0.0, -np.nan]
    for fn, np_fn in ((sl.isnan, np.isnan), (sl.isinf, np.isinf), (sl.isfinite, np.isfinite)):
        got, ref = _build_run(fn, [x], "bool", vectorize)
        np.testing.assert_array_equal(got, np_fn(x), err_msg=fn.__name__)
        np.testing.assert_array_equal(ref, np_fn(x), err_msg=fn.__name__)
    assert sl.isnan(sl.const(3)).value is False and sl.isfinite(sl.var("i")).value is True


@pytest.mark.parametrize("vectorize", [False, True])
def test_call_pure_extern_of_libm(vectorize):
    x = np.random.default_rng(5).uniform(0.1, 3, size=N)
    cases = [("float32", "expf", np.exp), ("float64", "cbrt", np.cbrt), ("float32", "erff", np.vectorize(math.erf)),
             ("float64", "pow", None)]
    for dtype, symbol, np_fn in cases:
        xs = x.astype(dtype)
        if np_fn is None:
            got, ref = _build_run(lambda a, b: sl.call_pure_extern(dtype, symbol, a, b), [xs, xs[::-1].copy()],
                                  dtype, vectorize)
            want = np.power(xs, xs[::-1])
        else:
            got, ref = _build_run(lambda a: sl.call_pure_extern(dtype, symbol, a), [xs], dtype, vectorize)
            want = np_fn(xs.astype("float64"))
        rtol = 1e-6 if dtype == "float32" else 1e-14
        np.testing.assert_allclose(got, want, rtol=rtol, err_msg=symbol)
        np.testing.assert_allclose(ref, want, rtol=rtol, err_msg=symbol)


def test_call_pure_extern_unknown_symbol_is_refused_clearly():
    A = sl.placeholder((N,), name="A")
    B = sl.compute((N,), lambda i: sl.call_pure_extern("float32", "no_such_function_xyz", A[i]), name="B")
    s = sl.create_schedule(B.op)
    with pytest.raises(ValueError, match="'no_such_function_xyz' is not found"):
        sl.build(s, [A, B])
    with pytest.raises(ValueError, match="does not know"):
        sl.reference([B], {A: np.zeros(N, "float32")})
    with pytest.raises(ValueError, match="C identifier"):
        sl.call_pure_extern("float32", "exp f", A[0])


def test_intrinsics_under_a_schedule_match_the_reference():
    A = sl.placeholder((8, 13), name="A")
    Bi = sl.placeholder((8, 13), name="Bi", dtype="int32")
    C = sl.compute((8, 13), lambda i, j: sl.hypot(A[i, j], sl.tan(A[i, j])) + sl.popcount(Bi[i, j]).astype("float32")
                   + sl.truncmod(Bi[i, j], 7).astype("float32"), name="C")
    s = sl.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[1], factor=4)
    s[C].vectorize(xi)
    s[C].parallel(C.op.axis[0])
    assert_matches_reference(s, [A, Bi, C], rtol=1e-5)
