"""The backend registry: build and lower dispatch on the target kind, and a backend owns its
Kernel IR passes, its schedule checks and its stages."""
import pytest

import schedlang as sl
from schedlang.target.registry import _BACKENDS
from tests import programs


def _program():
    A, B, C = programs.gemm(8, 8, 8)
    s = sl.create_schedule(C.op)
    s[C].vectorize(C.op.axis[1])
    return s, [A, B, C]


def test_builtin_backends():
    llvm, cuda = sl.get_backend("llvm"), sl.get_backend("cuda")
    assert llvm.kind == "llvm" and cuda.kind == "cuda"
    target = sl.Target.create("llvm")
    assert [name for name, _ in llvm.kernel_passes(target)] == [
        "flatten_buffers", "unroll_loops", "simplify", "widen_index_arith", "vectorize_loops", "simplify",
        "split_kernels", "add_size_params"]
    assert tuple(llvm.stage_names(target)) == ("llvm", "llvm.opt", "jit")
    with pytest.raises(ValueError, match="no backend for target kind 'opencl'"):
        sl.get_backend("opencl")
    with pytest.raises(TypeError, match="must be a schedlang.target.Backend"):
        sl.register_backend("cuda", object())


class RecordingBackend(sl.Backend):
    """A backend that drops unrolling from the pass list and returns what build received."""

    kind = "cuda"

    def __init__(self):
        self.checked = []

    def check_schedule(self, schedule, target):
        self.checked.append(target)

    def kernel_passes(self, target):
        return [(name, run) for name, run in sl.get_backend("llvm").kernel_passes(target) if name != "unroll_loops"]

    def build(self, kernel, target, is_output, texts):
        return ("built", kernel, target, tuple(is_output), texts)


@pytest.fixture
def recording_cuda():
    saved = _BACKENDS.get("cuda")
    backend = RecordingBackend()
    sl.register_backend("cuda", backend)
    yield backend
    if saved is None:
        _BACKENDS.pop("cuda", None)
    else:
        sl.register_backend("cuda", saved)


def test_build_and_lower_dispatch_on_the_target_kind(recording_cuda):
    s, args = _program()
    ko, ki = s[args[2]].split(s[args[2]].op.reduce_axis[0], factor=2)
    s[args[2]].unroll(ki)
    tag, kernel, target, is_output, texts = sl.build(s, args, target="cuda -arch=sm_80", cache=False)   # a tuple: nothing to cache
    assert tag == "built" and target == sl.Target("cuda", arch="sm_80") and is_output == (False, False, True)
    assert set(texts) == {"tensor", "loop", "tile", "kernel"} and texts["kernel"] == str(kernel)
    assert "unrolled k.inner in 0..2:" in texts["tile"]
    assert "k.inner in 0..2" in texts["kernel"]          # this backend's passes left the loop rolled
    assert "k.inner" not in sl.lower(s, args, level="kernel", target="llvm")   # llvm's unrolled it
    assert recording_cuda.checked == [target]


def test_a_backend_module_without_weak_references_is_cached(recording_cuda):
    """build_cache finds live modules by weak reference; a backend's module that has none
    (this backend's tuple) is kept by the cache's own recent-modules list instead."""
    sl.build_cache.clear()
    s, args = _program()
    first = sl.build(s, args, target="cuda -arch=sm_80")
    assert first[0] == "built" and sl.build(s, args, target="cuda -arch=sm_80") is first
    assert sl.build_cache.stats.hits == 1


def test_the_cuda_backend_lowers_an_unbound_program_but_refuses_to_build_it():
    s, args = _program()
    assert sl.lower(s, args, level="kernel", target="cuda").startswith("module C(")
    with pytest.raises(sl.ScheduleError, match="bind an outer loop to blockIdx.x"):
        sl.build(s, args, target="cuda")


def test_the_llvm_backend_refuses_tensors_beyond_32_bit_indices():
    A = sl.placeholder((1 << 16, 1 << 15), name="A")
    B = sl.compute(A.shape, lambda i, j: A[i, j] + 1.0, name="B")
    s = sl.create_schedule(B.op)
    assert "module B(" in sl.lower(s, [A, B], level="kernel", target="cuda")   # the limit is the CPU backend's
    with pytest.raises(ValueError, match="2\\*\\*31 - 1 elements"):
        sl.build(s, [A, B])


def _module_level_imports(path):
    import ast
    tree = ast.parse(path.read_text())
    return ["." * n.level + (n.module or "") if isinstance(n, ast.ImportFrom) else n.names[0].name
            for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]


def test_target_is_a_leaf_and_kernel_ir_needs_no_backend():
    from pathlib import Path
    root = Path(sl.__file__).parent
    assert all(not m.startswith(".") for m in _module_level_imports(root / "target" / "target.py"))
    for path in (root / "kernel").glob("*.py"):
        for m in _module_level_imports(path):
            assert not m.startswith("..target.") or m == "..target.target", (path.name, m)


def test_no_backend_imports_another():
    """Kernel-IR facts live in schedlang/kernel, what modules share in schedlang/target; the
    one exception is the cuda module's emulate(), which runs the SIMT interpreter."""
    import re
    from pathlib import Path
    root = Path(sl.__file__).parent / "target"
    found = []
    for kind in ("llvm", "cuda", "simt"):
        for f in (root / kind).glob("*.py"):
            for other in re.findall(r"from \.\.(\w+)", f.read_text()):
                if other in ("llvm", "cuda", "simt") and (kind, other) != ("cuda", "simt"):
                    found.append(f"{kind}/{f.name} imports {other}")
    assert found == []


def test_backend_modules_share_a_base():
    from schedlang.target.module import BuiltModule
    A, B, C = programs.gemm(8, 8, 8)
    s = sl.create_schedule(C.op)
    s[C].bind(C.op.axis[0], sl.thread_axis("blockIdx.x"))
    s[C].bind(C.op.axis[1], sl.thread_axis("threadIdx.x"))
    cuda = sl.build(s, [A, B, C], target="cuda")
    llvm = sl.build(*_program())
    assert isinstance(cuda, BuiltModule) and isinstance(llvm, BuiltModule)
    assert [b.name for b in cuda.params] == [b.name for b in llvm.params] == ["A", "B", "C"]
    with pytest.raises(NotImplementedError, match="the cuda target cannot export a shared library"):
        cuda.export_library("/nonexistent/x.so")
