"""wmma 16x16x16 with the scopes and intrinsic shapes of TVM's tensor-core tutorials
(opt_conv_tensorcore: blocked layouts, "wmma.matrix_a|b|accumulator" fragments, load / gemm /
store intrinsics tensorized on the inner 16x16 tiles), on both engines against numpy."""
import numpy as np
import pytest

import schedlang as sl
from schedlang.target.cuda.intrin import mma
from tests.target.cuda.test_mma import TOL

T = 16


def blocked_gemm(MT, NT, KT, warps=(2, 2)):
    """C[mo, no, mi, ni] = sum A[mo, ko, mi, ki] * B[ko, no, ki, ni] over (ko, ki), in 16x16 tiles;
    a block of warps[0] x warps[1] warps, a warp one output tile; A and B staged through shared
    memory one k tile at a time."""
    A = sl.placeholder((MT, KT, T, T), "float16", name="A")
    B = sl.placeholder((KT, NT, T, T), "float16", name="B")
    ko = sl.reduce_axis((0, KT), name="ko")
    ki = sl.reduce_axis((0, T), name="ki")
    C = sl.compute((MT, NT, T, T), lambda mo, no, mi, ni: sl.sum(
        A[mo, ko, mi, ki].astype("float32") * B[ko, no, ki, ni].astype("float32"), axis=[ko, ki]), name="C")
    s = sl.create_schedule(C.op)
    AS, BS = s.cache_read(A, "shared", [C]), s.cache_read(B, "shared", [C])
    CF = s.cache_write(C, "wmma.accumulator")
    AF, BF = s.cache_read(AS, "wmma.matrix_a", [CF]), s.cache_read(BS, "wmma.matrix_b", [CF])
    mo, no, mi, ni = C.op.axis
    bm, wm = s[C].split(mo, warps[0])
    bn, wn = s[C].split(no, warps[1])
    s[C].reorder(bm, bn, wm, wn, mi, ni)
    s[C].bind(bm, sl.thread_axis("blockIdx.y"))
    s[C].bind(bn, sl.thread_axis("blockIdx.x"))
    s[C].bind(wm, sl.thread_axis("threadIdx.z"))
    s[C].bind(wn, sl.thread_axis("threadIdx.y"))
    s[C].tensorize(mi, mma.wmma_store_intrin())
    s[CF].compute_at(s[C], wn)
    cmo, cno, cmi, cni = s[CF].op.axis
    cko, cki = s[CF].op.reduce_axis
    s[CF].reorder(cko, cmo, cno, cmi, cni, cki)
    s[CF].tensorize(cmi, mma.wmma_gemm_intrin())
    for F, scope in ((AF, "wmma.matrix_a"), (BF, "wmma.matrix_b")):
        s[F].compute_at(s[CF], cko)
        s[F].tensorize(s[F].op.axis[2], mma.wmma_load_intrin(scope))
    for S in (AS, BS):
        s[S].compute_at(s[CF], cko)
        f = s[S].fuse(*s[S].op.axis)
        f, tx = s[S].split(f, 32)
        f, ty = s[S].split(f, warps[1])
        f, tz = s[S].split(f, warps[0])
        s[S].bind(tx, sl.thread_axis("threadIdx.x"))
        s[S].bind(ty, sl.thread_axis("threadIdx.y"))
        s[S].bind(tz, sl.thread_axis("threadIdx.z"))
    return s, [A, B, C]


@pytest.mark.parametrize("MT, NT, KT", [(2, 2, 3), (4, 2, 2)])
def test_blocked_wmma_gemm_on_both_engines(MT, NT, KT):
    s, args = blocked_gemm(MT, NT, KT)
    mod = sl.build(s, args, target="cuda -arch=sm_80")
    cuda = mod.get_source("cuda")
    assert "sl_wmma_mma_f32_f16(" in cuda
    assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in mod.get_source("ptx")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((MT, KT, T, T)).astype("float16")
    b = rng.standard_normal((KT, NT, T, T)).astype("float16")
    ref = np.einsum("mkij,knjl->mnil", a.astype("float64"), b.astype("float64"))
    c = np.zeros((MT, NT, T, T), "float32")
    mod.emulate(a, b, c, engine="shim", bounds_check=True)
    np.testing.assert_allclose(c, ref, **TOL["float32"])
    simt = np.zeros_like(c)
    mod.emulate(a, b, simt, engine="simt")
    np.testing.assert_array_equal(simt, c)
    if mod.ptxas_info is not None:
        assert mod.ptxas_info["C_kernel"].spill_bytes == 0


def test_wmma_load_refuses_the_accumulator_scope():
    with pytest.raises(ValueError, match="wmma loads into wmma.matrix_a or wmma.matrix_b"):
        mma.wmma_load_intrin("wmma.accumulator")
