"""The SIMT engine's fast path for registers (memory.Memory.fast_local: a local buffer at an
index all threads share read and written as one column) against the general path it skips:
identical outputs, bit for bit, identical profiles, and the same race error."""
import dataclasses

import numpy as np
import pytest

import schedlang as sl
from schedlang.target.simt.memory import Memory
from tests.target.cuda import schedules
from tests.target.cuda.schedules import arrays_for
from tests.target.simt.test_simt import PROGRAMS

pytest.importorskip("cuda.bindings")

KERNELS = {
    **{name: PROGRAMS[name] for name in ("vthread_gemm", "shared_gemm_local_a", "row_max_cross_thread_2d",
                                         "softmax_fused", "store_predicate", "silu_and_mul")},
    "register_tiled_odd": lambda: schedules.vthread_gemm(45, 29, 21, k_tile=8),   # tails: masked local stores
    "silu_and_mul_vec": lambda: schedules.silu_and_mul_vec(rows=3, d=40, threads=8),
    "conv2d": lambda: schedules.conv2d(),
}


def _run(mod, s, args, fast: bool, monkeypatch):
    monkeypatch.setattr(Memory, "fast_local", fast)
    arrays, _ = arrays_for(s, args)
    profiles = mod.emulate(*arrays, engine="simt", profile=True)
    return arrays, profiles


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_fast_and_general_paths_agree(name, monkeypatch):
    s, args = KERNELS[name]()
    mod = sl.build(s, args, target="cuda")
    fast, fast_profiles = _run(mod, s, args, True, monkeypatch)
    slow, slow_profiles = _run(mod, s, args, False, monkeypatch)
    for a, b in zip(fast, slow):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert fast_profiles == slow_profiles
    for k, p in fast_profiles.items():
        assert dataclasses.asdict(p) == dataclasses.asdict(slow_profiles[k])
        assert p.load_requests > 0


def test_fast_path_keeps_the_race_check(monkeypatch):
    """The register-tiled GEMM without its barriers: a race on both paths, named alike."""
    from schedlang.target.cuda.backend import BACKEND
    from schedlang.target.simt import SharedMemoryRace
    passes = BACKEND.kernel_passes
    monkeypatch.setattr(BACKEND, "kernel_passes", lambda target: [p for p in passes(target) if p[0] != "insert_barriers"])
    s, args = schedules.vthread_gemm(37, 35, 13)
    mod = sl.build(s, args, target="cuda", cache=False)
    messages = []
    for fast in (True, False):
        monkeypatch.setattr(Memory, "fast_local", fast)
        arrays, _ = arrays_for(s, args)
        with pytest.raises(SharedMemoryRace) as err:
            mod.emulate(*arrays, engine="simt")
        messages.append(str(err.value))
    assert messages[0] == messages[1]
