"""TVM's tutorial "Intrinsics and Math Functions" (gallery/how_to/work_with_schedules/
intrin_math.py) on the CPU: a direct extern math call, the unified intrinsic in float32
and float64, and a user's log that calls libm's logf / log. The tutorial's CUDA-only
__expf becomes libm's expf, and its lowering-rule registration becomes the plain
function a user writes; the schedule splits (and vectorizes) instead of binding threads."""
import numpy as np
import pytest

import schedlang as sl

te = sl
n = 1000


def _run(B, A, x):
    s = te.create_schedule(B.op)
    bx, tx = s[B].split(B.op.axis[0], factor=64)
    s[B].vectorize(tx)
    f = sl.build(s, [A, B], name="myexp")
    out = np.zeros(x.shape, B.dtype)
    f(x, out)
    return out


def test_direct_declare_extern_math_call():
    A = te.placeholder((n,), name="A")
    B = te.compute(A.shape, lambda i: sl.call_pure_extern("float32", "expf", A[i]), name="B")
    x = np.random.uniform(-5, 5, size=n).astype("float32")
    np.testing.assert_allclose(_run(B, A, x), np.exp(x), rtol=1e-6)
    assert "call_pure_extern(\"float32\", \"expf\", A[i])" in sl.lower(te.create_schedule(B.op), [A, B],
                                                                         level="tensor")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_unified_intrinsic_call(dtype):
    A = te.placeholder((n,), name="A", dtype=dtype)
    B = te.compute(A.shape, lambda i: te.exp(A[i]), name="B")
    x = np.random.uniform(-5, 5, size=n).astype(dtype)
    np.testing.assert_allclose(_run(B, A, x), np.exp(x), rtol=1e-6 if dtype == "float32" else 1e-14)


def mylog(x):
    """customized log intrinsic function: libm's logf for float32, log for float64"""
    if x.dtype == "float32":
        return sl.call_pure_extern("float32", "logf", x)
    return sl.call_pure_extern("float64", "log", x)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_add_your_own_intrinsic(dtype):
    A = te.placeholder((n,), name="A", dtype=dtype)
    B = te.compute(A.shape, lambda i: mylog(A[i]), name="B")
    x = np.random.uniform(0.01, 50, size=n).astype(dtype)
    np.testing.assert_allclose(_run(B, A, x), np.log(x), rtol=1e-6 if dtype == "float32" else 1e-14)
    np.testing.assert_allclose(sl.reference([B], {A: x})[0], np.log(x), rtol=1e-6)


def test_general_commutative_reduction_product():
    # from TVM's "Reduction" tutorial: a comm_reducer of one value
    nn, mm = 13, 9
    product = te.comm_reducer(lambda x, y: x * y, lambda t: sl.const(1, dtype=t), name="product")
    A = te.placeholder((nn, mm), name="A")
    k = te.reduce_axis((0, mm), name="k")
    B = te.compute((nn,), lambda i: product(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    x = np.random.uniform(0.5, 1.5, size=(nn, mm)).astype("float32")
    out = np.zeros(nn, "float32")
    sl.build(s, [A, B])(x, out)
    np.testing.assert_allclose(out, np.prod(x, axis=1), rtol=1e-5)
