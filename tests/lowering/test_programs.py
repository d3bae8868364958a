"""Hand-written schedules of real programs, checked against the reference evaluator
and against numpy/torch."""
import numpy as np
import pytest

import schedlang as sl
from tests.helpers import assert_matches_reference, run
from schedlang.topi import cpu
from tests import programs


def test_gemm_all_primitives_together():
    A, B, C = programs.gemm(64, 96, 80)
    s = cpu.schedule_matmul_cached(sl.create_schedule(C.op), C, (16, 32), k_factor=8, vectorize_tile=True)
    feed, outputs, _ = run(s, [A, B, C])
    np.testing.assert_allclose(outputs[0][1], feed[A] @ feed[B], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("size", [64, 128])
def test_tvm_cpu_gemm_tutorial_schedule(size):
    A, B, packed, C = programs.packed_gemm(size, size, size, bn=32)
    s = cpu.schedule_matmul_packed(sl.create_schedule(C.op), C)
    feed, outputs, mod = run(s, [A, B, C])
    np.testing.assert_allclose(outputs[0][1], feed[A] @ feed[B], rtol=1e-4, atol=1e-3)
    assert "workers" in mod.ir["kernel"]          # parallel became CPU workers
    assert "ramp(" in mod.ir["kernel"]            # vectorize became vector accesses
    assert "<8 x float>" in mod.get_source() or "<16 x float>" in mod.get_source() or "<32 x float>" in mod.get_source()


def test_gemm_tail_tiles_non_divisible():
    A, B, C = programs.gemm(33, 47, 29)
    s = sl.create_schedule(C.op)
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], 8, 16)
    ko, ki = s[C].split(C.op.reduce_axis[0], factor=7)
    s[C].reorder(io, jo, ko, ii, ki, ji)
    s[C].vectorize(ji)
    s[C].parallel(io)
    assert_matches_reference(s, [A, B, C])


@pytest.mark.parametrize("variant", ["inline", "compute_at_row", "compute_at_outer_split", "root"])
def test_conv2d_with_padding(variant):
    X, Wt, padded, out = programs.conv2d(1, 3, 9, 11, 5, 3)
    s = sl.create_schedule(out.op)
    n, f, h, w = out.op.axis
    if variant == "inline":
        s[padded].compute_inline()
        wo, wi = s[out].split(w, factor=4)
        s[out].vectorize(wi)
    elif variant == "compute_at_row":
        s[padded].compute_at(s[out], h)
        s[out].parallel(f)
        wo, wi = s[out].split(w, factor=4)
        s[out].vectorize(wi)
    elif variant == "compute_at_outer_split":
        ho, hi = s[out].split(h, factor=4)
        s[padded].compute_at(s[out], ho)
        rc, rh, rw = s[out].op.reduce_axis
        s[out].reorder(n, f, ho, rc, rh, rw, hi, w)
        s[out].vectorize(w)
    feed, outputs, _ = run(s, [X, Wt, out])
    torch = pytest.importorskip("torch")
    want = torch.nn.functional.conv2d(torch.from_numpy(feed[X]), torch.from_numpy(feed[Wt]), padding=1).numpy()
    np.testing.assert_allclose(outputs[0][1], want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("N,M,factor", [(7, 1000, 16), (1, 1, 8), (4, 1023, 32)])
def test_softmax_stages_with_inlining(N, M, factor):
    X, mx, ex, total, out = programs.softmax(N, M)
    s = sl.create_schedule(out.op)
    s[ex].compute_inline()
    s[mx].compute_at(s[out], out.op.axis[0])
    s[total].compute_at(s[out], out.op.axis[0])
    jo, ji = s[out].split(out.op.axis[1], factor=factor)
    s[out].vectorize(ji)
    s[out].parallel(out.op.axis[0])
    feed, outputs, _ = run(s, [X, out])
    x = feed[X].astype("float64")
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(outputs[0][1], e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("M,factor,attach", [(1000, 16, True), (37, 8, False), (1, 4, True)])
def test_row_reduction_rfactor(M, factor, attach):
    A, B = programs.row_sum(5, M)
    s = sl.create_schedule(B.op)
    ko, ki = s[B].split(B.op.reduce_axis[0], factor=factor)
    BF = s.rfactor(B, ki)
    if attach:
        s[BF].compute_at(s[B], s[B].op.axis[0])
    feed, outputs, _ = run(s, [A, B])
    np.testing.assert_allclose(outputs[0][1], feed[A].sum(axis=1), rtol=1e-5, atol=1e-4)


def test_rfactor_vectorized_partials():
    A, B = programs.row_sum(6, 1003)
    s = sl.create_schedule(B.op)
    ko, ki = s[B].split(B.op.reduce_axis[0], factor=8)
    BF = s.rfactor(B, ki, factor_axis=1)
    i, kv = s[BF].op.axis
    (kr,) = s[BF].op.reduce_axis
    s[BF].reorder(i, kr, kv)
    s[BF].vectorize(kv)
    s[B].parallel(s[B].op.axis[0])
    assert "ramp(" in sl.lower(s, [A, B], level="kernel")
    assert_matches_reference(s, [A, B])


@pytest.mark.parametrize("shape,tile", [((37, 53), 8), ((64, 64), 16), ((1, 7), 4)])
def test_transpose(shape, tile):
    A = sl.placeholder(shape, name="A")
    T = sl.compute(shape[::-1], lambda i, j: A[j, i], name="T")
    s = sl.create_schedule(T.op)
    io, jo, ii, ji = s[T].tile(T.op.axis[0], T.op.axis[1], tile, tile)
    s[T].vectorize(ji)
    s[T].parallel(io)
    feed, outputs, _ = run(s, [A, T])
    np.testing.assert_array_equal(outputs[0][1], feed[A].T)


def test_transpose_through_cache_read():
    A = sl.placeholder((40, 24), name="A")
    T = sl.compute((24, 40), lambda i, j: A[j, i] * 2.0, name="T")
    s = sl.create_schedule(T.op)
    AA = s.cache_read(A, "local", [T])
    io, jo, ii, ji = s[T].tile(T.op.axis[0], T.op.axis[1], 8, 8)
    s[AA].compute_at(s[T], jo)
    s[T].vectorize(ji)
    assert_matches_reference(s, [A, T])


@pytest.mark.parametrize("n", [1, 7, 1000, 1023])
@pytest.mark.parametrize("factor", [3, 8, 64])
def test_odd_shapes_vector_tails(n, factor):
    A = sl.placeholder((3, n), name="A")
    B = sl.compute((3, n), lambda i, j: sl.exp(A[i, j]) * 0.5 + A[i, j], name="B")
    s = sl.create_schedule(B.op)
    jo, ji = s[B].split(B.op.axis[1], factor=factor)
    s[B].vectorize(ji)
    s[B].parallel(B.op.axis[0])
    assert_matches_reference(s, [A, B])


def test_silu_and_mul():
    x, out = programs.silu_and_mul(13, 2 * 1003)
    s = sl.create_schedule(out.op)
    jo, ji = s[out].split(out.op.axis[1], factor=16)
    s[out].vectorize(ji)
    s[out].parallel(out.op.axis[0])
    feed, outputs, _ = run(s, [x, out])
    a = feed[x].astype("float64")
    want = a[:, :1003] / (1 + np.exp(-a[:, :1003])) * a[:, 1003:]
    np.testing.assert_allclose(outputs[0][1], want, rtol=1e-5, atol=1e-6)
