"""TVM's tests/python/integration/test_reduce.py, the parts for the CPU: reducers with
where= and an inlined condition, rfactor, argmax (plain and rfactor'ed), init= (an
immediate, a tensor, with rfactor). GPU thread binding becomes compute_at/parallel. TVM's
argmax reducer and program, which three of its files write out, are tests/programs.arg_reduce."""
import numpy as np
import pytest

import schedlang as sl
from tests import programs

te = sl


def _check_argmax(s, args, mm, nn):
    fargmax = sl.build(s, args, name="argmax")
    np_idx = np.repeat(np.arange(nn, dtype="int32").reshape(1, nn), mm, axis=0)
    np_val = np.random.uniform(size=(mm, nn)).astype("float32")
    np_res = np.argmax(np_val, axis=1)
    nd_res0 = np.zeros(mm, dtype="int32")
    nd_res1 = np.zeros(mm, dtype="float32")
    fargmax(np_idx, np_val, nd_res0, nd_res1)
    np.testing.assert_allclose(np_res, nd_res0)
    np.testing.assert_allclose(np.max(np_val, axis=1), nd_res1)


@pytest.mark.parametrize("reducer,np_reducer", [(te.sum, np.sum), (te.min, np.amin), (te.max, np.amax)])
def test_reduce_prims(reducer, np_reducer):
    n, m = 1028, 129
    A = te.placeholder((n, m), name="A")
    R = te.compute((n,), lambda i: sl.select((i > 1), 1, 0), name="R")
    k = te.reduce_axis((0, m))
    B = te.compute((n,), lambda i: reducer(A[i, k], axis=k, where=(R[i] == 1)), name="B")
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=8)
    s[B].parallel(xo)
    s[R].compute_inline()
    freduce = sl.build(s, args=[A, B], name="myreduce")
    x = np.random.uniform(size=(n, m)).astype(A.dtype)
    y = np.zeros(n, dtype=B.dtype)
    freduce(x, y)
    y[:2] = 0
    res = np_reducer(x, axis=1)
    res[:2] = 0
    np.testing.assert_allclose(y, res, rtol=1e-4)


def test_argmax():
    m, n = 12, 16
    idx, val, T0, T1 = programs.arg_reduce(m, n)
    s = te.create_schedule(T0.op)
    _check_argmax(s, [idx, val, T0, T1], m, n)


def test_rfactor_argmax():
    nn, mm = 1027, 10
    A0, A1, B0, B1 = programs.arg_reduce(mm, nn, names=("A0", "A1", "B"))
    (k,) = B0.op.reduce_axis
    s = te.create_schedule(B0.op)
    nthread = 16
    ko, kf = s[B0].split(k, factor=nthread)
    BF0, BF1 = s.rfactor(B0, kf)
    bx, ty = s[B0].split(s[B0].op.axis[0], factor=nthread)
    s[B0].parallel(bx)
    s[BF0.op].compute_at(s[B0], ty)
    _check_argmax(s, [A0, A1, B0, B1], mm, nn)


def test_init_imm():
    n = 1027
    A = te.placeholder((n,), name="A")
    k = te.reduce_axis((0, n))
    B = te.compute((), lambda: te.sum(A[k], axis=k, init=10.0), name="B")
    s = te.create_schedule(B.op)
    fsum = sl.build(s, args=[A, B])
    a = np.random.uniform(size=(n,)).astype(A.dtype)
    b = np.zeros((), dtype=B.dtype)
    fsum(a, b)
    np.testing.assert_allclose(b, 10.0 + np.sum(a, axis=0), rtol=1e-4)


def _init_matmul(n):
    A = te.placeholder((n, n), name="A")
    C = te.placeholder((n, n), name="C")
    I = te.placeholder((n, n), name="I")   # noqa: E741 - TVM's name
    k = te.reduce_axis((0, n))
    B = te.compute((n, n), lambda i, j: te.sum(A[i, k] * C[k, j], axis=k, init=I[i, j]), name="B")
    return A, C, I, k, B


def _check_init_matmul(s, A, C, I, B, n):   # noqa: E741
    mmult = sl.build(s, args=[A, C, I, B])
    a = np.random.uniform(size=(n, n)).astype(A.dtype)
    c = np.random.uniform(size=(n, n)).astype(C.dtype)
    ii = np.random.uniform(size=(n, n)).astype(B.dtype)
    b = np.zeros((n, n), B.dtype)
    mmult(a, c, ii, b)
    np.testing.assert_allclose(b, ii + np.matmul(a, c), rtol=1e-4)


def test_init():
    n = 67
    A, C, I, k, B = _init_matmul(n)   # noqa: E741
    s = te.create_schedule(B.op)
    _check_init_matmul(s, A, C, I, B, n)


def test_rfactor_init():
    n = 67
    A, C, I, k, B = _init_matmul(n)   # noqa: E741
    s = te.create_schedule(B.op)
    kf, ki = s[B].split(k, nparts=4)
    BF = s.rfactor(B, kf, 1)
    s[BF].parallel(BF.op.axis[0])
    _check_init_matmul(s, A, C, I, B, n)


def test_rfactor():
    n = 1027
    A = te.placeholder((n,), name="A")
    k = te.reduce_axis((0, n))
    B = te.compute((1,), lambda i: te.sum(A[k], axis=k), name="B")
    s = te.create_schedule(B.op)
    kf, ki = s[B].split(k, nparts=4)
    BF = s.rfactor(B, kf)
    s[BF].parallel(BF.op.axis[0])
    fsum = sl.build(s, args=[A, B], name="mysum")
    a = np.random.uniform(size=(n,)).astype(A.dtype)
    b = np.zeros(1, dtype=B.dtype)
    fsum(a, b)
    np.testing.assert_allclose(b, np.sum(a, axis=0), rtol=1e-4)


def test_rfactor_factor_axis():
    """TVM's test_rfactor_factor_axis: a 0-d sum over 1027 elements, split into 4 parts,
    rfactor'd with factor_axis=0 and the partials computed in parallel; built from the
    lowered function with a name (which TVM, and schedlang with a warning, ignore)."""
    n = 1027
    A = te.placeholder((n,), name="A")
    k = te.reduce_axis((0, n))
    B = te.compute((), lambda: te.sum(A[k], axis=k), name="B")
    s = te.create_schedule(B.op)
    kf, _ = s[B].split(k, nparts=4)
    BF = s.rfactor(B, kf, 0)
    s[BF].parallel(BF.op.axis[0])
    fapi = sl.lower(s, args=[A, B])
    with pytest.warns(UserWarning, match="is ignored"):
        fsum = sl.build(fapi, target="llvm", name="mysum")
    a = np.random.default_rng(3).uniform(size=(n,)).astype(A.dtype)
    b = np.zeros((), dtype=B.dtype)
    fsum(a, b)
    np.testing.assert_allclose(b, np.sum(a, axis=0), rtol=1e-4)
