"""Asynchronous copies (target/cuda/intrin/copy.py) and the N-stage pipeline (schedule/pipeline.py):
cp.async fetches of the tensor-core GEMM on both engines against numpy and each other; a
missing wait is caught (the copy lands only at its wait_group in emulation); NVRTC and ptxas
accept the kernels for sm_80 and sm_90 without spills."""
import numpy as np
import pytest

import schedlang as sl
from schedlang.target.cuda import backend
from schedlang.target.cuda.intrin import copy
from schedlang.topi import cuda_tensorcore as tc
from tests.target.cuda.test_mma import TOL, run


def test_cp_async_fetch_matches_numpy_on_both_engines():
    M, N, K = 128, 64, 96
    s, args = tc.gemm(M, N, K, async_copy=True)
    mod = sl.build(s, args, target="cuda -arch=sm_80")
    cuda = mod.get_source("cuda")
    assert cuda.index("sl_cp_async_commit();") < cuda.index("sl_cp_async_wait_0();") < cuda.index("__syncthreads();")
    assert "cp.async.cg.shared.global" in mod.get_source("ptx") and "cp.async.wait_group 0" in mod.get_source("ptx")
    c, ref = run(mod, M, N, K, bounds_check=True)
    np.testing.assert_allclose(c, ref, **TOL["float32"])
    np.testing.assert_array_equal(run(mod, M, N, K, engine="simt")[0], c)


def test_a_missing_wait_is_observable(monkeypatch):
    """Without commit and wait_group the copies never land before the reads: on a GPU the mma
    reads stale shared memory; both engines show wrong numbers (the shim's copies land only
    at a wait, the SIMT engine's shared memory starts as NaN)."""
    monkeypatch.setattr(backend, "complete_async_copies", lambda body: body)
    s, args = tc.gemm(64, 64, 64, async_copy=True)
    mod = sl.build(s, args, target="cuda", cache=False)      # (compiled with the patched pass)
    assert "sl_cp_async_wait" not in mod.get_source("cuda")
    for engine in ("shim", "simt"):
        c, ref = run(mod, 64, 64, 64, engine=engine)
        assert not np.allclose(c, ref, **TOL["float32"])


def test_cp_async_intrinsic_checks():
    with pytest.raises(ValueError, match="'ca' .* or 'cg'"):
        copy.cp_async_intrin("float16", "cs")
    with pytest.raises(ValueError, match="wait_group 9"):
        copy.wait(9)


@pytest.mark.parametrize("async_copy, stages", [(False, 3), (True, 2), (True, 3), (True, 4)])
def test_pipelined_gemm_matches_numpy_on_both_engines(async_copy, stages):
    """K = 160: five k steps, so the prologue, the steady state and the drained tail all run."""
    M, N, K = 64, 64, 160
    s, args = tc.gemm(M, N, K, async_copy=async_copy, stages=stages)
    assert f".pipeline({stages})" in s.to_python()
    mod = sl.build(s, args, target="cuda -arch=sm_80")
    cuda = mod.get_source("cuda")
    assert f"__shared__ __align__(16) __half A_shared[{stages * 64 * 32}];" in cuda
    if async_copy:
        # stages - 1 groups before the loop, one an iteration, the (empty) last one before the barrier after it
        assert cuda.count("sl_cp_async_commit();") == stages + 1 and f"sl_cp_async_wait_{stages - 2}();" in cuda
        loop = cuda[cuda.index("for (int k_outer"):]
        # one barrier a step, after the wait and before the next fetch (CUTLASS's order), one after the loop
        assert cuda.count("__syncthreads();") == 2 and loop.index("__syncthreads();") < loop.index("if (k_outer")
    c, ref = run(mod, M, N, K, bounds_check=True)
    np.testing.assert_allclose(c, ref, **TOL["float32"])
    np.testing.assert_array_equal(run(mod, M, N, K, engine="simt")[0], c)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_ptxas_accepts_the_pipelined_kernel_without_spills(arch):
    s, args = tc.gemm(256, 256, 256, BM=128, BN=128, WM=64, WN=32, async_copy=True, stages=3)
    mod = sl.build(s, args, target=f"cuda -arch={arch}")
    ptx = mod.get_source("ptx")
    assert "cp.async.wait_group 1" in ptx and "mma.sync.aligned.m16n8k16" in ptx
    if mod.ptxas_info is None:
        pytest.skip("no ptxas on PATH")
    assert mod.ptxas_info["C_kernel"].spill_bytes == 0


def test_waiting_for_one_group_too_few_is_observable(monkeypatch):
    """wait_group(stages - 1) instead of (stages - 2): iteration i computes before its own copies
    landed; in emulation they land only at the wait that covers them: the shim's numbers are
    wrong, and the SIMT engine sees the late copy land (at the next step's wait, before its
    barrier) while other threads still read the tile."""
    from schedlang.target.simt.races import SharedMemoryRace
    monkeypatch.setattr(copy.ASYNC, "wait", lambda n: copy.wait(n + 1))
    s, args = tc.gemm(64, 64, 160, async_copy=True, stages=3)
    mod = sl.build(s, args, target="cuda", cache=False)      # (compiled with the patched pass)
    assert "sl_cp_async_wait_2();" in mod.get_source("cuda")
    c, ref = run(mod, 64, 64, 160, engine="shim")
    assert not np.allclose(c, ref, **TOL["float32"])
    with pytest.raises(SharedMemoryRace, match="'A.shared'.*sl_cp_async_wait_2"):
        run(mod, 64, 64, 160, engine="simt")


def test_pipeline_checks():
    A, B, C = tc.program(64, 64, 64)
    s = sl.create_schedule(C.op)
    BL = s.cache_read(B, "local", [C])
    with pytest.raises(sl.ScheduleError, match="2 to 8 stages"):
        s[BL].pipeline(1)
    with pytest.raises(sl.ScheduleError, match="is an output"):
        s[C].pipeline(3)
    s[BL].pipeline(3)              # computed at the root: refused when built, as double_buffer is
    with pytest.raises(sl.ScheduleError, match="is computed at the root; a stage gets two buffers"):
        sl.build(s, [A, B, C], target="cuda")


@pytest.mark.parametrize("sanitize", ["thread", "undefined"])
def test_the_pipelined_kernel_is_clean_under_the_sanitizers(sanitize):
    """ThreadSanitizer (one std::thread a GPU thread: the warp gathers, the copies landing at
    their waits, the barriers) finds no race, UndefinedBehaviorSanitizer nothing undefined."""
    s, args = tc.gemm(64, 64, 64, async_copy=True, stages=2)
    mod = sl.build(s, args, target="cuda")
    c, ref = run(mod, 64, 64, 64, sanitize=sanitize)
    np.testing.assert_allclose(c, ref, **TOL["float32"])


def test_a_missing_barrier_after_the_wait_is_a_race_on_both_engines(monkeypatch):
    """Without the barrier between wait_group and the compute (a pipeline pass that dropped
    it), a thread's copies land while other lanes' ldmatrix read them: the SIMT race check
    names the wait as the writer, ThreadSanitizer sees the shim's threads race."""
    from schedlang.kernel import double_buffer
    real = double_buffer.Barrier

    class _IsBarrier(type):
        def __instancecheck__(cls, x):
            return isinstance(x, real)

    class NoBarrier(metaclass=_IsBarrier):      # the pass's new barriers vanish; old ones stay
        def __new__(cls, *args):
            return None
    monkeypatch.setattr(double_buffer, "Barrier", NoBarrier)
    s, args = tc.gemm(64, 64, 192, async_copy=True, stages=3)
    mod = sl.build(s, args, target="cuda", cache=False)      # (compiled with the patched pass)
    assert mod.get_source("cuda").count("__syncthreads();") == 0     # (the step's closing one goes too)
    with pytest.raises(Exception, match=r"race on 'A.shared'.* wrote it in `call_pure_extern\(\"int32\", "
                                        r"\"sl_cp_async_wait_1\"\)`, with no barrier"):
        run(mod, 64, 64, 192, engine="simt")
    with pytest.raises(RuntimeError, match="ThreadSanitizer found a data race"):
        run(mod, 64, 64, 192, sanitize="thread")


def test_a_block_over_48_kb_takes_dynamic_shared_memory():
    """A target that lets a block take more than the static 48 KB (sm_90 gives up to 227 KB to
    a kernel that opts in): the kernel's shared buffers are carved from its dynamic shared
    memory on the GPU, each at its own 16-byte-aligned offset, and the launch asks for the
    total; the shim keeps static arrays; both engines match numpy. Within 48 KB nothing changes."""
    from schedlang.kernel.launch import dynamic_shared_layout
    big = sl.Target("cuda", sl.CUDAOptions(max_shared_memory_per_block=227 * 1024))
    M, N, K = 128, 128, 192
    s, args = tc.gemm(M, N, K, BM=128, BN=128, BK=32, WM=64, WN=64, pad=8, async_copy=True, stages=4)
    mod = sl.build(s, args, target=big)
    (kernel,) = mod.kernel_ir.kernels
    offsets, total = dynamic_shared_layout(kernel)
    (a, a_at), (b, b_at) = sorted(offsets.items(), key=lambda x: x[1])
    assert (a.name, b.name) == ("A.shared", "B.shared") and a.size >= 4 * 127 * 40    # 4 stages of ~128 x (32 + 8)
    a_bytes = -(-a.size * 2 // 16) * 16
    assert (a_at, b_at) == (0, a_bytes) and total == a_bytes + -(-b.size * 2 // 16) * 16 > 48 * 1024
    cuda = mod.get_source("cuda")
    assert "extern __shared__ __align__(16) unsigned char sl_dynamic_shared[];" in cuda
    assert f"__half* B_shared = reinterpret_cast<__half*>(sl_dynamic_shared + {a_bytes});" in cuda
    if mod.ptxas_info is not None:
        assert mod.ptxas_info["C_kernel"].shared_bytes == 0 and mod.ptxas_info["C_kernel"].spill_bytes == 0
    c, ref = run(mod, M, N, K, bounds_check=True)
    np.testing.assert_allclose(c, ref, **TOL["float32"])
    np.testing.assert_array_equal(run(mod, M, N, K, engine="simt")[0], c)
    with pytest.raises(sl.LoweringError, match=f"needs {a.size * 2 + b.size * 2} bytes of shared memory"):
        sl.build(s, args, target="cuda")             # the default target keeps the static limit
    small = sl.build(*tc.gemm(64, 64, 64, async_copy=True, stages=2), target=big)
    assert "sl_dynamic_shared" not in small.get_source("cuda")
    assert dynamic_shared_layout(small.kernel_ir.kernels[0]) is None
