"""Data types and math intrinsics through the whole pipeline, scalar and vectorized."""
import numpy as np
import pytest

import schedlang as sl
from tests.helpers import assert_matches_reference

FLOATS = ["float16", "float32", "float64"]
UNARY = ["exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "abs", "floor", "ceil"]


def _domain_input(name, shape, dtype, rng):
    x = rng.standard_normal(shape) * 3
    if name in ("log", "sqrt", "rsqrt"):
        x = np.abs(x) + 0.1
    return x.astype(dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("fn", UNARY)
@pytest.mark.parametrize("vector", [False, True])
def test_unary_math(dtype, fn, vector):
    A = sl.placeholder((4, 37), dtype, name="A")
    B = sl.compute((4, 37), lambda i, j: getattr(sl, fn)(A[i, j]), name="B")
    s = sl.create_schedule(B.op)
    if vector:
        jo, ji = s[B].split(B.op.axis[1], factor=16)
        s[B].vectorize(ji)
    rng = np.random.default_rng(1)
    feed = {A: _domain_input(fn, A.shape, dtype, rng)}
    assert_matches_reference(s, [A, B], feed=feed)


@pytest.mark.parametrize("dtype", FLOATS)
def test_pow_min_max_select(dtype):
    A = sl.placeholder((5, 19), dtype, name="A")
    B = sl.placeholder((5, 19), dtype, name="B")
    C = sl.compute((5, 19), lambda i, j: sl.select(A[i, j] > B[i, j], sl.power(sl.abs(A[i, j]) + 1.0, B[i, j]),
                                                   sl.max(A[i, j], B[i, j]) - sl.min(A[i, j], 0.5)), name="C")
    s = sl.create_schedule(C.op)
    s[C].vectorize(C.op.axis[1])
    assert_matches_reference(s, [A, B, C])


@pytest.mark.parametrize("dtype", ["int32", "int64", "int8", "uint8"])
def test_integer_arithmetic_floordiv_floormod(dtype):
    A = sl.placeholder((6, 23), dtype, name="A")
    C = sl.compute((6, 23), lambda i, j: (A[i, j] // 3) * 2 + A[i, j] % 5 - sl.max(A[i, j], sl.const(1, dtype)),
                   name="C")
    for vector in (False, True):
        s = sl.create_schedule(C.op)
        if vector:
            s[C].vectorize(C.op.axis[1])
        rng = np.random.default_rng(2)
        lo = 0 if dtype.startswith("u") else -40
        feed = {A: rng.integers(lo, 40, size=A.shape).astype(dtype)}
        assert_matches_reference(s, [A, C], feed=feed)


def test_index_arithmetic_negative_floordiv():
    A = sl.placeholder((16,), "int32", name="A")
    C = sl.compute((16,), lambda i: (i - 8) // 3 + (i - 8) % 3 * 100 + A[i] * 0, name="C")
    s = sl.create_schedule(C.op)
    s[C].vectorize(C.op.axis[0])
    feed = {A: np.zeros(16, "int32")}
    from tests.helpers import run
    _, outputs, _ = run(s, [A, C], feed=feed)
    i = np.arange(16) - 8
    np.testing.assert_array_equal(outputs[0][1], i // 3 + (i % 3) * 100)


def test_bool_and_casts():
    A = sl.placeholder((7, 9), name="A")
    M = sl.compute((7, 9), lambda i, j: sl.any(A[i, j] > 0.5, A[i, j] < -1.0), name="M")
    C = sl.compute((7, 9), lambda i, j: M[i, j].astype("float32") * 2.0 + A[i, j].astype("int32").astype("float32"),
                   name="C")
    s = sl.create_schedule([M.op, C.op])
    s[C].vectorize(C.op.axis[1])
    assert_matches_reference(s, [A, M, C])


def test_float16_storage_rounds_like_reference():
    A = sl.placeholder((3, 40), "float16", name="A")
    T = sl.compute((3, 40), lambda i, j: A[i, j] * 1.001 + 0.3, name="T")
    U = sl.compute((3, 40), lambda i, j: T[i, j].astype("float32") * 3.0, name="U")
    s = sl.create_schedule(U.op)
    s[U].vectorize(U.op.axis[1])
    mod = assert_matches_reference(s, [A, U], rtol=1e-6)
    assert "half" in mod.get_source()


def test_mixed_precision_reduction():
    A = sl.placeholder((4, 50), "float16", name="A")
    k = sl.reduce_axis((0, 50), name="k")
    B = sl.compute((4,), lambda i: sl.sum(A[i, k].astype("float32"), axis=k), name="B")
    s = sl.create_schedule(B.op)
    assert_matches_reference(s, [A, B])


def test_special_values_propagate():
    A = sl.placeholder((8,), name="A")
    k = sl.reduce_axis((0, 8), name="k")
    B = sl.compute((1,), lambda i: sl.max(A[k], axis=k), name="B")
    E = sl.compute((8,), lambda i: sl.exp(A[i]), name="E")
    s = sl.create_schedule([B.op, E.op])
    s[E].vectorize(E.op.axis[0])
    a = np.array([1, -np.inf, np.inf, 0, -0.0, 100, -200, 3], "float32")
    feed = {A: a}
    mod = sl.build(s, [A, B, E])
    b, e = np.zeros(1, "float32"), np.zeros(8, "float32")
    mod(a, b, e)
    assert b[0] == np.inf
    with np.errstate(over="ignore"):
        np.testing.assert_allclose(e, np.exp(a), rtol=1e-6)
