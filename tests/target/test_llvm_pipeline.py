"""What LLVM's O3 pipeline (target/llvm/jit.py: optimize) must keep doing for our kernels.

The schedule's `vectorize` emits the vectors, but LLVM's loop and SLP vectorizers are not
redundant: with them off, 55 of 70 programs (the digest's, the random schedules', the zoo
models' at tiny size) got other machine code on AVX2, e.g. a softmax with a tail lost 23
of its 49 vector FMAs and a GEMM without `vectorize` stayed scalar, while the warm build
of the tutorial GEMM was only ~1.5 ms (of ~68) faster. They stay on; these tests say why."""
import re

import pytest

import schedlang as sl
from schedlang.target.llvm import jit
from schedlang.target.llvm.codegen import is_parallel_body
from schedlang.topi import cpu, nn
from tests import programs


def _host_has_fma() -> bool:
    return "+fma" in sl.Target.create("llvm").features


needs_fma = pytest.mark.skipif(not _host_has_fma(), reason="the host CPU has no FMA")


def _vector_fmas(mod) -> int:
    """Packed single-precision FMAs on xmm/ymm/zmm registers in the module's machine code."""
    return len(re.findall(r"\bvfmadd\w*ps\s", mod.get_source("asm")))


@needs_fma
def test_tutorial_gemm_keeps_one_vector_fma_per_lane_group():
    A = sl.placeholder((64, 64), name="A")
    B = sl.placeholder((64, 64), name="B")
    C = nn.matmul_packed(A, B, 32)
    s = cpu.schedule_matmul_packed(sl.create_schedule(C.op), C)
    mod = sl.build(s, [A, B, C], cache=False)
    lanes = sl.Target.create("llvm").vector_bits // 32
    # k unrolled by 4, 32 columns vectorized: 4 * 32 / lanes FMAs in the inner loop
    assert _vector_fmas(mod) >= 4 * 32 // lanes


@needs_fma
def test_a_loop_the_schedule_left_scalar_is_vectorized_by_llvm():
    A, B, C = programs.gemm(32, 64, 16)
    s = sl.create_schedule(C.op)
    k = C.op.reduce_axis[0]
    s[C].reorder(C.op.axis[0], k, C.op.axis[1])     # columns innermost, not vectorized by us
    mod = sl.build(s, [A, B, C], cache=False)
    assert "x float>" not in mod.get_source("ll")       # our code is scalar
    assert _vector_fmas(mod) >= 1, "LLVM's loop vectorizer no longer vectorizes a plain column loop"


def test_one_pipeline_machine_per_cpu_gives_the_optimised_ir_of_a_fresh_one():
    """optimize() borrows one target machine per (cpu, features) (jit.pipeline_machine): the
    same object for the same CPU, another for other features, and the optimised IR is the
    one a new target machine gives."""
    target = sl.Target.create("llvm")
    name, features = target.cpu, target.features
    assert jit.pipeline_machine(name, features) is jit.pipeline_machine(name, features)
    other = ",".join(f for f in features.split(",") if f != "+fma") + ",-fma"
    assert jit.pipeline_machine(name, other) is not jit.pipeline_machine(name, features)
    A = sl.placeholder((64, 64), name="A")
    B = sl.placeholder((64, 64), name="B")
    C = nn.matmul_packed(A, B, 32)
    s = cpu.schedule_matmul_packed(sl.create_schedule(C.op), C)
    text = sl.build(s, [A, B, C], cache=False).get_source("ll")
    kept = str(jit.optimize(text, name, features, is_parallel_body))
    kept_machine = jit.pipeline_machine
    try:
        jit.pipeline_machine = jit.target_machine          # a new one for this call
        fresh = str(jit.optimize(text, name, features, is_parallel_body))
    finally:
        jit.pipeline_machine = kept_machine
    assert kept == fresh
