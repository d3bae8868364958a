"""TVM's tutorial "Compute and Reduce with Tuple Inputs" (gallery/how_to/work_with_schedules/
tuple_inputs.py), ported by changing the import; sizes are static and each part checks
its numbers against numpy."""
import numpy as np

import schedlang as sl
from tests import programs

te = sl   # the tutorial's `te.` calls, unchanged
M, N = 11, 19


def _rand(shape, dtype="float32", seed=0):
    return np.random.default_rng(seed).uniform(size=shape).astype(dtype)


def test_batchwise_computation():
    m, n = M, N
    A0 = te.placeholder((m, n), name="A0")
    A1 = te.placeholder((m, n), name="A1")
    B0, B1 = te.compute((m, n), lambda i, j: (A0[i, j] + 2, A1[i, j] * 3), name="B")
    s = te.create_schedule(B0.op)
    text = sl.lower(s, [A0, A1, B0, B1])
    assert text.count("for i in") == 1            # one loop nest stores both outputs
    f = sl.build(s, [A0, A1, B0, B1])
    a0, a1 = _rand((m, n)), _rand((m, n), seed=1)
    b0, b1 = np.zeros((m, n), B0.dtype), np.zeros((m, n), B1.dtype)
    f(a0, a1, b0, b1)
    np.testing.assert_allclose(b0, a0 + 2, rtol=1e-6)
    np.testing.assert_allclose(b1, a1 * 3, rtol=1e-6)


def test_reduction_with_collaborative_inputs():
    # The tutorial's argmax comm_reducer (x and y, the operands, are (index, value) tuples;
    # the identity is a tuple too) and its program: tests/programs.arg_reduce, written once.
    m, n = M, N
    idx, val, T0, T1 = programs.arg_reduce(m, n, "int32")
    s = te.create_schedule(T0.op)
    f = sl.build(s, [idx, val, T0, T1])
    np_idx = np.repeat(np.arange(n, dtype="int32")[None, :], m, axis=0)
    np_val = np.random.default_rng(3).permuted(np.tile(np.arange(n, dtype="int32"), (m, 1)), axis=1)
    t0, t1 = np.zeros(m, T0.dtype), np.zeros(m, T1.dtype)
    f(np_idx, np_val, t0, t1)
    np.testing.assert_array_equal(t0, np.argmax(np_val, axis=1))
    np.testing.assert_array_equal(t1, np.max(np_val, axis=1))


def test_schedule_operation_with_tuple_inputs():
    m, n = M, N
    A0 = te.placeholder((m, n), name="A0")
    B0, B1 = te.compute((m, n), lambda i, j: (A0[i, j] + 2, A0[i, j] * 3), name="B")
    A1 = te.placeholder((m, n), name="A1")
    C = te.compute((m, n), lambda i, j: A1[i, j] + B0[i, j], name="C")
    s = te.create_schedule(C.op)
    s[B0].compute_at(s[C], C.op.axis[0])
    text = sl.lower(s, [A0, A1, C])
    # both outputs of B are computed per row of C, in buffers of one row
    assert "alloc B.v0: f32[1, 19]" in text and "alloc B.v1: f32[1, 19]" in text
    f = sl.build(s, [A0, A1, C])
    a0, a1 = _rand((m, n)), _rand((m, n), seed=1)
    c = np.zeros((m, n), C.dtype)
    f(a0, a1, c)
    np.testing.assert_allclose(c, a1 + a0 + 2, rtol=1e-6)
