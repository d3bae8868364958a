"""Multi-output compute and tuple reductions: one op, one stage, one loop nest storing
every output; schedules, builds and the reference evaluator agree."""
import numpy as np
import pytest

import schedlang as sl
from tests import programs
from tests.helpers import assert_matches_reference, run


def _argmax_program(m=10, n=37):
    idx, val, T0, T1 = programs.arg_reduce(m, n)
    return idx, val, T0.op.reduce_axis[0], T0, T1


def _check_argmax(s, idx, val, T0, T1, m, n):
    f = sl.build(s, [idx, val, T0, T1])
    np_idx = np.repeat(np.arange(n, dtype="int32").reshape(1, n), m, axis=0)
    np_val = np.random.default_rng(1).uniform(size=(m, n)).astype("float32")
    res0, res1 = np.zeros(m, "int32"), np.zeros(m, "float32")
    f(np_idx, np_val, res0, res1)
    np.testing.assert_array_equal(res0, np.argmax(np_val, axis=1))
    np.testing.assert_array_equal(res1, np.max(np_val, axis=1))
    ref0, ref1 = sl.reference([T0, T1], {idx: np_idx, val: np_val})
    np.testing.assert_array_equal(ref0, res0)
    np.testing.assert_array_equal(ref1, res1)


def test_outputs_share_one_op_and_stage():
    A0 = sl.placeholder((6, 5), name="A0")
    A1 = sl.placeholder((6, 5), name="A1")
    T0, T1 = sl.compute((6, 5), lambda i, j: (A0[i, j] * 2, A1[i, j] * 3), name="T")
    assert T0.op is T1.op and T0.op == T1.op
    assert (T0.value_index, T1.value_index) == (0, 1)
    assert T0.op.num_outputs == 2 and T0.op.output(1) == T1
    assert (T0.name, T1.name) == ("T.v0", "T.v1")
    assert tuple(T0.shape) == tuple(T1.shape)
    s = sl.create_schedule(T0.op)
    assert s[T0] is s[T1] is s[T0.op]
    text = sl.lower(s, [A0, A1, T0, T1], level="tensor")
    assert "T.v0[i, j], T.v1[i, j] = (A0[i, j] * 2.0, A1[i, j] * 3.0)" in text
    with pytest.raises(IndexError, match="2 output"):
        T0.op.output(2)


def test_batchwise_outputs_stored_in_one_nest_under_a_schedule():
    A0 = sl.placeholder((9, 21), name="A0")
    A1 = sl.placeholder((9, 21), name="A1", dtype="int32")
    B0, B1 = sl.compute((9, 21), lambda i, j: (A0[i, j] + 2, A1[i, j] * 3), name="B")
    s = sl.create_schedule(B0.op)
    i, j = s[B0].op.axis
    jo, ji = s[B0].split(j, factor=8)
    s[B0].vectorize(ji)
    s[B1].parallel(i)
    text = sl.lower(s, [A0, A1, B0, B1])
    assert text.count("parallel") == 1 and "B.v0[" in text and "B.v1[" in text
    assert_matches_reference(s, [A0, A1, B0, B1])


def test_one_output_as_argument_the_other_is_a_temporary():
    A0 = sl.placeholder((7,), name="A0")
    T0, T1 = sl.compute((7,), lambda i: (A0[i] * 2, A0[i] * 3), name="T")
    s = sl.create_schedule(T0.op)
    text = sl.lower(s, [A0, T0])
    assert "alloc T.v1" in text
    assert_matches_reference(s, [A0, T0])


def test_argmax_builds_and_matches_numpy():
    m, n = 12, 16
    idx, val, k, T0, T1 = _argmax_program(m, n)
    s = sl.create_schedule(T0.op)
    text = sl.lower(s, [idx, val, T0, T1], level="tensor")
    assert "argmax((x0, x1), (y0, y1))" in text
    assert "T.v0[i], T.v1[i] = argmax((idx[i, k], val[i, k]), axis=k)" in text
    _check_argmax(s, idx, val, T0, T1, m, n)


def test_argmax_scheduled_split_reorder_unroll_vectorize_parallel():
    m, n = 10, 37
    idx, val, k, T0, T1 = _argmax_program(m, n)
    s = sl.create_schedule(T0.op)
    ko, ki = s[T0].split(k, factor=4)
    io, ii = s[T1].split(s[T1].op.axis[0], factor=4)
    s[T0].reorder(io, ko, ki, ii)
    s[T0].unroll(ki)
    s[T0].vectorize(ii)
    s[T0].parallel(io)
    kernel = sl.lower(s, [idx, val, T0, T1], level="kernel")
    assert "i32x4 T.v0.new = select(" in kernel   # both values of 4 rows updated as vectors
    _check_argmax(s, idx, val, T0, T1, m, n)

def test_argmin_cache_write_of_both_outputs():
    m, n = 9, 13
    idx, val, T0, T1 = programs.arg_reduce(m, n, "float64", kind="argmin")
    s = sl.create_schedule(T0.op)
    L0, L1 = s.cache_write([T0, T1], "local")
    assert L0.op is L1.op and L0.name == "T.local.v0"
    io, ii = s[T0].split(T0.op.axis[0], factor=4)
    s[L0].compute_at(s[T0], io)
    np_idx = np.repeat(np.arange(n, dtype="int32").reshape(1, n), m, axis=0)
    np_val = np.random.default_rng(2).uniform(size=(m, n))
    res0, res1 = np.zeros(m, "int32"), np.zeros(m, "float64")
    sl.build(s, [idx, val, T0, T1])(np_idx, np_val, res0, res1)
    np.testing.assert_array_equal(res0, np.argmin(np_val, axis=1))
    np.testing.assert_array_equal(res1, np.min(np_val, axis=1))
    # the schedule replays from its printed steps
    s2 = sl.create_schedule(T0.op).apply_json(s.to_json())
    assert sl.lower(s2, [idx, val, T0, T1]) == sl.lower(s, [idx, val, T0, T1])


def test_cache_write_of_one_output_of_several_is_refused():
    _, _, _, T0, T1 = _argmax_program()
    s = sl.create_schedule(T0.op)
    with pytest.raises(sl.ScheduleError, match=r"pass the list of all of them"):
        s.cache_write(T0, "local")
    with pytest.raises(sl.ScheduleError, match=r"outputs \[1\] of 2"):
        s.cache_write([T1], "local")


def test_max_init_and_where():
    A = sl.placeholder((5, 8), name="A")
    k = sl.reduce_axis((0, 8), "k")
    B = sl.compute((5,), lambda i: sl.max(A[i, k], axis=k, where=k < 3, init=sl.const(0.5)), name="B")
    s = sl.create_schedule(B.op)
    feed, outs, _ = run(s, [A, B])
    np.testing.assert_allclose(outs[0][1], np.maximum(0.5, feed[A][:, :3].max(axis=1)))


def test_bad_multi_output_computes_are_named():
    A = sl.placeholder((4, 5), name="A")
    k = sl.reduce_axis((0, 5), "k")
    with pytest.raises(ValueError, match="some outputs are reductions"):
        sl.compute((4,), lambda i: (sl.sum(A[i, k], axis=k), A[i, 0]), name="bad")
    argmax = programs.arg_reducer()
    with pytest.raises(ValueError, match="return its values in order"):
        sl.compute((4,), lambda i: tuple(reversed(argmax((k, A[i, k]), axis=k))), name="bad")
    with pytest.raises(ValueError, match="gives 2 values"):
        sl.compute((4,), lambda i: argmax((k, A[i, k]), axis=k)[:1], name="bad")
    with pytest.raises(ValueError, match="uses the reduction axis"):
        sl.compute((4,), lambda i: sl.sum(A[i, k], axis=k, init=A[i, k]), name="bad")
    with pytest.raises(TypeError, match="one value per source"):
        bad = sl.comm_reducer(lambda x, y: x[0] + y[0], lambda t0, t1: (0, 0), name="bad")
        bad((A[0, k], A[1, k]), axis=k)


def test_inline_and_cache_read_of_one_output():
    A0 = sl.placeholder((9, 21), name="A0")
    B0, B1 = sl.compute((9, 21), lambda i, j: (A0[i, j] + 2, A0[i, j] * 3), name="B")
    C = sl.compute((9, 21), lambda i, j: B0[i, j] * B1[i, j], name="C")
    s = sl.create_schedule(C.op)
    s[B0].compute_inline()
    assert "C[i, j] = (A0[i, j] + 2.0) * (A0[i, j] * 3.0)" in sl.lower(s, [A0, C])
    assert_matches_reference(s, [A0, C])
    s = sl.create_schedule(C.op)
    BL = s.cache_read(B1, "local", [C])
    assert str(s) == "s.cache_read('B.v1', 'local', ['C'])"
    assert str(s[C].op.body) == f"B.v0[i, j] * {BL.name}[i, j]"
    replayed = sl.create_schedule(C.op).apply_json(s.to_json())
    assert sl.lower(replayed, [A0, B0, B1, C]) == sl.lower(s, [A0, B0, B1, C])
    assert_matches_reference(s, [A0, B0, B1, C])
