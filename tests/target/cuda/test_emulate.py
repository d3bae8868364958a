"""CUDA programs compiled by NVRTC to PTX and run on the CPU through the shim (the exact
CUDA C, built by g++ against shim/cuda_shim.h), against the reference evaluator."""

import pytest

import schedlang as sl
from tests.helpers import assert_golden, emulate_and_check, run_both_engines
from tests.target.cuda import schedules
from tests.target.cuda.schedules import arrays_for

pytest.importorskip("cuda.bindings")


def test_elementwise_with_a_tail_block():
    mod = emulate_and_check(*schedules.elementwise(1000, 64))
    assert "if (i_outer * 64 + i_inner < 1000) {" in mod.get_source("cuda")


def test_silu_and_mul_fused_bound_and_vectorized():
    mod = emulate_and_check(*schedules.silu_and_mul())
    src = mod.get_source()
    assert "*(float4*)(out + i_j_fused_outer * 128 + i_j_fused_inner_outer * 4) = " in src, "aligned float4 stores"
    assert "make_float4(x[" in src, "loads across the fused rows are per-lane scalars"
    assert "for (int i_j_fused_inner_inner = 0; i_j_fused_inner_inner < 4; ++i_j_fused_inner_inner)" in src, \
        "the last group runs a scalar loop"


def test_tiled_gemm_with_a_local_accumulator():
    mod = emulate_and_check(*schedules.tiled_gemm())
    src = mod.get_source()
    assert "float C_local[1];" in src and "const int i_outer = blockIdx.y;" in src
    assert "__launch_bounds__(128)" in src


def test_prefetch_is_ignored_by_the_cuda_backend():
    """A schedule with Stage.prefetch (the CPU backend's hint) builds for cuda and computes
    the same as without it; the CUDA C has no trace of it."""
    s, args = schedules.tiled_gemm()
    A, B, C = args
    local = [st for st in s.stages if st.name == "C.local"][0]
    local.prefetch(B, local.op.reduce_axis[0], 4)
    mod = emulate_and_check(s, args)
    assert "prefetch" not in mod.get_source("cuda")


def test_row_sum_one_row_a_thread():
    emulate_and_check(*schedules.row_sum())


def test_float16_int_and_double_arithmetic():
    """half is stored as __half and computed in float; floordiv/floormod on negative ints;
    int8 wraps before it is divided (C would compute in int); double math."""
    mod = emulate_and_check(*schedules.mixed_dtypes())
    assert "#include <cuda_fp16.h>" in mod.get_source() and "__half* __restrict__ H" in mod.get_source()
    assert "sl_floordiv<signed char, unsigned>((signed char)(J[" in mod.get_source()


def test_ptx_ir_levels_and_ptxas_figures():
    s, args = schedules.shared_gemm()
    mod = sl.build(s, args, target="cuda -arch=sm_80")
    assert list(mod.ir) == ["tensor", "loop", "tile", "kernel", "cuda", "ptx"]
    assert ".entry C_kernel(" in mod.get_source("ptx") and ".target sm_80" in mod.get_source("ptx")
    assert "__shared__ float A_shared[64];" in mod.get_source("cuda")
    if mod.ptxas_info is None:
        pytest.skip("no ptxas on PATH")
    info = mod.ptxas_info["C_kernel"]
    assert info.registers > 0 and info.spill_bytes == 0 and info.shared_bytes == (64 + 128) * 4


GOLDEN_PROGRAMS = {"cuda_elementwise": lambda: schedules.elementwise(1000, 64),
                   "cuda_tiled_gemm": lambda: schedules.tiled_gemm(),
                   "cuda_shared_gemm": lambda: schedules.shared_gemm(),
                   "cuda_row_max_cross_thread": lambda: schedules.row_reduce(rows=7, cols=300, threads=128,
                                                                               reducer="max", rows_per_block=2)}


@pytest.mark.parametrize("name", sorted(GOLDEN_PROGRAMS))
def test_golden_cuda_source(name, update_golden):
    text = sl.build(*GOLDEN_PROGRAMS[name](), target="cuda").get_source("cuda")
    assert_golden(text, f"{name}.cuda.txt", update_golden)


def test_thread_sanitizer_is_quiet_on_a_race_free_kernel():
    emulate_and_check(*schedules.elementwise(1000, 64), sanitize="thread")


def test_two_kernels_through_a_global_temporary():
    """A root intermediate stage is its own kernel; the module allocates its buffer."""
    mod = emulate_and_check(*schedules.two_kernels())
    assert mod.kernels == ["C_B", "C_kernel"]


def test_shared_gemm_cooperative_fetch_with_barriers_is_race_free_and_correct():
    """TVM's tutorial GEMM: A and B tiles fetched into shared memory by all threads of the block at
    each step of k.outer, with __syncthreads() after the fetch and at the end of the step."""
    mod = emulate_and_check(*schedules.shared_gemm(20, 21, 19, block=(4, 8), k_tile=4), sanitize="thread")
    src = mod.get_source()
    assert "__shared__ float A_shared[16];" in src and "__shared__ float B_shared[32];" in src
    assert src.count("__syncthreads();") == 2


def test_shared_gemm_odd_shapes_in_process():
    emulate_and_check(*schedules.shared_gemm(70, 50, 30))


def test_without_the_barrier_pass_thread_sanitizer_reports_the_race(monkeypatch):
    from schedlang.target.cuda.backend import BACKEND
    passes = BACKEND.kernel_passes
    monkeypatch.setattr(BACKEND, "kernel_passes", lambda target: [p for p in passes(target) if p[0] != "insert_barriers"])
    s, args = schedules.shared_gemm(20, 21, 19, block=(4, 8), k_tile=4)
    mod = sl.build(s, args, target="cuda", cache=False)     # not the cached build with barriers
    assert "__syncthreads" not in mod.get_source()
    arrays, _ = arrays_for(s, args)
    with pytest.raises(RuntimeError, match="ThreadSanitizer found a data race"):
        mod.emulate(*arrays, sanitize="thread")


def test_virtual_threads_run_inside_each_thread_not_as_a_launch_axis():
    """TVM's GEMM with 2x2 vthreads of 4x4 threads, 2x2 registers each, shared and local caches."""
    mod = emulate_and_check(*schedules.vthread_gemm(37, 35, 13))
    src = mod.get_source()
    assert "__launch_bounds__(16)" in src and "vthread" not in src
    assert "__shared__ float A_shared[64];" in src and "float C_local[16];" in src   # 4 vthreads x 2x2 registers


def test_thread_axis_takes_a_domain_first_as_in_tvm():
    vx = sl.thread_axis((0, 2), "vthread", name="vx")
    assert vx.thread_tag == "vthread" and vx.var.name == "vx"
    assert sl.thread_axis("threadIdx.x").var.name == "threadIdx.x"
    with pytest.raises(ValueError, match="unknown thread tag"):
        sl.thread_axis((0, 2), "vthread.x")


@pytest.mark.parametrize("make", [schedules.batch_matmul, schedules.conv2d], ids=["batch_matmul", "conv2d"])
def test_batch_matmul_and_conv2d_with_shared_tiles_on_both_engines(make):
    """Odd shapes (tails in every tiled axis); the shim under ThreadSanitizer and the SIMT
    interpreter with its race check both agree with the reference."""
    mod, profile = run_both_engines(*make(), sanitize="thread")
    assert all(p.barriers > 0 for p in profile.values())     # the shared tiles are fenced
