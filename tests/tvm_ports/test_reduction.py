# Ported from apache/tvm v0.18 gallery/how_to/work_with_schedules/reduction.py ("Reduction"),
# its CPU parts: `from tvm import te` became `import schedlang as sl`. The symbolic n, m
# become static shapes; the cross-thread reduction (bind of a reduce axis to threadIdx.x)
# is a GPU feature and is left out; the argmax reducer over a tuple is expected to fail until
# tuple comm_reducers land.
import numpy as np
import pytest

import schedlang as sl
from tests import programs
from tests.tvm_ports.check import assert_close, build_and_run

n, m = 37, 45
rng = np.random.default_rng(0)
a = rng.random((n, m)).astype("float32")


def row_sum():
    A = sl.placeholder((n, m), name="A")
    k = sl.reduce_axis((0, m), "k")
    B = sl.compute((n,), lambda i: sl.sum(A[i, k], axis=k), name="B")
    return A, k, B


def check(s, A, B):
    (b,) = build_and_run(s, [A, B], [a], [np.zeros(n, "float32")])
    assert_close(b, a.sum(axis=1))


def test_describe_sum_of_rows():
    A, k, B = row_sum()
    s = sl.create_schedule(B.op)
    text = sl.lower(s, [A, B])
    assert "for k in 0..45:" in text
    check(s, A, B)


def test_schedule_the_reduction():
    A, k, B = row_sum()
    s = sl.create_schedule(B.op)
    ko, ki = s[B].split(B.op.reduce_axis[0], factor=16)
    xo, xi = s[B].split(B.op.axis[0], factor=32)
    check(s, A, B)


def test_reduction_factoring():
    A, k, B = row_sum()
    s = sl.create_schedule(B.op)
    ko, ki = s[B].split(B.op.reduce_axis[0], factor=16)
    BF = s.rfactor(B, ki)
    assert tuple(BF.shape) == (16, n)
    # print(s[B].op.body): B now sums over the factored partial results
    assert f"sum({BF.op.name}[" in str(s[B].op.body)
    check(s, A, B)


def test_rfactor_then_vectorize_and_parallel_on_the_cpu():
    """The CPU counterpart of the tutorial's cross-thread step: the factored axis becomes
    data-parallel, so it can be vectorized, and the rows run in parallel."""
    A, k, B = row_sum()
    s = sl.create_schedule(B.op)
    ko, ki = s[B].split(B.op.reduce_axis[0], factor=16)
    BF = s.rfactor(B, ki, factor_axis=1)
    s[BF].compute_at(s[B], s[B].op.axis[0])
    s[BF].vectorize(s[BF].op.axis[1])
    s[B].parallel(s[B].op.axis[0])
    check(s, A, B)


def test_convolution_via_2d_reduction():
    nn, kk = 16, 3
    Input = sl.placeholder((nn, nn), name="Input")
    Filter = sl.placeholder((kk, kk), name="Filter")
    di = sl.reduce_axis((0, kk), name="di")
    dj = sl.reduce_axis((0, kk), name="dj")
    Output = sl.compute((nn - kk + 1, nn - kk + 1),
                        lambda i, j: sl.sum(Input[i + di, j + dj] * Filter[di, dj], axis=[di, dj]),
                        name="Output")
    s = sl.create_schedule(Output.op)
    x = rng.random((nn, nn)).astype("float32")
    f = rng.random((kk, kk)).astype("float32")
    (o,) = build_and_run(s, [Input, Filter, Output], [x, f], [np.zeros((nn - kk + 1,) * 2, "float32")])
    want = sum(x[i:i + nn - kk + 1, j:j + nn - kk + 1] * f[i, j] for i in range(kk) for j in range(kk))
    assert_close(o, want)


def test_general_commutative_reduction():
    comp = lambda x, y: x * y
    zero = lambda t: sl.const(1, dtype=t)
    product = sl.comm_reducer(comp, zero, name="product")
    A = sl.placeholder((n, 4), name="A")
    k = sl.reduce_axis((0, 4), name="k")
    B = sl.compute((n,), lambda i: product(A[i, k], axis=k), name="B")
    s = sl.create_schedule(B.op)
    x = rng.uniform(0.5, 1.5, size=(n, 4)).astype("float32")
    (b,) = build_and_run(s, [A, B], [x], [np.zeros(n, "float32")])
    assert_close(b, x.prod(axis=1))


def test_argmax_tuple_reducer():
    # the tutorial's argmax comm_reducer and program: tests/programs.arg_reduce, written once
    idx, val, T0, T1 = programs.arg_reduce(n, m, "int32")
    s = sl.create_schedule(T0.op)
    iv = np.tile(np.arange(m, dtype="int32"), (n, 1))
    vv = rng.integers(0, 100, size=(n, m)).astype("int32")
    t0, t1 = np.zeros(n, "int32"), np.zeros(n, "int32")
    sl.build(s, [idx, val, T0, T1])(iv, vv, t0, t1)
    np.testing.assert_array_equal(t1, vv.max(axis=1))
