"""TVM's classic te tests that use te.var("n"), ported: each is built (bounds-checked and
normal) and run at several sizes against numpy, where TVM's only lowered them."""
from __future__ import annotations

import numpy as np

import schedlang as sl
from tests.lowering.test_symbolic import check

SIZES = (1, 7, 64, 1000)


def test_schedule0_1_2():
    """test_te_schedule_ops.py: schedule0 (copy), schedule1 (split 8 + auto_unroll pragma),
    schedule2 (compute_at the split's outer loop), over (m, l) = te.var."""
    m, l = sl.var("m"), sl.var("l")
    A = sl.placeholder((m, l), name="A")
    A1 = sl.compute((m, l), lambda i, j: A[i, j], name="A1")
    shapes = lambda n: ([(n, n % 5 + 3)], [(n, n % 5 + 3)])     # noqa: E731
    check(sl.create_schedule(A1.op), [A, A1], shapes, lambda a: a, sizes=(1, 7, 64, 300))
    s = sl.create_schedule(A1.op)
    xo, xi = s[A1].split(A1.op.axis[0], 8)
    s[A1].pragma(xo, "auto_unroll_max_step", 10)
    check(s, [A, A1], shapes, lambda a: a, sizes=(1, 7, 64, 300))
    A2 = sl.compute((m, l), lambda i, j: A1[i, j] + 3.0, name="A2")
    s = sl.create_schedule(A2.op)
    xo, xi = s[A2].split(A2.op.axis[0], 8)
    s[A1].compute_at(s[A2], xo)
    assert "local A1: f32[8 * l]" in sl.lower(s, [A, A2], level="kernel")   # sized at run time
    check(s, [A, A2], shapes, lambda a: a + 3, sizes=(1, 7, 64, 300))


def test_inline_mixed():
    n = sl.var("n")
    A = sl.placeholder((n,), name="A")
    A1 = sl.compute(A.shape, lambda *i: A[i] + 1.0, name="A1")
    A2 = sl.compute(A.shape, lambda *i: A1[i] + 2.0, name="A2")
    C = sl.compute((n,), lambda i: A2[i] + A1[i], name="C")
    s = sl.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=8)
    s[A1].compute_at(s[C], xo)
    s[A2].compute_inline()
    check(s, [A, C], lambda n: ([(n,)], [(n,)]), lambda a: (a + 3) + (a + 1))


def test_auto_inline_elementwise_chain():
    m, n = sl.var("m"), sl.var("n")
    A, B, C = (sl.placeholder((m, n), name=x) for x in "ABC")
    T1 = sl.compute((m, n), lambda i, j: A[i, j] * B[i, j], name="T1")
    T2 = sl.compute((m, n), lambda i, j: T1[i, j] + C[i, j], name="T2")
    s = sl.create_schedule(T2.op)
    s[T1].compute_inline()
    check(s, [A, B, C, T2], lambda n: ([(n, 3)] * 3, [(n, 3)]), lambda a, b, c: a * b + c)


def test_schedule_cache_and_middle_cache():
    m, n = sl.var("m"), sl.var("n")
    A = sl.placeholder((m, n), name="A")
    B = sl.placeholder((m, n), name="B")
    C = sl.compute((m, n), lambda i, j: A[i, j] * B[i, j], name="C")
    s = sl.create_schedule(C.op)
    AA = s.cache_read(A, "shared", readers=[C])
    CC = s.cache_write(C, "shared")
    s[AA].compute_at(s[CC], CC.op.axis[0])
    shapes = lambda k: ([(k, 2 * k % 9 + 1)] * 2, [(k, 2 * k % 9 + 1)])   # noqa: E731
    check(s, [A, B, C], shapes, np.multiply, sizes=(1, 7, 64, 300))
    D = sl.compute((m, n), lambda i, j: C[i, j], name="D")
    s = sl.create_schedule(D.op)
    s.cache_read(A, "local", readers=[C])
    s.cache_read(B, "local", readers=[C])
    s.cache_read(C, "local", readers=[D])
    s.cache_write(D, "local")
    check(s, [A, B, D], shapes, np.multiply, sizes=(1, 7, 64, 300))


def test_schedule_cache_relayout3():
    """A reduction over n with expression extents (m*4), cached then split."""
    m, n = sl.var("m"), sl.var("n")
    A = sl.placeholder((m * 4, n), name="A")
    B = sl.placeholder((m * 4, n), name="B")
    k = sl.reduce_axis((0, n), "k")
    C = sl.compute((A.shape[0],), lambda i: sl.sum(A[i, k] * B[i, k], axis=k), name="C")
    s = sl.create_schedule(C.op)
    CC = s.cache_write(C, "global")
    xo, xi = s[C].split(C.op.axis[0], factor=4)
    s[CC].compute_at(s[C], xo)
    check(s, [A, B, C], lambda q: ([(4 * q, q % 11 + 1)] * 2, [(4 * q,)]), lambda a, b: (a * b).sum(axis=1),
          sizes=(1, 7, 64, 200))


def test_loop_dependent_reduce_extent():
    """test_loop_dep_reduce: the reduction runs over 0..n, n being the output axis."""
    X = sl.placeholder((10,), name="x")

    def f(n):
        rv = sl.reduce_axis((0, n))
        return sl.sum(X[rv], axis=rv)
    Y = sl.compute(X.shape, f, name="y")
    s = sl.create_schedule([Y.op])
    check(s, [X, Y], lambda _: ([(10,)], [(10,)]), lambda x: np.concatenate([[0], np.cumsum(x)[:-1]]), sizes=(10,))


def test_llvm_flip_and_madd_pipelines():
    """test_target_codegen_llvm.py's flip (C[i] = A[n + base - i - 1]) and madd pipelines,
    with n symbolic: A's extent n + base is an expression, so n is read from C."""
    n = sl.var("n")
    for base in (0, 8):
        A = sl.placeholder((n + base,), name="A")
        C = sl.compute((n,), lambda i: A[n + base - i - 1], name="C")
        s = sl.create_schedule(C.op)
        xo, xi = s[C].split(C.op.axis[0], factor=4)
        s[C].parallel(xo)
        s[C].vectorize(xi)
        check(s, [A, C], lambda k: ([(k + base,)], [(k,)]), lambda a: a[::-1][:len(a) - base], sizes=SIZES + (3,))
        A = sl.placeholder((n + base, 2), name="A")
        C = sl.compute((n, 2), lambda i, j: A[base + i, j] + 1.0, name="C")
        s = sl.create_schedule(C.op)
        xo, xi = s[C].split(C.op.axis[0], factor=4)
        s[C].parallel(xo)
        s[C].vectorize(xi)
        check(s, [A, C], lambda k: ([(k + base, 2)], [(k, 2)]), lambda a: a[base:] + 1)


def test_reduction_tutorial_custom_comm_reducer():
    """The reduction tutorial's mysum = te.comm_reducer(...) over symbolic n, m."""
    n, m = sl.var("n"), sl.var("m")
    mysum = sl.comm_reducer(lambda x, y: x + y, lambda t: sl.const(0, dtype=t), name="mysum")
    A = sl.placeholder((n, m), name="A")
    k = sl.reduce_axis((0, m), name="k")
    B = sl.compute((n,), lambda i: mysum(A[i, k], axis=k), name="B")
    s = sl.create_schedule(B.op)
    ko, ki = s[B].split(B.op.reduce_axis[0], factor=16)
    xo, xi = s[B].split(B.op.axis[0], factor=32)
    check(s, [A, B], lambda q: ([(q, q % 40 + 1)], [(q,)]), lambda a: a.sum(axis=1), sizes=(1, 7, 64, 300))
