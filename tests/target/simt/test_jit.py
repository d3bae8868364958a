"""The SIMT engine's numba kernels (target/simt/jit.py, jit_kernels.py) against its numpy code,
the reference: identical outputs, identical profiles (every counter, conflicts by buffer) and
identical race reports. The first test of a fresh checkout compiles the kernels (numba's
cache, seconds); later processes load them."""
import sys

import numpy as np
import pytest

import schedlang as sl
from schedlang.dtypes import dtype as dtype_of
from schedlang.expr.nodes import Buffer
from schedlang.target.simt import SharedMemoryRace, jit
from schedlang.target.simt.profile import Counters
from tests.target.cuda import schedules
from tests.target.cuda.schedules import arrays_for
from tests.target.simt.test_profile import transpose
from tests.target.simt.test_profile_counters import FIELDS, random_access

pytest.importorskip("numba")


def use(monkeypatch, engine: str) -> list:
    """Switches the SIMT engine to "jit" (from the first access, no warm-up) or "numpy";
    returns a list that gets one entry each time an access is checked by the numba kernels."""
    used = []
    if engine == "numpy":
        monkeypatch.setenv(jit.ENV, "0")
        return used
    monkeypatch.setenv(jit.ENV, "1")
    monkeypatch.setattr(jit, "WARMUP_ELEMENTS", 0)
    kernels = jit.Warmup.kernels

    def counted(self, elements):
        out = kernels(self, elements)
        used.append(out is not None)
        return out
    monkeypatch.setattr(jit.Warmup, "kernels", counted)
    return used


def emulate(monkeypatch, mod, s, args, engine: str):
    """(outputs, profiles or the race error's text) of one SIMT run with the given engine."""
    used = use(monkeypatch, engine)
    arrays, _ = arrays_for(s, args)
    try:
        report = mod.emulate(*arrays, engine="simt", profile=True)
    except SharedMemoryRace as e:
        report = str(e)
    assert all(used) and (engine == "numpy") == (not used)
    monkeypatch.undo()
    return arrays, report


def assert_same(monkeypatch, mod, s, args):
    """Both engines give bit-identical arrays and equal profiles (or race texts); the profiles."""
    want_arrays, want = emulate(monkeypatch, mod, s, args, "numpy")
    got_arrays, got = emulate(monkeypatch, mod, s, args, "jit")
    for w, g in zip(want_arrays, got_arrays):
        np.testing.assert_array_equal(g, w)
    assert got == want
    if isinstance(want, dict):
        assert {k: p.conflicts_by_buffer for k, p in got.items()} == \
            {k: p.conflicts_by_buffer for k, p in want.items()}      # (not in KernelProfile's ==)
    return got


def without_barriers(monkeypatch):
    from schedlang.target.cuda.backend import BACKEND
    passes = BACKEND.kernel_passes
    monkeypatch.setattr(BACKEND, "kernel_passes",
                        lambda target: [p for p in passes(target) if p[0] != "insert_barriers"])


def test_shared_gemm_with_tails_conflicts_and_a_race(monkeypatch):
    """A shared GEMM with tails, then built without its barriers (a race), and a transpose whose
    column reads of a shared tile conflict: the same outputs, counters and race report from both."""
    s, args = schedules.shared_gemm(20, 21, 19, block=(4, 8), k_tile=4)
    p = assert_same(monkeypatch, sl.build(s, args, target="cuda"), s, args)["C_kernel"]
    assert p.shared_requests > 0 and p.load_requests > 0 and p.store_requests > 0 and p.barriers > 0
    t, t_args = transpose(64)
    assert assert_same(monkeypatch, sl.build(t, t_args, target="cuda"), t, t_args)["B_kernel"].bank_conflicts > 0
    without_barriers(monkeypatch)
    racy = sl.build(s, args, target="cuda", cache=False)
    monkeypatch.undo()
    report = assert_same(monkeypatch, racy, s, args)
    assert "race on" in report and "with no barrier between them" in report


def test_counters_on_random_accesses(monkeypatch):
    """Counters.access on random accesses (as test_profile_counters'), with warps in lane order
    and shuffled: the same figures from both."""
    rng = np.random.default_rng(0)
    cases = []
    for case in range(40):
        scope = "global" if case % 2 else "shared"
        b = Buffer(f"buf_{scope}", (1 << 20,), dtype_of(["float16", "float32", "float64"][case % 3]), scope)
        warp, index = random_access(rng, int(rng.choice([32, 96, 256, 1000])))
        if case % 5 == 4:
            order = rng.permutation(warp.size)
            warp, index = warp[order], index[order]
        cases.append((b, warp, index, bool(case % 4 < 2)))
    figures = {}
    for engine in ("numpy", "jit"):
        used = use(monkeypatch, engine)
        c = Counters()
        for b, warp, index, store in cases:
            c.access(b, warp, index, store)
        figures[engine] = ({f: getattr(c, f) for f in FIELDS}, c.conflicts)
        assert all(used) and (engine == "numpy") == (not used)
        monkeypatch.undo()
    assert figures["jit"] == figures["numpy"]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["shared_gemm_odd", "vthread_gemm", "transpose_padded",
                                  "row_max_cross_thread_2d", "softmax_fused"])
def test_programs(monkeypatch, name):
    s, args = {"shared_gemm_odd": lambda: schedules.shared_gemm(70, 50, 30),
               "vthread_gemm": lambda: schedules.vthread_gemm(37, 35, 13),
               "transpose_padded": lambda: transpose(64, pad=True),
               "row_max_cross_thread_2d": lambda: schedules.row_reduce(rows=7, cols=300, threads=128, reducer="max",
                                                                       rows_per_block=2),
               "softmax_fused": lambda: schedules.softmax(rows=6, cols=70)}[name]()
    assert_same(monkeypatch, sl.build(s, args, target="cuda"), s, args)


@pytest.mark.slow
def test_a_race_in_a_vthread_gemm(monkeypatch):
    s, args = schedules.vthread_gemm(37, 35, 13)
    without_barriers(monkeypatch)
    racy = sl.build(s, args, target="cuda", cache=False)
    monkeypatch.undo()
    assert "race on" in assert_same(monkeypatch, racy, s, args)


def test_without_numba_or_switched_off_numpy_checks(monkeypatch):
    """Where numba cannot be imported, or with SCHEDLANG_SIMT_JIT=0, a checker past its warm-up
    still gets no kernels (numpy checks every access); with it, the kernels."""
    monkeypatch.setattr(jit, "WARMUP_ELEMENTS", 0)
    monkeypatch.setenv(jit.ENV, "1")
    assert jit.Warmup().kernels(10) is not None
    monkeypatch.setenv(jit.ENV, "0")
    assert jit.Warmup().kernels(10) is None
    monkeypatch.setenv(jit.ENV, "1")
    monkeypatch.setitem(sys.modules, "numba", None)         # `import numba` raises ImportError
    monkeypatch.delitem(sys.modules, "schedlang.target.simt.jit_kernels")
    monkeypatch.delattr(sys.modules["schedlang.target.simt"], "jit_kernels")
    jit._load.cache_clear()
    try:
        assert jit.Warmup().kernels(10) is None
    finally:
        jit._load.cache_clear()
