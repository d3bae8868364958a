# Ported from apache/tvm v0.18 tests/python/integration/test_ewise.py and test_dot.py:
# `from tvm import te` became `import schedlang as sl`. The GPU tests (exp, fmod,
# multiple_cache_write, add) bind their split loops to blockIdx/threadIdx; on the CPU the
# outer loop is parallel instead (and the innermost vectorized where TVM vectorizes), as
# TVM's own tests do when the target is a CPU (test_fmod, test_popcount).
import numpy as np
import pytest

import schedlang as sl
from tests.tvm_ports.check import assert_close, build_and_run

te = sl
RNG = np.random.default_rng(0)


def test_exp():
    n = 1024
    A = te.placeholder((n,), name="A")
    B = te.compute(A.shape, lambda *i: te.exp(A(*i)), name="B")
    s = te.create_schedule(B.op)
    bx, tx = s[B].split(B.op.axis[0], factor=8)
    s[B].parallel(bx)          # GPU: bind(bx, blockIdx.x), bind(tx, threadIdx.x)
    s[B].vectorize(tx)
    a = RNG.uniform(size=n).astype(A.dtype)
    (b,) = build_and_run(s, [A, B], [a], [np.zeros(n, B.dtype)], name="myexp")
    assert_close(b, np.exp(a), rtol=1e-5)


def test_fmod():
    n = te.size_var("n")
    A = te.placeholder((n,), name="A", dtype="float32")
    B = te.placeholder((n,), name="B", dtype="float32")
    C = te.compute(A.shape, lambda *i: te.fmod(A(*i), B(*i)), name="C")
    s = te.create_schedule(C.op)
    s[C].split(C.op.axis[0], factor=8)
    value_n = 1024
    a = (RNG.uniform(size=value_n) * 256).astype(A.dtype)
    b = (RNG.uniform(size=value_n) * 256).astype(B.dtype)
    b += (b < 2.0) * 2                      # keep the results away from tiny values, as TVM does
    a[np.abs(np.fmod(a, b)) < 1] += 1
    (c,) = build_and_run(s, [A, B, C], [a, b], [np.zeros(value_n, C.dtype)], name="myfmod")
    assert_close(c, np.mod(a, b), rtol=1e-5)


def test_multiple_cache_write():
    n = 1024
    A0 = te.placeholder((n,), name="A0", dtype="float32")
    A1 = te.placeholder((n,), name="A1", dtype="float32")
    B0, B1 = te.compute((n,), lambda *i: (A0(*i) + A1(*i), A0(*i) * A1(*i)), name="B")
    C = te.compute((n,), lambda *i: B0(*i) + B1(*i), name="C")
    s = te.create_schedule(C.op)
    B0_cache, _ = s.cache_write([B0, B1], "local")
    bx, tx = s[C].split(C.op.axis[0], factor=8)
    s[B0].compute_at(s[C], bx)
    s[B0_cache].compute_at(s[C], bx)
    s[C].parallel(bx)          # GPU: bind(bx, blockIdx.x), bind(tx, threadIdx.x)
    a0, a1 = RNG.uniform(size=(2, n)).astype("float32")
    (c,) = build_and_run(s, [A0, A1, C], [a0, a1], [np.zeros(n, C.dtype)], name="multiple_cache_write")
    assert_close(c, a0 + a1 + a0 * a1, rtol=1e-5)


def test_log_pow_llvm():
    n = te.size_var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute(A.shape, lambda *i: te.power(te.log(A(*i)), 2.0), name="B")
    s = te.create_schedule(B.op)
    s[B].split(B.op.axis[0], factor=32)
    flog = sl.build(s, [A, B], "llvm", name="mylog")
    a = RNG.uniform(size=1028).astype(A.dtype)
    b = np.zeros(1028, dtype=B.dtype)
    assert flog.time(a, b, number=1, repeat=2) > 0     # TVM's time_evaluator(number=1, repeat=10)
    assert_close(b, np.power(np.log(a), 2.0), rtol=1e-5)


@pytest.mark.parametrize("dtype", ["uint32", "uint64"])
def test_popcount(dtype):
    n = 1024
    A = te.placeholder((n,), name="A", dtype=dtype)
    B = te.compute(A.shape, lambda *i: sl.popcount(A(*i)), name="B")
    s = te.create_schedule(B.op)
    s[B].split(B.op.axis[0], factor=8)
    a = RNG.integers(low=0, high=1000, size=n, dtype=dtype)
    (b,) = build_and_run(s, [A, B], [a], [np.zeros(n, B.dtype)])
    np.testing.assert_array_equal(b, [bin(x).count("1") for x in a])


@pytest.mark.parametrize("dtype", ["float32", "int32", "int64", "uint64"])
def test_add(dtype):
    n = te.size_var("n")
    A = te.placeholder((n,), name="A", dtype=dtype)
    B = te.placeholder((n,), name="B", dtype=dtype)
    C = te.compute(A.shape, lambda *i: A(*i) + B(*i), name="C")
    s = te.create_schedule(C.op)
    num_thread = 16
    bx, x = s[C].split(C.op.axis[0], factor=num_thread * 4)
    tx, x = s[C].split(x, nparts=num_thread)
    _, x = s[C].split(x, factor=4)
    s[C].parallel(bx)          # GPU: bind(bx, blockIdx.x), bind(tx, threadIdx.x)
    s[C].vectorize(x)
    for size in (1024, 1000):  # TVM runs 1024; 1000 leaves a tail
        a = (RNG.uniform(size=size) * 256).astype(dtype)
        b = (RNG.uniform(size=size) * 256).astype(dtype)
        (c,) = build_and_run(s, [A, B, C], [a, b], [np.zeros(size, dtype)], name="myadd")
        assert_close(c, a + b, rtol=1e-6)


def test_dot():
    n = 12
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    k = te.reduce_axis((0, n), "k")
    C = te.compute((), lambda: te.sum(A[k] * B[k], axis=k), name="C")
    s = te.create_schedule(C.op)
    a, b = RNG.uniform(size=(2, n)).astype("float32")
    f = sl.driver.build(s, [A, B, C], "llvm")          # TVM calls tvm.driver.build
    c = np.zeros((), dtype=C.dtype)
    f(a, b, c)
    assert_close(c, np.dot(a, b), rtol=1e-4)
