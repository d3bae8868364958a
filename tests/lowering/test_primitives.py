"""Every schedule primitive alone (and in small combinations) gives the reference's result,
and shows up in the IR level where it should."""
import re

import numpy as np
import pytest

import schedlang as sl
from tests.helpers import assert_matches_reference
from tests import programs


def elementwise(shape=(13, 29)):
    A = sl.placeholder(shape, name="A")
    B = sl.placeholder(shape, name="B")
    C = sl.compute(shape, lambda i, j: A[i, j] * B[i, j] + sl.tanh(A[i, j]), name="C")
    return A, B, C


def test_split_factor():
    A, B, C = elementwise()
    s = sl.create_schedule(C.op)
    jo, ji = s[C].split(C.op.axis[1], factor=8)
    assert (jo.name, ji.name) == ("j.outer", "j.inner")
    tile = sl.lower(s, [A, B, C])
    assert "for j.outer in 0..4:" in tile and "for j.inner in 0..8:" in tile
    assert "j.outer * 8 + j.inner < 29" in tile      # the tail is guarded
    assert_matches_reference(s, [A, B, C])


def test_split_nparts():
    A, B, C = elementwise()
    s = sl.create_schedule(C.op)
    io, ii = s[C].split(C.op.axis[0], nparts=4)
    assert "for i.outer in 0..4:" in sl.lower(s, [A, B, C])
    assert_matches_reference(s, [A, B, C])


def test_split_factor_larger_than_extent():
    A, B, C = elementwise((3, 5))
    s = sl.create_schedule(C.op)
    jo, ji = s[C].split(C.op.axis[1], factor=64)
    s[C].vectorize(ji)
    assert_matches_reference(s, [A, B, C])


def test_tile():
    A, B, C = elementwise()
    s = sl.create_schedule(C.op)
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], 4, 8)
    assert [a.name for a in s[C].leaf_iter_vars] == ["i.outer", "j.outer", "i.inner", "j.inner"]
    assert_matches_reference(s, [A, B, C])


def test_fuse():
    A, B, C = elementwise()
    s = sl.create_schedule(C.op)
    f = s[C].fuse(*C.op.axis)
    assert f.name == "i.j.fused"
    assert "for i.j.fused in 0..377:" in sl.lower(s, [A, B, C])
    assert_matches_reference(s, [A, B, C])


def test_fuse_then_split_and_parallel():
    A, B, C = elementwise()
    s = sl.create_schedule(C.op)
    f = s[C].fuse(*C.op.axis)
    fo, fi = s[C].split(f, factor=16)
    s[C].parallel(fo)
    s[C].vectorize(fi)
    assert_matches_reference(s, [A, B, C])


def test_reorder():
    A, B, C = elementwise()
    s = sl.create_schedule(C.op)
    i, j = C.op.axis
    s[C].reorder(j, i)
    tile = sl.lower(s, [A, B, C])
    assert tile.index("for j in") < tile.index("for i in")
    assert_matches_reference(s, [A, B, C])


def test_unroll_materialised():
    A, B, C = elementwise((4, 6))
    s = sl.create_schedule(C.op)
    s[C].unroll(C.op.axis[1])
    assert "unrolled j in 0..6:" in sl.lower(s, [A, B, C])
    kernel = sl.lower(s, [A, B, C], level="kernel")
    assert "for j" not in kernel and kernel.count("C[") == 6
    assert_matches_reference(s, [A, B, C])


def test_vectorize_is_vector_code():
    A, B, C = elementwise((4, 16))
    s = sl.create_schedule(C.op)
    s[C].vectorize(C.op.axis[1])
    mod = assert_matches_reference(s, [A, B, C])
    assert "ramp(" in mod.ir["kernel"]
    assert "<16 x float>" in mod.get_source()
    assert "@sl.tanh.v16f32" in mod.get_source()     # the polynomial, not libm per lane


def test_parallel_uses_workers():
    A, B, C = elementwise()
    s = sl.create_schedule(C.op)
    s[C].parallel(C.op.axis[0])
    mod = assert_matches_reference(s, [A, B, C])
    assert "workers(i: 13)" in mod.ir["kernel"]
    assert "GOMP_parallel" in mod.get_source() or mod.parallel_runtime is None


def test_parallel_inner_loop():
    A, B, C = elementwise()
    s = sl.create_schedule(C.op)
    s[C].parallel(C.op.axis[1])
    assert_matches_reference(s, [A, B, C])


def test_compute_inline():
    A = sl.placeholder((10, 12), name="A")
    T = sl.compute((10, 12), lambda i, j: A[i, j] + 1.0, name="T")
    U = sl.compute((10, 12), lambda i, j: T[i, j] * T[i, j], name="U")
    s = sl.create_schedule(U.op)
    s[T].compute_inline()
    loop = sl.lower(s, [A, U], level="loop")
    assert "T[" not in loop and "(A[i, j] + 1.0) * (A[i, j] + 1.0)" in loop
    assert_matches_reference(s, [A, U])


def test_compute_at_and_compute_root():
    A = sl.placeholder((10, 12), name="A")
    T = sl.compute((10, 12), lambda i, j: A[i, j] * 3.0, name="T")
    U = sl.compute((10, 12), lambda i, j: T[i, j] + T[i, (j + 1) % 12], name="U")
    s = sl.create_schedule(U.op)
    s[T].compute_at(s[U], U.op.axis[0])
    assert "alloc T: f32[1, 12]" in sl.lower(s, [A, U])
    assert_matches_reference(s, [A, U])
    s[T].compute_root()
    assert "alloc T: f32[10, 12]" in sl.lower(s, [A, U])
    assert_matches_reference(s, [A, U])


def test_compute_at_stencil_region():
    A = sl.placeholder((20,), name="A")
    T = sl.compute((20,), lambda i: A[i] * 2.0, name="T")
    U = sl.compute((18,), lambda i: T[i] + T[i + 1] + T[i + 2], name="U")
    s = sl.create_schedule(U.op)
    io, ii = s[U].split(U.op.axis[0], factor=4)
    s[T].compute_at(s[U], io)
    assert "alloc T: f32[6]" in sl.lower(s, [A, U])     # 4 outputs need 6 inputs
    assert_matches_reference(s, [A, U])


def test_cache_read():
    A, B, C = programs.gemm(16, 24, 8)
    s = sl.create_schedule(C.op)
    AA = s.cache_read(A, "local", [C])
    assert AA.name == "A.local"
    s[AA].compute_at(s[C], C.op.axis[0])
    tile = sl.lower(s, [A, B, C])
    assert "alloc A.local: f32[1, 8] local" in tile
    assert_matches_reference(s, [A, B, C])


def test_cache_write():
    A, B, C = programs.gemm(16, 24, 8)
    s = sl.create_schedule(C.op)
    CL = s.cache_write(C, "local")
    s[CL].compute_at(s[C], C.op.axis[0])
    assert "alloc C.local: f32[1, 24] local" in sl.lower(s, [A, B, C])
    assert_matches_reference(s, [A, B, C])


def test_rfactor_alone():
    A, B = programs.row_sum(3, 50)
    s = sl.create_schedule(B.op)
    ko, ki = s[B].split(B.op.reduce_axis[0], factor=4)
    BF = s.rfactor(B, ki)
    assert BF.name == "B.rf" and BF.shape == (4, 3)
    assert_matches_reference(s, [A, B])


def test_storage_align():
    A = sl.placeholder((8, 10), name="A")
    B = sl.compute((8, 10), lambda i, j: A[i, j] + 1.0, name="B")
    s = sl.create_schedule(B.op)
    AA = s.cache_read(A, "shared", [B])
    s[AA].storage_align(AA.op.axis[0], 16, 4)
    tile = sl.lower(s, [A, B])
    assert "alloc A.shared: f32[8, 10] strides(20, 1) shared" in tile   # 20 = 16 + 4
    assert_matches_reference(s, [A, B])


def test_pragma_auto_unroll():
    A, B, C = elementwise((8, 4))
    s = sl.create_schedule(C.op)
    s[C].pragma(C.op.axis[0], "auto_unroll_max_step", 8)
    assert "pragma auto_unroll_max_step=8" in sl.lower(s, [A, B, C])
    kernel = sl.lower(s, [A, B, C], level="kernel")
    assert "for j" not in kernel          # the inner 4-trip loop was unrolled
    assert_matches_reference(s, [A, B, C])


def test_pragma_unroll_count_is_llvm_loop_metadata():
    """unroll_count leaves the loop whole in schedlang's IR and asks LLVM's unroller for its
    copies (llvm.loop.unroll.count on the loop's latch); a trip count it does not divide
    (13 by 4) keeps a remainder loop; both match the reference."""
    A = sl.placeholder((6, 13), name="A")
    k = sl.reduce_axis((0, 13), name="k")
    B = sl.compute((6,), lambda i: sl.sum(A[i, k] * A[i, k], axis=k), name="B")
    s = sl.create_schedule(B.op)
    s[B].pragma(k, "unroll_count", 4)
    assert "for k in 0..13:" in sl.lower(s, [A, B], level="kernel")
    mod = assert_matches_reference(s, [A, B])
    ll = mod.get_source("ll")
    assert re.search(r"br i1 %\S+, label %\S+, label %\S+, !llvm.loop !(\d+)", ll), ll
    assert '!{!"llvm.loop.unroll.count", i32 4}' in ll


def test_prefetch_emits_a_prefetch_per_cache_line_ahead():
    """prefetch(B, k, 16) on a k loop reading a 32-float row of B (two cache lines) and a
    scalar of A: two prefetches of B's row 16 steps ahead at the top of each k step (A's read
    is not asked for); none past the loop's own reads changes a result, the last 16 steps
    included, whose prefetches fall past B."""
    A, B, C = programs.gemm(5, 32, 20)
    s = sl.create_schedule(C.op)
    i, j = s[C].op.axis
    (k,) = s[C].op.reduce_axis
    s[C].reorder(i, k, j)
    s[C].vectorize(j)
    s[C].prefetch(B, k, 16)
    assert "for k in 0..20:  # prefetch: B +16" in sl.lower(s, [A, B, C], level="kernel")
    mod = assert_matches_reference(s, [A, B, C])
    ll = mod.get_source("ll")
    body = ll[ll.index("k.loop"):]
    calls = re.findall(r"call void @llvm.prefetch.p0\(ptr (%\S+), i32 0, i32 3, i32 1\)", body)
    assert len(calls) == 2, ll
    asm = mod.get_source("asm")
    assert asm.count("prefetcht0") == 2, asm


def test_prefetch_of_reads_inside_a_nested_loop_is_skipped():
    """A read whose index uses a loop inside the prefetched one has no address at the top of
    its body: nothing is prefetched, and the result is unchanged."""
    A = sl.placeholder((8, 12), name="A")
    k = sl.reduce_axis((0, 12), name="k")
    B = sl.compute((8,), lambda i: sl.sum(A[i, k], axis=k), name="B")
    s = sl.create_schedule(B.op)
    s[B].prefetch(A, B.op.axis[0], 2)
    mod = assert_matches_reference(s, [A, B])
    assert "llvm.prefetch" not in mod.get_source("ll")


def test_multiple_outputs_and_intermediate_argument():
    A = sl.placeholder((6, 7), name="A")
    T = sl.compute((6, 7), lambda i, j: A[i, j] * 2.0, name="T")
    U = sl.compute((6, 7), lambda i, j: T[i, j] + 1.0, name="U")
    s = sl.create_schedule([T.op, U.op])
    s[U].vectorize(U.op.axis[1])
    assert_matches_reference(s, [A, T, U])


def test_reduction_with_where_condition():
    A = sl.placeholder((9, 11), name="A")
    k = sl.reduce_axis((0, 11), name="k")
    B = sl.compute((9,), lambda i: sl.sum(A[i, k], axis=k, where=k % 2 == 0), name="B")
    s = sl.create_schedule(B.op)
    s[B].parallel(B.op.axis[0])
    feed = {A: np.arange(99, dtype="float32").reshape(9, 11)}
    mod = assert_matches_reference(s, [A, B], feed=feed)
    out = np.zeros(9, "float32")
    mod(feed[A], out)
    np.testing.assert_allclose(out, feed[A][:, ::2].sum(axis=1))


def test_custom_comm_reducer():
    argabs = sl.comm_reducer(lambda x, y: sl.select(sl.abs(x) > sl.abs(y), x, y), lambda dt: sl.const(0.0, dt),
                             name="maxabs")
    A = sl.placeholder((5, 17), name="A")
    k = sl.reduce_axis((0, 17), name="k")
    B = sl.compute((5,), lambda i: argabs(A[i, k], axis=k), name="B")
    s = sl.create_schedule(B.op)
    feed, outputs, _ = __import__("tests.helpers", fromlist=["run"]).run(s, [A, B])
    a = feed[A]
    want = a[np.arange(5), np.abs(a).argmax(axis=1)]
    np.testing.assert_array_equal(outputs[0][1], want)
