"""Tensor cores (target/cuda/intrin/mma.py): ldmatrix + mma.sync m16n8k16 GEMMs via tensorize,
emulated on both engines (the shim's C++ and the SIMT engine's numpy, target/simt/intrin.py)
with the hardware's per-lane fragment layouts against numpy and each other, compiled by NVRTC
and accepted by ptxas for sm_80 and sm_90 without spills; odd shapes refused clearly."""
import numpy as np
import pytest

import schedlang as sl
from schedlang.target.cuda.intrin import mma
from schedlang.topi import cuda_tensorcore as tc


def operands(M, N, K, element="float16", layout="kn", seed=0):
    """A, B (as the kernel takes them: numpy, or torch for bfloat16) and A @ B in float64."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((M, K)).astype("float32")
    b = rng.standard_normal((K, N) if layout == "kn" else (N, K)).astype("float32")
    args = a.astype(sl.dtype(element).numpy), b.astype(sl.dtype(element).numpy)     # (bfloat16: ml_dtypes')
    a, b = (x.astype("float32") for x in args)
    ref = a.astype("float64") @ (b.astype("float64") if layout == "kn" else b.astype("float64").T)
    return args, ref


def run(mod, M, N, K, element="float16", acc="float32", layout="kn", engine="shim", **emulate):
    (a, b), ref = operands(M, N, K, element, layout)
    c = np.zeros((M, N), acc)
    mod.emulate(a, b, c, engine=engine, **emulate)
    return c, ref


TOL = {"float32": dict(rtol=1e-4, atol=1e-3), "float16": dict(rtol=2e-2, atol=5e-2)}


@pytest.mark.parametrize("element, acc, layout", [("float16", "float32", "kn"), ("bfloat16", "float32", "kn"),
                                                  ("float16", "float16", "kn"), ("float16", "float32", "nk")])
def test_gemm_64_matches_numpy_on_both_engines(element, acc, layout):
    s, args = tc.gemm(64, 64, 64, element, acc, layout)
    mod = sl.build(s, args, target="cuda -arch=sm_80")
    cuda = mod.get_source("cuda")
    assert f"sl_mma_m16n8k16_{mma.ACCUMULATORS[acc][0]}_{mma.ELEMENTS[element][0]}(" in cuda
    assert "__shared__ __align__(16)" in cuda          # ldmatrix's rows are 16-byte aligned
    ptx = mod.get_source("ptx")
    assert "mma.sync.aligned.m16n8k16.row.col" in ptx
    # (the default warp tile is 16 wide: B's two fragments in one ldmatrix.x4)
    assert ("ldmatrix.sync.aligned.m8n8.x4.trans" if layout == "kn" else "ldmatrix.sync.aligned.m8n8.x4.shared") in ptx
    c, ref = run(mod, 64, 64, 64, element, acc, layout)
    np.testing.assert_allclose(c, ref, **TOL[acc])
    simt, _ = run(mod, 64, 64, 64, element, acc, layout, engine="simt")
    np.testing.assert_array_equal(simt, c)           # the same layouts, the same summation order


@pytest.mark.parametrize("layout", ["kn", "nk"])
@pytest.mark.parametrize("WN, x", [(8, "x2"), (32, "x4")])
def test_b_fragments_one_or_two_an_ldmatrix(layout, WN, x):
    """A warp tile 8 wide loads B's fragment with ldmatrix.x2, one 16k wide two at a time with
    .x4; both give numpy's product on both engines."""
    s, args = tc.gemm(64, 64, 32, "float16", "float32", layout, BM=32, BN=64, BK=32, WM=16, WN=WN)
    mod = sl.build(s, args, target="cuda -arch=sm_80")
    trans = ".trans" if layout == "kn" else ".shared"
    ptx = mod.get_source("ptx")
    assert f"ldmatrix.sync.aligned.m8n8.{x}{trans}" in ptx
    c, ref = run(mod, 64, 64, 32, "float16", "float32", layout)
    np.testing.assert_allclose(c, ref, **TOL["float32"])
    simt, _ = run(mod, 64, 64, 32, "float16", "float32", layout, engine="simt")
    np.testing.assert_array_equal(simt, c)


def test_several_blocks_and_k_steps_with_bounds_checks():
    M, N, K = 128, 64, 96
    s, args = tc.gemm(M, N, K)
    mod = sl.build(s, args, target="cuda")
    c, ref = run(mod, M, N, K, bounds_check=True)
    np.testing.assert_allclose(c, ref, **TOL["float32"])
    np.testing.assert_array_equal(run(mod, M, N, K, engine="simt")[0], c)


def test_a_wrong_fragment_layout_gives_wrong_numbers():
    """B stored [k][n] loaded as if [n][k] (ldmatrix without .trans): the emulation's lanes get
    other elements, as a GPU's would, so the product is wrong."""
    A, B, C = tc.program(64, 64, 64)
    b = sl.placeholder((16, 8), "float16", name="b_shared")
    frag = sl.compute((16, 8), lambda r, c: b[r, c], name="b_frag")
    binds = {b: mma._handle((16, 8), "float16", "b_shared", "shared", 8),
             frag: mma._handle((16, 8), "float16", "b_frag", mma.WARP)}
    wrong = sl.decl_tensor_intrin(frag.op, lambda ins, outs: sl.call_extern(
        "int32", "sl_mma_load_b_nk_f16", mma.fragment_address(outs[0], 16, 8), ins[0].access_ptr("r"),
        ins[0].strides[0]), name="wrong_load_b", binds=binds)
    mod = sl.build(tc.schedule_matmul(sl.create_schedule(C.op), C, load_b=wrong), [A, B, C], target="cuda")
    for engine in ("shim", "simt"):
        c, ref = run(mod, 64, 64, 64, engine=engine)
        assert np.abs(c - ref).max() > 1.0


def test_padding_the_shared_rows_removes_ldmatrix_bank_conflicts():
    """Rows 32 halves apart put ldmatrix's eight rows of a matrix in the same banks two by two;
    rows 40 apart (storage_align) spread them over all 32 banks: the SIMT profile shows it."""
    conflicts = {}
    for pad in (0, 8):
        s, args = tc.gemm(64, 64, 64, pad=pad)
        mod = sl.build(s, args, target="cuda")
        (a, b), ref = operands(64, 64, 64)
        c = np.zeros((64, 64), "float32")
        prof = mod.emulate(a, b, c, engine="simt", profile=True)["C_kernel"]
        np.testing.assert_allclose(c, ref, **TOL["float32"])
        conflicts[pad] = sum(sum(c) for c in prof.conflicts_by_buffer.values())
    assert conflicts[0] > 0 and conflicts[8] == 0


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("tiles", [{}, dict(BM=128, BN=128, WM=64, WN=32)])
def test_ptxas_accepts_it_without_spills(arch, tiles):
    s, args = tc.gemm(128, 128, 64, **tiles)
    mod = sl.build(s, args, target=f"cuda -arch={arch}")
    assert f".target {arch}" in mod.get_source("ptx")
    if mod.ptxas_info is None:
        pytest.skip("no ptxas on PATH")
    info = mod.ptxas_info["C_kernel"]
    bm = tiles.get("BM", 64)
    assert info.spill_bytes == 0 and info.shared_bytes == 2 * bm * 32 * 2


def test_odd_shapes_are_refused_clearly():
    with pytest.raises(ValueError, match="multiples of the block tile"):
        tc.gemm(60, 64, 64)
    s, args = tc.gemm(60, 64, 64, check=False)     # a tail: fragments accessed element by element
    with pytest.raises(sl.LoweringError, match="warp-scope buffer .* only tensor intrinsics"):
        sl.build(s, args, target="cuda")


def test_fragment_intrinsics_refuse_other_types():
    with pytest.raises(ValueError, match="float16 or bfloat16"):
        mma.load_a_intrin("float32")
    with pytest.raises(ValueError, match="accumulates in float32 or float16"):
        mma.mma_intrin("float16", "int32")


@pytest.mark.parametrize("threads, refused", [(16, True), (48, True), (32, False)])
def test_a_block_of_partial_warps_is_refused_at_build(threads, refused):
    """ldmatrix and mma.sync gather across a warp: a block whose threads are not whole warps
    has lanes missing from its last warp (undefined on a GPU; the shim gathered garbage), so the
    build refuses it, naming the kernel, its block size and the function."""
    A, B, C = tc.program(16, 8, 16)
    s = sl.create_schedule(C.op)
    AS, BS = s.cache_read(A, "shared", [C]), s.cache_read(B, "shared", [C])
    CF = s.cache_write(C, "warp")
    AF, BF = s.cache_read(AS, "warp", [CF]), s.cache_read(BS, "warp", [CF])
    io, ii = s[C].split(C.op.axis[0], 16)
    s[C].bind(io, sl.thread_axis("blockIdx.x"))
    s[C].tensorize(ii, mma.store_c_intrin("float32"))
    s[CF].compute_at(s[C], io)
    ci, cj = s[CF].op.axis
    ko, ki = s[CF].split(s[CF].op.reduce_axis[0], 16)
    cio, cii = s[CF].split(ci, 16)
    s[CF].reorder(ko, cio, cii, cj, ki)
    s[CF].tensorize(cii, mma.mma_intrin("float16", "float32"))
    for F, intrin in ((AF, mma.load_a_intrin("float16")), (BF, mma.load_b_intrin("float16"))):
        s[F].compute_at(s[CF], ko)
        ro, ri = s[F].split(s[F].op.axis[0], 16)
        s[F].tensorize(ri, intrin)
    for S in (AS, BS):
        s[S].compute_at(s[CF], ko)
        _, tx = s[S].split(s[S].fuse(*s[S].op.axis), threads)
        s[S].bind(tx, sl.thread_axis("threadIdx.x"))
    if refused:
        with pytest.raises(sl.LoweringError, match=f"kernel C_kernel has {threads} threads a block "
                                                   r"\(threadIdx.x=\d+\), not a multiple of 32, but calls "
                                                   "sl_mma_load_a_f16, a warp-collective function"):
            sl.build(s, [A, B, C], target="cuda")
    else:
        c, ref = run(sl.build(s, [A, B, C], target="cuda"), 16, 8, 16)
        np.testing.assert_allclose(c, ref, **TOL["float32"])



def test_the_build_and_the_simt_engine_agree_on_which_calls_are_warp_collective():
    """Every library function the SIMT engine executes as a warp-collective call is refused by
    the build in a block of partial warps, except the fills (each lane sets its own registers)."""
    from schedlang.target.cuda import intrin
    from schedlang.target.simt import intrin as simt
    intrin.prelude([])            # (loads the library)
    names = [n for n in intrin.FUNCTIONS if simt._rule(n) is not None and simt._rule(n)[0] not in simt._PER_THREAD]
    assert any(n.startswith("sl_wmma_mma") for n in names) and any(n.startswith("sl_ldmatrix") for n in names)
    assert [n for n in names if not intrin.is_collective(n)] == [n for n in names if "_fill_" in n]
    assert not any(intrin.is_collective(n) for n in intrin.FUNCTIONS if n.startswith("sl_cp_async"))


def test_the_topi_tensorcore_functions_refuse_what_they_do_not_take():
    A, B, _ = tc.program(64, 64, 64)
    with pytest.raises(ValueError, match="layout is one of"):
        tc.matmul(A, B, layout="mk")
    X = sl.compute((64, 64), lambda i, j: A[i, j] * 2, name="X")
    with pytest.raises(ValueError, match="not a matmul's output"):
        tc.schedule_matmul(sl.create_schedule(X.op), X)


@pytest.mark.parametrize("layout", ["kn", "nk"])
@pytest.mark.parametrize("kw", [dict(stages=1), dict(stages=2, async_copy=True, pad=8), dict(stages=3, async_copy=True)],
                         ids=["plain", "pipelined", "three-stages"])
def test_prefetched_fragments_match_numpy_on_both_engines(layout, kw):
    """prefetch_fragments double-buffers the warp's fragments over the k step's 16-deep slices:
    each lane's part of a fragment buffer twice (a lane's part apart, not the warp's tile), the
    next slice's ldmatrix before this one's mma; numpy's product on both engines."""
    s, args = tc.gemm(64, 32, 128, "float16", "float32", layout, BM=32, BN=32, BK=64, WM=16, WN=16,
                      prefetch_fragments=True, **kw)
    mod = sl.build(s, args, target="cuda -arch=sm_80")
    cuda = mod.get_source("cuda")
    assert "__half A_shared_warp[16];" in cuda and "__half B_shared_warp[16];" in cuda   # 2 x (256 / 32) a lane
    assert "% 2 * 8]" in cuda                                                          # the copies a lane's part apart
    c, ref = run(mod, 64, 32, 128, "float16", "float32", layout)
    np.testing.assert_allclose(c, ref, **TOL["float32"])
    simt, _ = run(mod, 64, 32, 128, "float16", "float32", layout, engine="simt")
    np.testing.assert_array_equal(simt, c)
