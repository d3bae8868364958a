"""Symbolic shapes: sl.var / sl.size_var extents, one build run at many sizes.

Every schedule is built twice (bounds-checked and normal) and run at several sizes
against numpy; the checked build raises IndexError on any access outside a buffer."""
from __future__ import annotations

import numpy as np
import pytest

import schedlang as sl
from schedlang import topi
from tests import programs
from schedlang.loop.functor import walk_stmts
from schedlang.loop.nodes import For
from tests.helpers import CHECKED, assert_close

SIZES = (1, 7, 64, 1000)


def builds(s, args):
    return [sl.build(s, args, target=CHECKED), sl.build(s, args)]


def check(s, args, make, reference, sizes=SIZES, dtype="float32", rtol=None):
    """make(size) -> (inputs, output shapes); reference(*inputs) -> expected outputs."""
    mods = builds(s, args)
    rng = np.random.default_rng(0)
    for size in sizes:
        in_shapes, out_shapes = make(size)
        inputs = [rng.standard_normal(sh).astype(dtype) for sh in in_shapes]
        want = reference(*inputs)
        want = want if isinstance(want, tuple) else (want,)
        for mod in mods:
            outs = [np.full(sh, 7, dtype) for sh in out_shapes]
            mod(*inputs, *outs)
            for got, exp in zip(outs, want):
                assert_close(got, exp.astype(dtype), dtype, rtol, name=f"size {size}")
    return mods


# ---- the TVM tutorials ----------------------------------------------------------------

def test_tvm_get_started_vector_add():
    """TVM's "get started with tensor expressions": n = te.var("n"), split 64, parallel, vectorize."""
    A, B, C = programs.vector_add(sl.var("n"))
    s = topi.cpu.schedule_injective(sl.create_schedule(C.op), C, factor=64)    # split, parallel, vectorize
    check(s, [A, B, C], lambda n: ([(n,), (n,)], [(n,)]), np.add, sizes=SIZES + (0, 63, 65, 129))


def test_tvm_reduction_tutorial_rfactor():
    """TVM's reduction tutorial: n, m = te.var, B[i] = sum(A[i, k]), k split by 16 and rfactor'd."""
    A, B = programs.row_sum(sl.var("n"), sl.var("m"))
    s = sl.create_schedule(B.op)
    ko, ki = s[B].split(B.op.reduce_axis[0], factor=16)
    BF = s.rfactor(B, ki)
    xo, xi = s[B].split(B.op.axis[0], factor=32)
    s[B].parallel(xo)
    s[BF].compute_at(s[B], xi)
    assert "for k.outer in 0..(m + 15) // 16:" in sl.lower(s, [A, B])
    check(s, [A, B], lambda n: ([(n, n // 3 + 1)], [(n,)]), lambda a: a.sum(axis=1), sizes=(1, 7, 64, 300))


def test_symbolic_reduce_extent_vectorized_rfactor():
    n = sl.size_var("n")
    A = sl.placeholder((n,), name="A")
    k = sl.reduce_axis((0, n), "k")
    B = sl.compute((1,), lambda i: sl.sum(A[k], axis=k), name="B")
    s = sl.create_schedule(B.op)
    ko, ki = s[B].split(k, factor=8)
    BF = s.rfactor(B, ki)
    s[BF].vectorize(s[BF].op.axis[0])
    check(s, [A, B], lambda n: ([(n,)], [(1,)]), lambda a: a.sum(keepdims=True)[:1], sizes=SIZES + (0,))


# ---- schedules ------------------------------------------------------------------------

def test_2d_tile_fuse_vectorize_parallel():
    n, m = sl.size_var("n"), sl.size_var("m")
    A = sl.placeholder((n, m), name="A")
    B = sl.compute((n, m), lambda i, j: A[i, j] * 2.0 + 1.0, name="B")
    s = sl.create_schedule(B.op)
    xo, yo, xi, yi = s[B].tile(B.op.axis[0], B.op.axis[1], 4, 16)
    f = s[B].fuse(xo, yo)
    s[B].parallel(f)
    s[B].vectorize(yi)
    check(s, [A, B], lambda n: ([(n, (n * 7) % 97 + 1)], [(n, (n * 7) % 97 + 1)]), lambda a: a * 2 + 1,
          sizes=(1, 7, 64, 300))


def test_vectorize_whole_symbolic_axis_gets_a_tail():
    n = sl.size_var("n")
    A = sl.placeholder((n,), name="A")
    B = sl.compute((n,), lambda i: sl.exp(A[i]), name="B")
    s = sl.create_schedule(B.op)
    s[B].vectorize(B.op.axis[0])
    mods = check(s, [A, B], lambda n: ([(n,)], [(n,)]), np.exp, sizes=SIZES + (0, 15, 17, 33))
    assert "ramp(" in mods[1].ir["kernel"]          # a vector body, with a scalar tail
    assert "for i.v in 0.." in mods[1].ir["kernel"]


def test_gemm_symbolic_mnk_tvm_tutorial_schedule():
    A, B, C = programs.gemm(sl.size_var("M"), sl.size_var("N"), sl.size_var("K"))
    s = topi.cpu.schedule_matmul_cached(sl.create_schedule(C.op), C, (16, 16), k_factor=4, vectorize_tile=True)
    kernel = sl.lower(s, [A, B, C], level="kernel")
    assert "local C.local: f32[256]" in kernel      # a constant region stays a fixed buffer
    check(s, [A, B, C], lambda n: ([(n, n // 2 + 1), (n // 2 + 1, (3 * n) % 50 + 1)], [(n, (3 * n) % 50 + 1)]),
          lambda a, b: a @ b, sizes=(1, 7, 64, 100))


def test_compute_at_symbolic_outer_extent_and_runtime_sized_buffer():
    n, m = sl.size_var("n"), sl.size_var("m")
    A = sl.placeholder((n, m), name="A")
    B = sl.compute((n, m), lambda i, j: A[i, j] + 1.0, name="B")
    C = sl.compute((n, m), lambda i, j: B[i, m - 1 - j] * 2.0, name="C")   # a body may use a size
    s = sl.create_schedule(C.op)
    s[B].compute_at(s[C], C.op.axis[0])     # one row of B per row of C: a buffer of m elements
    text = sl.lower(s, [A, C], level="kernel")
    assert "local B: f32[m]" in text
    check(s, [A, C], lambda n: ([(n, n % 13 + 1)], [(n, n % 13 + 1)]), lambda a: (a + 1)[:, ::-1] * 2)


def test_cache_read_and_cache_write_with_symbolic_regions():
    n = sl.size_var("n")
    A = sl.placeholder((n, 64), name="A")
    B = sl.compute((n, 64), lambda i, j: A[i, j] * 3.0, name="B")
    s = sl.create_schedule(B.op)
    AA = s.cache_read(A, "local", [B])
    BB = s.cache_write(B, "local")
    io, ii = s[B].split(B.op.axis[0], factor=8)
    s[BB].compute_at(s[B], io)
    s[AA].compute_at(s[BB], s[BB].op.axis[0])
    s[BB].vectorize(s[BB].op.axis[1])
    check(s, [A, B], lambda n: ([(n, 64)], [(n, 64)]), lambda a: a * 3, sizes=SIZES + (0,))


def test_inline_chain_with_expression_extents():
    n = sl.size_var("n")
    A = sl.placeholder((n,), name="A")
    B = sl.compute((n,), lambda i: A[i] + 1.0, name="B")
    C = sl.compute((n,), lambda i: B[i] * B[i], name="C")
    D = sl.compute((n * 2,), lambda i: C[i // 2] - 1.0, name="D")
    E = sl.compute(((n + 3) // 4,), lambda i: D[i * 8 % (n * 2)], name="E")
    s = sl.create_schedule([D.op, E.op])
    s[B].compute_inline()
    s[C].compute_inline()
    xo, xi = s[D].split(D.op.axis[0], factor=8)
    s[D].vectorize(xi)

    def ref(a):
        d = np.repeat((a + 1) ** 2 - 1, 2)
        return d, d[(np.arange((len(a) + 3) // 4) * 8) % (2 * len(a))]
    check(s, [A, D, E], lambda n: ([(n,)], [(2 * n,), ((n + 3) // 4,)]), ref)


def test_torch_tensors_and_nparts_split():
    torch = pytest.importorskip("torch")
    n = sl.size_var("n")
    A = sl.placeholder((n,), name="A")
    B = sl.compute((n,), lambda i: A[i] * A[i], name="B")
    s = sl.create_schedule(B.op)
    o, i = s[B].split(B.op.axis[0], nparts=4)
    s[B].vectorize(i)
    for mod in builds(s, [A, B]):
        for size in (0, 1, 5, 1000):
            a = torch.randn(size)
            b = torch.empty(size)
            mod(a, b)
            torch.testing.assert_close(b, a * a)


# ---- printing and code --------------------------------------------------------------

def test_printed_ir_shows_symbolic_extents():
    n, m = sl.size_var("n"), sl.size_var("m")
    A = sl.placeholder((n, m), name="A")
    B = sl.compute((n, m), lambda i, j: A[i, j] + 1.0, name="B")
    s = sl.create_schedule(B.op)
    jo, ji = s[B].split(B.op.axis[1], factor=4)
    text = sl.lower(s, [A, B], level="all")
    assert "A: (n, m) f32" in text
    assert "func B(A: f32[n, m], B: f32[n, m]):" in text
    assert "for i in 0..n:" in text
    assert "for j.outer in 0..(m + 3) // 4:" in text
    assert "if j.outer * 4 + j.inner < m:" in text
    assert "kernel B_kernel(A: f32* global, B: f32* global, n: i32, m: i32)" in text
    ll = sl.build(s, [A, B]).get_source("ll")
    assert "i32 %size.n, i32 %size.m" in ll


def test_loops_over_the_whole_extent_need_no_guard():
    n = sl.size_var("n")
    A = sl.placeholder((n,), name="A")
    B = sl.compute((n,), lambda i: A[i] + 1.0, name="B")
    s = sl.create_schedule(B.op)
    assert "if" not in sl.lower(s, [A, B])


# ---- errors -------------------------------------------------------------------------

def _add(n_a, n_b):
    A = sl.placeholder((n_a,), name="A")
    B = sl.compute((n_b,), lambda i: A[i] + 1.0, name="B")
    return A, B


def test_inconsistent_sizes_name_the_variable_and_both_arguments():
    n = sl.size_var("n")
    A = sl.placeholder((n, 3), name="A")
    B = sl.placeholder((3, n), name="B")
    C = sl.compute((n,), lambda i: A[i, 0] + B[0, i], name="C")
    mod = sl.build(sl.create_schedule(C.op), [A, B, C])
    with pytest.raises(ValueError, match=r"size variable 'n' is 7 from A.shape\[0\] but 9 from B.shape\[1\]"):
        mod(np.zeros((7, 3), "float32"), np.zeros((3, 9), "float32"), np.zeros(7, "float32"))


def test_shape_expression_mismatch_names_the_size():
    n = sl.size_var("n")
    A = sl.placeholder((n,), name="A")
    B = sl.compute((n * 2,), lambda i: A[i // 2], name="B")
    mod = sl.build(sl.create_schedule(B.op), [A, B])
    with pytest.raises(ValueError, match=r"'B' has B.shape\[0\] = 9, but its extent 'n \* 2' is 10 with n=5"):
        mod(np.zeros(5, "float32"), np.zeros(9, "float32"))
    with pytest.raises(ValueError, match="must have 1 dimensions"):
        mod(np.zeros(5, "float32"), np.zeros((10, 1), "float32"))


def test_size_that_no_argument_gives_is_refused_at_build():
    n = sl.size_var("n")
    A = sl.placeholder((n * n,), name="A")
    B = sl.compute((n * n,), lambda i: A[i] + 1.0, name="B")
    with pytest.raises(ValueError, match="size variable\\(s\\) 'n' are not the extent of any dimension"):
        sl.build(sl.create_schedule(B.op), [A, B])


def test_size_solved_from_a_linear_extent():
    n = sl.size_var("n")
    A = sl.placeholder((n * 4 + 1,), name="A")
    B = sl.compute((n * 4 + 1,), lambda i: A[i] + 1.0, name="B")
    mod = sl.build(sl.create_schedule(B.op), [A, B])
    a, b = np.arange(13, dtype="float32"), np.zeros(13, "float32")
    mod(a, b)
    np.testing.assert_array_equal(b, a + 1)
    with pytest.raises(ValueError, match=r"A.shape\[0\] = 10, but its extent 'n \* 4 \+ 1' is not 10 for any size 'n'"):
        mod(np.zeros(10, "float32"), np.zeros(10, "float32"))


def test_an_extent_scaled_by_a_float():
    """An output size made by scaling a size by a float and rounding it (torch's
    interpolate(scale_factor=1.5) at a symbolic size: trunc(1.5 * n)): one build at every
    size, the extent computed as float64 arithmetic as the kernel computes it, and the
    extent written to and read back from JSON (the kernel cache) unchanged."""
    from schedlang.expr.extent import evaluate_extent, extent_from_json, extent_to_json
    n = sl.size_var("n")
    m = sl.cast("int32", sl.trunc(sl.const(1.5, "float64") * sl.cast("float64", n)))
    A = sl.placeholder((n,), name="A")
    B = sl.compute((m,), lambda i: A[sl.floordiv(i * 2, 3)] * 2.0, name="B")
    check(sl.create_schedule(B.op), [A, B], lambda k: ([(k,)], [(int(1.5 * k),)]),
          lambda a: a[np.arange(int(1.5 * a.shape[0])) * 2 // 3] * 2, sizes=(1, 2, 7, 64, 1001))
    ids = {}
    back = extent_from_json(extent_to_json(m, ids), list(ids))
    assert [evaluate_extent(back, {n: k}) for k in (3, 7, 1001)] == [4, 10, 1501]


def test_more_than_2_31_elements_is_refused_at_call():
    n = sl.size_var("n")
    A = sl.placeholder((n,), name="A")
    B = sl.compute((n, n), lambda i, j: A[i] * A[j], name="B")
    mod = sl.build(sl.create_schedule(B.op), [A, B])
    big = np.lib.stride_tricks.as_strided(np.zeros(1, "float32"), (1 << 16, 1 << 16), (0, 0))
    with pytest.raises(ValueError, match="tensor 'B' would have 4294967296 elements"):
        mod(np.zeros(1 << 16, "float32"), big)


def test_loop_extent_near_2_31_is_computed_in_64_bits():
    # (n + 63) // 64 passed 2**31 - 1 in int32 for n near it (the call refused such n);
    # the numerator is int64 now, so every n up to 2**31 - 1 is exact (issue 15 item 1).
    from schedlang.expr.extent import evaluate_extent, first_overflow
    n = sl.size_var("n")
    A = sl.placeholder((n,), "int8", name="A")
    B = sl.compute((n,), lambda i: A[i] + sl.const(1, "int8"), name="B")
    s = sl.create_schedule(B.op)
    s[B].split(B.op.axis[0], factor=63)
    kernel = sl.lower(s, [A, B], level="kernel").ir["kernel"]
    extent = next(x.extent for k in kernel.kernels for x in walk_stmts(k.body) if isinstance(x, For))
    assert str(extent) == "int32((int64(n) + 62) // 63)"
    for size in (2 ** 31 - 1, 2 ** 31 - 10):
        assert first_overflow(extent, {n: size}) is None
        assert evaluate_extent(extent, {n: size}) == -(-size // 63)
    a = np.arange(100, dtype="int8")
    b = np.zeros_like(a)
    sl.build(s, [A, B])(a, b)
    np.testing.assert_array_equal(b, a + 1)


def test_bad_symbolic_extents():
    with pytest.raises(TypeError, match="int32 expressions"):
        sl.placeholder((sl.var("x", "float32"),), name="A")
    n = sl.size_var("n")
    A = sl.placeholder((n,), name="A")
    B = sl.compute((n,), lambda i: A[i], name="B")
    s = sl.create_schedule(B.op)
    with pytest.raises(sl.ScheduleError, match="symbolic"):
        s[B].unroll(B.op.axis[0])
    assert sl.size_var("n").nonnegative and not sl.var("n").nonnegative


# ---- the reference evaluator, and more schedules against it ---------------------------

def check_reference(s, args, shapes, sizes=SIZES):
    """Run at each size against sl.reference; shapes(size) gives the shape of every arg."""
    mods = builds(s, args)
    rng = np.random.default_rng(1)
    for size in sizes:
        arrays = [rng.standard_normal(sh).astype("float32") for sh in shapes(size)]
        inputs = {t: a for t, a in zip(args, arrays) if isinstance(s[t].op, sl.tensor.PlaceholderOp)}
        outputs = [(t, a) for t, a in zip(args, arrays) if t not in inputs]
        want = sl.reference([t for t, _ in outputs], inputs)
        for mod in mods:
            mod(*arrays)
            for (t, got), exp in zip(outputs, want):
                assert_close(got, exp, "float32", name=f"{t.name} at size {size}")


def test_softmax_symbolic_against_reference():
    X, mx, ex, total, out = programs.softmax(sl.size_var("n"), sl.size_var("m"))
    s = topi.cpu.schedule_softmax(sl.create_schedule(out.op), out, factor=8)
    check_reference(s, [X, out], lambda n: [(n, n % 37 + 1)] * 2)


def test_parallel_inner_loop_and_storage_align_on_symbolic_cache():
    n, m = sl.size_var("n"), sl.size_var("m")
    A = sl.placeholder((n, m), name="A")
    B = sl.compute((n, m), lambda i, j: A[i, j] * A[i, j], name="B")
    s = sl.create_schedule(B.op)
    AA = s.cache_read(A, "global", [B])
    s[AA].storage_align(s[AA].op.axis[0], 16, 1)
    jo, ji = s[B].split(B.op.axis[1], factor=5)
    s[B].parallel(jo)
    check_reference(s, [A, B], lambda n: [(n, 2 * n % 41 + 1)] * 2, sizes=(1, 7, 64, 200))


def test_reference_reads_sizes_from_the_feed():
    n = sl.size_var("n")
    A = sl.placeholder((n,), name="A")
    k = sl.reduce_axis((0, n), "k")
    B = sl.compute((n,), lambda i: sl.sum(sl.if_then_else(k <= i, A[k], 0.0), axis=k), name="B")   # prefix sum
    a = np.arange(6, dtype="float32")
    (got,) = sl.reference([B], {A: a})
    np.testing.assert_allclose(got, np.cumsum(a))
    s = sl.create_schedule(B.op)
    check_reference(s, [A, B], lambda n: [(n,), (n,)], sizes=(0, 1, 7, 64))


# ---- what the simplifier knows about sizes -------------------------------------------

def test_simplifier_facts_about_sizes():
    from schedlang.expr.simplify import simplify
    n, x = sl.size_var("n"), sl.var("x")
    i, io, ii = sl.var("i"), sl.var("io"), sl.var("ii")
    assert str(simplify(n >= 0)) == "True" and str(simplify(n + 1 > 0)) == "True"
    assert str(simplify(x >= 0)) == "x >= 0"                       # a plain var may be negative
    loop = {i: (0, n - 1)}
    assert str(simplify(i < n, loop)) == "True"                    # i runs over 0..n
    assert str(simplify(i <= n - 2, loop)) == "i <= n - 2"
    assert str(simplify(sl.min(i, n), loop)) == "i"
    split = {io: (0, (n + 63) // 64 - 1), ii: (0, 63)}
    assert str(simplify(io * 64 < n, split)) == "True"             # every block starts inside
    assert str(simplify(io * 64 + ii < n, split)) == "io * 64 + ii < n"   # the tail needs its guard


def test_rfactor_of_a_symbolic_outer_reduction_loop_has_a_runtime_sized_temp():
    A, B = programs.row_sum(sl.size_var("n"), sl.size_var("m"))
    s = sl.create_schedule(B.op)
    ko, ki = s[B].split(B.op.reduce_axis[0], factor=16)
    BF = s.rfactor(B, ko, 1)
    s[BF].parallel(s[BF].op.axis[0])
    assert "temp B.rf: f32[n, (m + 15) // 16] global" in sl.lower(s, [A, B], level="kernel")
    mods = builds(s, [A, B])
    rng = np.random.default_rng(3)
    for shape in ((0, 0), (3, 0), (0, 5), (1, 1), (7, 33), (64, 100)):
        a = rng.standard_normal(shape).astype("float32")
        for mod in mods:
            b = np.full(shape[0], 7, "float32")
            mod(a, b)
            assert_close(b, a.sum(axis=1), "float32", name=f"shape {shape}")
