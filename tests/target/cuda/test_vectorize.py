"""vectorize on the CUDA target (target/cuda/vectorize.py, codegen_vector.py): float4/float2/__half2/
__nv_bfloat162 accesses where contiguous and provably aligned, per-lane scalar code otherwise, loops
kept scalar where CUDA has no vector form; storage_align on shared memory; double_buffer at a block loop refused.
Each program is compiled by NVRTC and run through the shim against the reference evaluator."""

import pytest

import schedlang as sl
from tests.target.cuda import schedules
from tests.helpers import assert_golden, emulate_and_check

pytest.importorskip("cuda.bindings")


def test_silu_and_mul_float4_loads_and_stores():
    mod = emulate_and_check(*schedules.silu_and_mul_vec(rows=3, d=64))
    src = mod.get_source()
    assert "*(float4*)(out + i * 64 + j_outer_outer * 32 + j_outer_inner * 4) = " in src
    assert "*(const float4*)(x + i * 128 + j_outer_outer * 32 + j_outer_inner * 4 + 64)" in src
    assert "make_float4(x[" not in src and "for (" not in src, "every access is one float4"
    ptx = mod.get_source("ptx")
    assert "ld.global.nc.v4.f32" in ptx or "ld.global.v4.f32" in ptx
    assert "st.global.v4.f32" in ptx


def test_golden_silu_and_mul_float4(update_golden):
    text = sl.build(*schedules.silu_and_mul_vec(rows=3, d=64), target="cuda").get_source("cuda")
    assert_golden(text, "cuda_silu_and_mul_float4.cuda.txt", update_golden)


def test_unaligned_accesses_are_per_lane_scalars_and_the_tail_a_scalar_loop():
    """d = 50: x[i, j] stays aligned (rows of 100), x[i, j + 50] and out[i, j] (rows of 50) do not;
    the last group of a row (48..51) runs the scalar loop under its guard."""
    mod = emulate_and_check(*schedules.silu_and_mul_vec(rows=3, d=50))
    src = mod.get_source()
    assert "*(const float4*)(x + i * 100 + j_outer_outer * 32 + j_outer_inner * 4)" in src
    assert "make_float4(x[i * 100 + j_outer_outer * 32 + j_outer_inner * 4 + 50], " in src
    assert "out[i * 50 + j_outer_outer * 32 + j_outer_inner * 4 + 3] = lanes.w;" in src
    assert "*(float4*)(out" not in src and "for (int j_inner = 0; j_inner < 4; ++j_inner)" in src


@pytest.mark.parametrize("dtype, d, vtype", [("float16", 66, "__half2"), ("bfloat16", 64, "__nv_bfloat162")])
def test_half2_and_bfloat162(dtype, d, vtype):
    """Two lanes of 16-bit floats a vector access, computed as float2 (bfloat16 rounded after each
    operation, as scalars are); d = 66 keeps the x[i, j + d] loads aligned to 2."""
    mod = emulate_and_check(*schedules.silu_and_mul_vec(rows=2, d=d, dtype=dtype, lanes=2))
    src = mod.get_source()
    assert f"*({vtype}*)(out + " in src and f"*(const {vtype}*)(x + " in src
    assert ("sl_round_bf16(" in src) == (dtype == "bfloat16")


def test_float32_loop_of_eight_is_two_float4_groups_and_strided_loads_per_lane():
    """B[i, j] = A[j, i] * 2 with j vectorized by 8: stores are two float4 groups; the loads step
    by a row of A, so each lane loads its own element."""
    A = sl.placeholder((16, 24), name="A")
    B = sl.compute((24, 16), lambda i, j: A[j, i] * 2.0, name="B")
    s = sl.create_schedule(B.op)
    jo, ji = s[B].split(B.op.axis[1], factor=8)
    s[B].bind(B.op.axis[0], sl.thread_axis("blockIdx.x"))
    s[B].bind(jo, sl.thread_axis("threadIdx.x"))
    s[B].vectorize(ji)
    src = emulate_and_check(s, [A, B]).get_source()
    assert "for (int j_inner_o = 0; j_inner_o < 2; ++j_inner_o)" in src
    assert "*(float4*)(B + i * 16 + j_outer * 8 + j_inner_o * 4) = make_float4(A[" in src
    assert "make_float4(2.0f, 2.0f, 2.0f, 2.0f)" in src


def test_aligned_local_buffer_and_float2():
    """A local accumulator of 2 columns a thread, written and read as float2: the local array is
    declared __align__(8)."""
    A = sl.placeholder((10, 6), name="A")
    B = sl.compute((10, 6), lambda i, j: sl.exp(A[i, j]) + 1.0, name="B")
    s = sl.create_schedule(B.op)
    BL = s.cache_write(B, "local")
    jo, ji = s[B].split(B.op.axis[1], factor=2)
    s[B].bind(B.op.axis[0], sl.thread_axis("blockIdx.x"))
    s[B].bind(jo, sl.thread_axis("threadIdx.x"))
    s[B].vectorize(ji)
    s[BL].compute_at(s[B], jo)
    s[BL].vectorize(BL.op.axis[1])
    src = emulate_and_check(s, [A, B]).get_source()
    assert "__align__(8) float B_local[2];" in src
    assert "*(float2*)(B_local + 0) = expf(*(const float2*)(A + " in src


@pytest.mark.parametrize("what, why", [("int", "int32"), ("select", "no CUDA vector form"),
                                        ("three", "not a multiple of a CUDA vector width")])
def test_loops_without_a_cuda_vector_form_stay_scalar(what, why):
    n = 3 if what == "three" else 8
    dt = "int32" if what == "int" else "float32"
    A = sl.placeholder((5, n), dt, name="A")
    if what == "select":
        B = sl.compute((5, n), lambda i, j: sl.if_then_else(A[i, j] > 0.0, A[i, j], 0.0), name="B")
    else:
        B = sl.compute((5, n), lambda i, j: A[i, j] + A[i, j], name="B")
    s = sl.create_schedule(B.op)
    s[B].bind(B.op.axis[0], sl.thread_axis("threadIdx.x"))
    s[B].vectorize(B.op.axis[1])
    mod = emulate_and_check(s, [A, B])
    assert "kept scalar" in mod.ir["kernel"] and why in mod.ir["kernel"]
    assert "float4" not in mod.get_source() and "float2" not in mod.get_source()


def test_transpose_through_shared_memory_with_storage_align():
    """storage_align(16, 1) pads the tile's rows from 16 to 17 floats: the column reads of a warp
    (16 rows apart) fall in different banks. Race-free under ThreadSanitizer, and correct."""
    plain = emulate_and_check(*schedules.shared_transpose(40, 36, align=None))
    aligned = emulate_and_check(*schedules.shared_transpose(40, 36, align=(16, 1)), sanitize="thread")
    assert "__shared__ float A_shared[256];" in plain.get_source()
    src = aligned.get_source()
    assert "__shared__ float A_shared[271];" in src     # 15 rows of 17 and a last row of 16
    assert "A_shared[ax0 * 17 + ax1] = A[" in src and "= A_shared[ax1 * 17 + ax0];" in src
    if aligned.ptxas_info is not None:
        assert aligned.ptxas_info["B_kernel"].shared_bytes == 271 * 4


def test_storage_align_on_the_cpu_is_harmless():
    s, args = schedules.shared_transpose(20, 18, tile=8, align=(8, 3))
    A, B = args
    s2 = sl.create_schedule(B.op)
    AS = s2.cache_read(A, "local", [B])
    s2[AS].storage_align(AS.op.axis[0], 8, 3)
    mod = sl.build(s2, [A, B])
    import numpy as np
    a = np.random.default_rng(0).standard_normal((20, 18)).astype("float32")
    b = np.zeros((18, 20), "float32")
    mod(a, b)
    np.testing.assert_array_equal(b, a.T)


def test_double_buffer_at_a_block_loop_is_refused_clearly():
    """A tile computed at a loop bound to blockIdx has no next iteration to fetch ahead for."""
    s, (A, B) = schedules.shared_transpose()
    AS = next(st for st in s.stages if st.name == "A.shared")
    AS.double_buffer()
    with pytest.raises(sl.ScheduleError, match=r"double_buffer.*which is bind\(blockIdx.x\); only a serial loop"):
        sl.build(s, [A, B], target="cuda")


def test_a_misaligned_argument_is_refused_before_a_vector_access():
    import numpy as np
    s, args = schedules.silu_and_mul_vec(rows=3, d=64)
    mod = sl.build(s, args, target="cuda")
    storage = np.zeros(3 * 128 + 1, "float32")
    x = storage[1:].reshape(3, 128)          # 4 bytes past a 16-byte boundary
    with pytest.raises(ValueError, match="argument 'x' starts at address .* not a multiple of 16 bytes"):
        mod.emulate(x, np.zeros((3, 64), "float32"))


def _vector_fetch_gemm(M, N, K):
    """shared_gemm's tiles fetched four adjacent elements a thread: the fused tile axis split by 4
    and vectorized; the lanes of a group stay in one row of the tile (ramp // 16 is one value)."""
    from schedlang.topi import cuda
    from tests import programs
    A, B, C = programs.gemm(M, N, K)
    return cuda.schedule_matmul_shared(sl.create_schedule(C.op), C, (8, 16), 16, fetch_vector=4), [A, B, C]


def test_cooperative_fetch_with_float4_into_aligned_shared_tiles():
    mod = emulate_and_check(*_vector_fetch_gemm(64, 64, 64), sanitize="thread")
    src = mod.get_source()
    assert "__shared__ __align__(16) float A_shared[128];" in src
    assert ("*(float4*)(A_shared + i_inner * 64 + j_inner * 4) = *(const float4*)(A + i_outer * 512 + "
            "i_inner * 256 + j_inner / 4 * 64 + k_outer * 16 + j_inner % 4 * 4);") in src
    assert src.count("__syncthreads();") == 2


def test_cooperative_fetch_with_odd_shapes_guards_whole_vectors():
    """70x50x30: the tile edges are guarded per element; the fused axis's quotient and
    remainder split off the lanes ((4 * j + l) // 16 == j // 4, simplify), so the guards of a
    whole float4 hoist out of them: a vector where all four are in bounds, the guarded scalar
    loop where some are not (emulate_and_check: numerics and bounds)."""
    mod = emulate_and_check(*_vector_fetch_gemm(70, 50, 30))
    src = mod.get_source()
    assert "if (k_outer * 16 + j_inner % 4 * 4 + 3 < 30) {" in src
    assert "*(float4*)(A_shared + i_inner * 64 + j_inner * 4) = make_float4(" in src   # rows of 30: not 16-byte aligned
    assert "if (k_outer * 16 + j_inner % 4 * 4 + ax0_ax1_fused_inner < 30) {" in src   # the scalar tail
