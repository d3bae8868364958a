"""benchmarks/gpu_check.py without a GPU (--quick): it builds every kernel of its table (NVRTC,
ptxas: no spills), runs each on the SIMT engine against torch, and exits 0."""
import importlib.util
import sys
from pathlib import Path

import pytest

pytest.importorskip("cuda.bindings")
from schedlang.target.cuda.gpu import gpu_problem  # noqa: E402

SCRIPT = Path(__file__).resolve().parents[3] / "benchmarks" / "gpu_check.py"


@pytest.mark.skipif(gpu_problem() is None, reason="a GPU is present: the script would time the table")
def test_gpu_check_compiles_and_emulates_every_kernel_and_says_no_gpu(capsys, monkeypatch):
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    gpu_check = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "gpu_check", gpu_check)     # dataclasses look their module up
    spec.loader.exec_module(gpu_check)
    assert gpu_check.main(["--quick"]) == 0
    out = capsys.readouterr().out
    n = len(gpu_check.rows(small=True))
    assert n >= 7 and out.count("built ") == n and "BUILD FAILED" not in out and "SPILLS" not in out
    for row in ("GEMM float16 tensor cores", "GEMM bfloat16 tensor cores", "Linear float16", "attention float16"):
        assert row in out
    assert "no GPU here" in out and f"{n} of {n} kernels compiled without spills" in out
    assert f"{n} of {n} emulated kernels match torch" in out and "MISMATCH" not in out
