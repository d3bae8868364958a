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


@pytest.mark.skipif(gpu_problem() is None, reason="a GPU is present: the script would time the sweep")
def test_gpu_gemm_tiles_builds_its_configurations_within_the_shared_limit(capsys, monkeypatch):
    monkeypatch.syspath_prepend(str(SCRIPT.parent))
    tiles = pytest.importorskip("gpu_gemm_tiles")
    for kb in (48, 227):
        configs = tiles.configurations(kb * 1024)
        assert configs and all(tiles.shared_bytes(c) <= kb * 1024 for c in configs)
        assert all((c["BM"] // c["WM"]) * (c["BN"] // c["WN"]) in (4, 8) for c in configs)
    assert len(tiles.configurations(227 * 1024)) > len(tiles.configurations(48 * 1024))
    assert tiles.main(["--n", "256", "--limit", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2 and all("0 B spilled" in line and "built" in line for line in out)
