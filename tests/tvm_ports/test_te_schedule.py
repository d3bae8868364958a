# Ported from apache/tvm v0.18 tests/python/te/test_te_schedule.py: `from tvm import te`
# became `import schedlang as sl`. te.size_var shapes become static ones (the symbolic
# originals are grouped at the end as expected failures until symbolic shapes land);
# tvm.ir.save_json/pickle of a schedule become s.to_json()/apply_json; vscale splits have no
# counterpart and are left out (tensorize: tests/tvm_ports/test_tensorize_tutorial.py).
import pickle

import numpy as np
import pytest

import schedlang as sl
from tests.tvm_ports.check import assert_close, build_and_run

M, N, L = 20, 30, 12


def _copy(shape):
    """The tests' copy program T = A (TVM writes it out in each test), and its schedule."""
    A = sl.placeholder(shape, name="A")
    T = sl.compute(shape, (lambda i: A[i]) if len(shape) == 1 else (lambda i, j: A[i, j]), name="T")
    return A, T, sl.create_schedule(T.op)


def test_schedule_create():
    A = sl.placeholder((M, L), name="A")
    B = sl.placeholder((N, L), name="B")
    AA = sl.compute((M, L), lambda i, j: A[i, j], name="AA")
    T = sl.compute((M, N, L), lambda i, j, k: AA[i, k] * B[j, k], name="T")
    s = sl.create_schedule(T.op)
    xo, xi = s[T].split(T.op.axis[0], factor=10)
    xi1, xi2 = s[T].split(xi, factor=2)
    s[AA].compute_at(s[T], xi1)
    xo, xi = s[AA].split(AA.op.axis[0], factor=10)
    s[T].reorder(xi2, xi1)
    assert any(a is T.op.axis[1] for a in s[T].leaf_iter_vars)
    # save / load (TVM: tvm.ir.save_json and pickle of the schedule)
    loaded = sl.create_schedule(T.op).apply_json(s.to_json())
    assert sl.lower(loaded, [A, B, T]) == sl.lower(s, [A, B, T])
    again = pickle.loads(pickle.dumps((A, B, T)))
    s2 = sl.create_schedule(again[2].op).apply_json(s.to_json())
    assert sl.lower(s2, list(again)) == sl.lower(s, [A, B, T])
    a, b = np.random.default_rng(0).random((M, L), "float32"), np.random.default_rng(1).random((N, L), "float32")
    (t,) = build_and_run(s, [A, B, T], [a, b], [np.empty((M, N, L), "float32")])
    assert_close(t, a[:, None, :] * b[None, :, :])


def test_reorder():
    A = sl.placeholder((M,), name="A")
    T = sl.compute((M - 1,), lambda i: A[i + 1], name="T")
    s = sl.create_schedule(T.op)
    xo, xi = s[T].split(T.op.axis[0], factor=10)
    xi1, xi2 = s[T].split(xi, factor=2)
    order = (xi2, xi1, xo)
    assert tuple(s[T].leaf_iter_vars) != order
    s[T].reorder(*order)
    assert tuple(s[T].leaf_iter_vars) == order
    with pytest.raises(sl.ScheduleError):       # TVM: TVMError on a duplicate IterVar
        s[T].reorder(xi2, xi1, xi2)
    a = np.arange(M, dtype="float32")
    (t,) = build_and_run(s, [A, T], [a], [a[1:]])
    assert_close(t, a[1:])


def test_split():
    A, T, s = _copy((M,))
    xo, xi = s[T].split(T.op.axis[0], factor=10)
    assert tuple(s[T].leaf_iter_vars) == (xo, xi)


def test_tile():
    A, T, s = _copy((M, N))
    xo, yo, xi, yi = s[T].tile(T.op.axis[0], T.op.axis[1], x_factor=10, y_factor=5)
    assert tuple(s[T].leaf_iter_vars) == (xo, yo, xi, yi)


def test_fuse():
    A, T, s = _copy((M, N))
    xo, yo, xi, yi = s[T].tile(T.op.axis[0], T.op.axis[1], x_factor=10, y_factor=5)
    fused = s[T].fuse(xo, yo)
    assert any(type(r).__name__ == "FuseRel" for r in s[T].relations)
    assert tuple(s[T].leaf_iter_vars) == (fused, xi, yi)


def test_fuse_with_split():
    A, T, s = _copy((M, N))
    y = T.op.axis[1]
    xo, xi = s[T].split(T.op.axis[0], factor=10)
    fused = s[T].fuse(xi, y)
    assert tuple(s[T].leaf_iter_vars) == (xo, fused)
    a = np.random.default_rng(2).random((M, N), "float32")
    (t,) = build_and_run(s, [A, T], [a], [a])
    assert_close(t, a)


def test_fuse_with_out_of_order_axis():
    A, T, s = _copy((M, N))
    y = T.op.axis[1]
    xo, xi = s[T].split(T.op.axis[0], factor=10)
    with pytest.raises(sl.ScheduleError):        # TVM: RuntimeError
        s[T].fuse(xo, y)


def test_fuse_with_out_of_order_axis_with_reorder():
    A, T, s = _copy((M, N))
    y = T.op.axis[1]
    xo, xi = s[T].split(T.op.axis[0], factor=10)
    s[T].reorder(y, xo, xi)
    s[T].fuse(y, xo)                             # should be ok
    s = sl.create_schedule(T.op)
    y = T.op.axis[1]
    xo, xi = s[T].split(T.op.axis[0], factor=10)
    s[T].reorder(y, xo, xi)
    with pytest.raises(sl.ScheduleError):
        s[T].fuse(y, xi)


def test_singleton():
    A = sl.placeholder((1,), name="A")           # TVM: a 0-d placeholder (A() + 1)
    T = sl.compute((1,), lambda i: A[i] + 1, name="T")
    s = sl.create_schedule(T.op)
    fused = s[T].fuse()
    assert any(type(r).__name__ == "SingletonRel" for r in s[T].relations)
    assert s[T].leaf_iter_vars[0] is fused
    loaded = sl.create_schedule(T.op).apply_json(s.to_json())
    assert sl.lower(loaded, [A, T]) == sl.lower(s, [A, T])
    a = np.array([2.5], "float32")
    (t,) = build_and_run(s, [A, T], [a], [a])
    assert_close(t, a + 1)


def test_vectorize():
    A, T, s = _copy((M, N))
    xo, yo, xi, yi = s[T].tile(T.op.axis[0], T.op.axis[1], x_factor=10, y_factor=5)
    s[T].vectorize(yi)
    s[T].unroll(xi)
    assert s[T].annotations[xi].kind == "unroll"
    assert s[T].annotations[yi].kind == "vectorize"
    a = np.random.default_rng(3).random((M, N), "float32")
    (t,) = build_and_run(s, [A, T], [a], [a])
    assert_close(t, a)


def test_vectorize_commreduce():
    V = sl.placeholder((128,), name="V")
    ax = sl.reduce_axis((0, 128), name="ax")
    O = sl.compute((1,), lambda _: sl.sum(V[ax], axis=[ax]), name="O")
    s = sl.create_schedule(O.op)
    with pytest.raises(sl.ScheduleError):
        s[O].vectorize(ax)


def test_pragma():
    m = 100
    A = sl.placeholder((m,), name="A")
    T = sl.compute((m,), lambda i: A[i], name="T")
    s = sl.create_schedule(T.op)
    xo, xi = s[T].split(T.op.axis[0], factor=10)
    s[T].pragma(xo, "pragma1")
    s[T].pragma(xi, "vectorize")
    assert s[T].pragmas[xo][0][0] == "pragma1"
    assert s[T].annotations[xi].kind == "vectorize"
    a = np.random.default_rng(4).random(m, "float32")
    (t,) = build_and_run(s, [A, T], [a], [a])
    assert_close(t, a)


def test_rfactor():
    n = 12
    k1 = sl.reduce_axis((0, n), name="k1")
    k2 = sl.reduce_axis((0, n), name="k2")
    A = sl.placeholder((n, n, n), name="A")
    B = sl.compute((n,), lambda i: sl.sum(A[i, k1, k2], axis=[k1, k2]), name="B")
    a = np.random.default_rng(5).random((n, n, n), "float32")
    want = a.sum(axis=(1, 2))
    # normal schedule
    s = sl.create_schedule(B.op)
    BF = s.rfactor(B, k1)
    assert tuple(BF.shape) == (n, n)
    assert [x.name for x in BF.op.body.axis] == ["k2"]
    assert s[B].op.body.axis[0].dom.extent == n
    assert len(s[B].all_iter_vars) == 2
    (b,) = build_and_run(s, [A, B], [a], [want])
    assert_close(b, want)
    # schedule with split (of the reduction and of the data-parallel axis)
    s = sl.create_schedule(B.op)
    ko, ki = s[B].split(k1, factor=4)
    xo, xi = s[B].split(B.op.axis[0], factor=8)
    with pytest.warns(UserWarning):                # the data-parallel split is discarded, as in TVM
        BF = s.rfactor(B, ki)
    assert BF.shape[0] == 4 and BF.shape[1] == n
    assert [x.name for x in BF.op.body.axis] == ["k1.outer", "k2"]   # TVM: (k2, ko); order differs
    assert s[B].op.body.axis[0].dom.extent == 4
    (b,) = build_and_run(s, [A, B], [a], [want])
    assert_close(b, want)
    # schedule with factor_axis
    s = sl.create_schedule(B.op)
    ko, ki = s[B].split(k1, factor=4)
    with pytest.warns(UserWarning):
        xo, xi = s[B].split(B.op.axis[0], factor=8)
        BF = s.rfactor(B, ki, 1)
    assert BF.shape[0] == n and BF.shape[1] == 4
    assert s[B].op.body.axis[0].dom.extent == 4
    (b,) = build_and_run(s, [A, B], [a], [want])
    assert_close(b, want)


def test_legalize_invalid_attach():
    A = sl.compute((10, 10), lambda i, j: sl.const(1.0), name="A")
    B = sl.compute((10, 10), lambda i, j: A[i, j], name="B")
    # Case 1: split an axis which is the target of a compute_at
    s = sl.create_schedule([B.op])
    s[A].compute_at(s[B], B.op.axis[1])
    s[B].split(B.op.axis[1], 2)
    (b,) = build_and_run(s, [B], [], [np.empty((10, 10), "float32")])
    assert_close(b, np.ones((10, 10)))
    # Case 2: fuse an axis which is the target of a compute_at
    s = sl.create_schedule([B.op])
    s[A].compute_at(s[B], B.op.axis[1])
    s[B].fuse(B.op.axis[0], B.op.axis[1])
    (b,) = build_and_run(s, [B], [], [np.empty((10, 10), "float32")])
    assert_close(b, np.ones((10, 10)))


def test_compute_at():
    def add():
        shape = (16, 16)
        A = sl.compute(shape, lambda *i: sl.const(1.0), name="A")
        B = sl.compute(shape, lambda *i: sl.const(2.0), name="B")
        C = sl.compute(shape, lambda *i: A[i] + B[i], name="C")
        return A, B, C

    A, B, C = add()
    s = sl.create_schedule(C.op)
    with pytest.raises(sl.ScheduleError):       # TVM raises at lower time; here at once
        s[C].compute_at(s[C], C.op.axis[0])
        sl.lower(s, [A, B])
    A, B, C = add()
    s = sl.create_schedule(C.op)
    with pytest.raises(sl.ScheduleError):
        s[A].compute_at(s[C], C.op.axis[0])
        s[C].compute_at(s[A], A.op.axis[0])
        sl.lower(s, [C])


def test_split_disable_predicate_default_guards_the_tail():
    A = sl.placeholder((43,), name="A")
    B = sl.compute(A.shape, lambda i: A[i] + 2, name="C")
    s = sl.create_schedule(B.op)
    s[B].split(s[B].op.axis[0], factor=4)
    assert "if " in sl.lower(s, [A, B])


# ---- the originals with symbolic shapes: need symbolic shapes (issue 5) -------------------
def test_schedule_create_symbolic():
    m, n, l = sl.size_var("m"), sl.size_var("n"), sl.size_var("l")
    A = sl.placeholder((m, l), name="A")
    B = sl.placeholder((n, l), name="B")
    AA = sl.compute((m, l), lambda i, j: A[i, j])
    T = sl.compute((m, n, l), lambda i, j, k: AA[i, k] * B[j, k])
    s = sl.create_schedule(T.op)
    xo, xi = s[T].split(T.op.axis[0], factor=10)
    xi1, xi2 = s[T].split(xi, factor=2)
    s[AA].compute_at(s[T], xi1)
    s[T].reorder(xi2, xi1)
    assert sl.lower(s, [A, B, T])


def test_rfactor_symbolic():
    n = sl.size_var("n")
    k1 = sl.reduce_axis((0, n), name="k1")
    k2 = sl.reduce_axis((0, n), name="k2")
    A = sl.placeholder((n, n, n), name="A")
    B = sl.compute((n,), lambda i: sl.sum(A[i, k1, k2], axis=[k1, k2]))
    s = sl.create_schedule(B.op)
    BF = s.rfactor(B, k1)
    assert tuple(BF.shape) == (n, n)


def test_singleton_zero_dim_call_syntax():
    A = sl.placeholder((), name="A")
    T = sl.compute((), lambda: A() + 1)
    s = sl.create_schedule(T.op)
    fused = s[T].fuse()
    assert tuple(s[T].leaf_iter_vars) == (fused,)
