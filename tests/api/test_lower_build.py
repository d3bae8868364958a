"""sl.lower returns a LoweredFunc (its text, carrying the IR) that sl.build accepts, and
build takes TVM's call forms."""
import pytest

import schedlang as sl
from schedlang.kernel import LaunchKind
from tests import programs
from tests.helpers import call_and_compare


def _gemm(bind=False):
    A, B, C = programs.gemm(16, 24, 8)
    s = sl.create_schedule(C.op)
    io, ii = s[C].split(C.op.axis[0], factor=4)
    s[C].vectorize(C.op.axis[1])
    if bind:
        s[C].bind(io, sl.thread_axis("blockIdx.x"))
        s[C].bind(ii, sl.thread_axis("threadIdx.x"))
    else:
        s[C].parallel(io)
    return s, [A, B, C]


def _run(mod):
    call_and_compare(mod, *_gemm())


def test_lowered_is_the_text():
    s, args = _gemm()
    lowered = sl.lower(s, args)
    assert isinstance(lowered, sl.LoweredFunc) and isinstance(lowered, str)
    text = str(lowered)
    assert type(text) is str and lowered == text and text == lowered
    assert text.startswith("func C(") and "parallel i.outer in 0..4:" in lowered
    assert lowered.splitlines() == text.splitlines() and lowered + "\n" == text + "\n"
    assert f"{lowered}" == text
    assert sl.lower(s, args, level="kernel") == sl.lower(s, args, level="kernel", target="llvm")


def test_build_accepts_a_lowered_function():
    s, args = _gemm()
    lowered = sl.lower(s, args)
    mod = sl.build(lowered)
    _run(mod)
    assert mod.ir["tile"] == lowered and mod.ir["kernel"] == sl.lower(s, args, level="kernel")
    _run(sl.build(lowered, target="llvm"))
    _run(sl.build(lowered, "llvm"))
    checked = sl.build(lowered, target=sl.Target("llvm", bounds_check=True))
    _run(checked)
    assert "sl.oob.report" in checked.get_source()


def test_build_from_lowered_does_not_lower_again(monkeypatch):
    s, args = _gemm()
    lowered = sl.lower(s, args, level="kernel")
    import schedlang.driver as driver

    def no(*a, **k):
        raise AssertionError("lowered again")
    monkeypatch.setattr(driver, "lower_all", no)
    monkeypatch.setattr(driver, "lower_to_kernel_ir", no)
    _run(sl.build(lowered))                     # the kernel level is reused for the same target


def test_build_of_lowered_kernel_for_another_target_relowers_only_kernel_ir():
    s, args = _gemm()
    lowered = sl.lower(s, args, level="kernel", target=sl.Target("llvm", vector_bits=128))
    assert "# f32x8" in lowered and "f32x24" not in lowered      # 128-bit registers: strip-mined
    mod = sl.build(lowered, target="llvm -mcpu=skylake-avx512")
    assert "# f32x24" in mod.ir["kernel"] and "f32x8" not in mod.ir["kernel"]   # 512-bit: one group


def test_tvm_build_forms():
    s, args = _gemm()
    _run(sl.build(s, args, "llvm"))
    mod = sl.build(s, args, target="llvm", name="my_gemm")
    _run(mod)
    assert mod.name == "my_gemm" and "define i32 @my_gemm(ptr" in mod.get_source()


def test_build_rejects_what_a_lowered_function_cannot_give():
    s, args = _gemm()
    with pytest.raises(ValueError, match="lowered with level='loop'"):
        sl.build(sl.lower(s, args, level="loop"))
    with pytest.raises(TypeError, match="takes no args"):
        sl.build(sl.lower(s, args), args)
    with pytest.warns(UserWarning, match=r"build\(lowered, name='g'\) is ignored: the function was named 'C'"):
        assert sl.build(sl.lower(s, args), name="g").name == "C"     # TVM ignores name= here too


def test_bind_is_checked_when_a_cuda_lowering_is_built_for_the_cpu():
    s, args = _gemm(bind=True)
    lowered = sl.lower(s, args, level="kernel", target="cuda")
    assert "launch(blockIdx.x(i.outer: 4), threadIdx.x(i.inner: 4))" in lowered
    with pytest.raises(sl.ScheduleError, match="bind: stage 'C', axis 'i.outer'.*llvm"):
        sl.build(lowered, target="llvm")
    pytest.importorskip("cuda.bindings")
    mod = sl.build(lowered)                   # by default, for the target it was lowered for
    assert mod.target.kind == "cuda" and mod.ir["kernel"] == str(lowered)
    assert sl.build(s, args, target="cuda").get_source() == mod.get_source()


def test_launch_kinds():
    s, args = _gemm(bind=True)
    kernel = sl.lower(s, args, level="kernel", target="cuda").ir["kernel"]
    kinds = {a.tag: a.kind for k in kernel.kernels for a in k.launch}
    assert kinds == {"blockIdx.x": LaunchKind.BLOCK, "threadIdx.x": LaunchKind.THREAD}
    assert all(k.workers is None for k in kernel.kernels)
    s, args = _gemm()
    kernel = sl.lower(s, args, level="kernel").ir["kernel"]
    (k,) = kernel.kernels
    assert [a.kind for a in k.launch] == [LaunchKind.CPU_WORKER] and k.workers is k.launch[0]
    assert f"workers(i.outer: 4)" in str(k)
