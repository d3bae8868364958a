# Ported from apache/tvm tests/python/te/test_te_schedule_ops.py: `from tvm import te` became
# `import schedlang as sl`, and each program, which TVM only lowers (InferBound + ScheduleOps), is
# built and run against numpy here (s.normalize() returns the schedule itself). Left out: the
# tensor-compute cases (tensor intrinsics that call packed functions TVM's test never defines) and
# AutoInlineElemWise (no counterpart).
import numpy as np
import pytest

import schedlang as sl
from tests.tvm_ports.check import assert_close, build_and_run


def test_inline_multi_reduce():
    """An argmax comm_reducer over an inlined stage, symbolic shapes."""
    def argmax_comp(x, y):
        return sl.select(x[1] >= y[1], x[0], y[0]), sl.select(x[1] >= y[1], x[1], y[1])

    argmax = sl.comm_reducer(argmax_comp, lambda it, vt: (sl.const(-1, it), sl.min_value(vt)), name="argmax")
    m, n = sl.var("m"), sl.var("n")
    val = sl.placeholder((m, n), name="val", dtype="float32")
    val1 = sl.compute((m, n), lambda i, j: val[i, j] + 1, name="val1")
    val2 = sl.compute((m, n), lambda i, j: sl.exp(val1[i, j]), name="val2")
    k = sl.reduce_axis((0, n), "k")
    T_idx, T_val = sl.compute((m,), lambda i: argmax((k.var, val2[i, k]), axis=k), name="T")
    s = sl.create_schedule(T_idx.op)
    s[val1].compute_inline()
    s = s.normalize()
    a = np.random.rand(5, 7).astype("float32")
    idx, v = build_and_run(s, [val, T_idx, T_val], [a], [np.zeros(5, "int32"), np.zeros(5, "float32")])
    assert_close(idx, a.argmax(1))
    assert_close(v, np.exp(a + 1).max(1))


def test_inline_mixed():
    n = sl.var("n")
    A = sl.placeholder((n,), name="A")
    A1 = sl.compute(A.shape, lambda *i: A(*i) + 1, name="A1")
    A2 = sl.compute(A.shape, lambda *i: A1(*i) + 2, name="A2")
    C = sl.compute((n,), lambda i: A2[i] + A1[i], name="C")
    s = sl.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=8)
    s[A1].compute_at(s[C], xo)
    s[A2].compute_inline()
    assert s.normalize() is s          # TVM rebases loops here; lowering does not need it
    assert "A2" not in str(sl.lower(s, [A, C]))
    a = np.random.rand(13).astype("float32")
    (c,) = build_and_run(s, [A, C], [a], [np.zeros(13, "float32")])
    assert_close(c, (a + 3) + (a + 1))


def _two_state_scan(inline_both: bool):
    """TVM's test_scan_inline1 (inline_both False) and test_scan_inline2: two states, a
    symbolic number of steps."""
    m, n = sl.var("m"), sl.var("n")
    x = sl.compute((m, n), lambda i, j: sl.const(1, "float32"), name="x")
    state1, state2 = sl.placeholder((m, n)), sl.placeholder((m, n))
    init1 = sl.compute((1, n), lambda _, i: x[0, i])
    init2 = sl.compute((1, n), lambda _, i: x[0, i])
    if inline_both:
        xx = sl.compute((m, n), lambda t, i: state1[t - 1, i] + x[t, i], name="xx")
        x1 = sl.compute((m, n), lambda t, i: xx[t, i] + 1, name="x1")
        x2 = sl.compute((m, n), lambda t, i: xx[t, i] + state2[t - 1, 2], name="x2")
    else:
        x1 = sl.compute((m, n), lambda t, i: state1[t - 1, i] + x[t, i], name="x1")
        x2 = sl.compute((m, n), lambda t, i: state2[t - 1, i] + 1, name="x2")
    update1 = sl.compute((m, n), lambda t, i: x1[t, i], "u1")
    update2 = sl.compute((m, n), lambda t, i: x2[t, i], "u2")
    res1, res2 = sl.scan([init1, init2], [update1, update2], [state1, state2])
    s = sl.create_schedule(res1.op)
    for stage in ([xx, x1, x2] if inline_both else [x1]):
        s[stage].compute_inline()
    return s, [x, res1, res2]


@pytest.mark.parametrize("inline_both", [False, True], ids=["scan_inline1", "scan_inline2"])
@pytest.mark.parametrize("steps", [6, 1])
def test_scan_inline(inline_both, steps):
    """steps = 1: nothing is left to scan at run time (the length is symbolic), only the init."""
    s, args = _two_state_scan(inline_both)
    n = 5
    r1, r2 = build_and_run(s, args, [np.zeros((steps, n), "float32")],
                           [np.zeros((steps, n), "float32"), np.zeros((steps, n), "float32")])
    e1, e2 = np.ones((steps, n)), np.ones((steps, n))
    for t in range(1, steps):
        if inline_both:
            xx = e1[t - 1] + 1
            e1[t], e2[t] = xx + 1, xx + e2[t - 1, 2]
        else:
            e1[t], e2[t] = e1[t - 1] + 1, e2[t - 1] + 1
    assert_close(r1, e1)
    assert_close(r2, e2)


def test_a_constant_scan_of_no_steps_is_an_error():
    x = sl.placeholder((1, 4), name="x")
    state = sl.placeholder((1, 4))
    init = sl.compute((1, 4), lambda _, i: x[0, i])
    with pytest.raises(ValueError, match="nothing is left to scan"):
        sl.scan(init, sl.compute((1, 4), lambda t, i: state[t - 1, i] + 1), state)


def _mul(m, n):
    A, B = sl.placeholder((m * 4, n), name="A"), sl.placeholder((m * 4, n), name="B")
    return A, B, sl.compute(A.shape, lambda i, j: A(i, j) * B(i, j), name="C")


@pytest.mark.parametrize("case", ["cache", "middle_cache", "relayout1", "relayout2", "relayout3", "relayout4"])
def test_schedule_cache(case):
    """test_schedule_cache, test_schedule_middle_cache and test_schedule_cache_relayout1-4."""
    m, n = sl.var("m"), sl.var("n")
    a, b = np.random.rand(8, 6).astype("float32"), np.random.rand(8, 6).astype("float32")
    A, B, C = _mul(m, n)
    want = [a * b]
    if case == "cache":
        s = sl.create_schedule(C.op)
        AA = s.cache_read(A, "shared", readers=[C])
        CC = s.cache_write(C, "shared")
        s[AA].compute_at(s[CC], CC.op.axis[0])
        args = [A, B, C]
    elif case == "middle_cache":
        D = sl.compute(C.shape, lambda i, j: C(i, j), name="D")
        s = sl.create_schedule(D.op)
        s.cache_read(A, "local", readers=[C])
        s.cache_read(B, "local", readers=[C])
        s.cache_read(C, "local", readers=[D])
        s.cache_write(D, "local")
        args = [A, B, D]
    elif case == "relayout1":
        s = sl.create_schedule(C.op)
        s[C].reorder(C.op.axis[1], C.op.axis[0])
        s.cache_write(C, "global")
        args = [A, B, C]
    elif case == "relayout2":
        s = sl.create_schedule(C.op)
        xo, xi = s[C].split(C.op.axis[0], factor=4)
        s[C].reorder(xo, C.op.axis[1], xi)
        s.cache_write(C, "global")
        args = [A, B, C]
    elif case == "relayout3":
        k = sl.reduce_axis((0, n), "k")
        C = sl.compute((A.shape[0],), lambda i: sl.sum(A(i, k) * B(i, k), axis=k), name="C")
        s = sl.create_schedule(C.op)
        s[C].split(C.op.axis[0], factor=4)
        s.cache_write(C, "global")
        args, want = [A, B, C], [(a * b).sum(1)]
    else:
        C1, C2 = sl.compute(A.shape, lambda *i: (A(*i) + 1, B(*i) / 2), name="C")
        s = sl.create_schedule([C1.op, C2.op])
        s.cache_write([C1, C2], "local")
        args, want = [A, B, C1, C2], [a + 1, b / 2]
    s = s.normalize()
    outs = build_and_run(s, args, [a, b], [np.zeros(w.shape, "float32") for w in want])
    for got, w in zip(outs, want):
        assert_close(got, w)


@pytest.mark.parametrize("cache_write", [False, True], ids=["loop_dep_reduce", "loop_dep_reduce_cache_write"])
def test_loop_dep_reduce(cache_write):
    """A reduction whose extent is the compute's own axis; with cache_write, a custom reducer
    named "sum" whose combiner and identity read that axis too (the cache stage renames it)."""
    X = sl.placeholder(shape=(10,), name="x")

    def f(n):
        rv = sl.reduce_axis((0, n))
        if not cache_write:
            return sl.sum(X[rv], axis=rv)
        init = lambda dtype: sl.select(n > 1, sl.const(0, dtype), n.astype(dtype))
        total = sl.comm_reducer(lambda x, y: sl.max(x + y, n.astype("float32")), init, name="sum")
        return total(X[rv], axis=rv)
    Y = sl.compute(X.shape, f, name="y")
    s = sl.create_schedule([Y.op])
    if cache_write:
        s.cache_write(Y, "local")
    x = np.random.rand(10).astype("float32") - 0.5
    (y,) = build_and_run(s, [X, Y], [x], [np.zeros(10, "float32")])
    want = []
    for n in range(10):
        if cache_write:
            acc = 0.0 if n > 1 else float(n)
            for r in range(n):
                acc = max(acc + x[r], float(n))
        else:
            acc = x[:n].sum()
        want.append(acc)
    assert_close(y, np.array(want, "float32"))


def test_reduction_and_dummy_fuse_split():
    n = 10
    X = sl.placeholder(shape=(n,), dtype="int32", name="X")
    k = sl.reduce_axis((0, n))
    Y = sl.compute((), lambda: sl.sum(X[k], k), name="Y")
    s = sl.create_schedule([Y.op])
    ax = s[Y.op].fuse(*Y.op.axis)
    s[Y.op].split(ax, nparts=20)
    x = np.arange(n, dtype="int32")
    (y,) = build_and_run(s, [X, Y], [x], [np.zeros((), "int32")])
    assert int(y) == x.sum()
