"""The TVM ports run on every CPU target: a port test that calls build_and_run (check.py, itself
or through a helper of its module) runs once for llvm and once for the c target (C99 through the
system C compiler). The c runs of the modules in C_BY_DEFAULT are in the default suite; the
others are marked slow (each c build is a compile of ~0.2 s)."""
import pytest

from tests.cpu_targets import needs_cc
from tests.tvm_ports import check

C_BY_DEFAULT = {"test_opt_gemm"}     # TVM's GEMM tutorial, every step of it


def _calls_build_and_run(fn, module, depth: int = 2) -> bool:
    """Whether fn calls build_and_run, itself or through a helper of its module."""
    names = getattr(getattr(fn, "__code__", None), "co_names", ())
    return "build_and_run" in names or depth > 0 and any(
        _calls_build_and_run(getattr(module, n), module, depth - 1) for n in names
        if callable(getattr(module, n, None)) and getattr(getattr(module, n), "__module__", "") == module.__name__)


def pytest_generate_tests(metafunc):
    if not _calls_build_and_run(metafunc.function, metafunc.module):
        return
    marks = [needs_cc] if metafunc.module.__name__.rsplit(".", 1)[-1] in C_BY_DEFAULT else [needs_cc, pytest.mark.slow]
    metafunc.parametrize("port_target", ["llvm", pytest.param("c", marks=marks)], indirect=True)


@pytest.fixture(autouse=True)
def port_target(request, monkeypatch):
    """The target build_and_run builds for (besides the bounds-checked llvm build)."""
    target = getattr(request, "param", "llvm")
    monkeypatch.setattr(check, "TARGET", target)
    return target
