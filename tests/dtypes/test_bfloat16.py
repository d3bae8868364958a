"""bfloat16 end to end: the dtype, per-operation rounding in the reference evaluator and the
CPU target, casts bit for bit against torch and ml_dtypes' float32 casts (ties, subnormals, nan, inf,
overflow; int and float64 through float32, as torch), math functions, reductions, vectorized and bounds-checked builds, CPUs with and
without AVX-512 BF16, torch.bfloat16 tensors and JSON."""
import ml_dtypes
import numpy as np
import pytest
import torch

import schedlang as sl
from tests import programs
from schedlang.dtypes import dtype, promote
from schedlang.tensor.serialize import from_json, to_json
from tests.cpu_targets import HAS_CC, needs_cc
from tests.helpers import CHECKED, assert_matches_reference, run

BF16 = ml_dtypes.bfloat16
# The host with all its features (AVX-512 BF16 on Zen 4), and without AVX-512 BF16 and F16C.
TARGETS = ["llvm", "llvm -mattr=-avx512bf16,-f16c", pytest.param("c", marks=needs_cc)]


def bits(x) -> np.ndarray:
    return np.asarray(x).view(np.uint16)


def special_floats() -> np.ndarray:
    """float32 values whose rounding to bfloat16 is delicate, and random bit patterns."""
    one = np.float32(1.0).view(np.uint32)
    edges = np.array([one + 0x8000, one + 0x18000, one + 0x8001, one + 0x7FFF,   # ties to even, just above/below
                      0x7F7FFFFF, 0x7F7F7FFF, 0x7F7F8000, 0xFF7F8000,            # max float, round to max / to inf
                      0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001, 0xFFA12345,   # inf, nan
                      0x00000001, 0x00008000, 0x00018000, 0x007FFFFF, 0x80000001,  # subnormals
                      0x00000000, 0x80000000], dtype=np.uint32)
    rng = np.random.default_rng(0)
    return np.concatenate([edges, rng.integers(0, 2**32, 4000, dtype=np.uint64).astype(np.uint32)]).view(np.float32)


def test_dtype_spelling_and_promotion():
    bf = dtype("bfloat16")
    assert (bf.kind, bf.bits, bf.lanes, str(bf), bf.short) == ("bfloat", 16, 1, "bfloat16", "bf16")
    assert bf.is_float and not bf.is_int and bf.bytes == 2 and bf.numpy == np.dtype(BF16)
    assert dtype("bfloat") == bf and dtype(BF16) == bf and dtype(np.dtype("bfloat16")) == bf
    assert str(dtype("bfloat16x8")) == "bfloat16x8" and dtype("bfloat16x8").short == "bf16x8"
    assert promote(bf, dtype("int32")) == "bfloat16"
    assert promote(bf, dtype("float16")) == "float32"     # neither holds the other (torch's rule)
    assert promote(bf, dtype("float32")) == "float32" and promote(bf, dtype("float64x4")) == "float64x4"
    with pytest.raises(ValueError, match="bfloat16"):
        dtype("bfloat32")
    A = sl.placeholder((4,), "bfloat16", name="A")
    assert A.dtype == "bfloat16" and (A[0] + 1).dtype == "bfloat16" and (A[0] * 2.5).dtype == "bfloat16"
    assert sl.min_value("bfloat16").value == float("-inf")


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("vector", [False, True])
def test_casts_from_float32_round_like_ml_dtypes_and_torch(target, vector):
    f32 = special_floats()
    n = f32.size
    A = sl.placeholder((n,), "float32", name="A")
    B = sl.compute((n,), lambda i: A[i].astype("bfloat16"), name="B")
    C = sl.compute((n,), lambda i: B[i].astype("float32"), name="C")
    s = sl.create_schedule([B.op, C.op])
    if vector:
        for T in (B, C):
            s[T].vectorize(s[T].split(T.op.axis[0], factor=16)[1])
    b, c = np.zeros(n, BF16), np.zeros(n, np.float32)
    sl.build(s, [A, B, C], target=target)(f32, b, c)
    with np.errstate(invalid="ignore"):
        want = f32.astype(BF16)
    np.testing.assert_array_equal(bits(b), bits(want))          # nan: the quiet nan of its sign, as ml_dtypes
    np.testing.assert_array_equal(c.view(np.uint32), want.astype(np.float32).view(np.uint32))
    finite = ~np.isnan(f32)
    torch_bits = torch.from_numpy(f32[finite]).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    np.testing.assert_array_equal(bits(b)[finite], torch_bits)
    assert list(bits(b)[4:8]) == [0x7F80, 0x7F7F, 0x7F80, 0xFF80]     # overflow (and a tie above max) to inf


@pytest.mark.parametrize("target", TARGETS)
def test_every_bfloat16_widens_exactly_and_converts_to_other_types(target):
    n = 1 << 16
    H = sl.placeholder((n,), "bfloat16", name="H")
    s, (F, D, G) = programs.casts((H, "float32", "F"), (H, "float64", "D"), (H, "float16", "G"), vectorize=("F", "G"),
                                  factor=32)
    h = np.arange(n, dtype=np.uint32).astype(np.uint16).view(BF16)
    f, d, g = np.zeros(n, np.float32), np.zeros(n, np.float64), np.zeros(n, np.float16)
    sl.build(s, [H, F, D, G], target=target)(h, f, d, g)
    want = h.astype(np.float32)
    nan = np.isnan(want)
    np.testing.assert_array_equal(f[~nan].view(np.uint32), want[~nan].view(np.uint32))
    np.testing.assert_array_equal(d[~nan], want[~nan].astype(np.float64))
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(bits(g)[~nan], bits(want.astype(np.float16))[~nan])
    assert np.isnan(f[nan]).all() and np.isnan(d[nan]).all() and np.isnan(g[nan]).all()


def through_float32(x) -> np.ndarray:
    """x rounded to bfloat16 as torch converts it: to float32, then to bfloat16 (two roundings to
    nearest even, each well defined). ml_dtypes' own int and float64 casts round once from 0.7 on
    (through float32 before), so they are no reference."""
    with np.errstate(over="ignore"):
        return np.asarray(x).astype(np.float32).astype(BF16)


def torch_bits(x: np.ndarray) -> np.ndarray:
    return torch.from_numpy(x).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)


@pytest.mark.parametrize("target", TARGETS)
def test_casts_between_bfloat16_and_ints_float16_float64(target):
    big = [2**24 + 2**16 + 1, 2**24 + 2**16, 2**31 - 1, -2**31, 255, 257, -129, 0]   # the first rounds twice
    i32 = np.array(big + list(range(-60, 60)), np.int32)
    n = i32.size
    rng = np.random.default_rng(1)
    f16 = (rng.standard_normal(n) * 100).astype(np.float16)
    f64 = rng.standard_normal(n) * 1e3
    f64[:3] = [1 + 2**-8 + 2**-40, 1e39, -3.3961e38]     # the first rounds twice
    I = sl.placeholder((n,), "int32", name="I")
    H = sl.placeholder((n,), "float16", name="H")
    D = sl.placeholder((n,), "float64", name="D")
    outs = [sl.compute((n,), lambda i, X=X: X[i].astype("bfloat16"), name=f"{X.name}2bf") for X in (I, H, D)]
    back = sl.compute((n,), lambda i: outs[0][i].astype("int32"), name="bf2i")
    s = sl.create_schedule([T.op for T in outs + [back]])
    s[outs[1]].vectorize(s[outs[1]].split(outs[1].op.axis[0], factor=8)[1])
    got = [np.zeros(n, BF16) for _ in outs] + [np.zeros(n, np.int32)]
    sl.build(s, [I, H, D] + outs + [back], target=target)(i32, f16, f64, *got)
    wants = [through_float32(i32), f16.astype(BF16), through_float32(f64)]    # float16 -> float32 is exact
    for g, w in zip(got, wants):
        np.testing.assert_array_equal(bits(g), bits(w))
    # int and float64 -> bfloat16 go through float32, as eager torch does (the PyTorch frontend's contract)
    np.testing.assert_array_equal(bits(got[0]), torch_bits(i32))
    np.testing.assert_array_equal(bits(got[2]), torch_bits(f64))
    assert bits(got[0])[0] == 0x4B80 and bits(got[2])[0] == 0x3F80      # rounded twice, not once
    for g, w in zip(sl.reference(outs, {I: i32, H: f16, D: f64}), wants):
        np.testing.assert_array_equal(bits(g), bits(w))
    fits = np.abs(i32.astype(np.float64)) < 2**31 - 2**24
    np.testing.assert_array_equal(got[3][fits], wants[0].astype(np.float32)[fits].astype(np.int32))


def test_literals_and_int_casts_round_through_float32_on_every_engine():
    """A float64 literal and an int cast round to bfloat16 through float32 (as torch does) in the
    reference evaluator, the CPU target and both CUDA emulators (the SIMT interpreter rounded a
    bfloat16 cast to float16 and kept literals unrounded)."""
    n = 64
    A = sl.placeholder((n,), "float32", name="A")
    I = sl.placeholder((n,), "int32", name="I")
    B = sl.compute((n,), lambda i: A[i].astype("bfloat16"), name="B")
    C = sl.compute((n,), lambda i: B[i] * (1 + 2**-8 + 2**-40) + I[i].astype("bfloat16"), name="C")
    a = np.random.default_rng(0).standard_normal(n).astype(np.float32) * 3e4     # beyond float16's range
    i = np.arange(n, dtype=np.int32) + 2**24 + 2**16 + 1
    r = lambda x: through_float32(x).astype(np.float32)          # noqa: E731
    literal = r(1 + 2**-8 + 2**-40)                                # 1.0: the tie rounds to even
    want = bits(through_float32(r(r(a) * literal) + r(i)))
    np.testing.assert_array_equal(bits(through_float32(i)), torch_bits(i))
    np.testing.assert_array_equal(bits(sl.reference([C], {A: a, I: i})[0]), want)
    for target in ["llvm"] + (["c"] if HAS_CC else []):
        c = np.zeros(n, BF16)
        sl.build(sl.create_schedule(C.op), [A, I, C], target=target)(a, i, c)
        np.testing.assert_array_equal(bits(c), want, err_msg=target)
    pytest.importorskip("cuda.bindings")
    s = sl.create_schedule(C.op)
    for T in (B, C):
        xo, xi = s[T].split(T.op.axis[0], factor=32)
        s[T].bind(xo, sl.thread_axis("blockIdx.x"))
        s[T].bind(xi, sl.thread_axis("threadIdx.x"))
    mod = sl.build(s, [A, I, C], target="cuda")
    for engine in ("simt", "shim"):
        c = np.zeros(n, BF16)
        mod.emulate(a, i, c, engine=engine)
        np.testing.assert_array_equal(bits(c), want, err_msg=engine)


def _arith(A, B):
    return sl.compute(A.shape, lambda i, j: sl.select(
        A[i, j] > B[i, j], (A[i, j] * B[i, j] + A[i, j]) / (B[i, j] - 3.3), sl.max(A[i, j], B[i, j]) * 1.1
        - A[i, j] // B[i, j] + A[i, j] % 0.75), name="C")


@pytest.mark.parametrize("vector", [False, True])
def test_elementwise_rounds_after_every_operation(vector):
    A = sl.placeholder((5, 37), "bfloat16", name="A")
    B = sl.placeholder((5, 37), "bfloat16", name="B")
    C = _arith(A, B)
    s = sl.create_schedule(C.op)
    if vector:
        s[C].vectorize(s[C].split(C.op.axis[1], factor=16)[1])
    feed, outputs, mod = run(s, [A, B, C])      # a bounds-checked build and a normal one
    want = sl.reference([C], feed)[0]
    np.testing.assert_array_equal(bits(outputs[0][1]), bits(want))
    # the reference computes each operation in float32 and rounds it to bfloat16, as ml_dtypes does
    a, b = (feed[A].astype(np.float32), feed[B].astype(np.float32))
    r = lambda x: x.astype(BF16).astype(np.float32)    # noqa: E731
    with np.errstate(all="ignore"):
        expect = np.where(a > b, r(r(r(a * b) + a) / r(b - r(np.float32(3.3)))),
                          r(r(np.maximum(a, b) * r(np.float32(1.1))) - r(np.floor_divide(a, b))) + r(np.mod(a, r(np.float32(0.75)))))
    np.testing.assert_array_equal(bits(want), bits(r(expect).astype(BF16)))
    assert "i16" in mod.get_source() and "bfloat" not in mod.get_source()
    if HAS_CC:       # C99 rounds after every operation too (the prelude's sl_bf16_round)
        c = np.zeros_like(outputs[0][1])
        sl.build(s, [A, B, C], target="c")(feed[A], feed[B], c)
        np.testing.assert_array_equal(bits(c), bits(want))


def test_inlining_does_not_change_bfloat16_results():
    A = sl.placeholder((3, 40), "bfloat16", name="A")
    T = sl.compute((3, 40), lambda i, j: A[i, j] * 1.001 + 0.3, name="T")
    U = sl.compute((3, 40), lambda i, j: T[i, j] * 3.0 - A[i, j], name="U")
    results = []
    for inline in (False, True):
        s = sl.create_schedule(U.op)
        if inline:
            s[T].compute_inline()
        s[U].vectorize(U.op.axis[1])
        feed, outputs, _ = run(s, [A, U], check_bounds=False)
        results.append(outputs[0][1])
    np.testing.assert_array_equal(bits(results[0]), bits(results[1]))
    np.testing.assert_array_equal(bits(results[0]), bits(sl.reference([U], feed)[0]))


MATH = ["exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "abs", "floor", "ceil", "sin", "log1p"]


@pytest.mark.parametrize("vector", [False, True])
def test_math_functions_computed_in_float32(vector):
    n = 61
    A = sl.placeholder((n,), "bfloat16", name="A")
    outs = [sl.compute((n,), lambda i, fn=fn: getattr(sl, fn)(A[i]) if hasattr(sl, fn)
                       else sl.call_pure_extern("bfloat16", fn + "f", A[i]), name=fn) for fn in MATH]
    s = sl.create_schedule([T.op for T in outs])
    if vector:
        for T in outs:
            s[T].vectorize(s[T].split(T.op.axis[0], factor=16)[1])
    a = np.concatenate([np.linspace(-9, 9, n - 4), [np.inf, -np.inf, np.nan, 0.0]]).astype(BF16)
    got = [np.zeros(n, BF16) for _ in outs]
    sl.build(s, [A] + outs, target=CHECKED)(a, *got)
    wants = sl.reference(outs, {A: a})
    for fn, g, w in zip(MATH, got, wants):
        g32, w32 = g.astype(np.float32), w.astype(np.float32)
        assert np.array_equal(np.isnan(g32), np.isnan(w32)), fn
        ok = ~np.isnan(w32)
        # float32 results within a few float32 ulp may round to neighbouring bfloat16 values
        ulps = np.abs(bits(g)[ok].astype(np.int32) - bits(w)[ok].astype(np.int32))
        assert ulps.max() <= 1, (fn, a[ok][ulps > 1], g[ok][ulps > 1], w[ok][ulps > 1])


def test_reductions_with_float32_and_bfloat16_accumulators():
    A = sl.placeholder((6, 300), "bfloat16", name="A")
    k = sl.reduce_axis((0, 300), name="k")
    S32 = sl.compute((6,), lambda i: sl.sum(sl.cast("float32", A[i, k]), axis=k), name="S32")
    k2 = sl.reduce_axis((0, 300), name="k2")
    S16 = sl.compute((6,), lambda i: sl.sum(A[i, k2] * A[i, k2], axis=k2), name="S16")
    k3 = sl.reduce_axis((0, 300), name="k3")
    M = sl.compute((6,), lambda i: sl.max(A[i, k3], axis=k3), name="M")
    s = sl.create_schedule([S32.op, S16.op, M.op])
    ko, ki = s[S32].split(S32.op.reduce_axis[0], factor=16)
    s[S32].reorder(S32.op.axis[0], ko, ki)
    feed, outputs, _ = run(s, [A, S32, S16, M])
    want = sl.reference([S32, S16, M], feed)
    a = feed[A].astype(np.float64)
    np.testing.assert_allclose(outputs[0][1], a.sum(axis=1), rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(bits(outputs[1][1]), bits(want[1]))    # in order: the loop's order
    np.testing.assert_array_equal(bits(outputs[2][1]), bits(want[2]))
    np.testing.assert_array_equal(outputs[2][1].astype(np.float32), a.max(axis=1).astype(np.float32))


def test_vectorized_matmul_with_float32_accumulator_matches_torch():
    M, N, K = 8, 48, 33
    A = sl.placeholder((M, K), "bfloat16", name="A")
    B = sl.placeholder((K, N), "bfloat16", name="B")
    k = sl.reduce_axis((0, K), name="k")
    C = sl.compute((M, N), lambda i, j: sl.sum(A[i, k].astype("float32") * B[k, j].astype("float32"), axis=k), name="C")
    D = sl.compute((M, N), lambda i, j: C[i, j].astype("bfloat16"), name="D")
    s = sl.create_schedule(D.op)
    s[C].compute_at(s[D], D.op.axis[0])
    s[C].vectorize(C.op.axis[1])
    s[D].vectorize(s[D].split(D.op.axis[1], factor=16)[1])
    s[D].parallel(D.op.axis[0])
    a, b = torch.randn(M, K).to(torch.bfloat16), torch.randn(K, N).to(torch.bfloat16)
    d = torch.zeros(M, N, dtype=torch.bfloat16)
    mod = sl.build(s, [A, B, D])
    mod(a, b, d)
    want = (a.double() @ b.double()).to(torch.bfloat16)
    assert (d.float() - want.float()).abs().max() <= 2**-7 * want.float().abs().max()
    assert_matches_reference(s, [A, B, D])


def test_torch_bfloat16_tensors_in_and_out_match_eager_torch():
    A = sl.placeholder((4, 40), "bfloat16", name="A")
    B = sl.placeholder((4, 40), "bfloat16", name="B")
    C = sl.compute((4, 40), lambda i, j: (A[i, j] * B[i, j] + A[i, j]) / (B[i, j] + 4.0), name="C")
    s = sl.create_schedule(C.op)
    s[C].vectorize(s[C].split(C.op.axis[1], factor=16)[1])
    mod = sl.build(s, [A, B, C])
    a, b = torch.randn(4, 40).to(torch.bfloat16), torch.randn(4, 40).to(torch.bfloat16)
    c = torch.zeros(4, 40, dtype=torch.bfloat16)
    mod(a, b, c)
    torch.testing.assert_close(c, (a * b + a) / (b + 4.0), rtol=0, atol=0)     # eager torch rounds each op too
    with pytest.raises(TypeError, match="argument 'A' must have dtype bfloat16, got float16"):
        mod(a.to(torch.float16), b, c)
    with pytest.raises(TypeError, match="argument 'C' must have dtype bfloat16, got float32"):
        mod(a, b, np.zeros((4, 40), np.float32))


def test_json_round_trip_keeps_bfloat16():
    A = sl.placeholder((3, 5), "bfloat16", name="A")
    B = sl.compute((3, 5), lambda i, j: A[i, j] * sl.const(1.1, "bfloat16") + A[i, j].astype("float32").astype("bfloat16"),
                   name="B")
    text = to_json([B])
    (B2,) = from_json(text)
    assert B2.dtype == "bfloat16" and to_json([B2]) == text
    A2 = B2.op.input_tensors[0]
    a = np.random.default_rng(0).standard_normal((3, 5)).astype(BF16)
    np.testing.assert_array_equal(bits(sl.reference([B2], {A2: a})[0]), bits(sl.reference([B], {A: a})[0]))


def test_constants_fold_with_bfloat16_rounding():
    A = sl.placeholder((8,), "bfloat16", name="A")
    B = sl.compute((8,), lambda i: A[i] + (sl.const(1.0, "bfloat16") + sl.const(2**-8, "bfloat16")) * 3.0, name="B")
    s = sl.create_schedule(B.op)
    feed, outputs, mod = run(s, [A, B])
    np.testing.assert_array_equal(bits(outputs[0][1]), bits(sl.reference([B], feed)[0]))
    assert "bf16" in sl.lower(s, [A, B], level="kernel")


def test_cuda_stores_nv_bfloat16_and_rounds_each_operation():
    """NVRTC compiles it (cuda_bf16.h) and the g++ shim runs the same CUDA C: bit for bit the
    reference, the casts included."""
    pytest.importorskip("cuda.bindings")
    n = 77
    A = sl.placeholder((n,), "bfloat16", name="A")
    B = sl.placeholder((n,), "bfloat16", name="B")
    F = sl.placeholder((n,), "float32", name="F")
    C = sl.compute((n,), lambda i: (A[i] * B[i] + A[i]) / (B[i] - 3.3) + sl.exp(A[i]), name="C")
    D = sl.compute((n,), lambda i: F[i].astype("bfloat16") + A[i].astype("float32"), name="D")
    s = sl.create_schedule([C.op, D.op])
    for T in (C, D):
        xo, xi = s[T].split(T.op.axis[0], factor=32)
        s[T].bind(xo, sl.thread_axis("blockIdx.x"))
        s[T].bind(xi, sl.thread_axis("threadIdx.x"))
    mod = sl.build(s, [A, B, F, C, D], target="cuda -arch=sm_80")
    src = mod.get_source("cuda")
    assert "#include <cuda_bf16.h>" in src and "__nv_bfloat16* __restrict__ A" in src
    assert "cvt.rn.bf16.f32" in mod.get_source("ptx")
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(n).astype(BF16), rng.standard_normal(n).astype(BF16)
    f = special_floats()[:n].copy()
    f[np.isnan(f)] = 1.0
    c, d = np.zeros(n, BF16), np.zeros(n, np.float32)
    mod.emulate(a, b, f, c, d)
    want_c, want_d = sl.reference([C, D], {A: a, B: b, F: f})
    ulps = np.abs(bits(c).astype(np.int32) - bits(want_c).astype(np.int32))
    assert ulps.max() <= 1       # expf of the host's libm against numpy's
    np.testing.assert_array_equal(d.view(np.uint32), want_d.view(np.uint32))


def _row_centre(n):
    A = sl.placeholder((n, 24), "bfloat16", name="A")
    k = sl.reduce_axis((0, 24), name="k")
    B = sl.compute((n,), lambda i: sl.sum(A[i, k] * 0.5, axis=k), name="B")
    C = sl.compute((n, 24), lambda i, j: A[i, j] - B[i], name="C")
    s = sl.create_schedule(C.op)
    s.cache_write(B, "local")
    s[B].compute_at(s[C], C.op.axis[0])
    s[C].vectorize(C.op.axis[1])
    s[C].parallel(C.op.axis[0])
    return s, A, C


def test_symbolic_shapes_local_buffers_and_an_exported_library(tmp_path):
    a = np.random.default_rng(0).standard_normal((37, 24)).astype(BF16)
    s, A, C = _row_centre(sl.var("n"))
    c = np.zeros((37, 24), BF16)
    sl.build(s, [A, C])(a, c)
    np.testing.assert_array_equal(bits(c), bits(sl.reference([C], {A: a})[0]))
    s, A, C = _row_centre(37)
    path = str(tmp_path / "centre.so")
    sl.build(s, [A, C]).export_library(path)
    loaded, c2 = sl.load_module(path), np.zeros((37, 24), BF16)
    loaded(a, c2)
    np.testing.assert_array_equal(bits(c2), bits(c))
    with pytest.raises(TypeError, match="argument 'A' must have dtype bfloat16, got float32"):
        loaded(a.astype(np.float32), c2)


def test_pytorch_frontend_int_and_float64_to_bfloat16_match_eager_torch():
    """The frontend's contract: .to(torch.bfloat16) of int32 and float64 tensors is eager
    torch's, bit for bit (through float32: both first values round twice)."""
    import schedlang.torch as st

    class ToBF16(torch.nn.Module):
        def forward(self, i, d):
            return i.to(torch.bfloat16), d.to(torch.bfloat16)

    i = torch.tensor([2**24 + 2**16 + 1, 2**31 - 1, -2**31, 257, -129, 0], dtype=torch.int32)
    d = torch.tensor([1 + 2**-8 + 2**-40, 1e39, -3.3961e38, 0.1, -0.0, float("nan")], dtype=torch.float64)
    got, want = st.compile(ToBF16(), (i, d))(i, d), ToBF16()(i, d)
    for g, w in zip(got, want):
        assert torch.equal(g.view(torch.int16), w.view(torch.int16)), (g, w)
    assert got[0].view(torch.int16)[0] == 0x4B80 and got[1].view(torch.int16)[0] == 0x3F80
