"""TVM's tests/python/te/test_te_tensor.py (tensor, rank zero, slices, reducers, tuple
inputs and outputs), ported by changing the import. TVM's symbolic sizes are static
here, and each test also builds and checks its numbers."""
import numpy as np

import schedlang as sl
from tests.helpers import assert_matches_reference, run

te = sl
m, n, l = 5, 6, 7


def test_tensor():
    A = te.placeholder((m, l), name="A")
    B = te.placeholder((n, l), name="B")
    T = te.compute((m, n, l), lambda i, j, k: A[i, k] * B[j, k])
    assert tuple(T.shape) == (m, n, l)
    assert isinstance(A.op, sl.tensor.PlaceholderOp)
    assert A == A
    assert T.op.output(0) == T
    assert T.op.output(0).__hash__() == T.__hash__()
    d = {T.op.output(0): 1}
    assert d[T] == 1
    assert T[0][0][0].astype("float16").dtype == "float16"
    feed, outs, _ = run(te.create_schedule(T.op), [A, B, T])
    np.testing.assert_allclose(outs[0][1], feed[A][:, None, :] * feed[B][None, :, :], rtol=1e-6)


def test_rank_zero():
    A = te.placeholder((m,), name="A")
    scale = te.placeholder((), name="s")
    k = te.reduce_axis((0, m), name="k")
    T = te.compute((), lambda: te.sum(A[k] * scale(), axis=k))
    assert tuple(T.shape) == ()
    feed, outs, _ = run(te.create_schedule(T.op), [A, scale, T])
    np.testing.assert_allclose(outs[0][1], (feed[A] * feed[scale]).sum(), rtol=1e-5)


def test_tensor_slice():
    A = te.compute((n, n), lambda i, j: i * 10 + j)
    B = te.compute((n,), lambda i: A[0][i] + A[0][i])
    _, outs, _ = run(te.create_schedule(B.op), [B])
    np.testing.assert_array_equal(outs[0][1], 2 * np.arange(n))


def test_tensor_reduce_multi_axis():
    A = te.placeholder((m, n), name="A")
    k1 = te.reduce_axis((0, n), "k")
    k2 = te.reduce_axis((0, m), "k")
    C1 = te.compute((1,), lambda _: te.sum(A[k2, k1], axis=(k1, k2)))
    C2 = te.compute((1,), lambda _: te.sum(A[k2, k1], axis=[k1, k2]))
    feed, outs, _ = run(te.create_schedule([C1.op, C2.op]), [A, C1, C2])
    for _, got in outs:
        np.testing.assert_allclose(got, [feed[A].sum()], rtol=1e-5)


def test_tensor_comm_reducer():
    A = te.placeholder((m, n), name="A")
    k = te.reduce_axis((0, n), "k")
    mysum = te.comm_reducer(lambda x, y: x + y, lambda t: sl.const(0, dtype=t))
    C = te.compute((m,), lambda i: mysum(A[i, k], axis=k))
    feed, outs, _ = run(te.create_schedule(C.op), [A, C])
    np.testing.assert_allclose(outs[0][1], feed[A].sum(axis=1), rtol=1e-5)


def test_tensor_comm_reducer_overload():
    mysum = te.comm_reducer(lambda x, y: x + y, lambda t: sl.const(0, dtype=t))
    mm, nn = sl.var("m"), sl.var("n")
    sum_res = mysum(mm, nn)
    assert str(sum_res) == "m + n"


def test_tensor_reduce():
    A = te.placeholder((m, l), name="A")
    B = te.placeholder((n, l), name="B")
    T = te.compute((m, n, l), lambda i, j, k: A[i, k] * B[j, k])
    rv = te.reduce_axis((0, A.shape[1] - 1), "k")
    C = te.compute((m, n), lambda i, j: te.sum(T(i, j, rv + 1), axis=rv))
    feed, outs, _ = run(te.create_schedule(C.op), [A, B, C])
    np.testing.assert_allclose(outs[0][1], feed[A][:, 1:] @ feed[B][:, 1:].T, rtol=1e-4, atol=1e-5)


def test_tensor_reduce_multiout_with_cond():
    def fcombine(x, y):
        return x[0] + y[0], x[1] + y[1]

    def fidentity(t0, t1):
        return sl.const(0, t0), sl.const(1, t1)

    mysum = te.comm_reducer(fcombine, fidentity, name="mysum")
    idx = te.placeholder((m, n), name="idx", dtype="int32")
    val = te.placeholder((m, n), name="val", dtype="int32")
    k = te.reduce_axis((0, n), "k")
    cond = te.floormod(k, 2) == 0
    T0, T1 = te.compute((m,), lambda i: mysum((idx[i, k], val[i, k]), axis=k, where=cond), name="T")
    feed, outs, _ = run(te.create_schedule(T0.op), [idx, val, T0, T1])
    np.testing.assert_array_equal(outs[0][1], feed[idx][:, ::2].sum(axis=1))
    np.testing.assert_array_equal(outs[1][1], 1 + feed[val][:, ::2].sum(axis=1))


def test_tuple_inputs():
    A0 = te.placeholder((m, n), name="A0")
    A1 = te.placeholder((m, n), name="A1")
    T0, T1 = te.compute((m, n), lambda i, j: (A0[i, j] * 2, A1[i, j] * 3), name="T")
    s = te.create_schedule(T0.op)
    for i in range(len(T0.shape)):
        assert T0.shape[i] == T1.shape[i]
    assert T0.op == T1.op
    assert T0.value_index == 0
    assert T1.value_index == 1
    assert_matches_reference(s, [A0, A1, T0])   # T1 is not an argument: a temporary


def test_tuple_with_different_deps():
    A0 = te.placeholder((m * 5, n), name="A1")
    A1 = te.placeholder((m * 5, n), name="A2")
    B0, B1 = te.compute((m * 5, n), lambda i, j: (A0[i, j] * 2, A1[i, j] * 3), name="B")
    C = te.compute((m * 5, n), lambda i, j: B0[i, j] + 4, name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=10)
    s[B0.op].compute_at(s[C], xo)
    text = sl.lower(s, [A0, A1, C])
    assert "alloc B.v1: f32[10, 6]" in text     # B1 is realised once, at C's outer loop
    assert_matches_reference(s, [A0, A1, C])


def test_tensor_inputs():
    x = te.placeholder((1,), name="x")
    y = te.compute(x.shape, lambda i: x[i] + x[i])
    assert tuple(y.op.input_tensors) == (x,)
