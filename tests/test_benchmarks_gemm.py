"""Smoke runs of the transformer GEMM benchmarks at tiny sizes: gemm_shapes.py checks every
kernel against torch before timing it (it raises otherwise), model_profile.py builds every
kernel of a tiny model alone and reports the kinds."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(script, *args):
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", script), *args],
                          capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


@pytest.mark.slow      # two tiny Linears built for AVX2 and AVX-512 code and timed beside torch (about 20 s)
def test_gemm_shapes_quick_run():
    out = _run("gemm_shapes.py", "--threads", "1", "--shapes", "7x19x33", "9x40x70", "--rounds", "1")
    rows = [line for line in out.splitlines() if line.strip().startswith(("7x19x33", "9x40x70"))]
    assert len(rows) == 2 and all("%" in r and "peak avx512" in r and "avx2" in r for r in rows), out


@pytest.mark.slow      # a tiny Llama's kernels built alone and timed (about 20 s)
def test_model_profile_quick_run():
    out = _run("model_profile.py", "--model", "llama", "--size", "tiny", "--rounds", "1")
    assert "matmul" in out and "attention" in out and "top kernels" in out, out
