"""Misuses of the cuda target: clear ScheduleError/LoweringError/RuntimeError with hints,
raised before any code is compiled."""
import numpy as np
import pytest

import schedlang as sl
from tests.target.cuda import schedules

pytest.importorskip("cuda.bindings")


def elementwise(n=100):
    A = sl.placeholder((n,), name="A")
    B = sl.compute((n,), lambda i: A[i] + 1.0, name="B")
    return A, B, sl.create_schedule(B.op)


def test_a_kernel_with_nothing_bound():
    A, B, s = elementwise()
    with pytest.raises(sl.ScheduleError, match="no loop bound to a GPU axis(.|\n)*bind an outer loop to blockIdx.x"):
        sl.build(s, [A, B], target="cuda")


def test_more_threads_a_block_than_the_target_allows():
    A, B, s = elementwise(4096)
    schedules.bind(s, B, *s[B].split(B.op.axis[0], factor=2048))
    with pytest.raises(sl.LoweringError, match="2048 threads a block(.|\n)*at most 1024"):
        sl.build(s, [A, B], target="cuda")
    # the limit comes from CUDAOptions
    with pytest.raises(sl.LoweringError, match="at most 256"):
        sl.build(s, [A, B], target=sl.Target("cuda", max_threads_per_block=256))


def test_one_thread_axis_bound_with_two_extents():
    A = sl.placeholder((64,), name="A")
    B = sl.compute((64,), lambda i: A[i] * 2.0, name="B")
    C = sl.compute((64,), lambda i: B[i] + 1.0, name="C")
    s = sl.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=32)
    schedules.bind(s, C, xo, xi)
    s[B].compute_at(s[C], xo)
    s[B].set_scope("shared")     # (a local stage binding a loop to threadIdx is refused before)
    bo, bi = s[B].split(B.op.axis[0], factor=16)
    s[B].bind(bi, sl.thread_axis("threadIdx.x"))
    with pytest.raises(sl.LoweringError, match="threadIdx.x is bound to loops of extents"):
        sl.build(s, [A, C], target="cuda")


def test_parallel_is_a_cpu_loop_kind():
    A, B, s = elementwise()
    s[B].parallel(B.op.axis[0])
    with pytest.raises(sl.ScheduleError, match="bind the loop to blockIdx.x"):
        sl.build(s, [A, B], target="cuda")


def test_calling_without_a_gpu_and_bad_emulate_arguments():
    s, args = schedules.elementwise(100, 32)
    mod = sl.build(s, args, target="cuda")
    a, b = np.zeros(100, "float32"), np.zeros(100, "float32")
    with pytest.raises(RuntimeError, match="no GPU is present(.|\n)*emulate"):
        mod(a, b)
    with pytest.raises(ValueError, match="unknown emulation engine 'gpu'"):
        mod.emulate(a, b, engine="gpu")
    with pytest.raises(ValueError, match="unknown sanitizer 'address'"):
        mod.emulate(a, b, sanitize="address")
    # the llvm module's argument checks
    with pytest.raises(ValueError, match="must have shape"):
        mod.emulate(a, np.zeros(99, "float32"))
    with pytest.raises(TypeError, match="takes 2 arrays"):
        mod.emulate(a)
    with pytest.raises(ValueError, match="overlap"):
        mod.emulate(a, a)
    with pytest.raises(ValueError, match="unknown source format"):
        mod.get_source("ll")


def test_an_nvrtc_error_names_the_source_line():
    from schedlang.target.cuda.nvrtc import compile_ptx
    source = 'extern "C" __global__ void k(float* a) {\n  a[0] = undefined_name;\n}\n'
    with pytest.raises(sl.LoweringError, match="undefined_name(.|\n)*line 2: a\\[0\\] = undefined_name;"):
        compile_ptx(source, "sm_90", "k")


def test_too_much_shared_memory_or_too_many_blocks_along_y():
    s, args = schedules.tiled_gemm(cache_shared=True)       # an 8x8 tile of A a block: 64 floats
    with pytest.raises(sl.LoweringError, match="needs 256 bytes of shared memory(.|\n)*allows 16 a block"):
        sl.build(s, args, target=sl.Target("cuda", max_shared_memory_per_block=16))
    A, B, s = elementwise(70000)
    s[B].bind(B.op.axis[0], sl.thread_axis("blockIdx.y"))
    with pytest.raises(sl.LoweringError, match="70000 blocks along blockIdx.y(.|\n)*at most 65535"):
        sl.build(s, [A, B], target="cuda")


def test_a_shared_stage_computed_outside_the_block():
    s, args = schedules.shared_gemm()
    AA = s.stages[[st.name for st in s.stages].index("A.shared")]
    AA.compute_root()
    with pytest.raises(sl.ScheduleError, match="A.shared.*computed at the root(.|\n)*compute_at"):
        sl.build(s, args, target="cuda")
