"""Kernels with a scalar result: a reduction of several values (argmax) that no thread
axis can split runs on one thread; isnan/isinf/isfinite in CUDA C. Run on the CPU by both
emulation engines against the Tensor IR reference."""
import numpy as np
import pytest

import schedlang as sl
from tests.helpers import assert_close

pytest.importorskip("cuda.bindings")


def _argmax_reducer():
    def combine(a, b):
        take = a[0] >= b[0]
        return sl.select(take, a[0], b[0]), sl.select(take, a[1], b[1])
    return sl.comm_reducer(combine, lambda t0, t1: (sl.min_value(t0), sl.const(0, t1)), name="argmax")


def test_scalar_argmax_runs_on_one_thread():
    X = sl.placeholder((37,), name="X")
    k = sl.reduce_axis((0, 37), name="k")
    V, I = sl.compute((), lambda: _argmax_reducer()((X[k], k), axis=k), name="A")
    s = sl.create_schedule(V.op)
    mod = sl.build(s, [X, V, I], target="cuda")          # nothing bound: one thread writes one element
    assert "__global__" in mod.get_source()
    x = np.random.default_rng(0).standard_normal(37).astype("float32")
    for engine in ("shim", "simt"):
        v, i = np.zeros((), "float32"), np.zeros((), "int32")
        mod.emulate(x, v, i, engine=engine)
        assert int(i) == int(np.argmax(x)) and float(v) == float(x.max()), engine


def test_a_vector_result_still_needs_a_bound_loop():
    X = sl.placeholder((2, 37), name="X")
    k = sl.reduce_axis((0, 37), name="k")
    Y = sl.compute((2,), lambda i: sl.sum(X[i, k], axis=k), name="Y")
    with pytest.raises(sl.ScheduleError, match="no loop bound to a GPU axis"):
        sl.build(sl.create_schedule(Y.op), [X, Y], target="cuda")


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_float_classes(dtype):
    A = sl.placeholder((8,), dtype, name="A")
    B = sl.compute((8,), lambda i: sl.isnan(A[i]).astype("int32") + 2 * sl.isinf(A[i]).astype("int32")
                   + 4 * sl.isfinite(A[i]).astype("int32"), name="B")
    s = sl.create_schedule(B.op)
    s[B].bind(s[B].op.axis[0], sl.thread_axis("threadIdx.x"))
    mod = sl.build(s, [A, B], target="cuda")
    a = np.array([0.0, -1.5, np.inf, -np.inf, np.nan, 3e4, -0.0, 1.0], dtype)
    want = sl.reference([B], {A: a})[0]
    np.testing.assert_array_equal(want, np.isnan(a) + 2 * np.isinf(a) + 4 * np.isfinite(a))
    for engine in ("shim", "simt"):
        b = np.full(8, 9, "int32")
        mod.emulate(a, b, engine=engine)
        assert_close(b, want, "int32", name=engine)
