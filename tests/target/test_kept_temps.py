"""The entry function keeps its fixed-size temporaries from call to call (target/llvm/temps.py):
the same block again on the next call, correct results when calls overlap on several threads,
the block freed by the module's release function, which runs when the module is collected."""
import ctypes
import gc
import threading

import numpy as np

import schedlang as sl
from schedlang.target.llvm import module as llvm_module
from schedlang.target.llvm.codegen import function_symbol
from schedlang.target.llvm.temps import release_symbol

N, M = 96, 130


def _program(scale: float = 2.0):
    """D = (A * scale + 1) + A * scale, with B = A * scale and C = B + 1 computed at the root:
    two temporaries of the entry function, live together (each a kept block of its own)."""
    A = sl.placeholder((N, M), name="A")
    B = sl.compute((N, M), lambda i, j: A[i, j] * scale, name="B")
    C = sl.compute((N, M), lambda i, j: B[i, j] + 1.0, name="C")
    D = sl.compute((N, M), lambda i, j: C[i, j] + B[i, j], name="D")
    return A, D


def _build(scale: float = 2.0, cache: bool = True):
    A, D = _program(scale)
    return sl.build(sl.create_schedule(D.op), [A, D], target="llvm", cache=cache)


def kept_blocks(mod):
    """The values of the module's temporaries' slots (0: empty), in order."""
    entry = function_symbol(mod.name)
    count = sum(1 for line in mod.get_source().splitlines() if line.startswith(f"@{entry}.temps."))
    return [ctypes.c_void_p.from_address(mod._compiled.global_address(f"{entry}.temps.{i}")).value or 0
            for i in range(count)]


def _check(mod, scale: float = 2.0, seed: int = 0):
    a = np.random.default_rng(seed).random((N, M), dtype="float32")
    d = np.full_like(a, np.nan)
    mod(a, d)
    np.testing.assert_allclose(d, a * scale * 2 + 1, rtol=1e-6)


def test_a_call_takes_the_blocks_the_last_call_kept():
    mod = _build()
    assert kept_blocks(mod) == [0, 0]                 # nothing taken before the first call
    _check(mod)
    kept = kept_blocks(mod)
    assert len(kept) == 2 and all(kept) and kept[0] != kept[1]
    for seed in range(3):
        _check(mod, seed=seed)
        assert kept_blocks(mod) == kept


def test_release_frees_the_kept_blocks_and_later_calls_allocate_again():
    mod = _build()
    _check(mod)
    mod.release_temps()
    assert kept_blocks(mod) == [0, 0]
    _check(mod, seed=1)
    assert all(kept_blocks(mod))


def test_overlapping_calls_on_threads_each_get_blocks_of_their_own():
    mod = _build()
    errors = []

    def work(seed):
        try:
            for i in range(40):
                _check(mod, seed=seed * 100 + i)
        except Exception as e:      # noqa: BLE001  (reported below)
            errors.append(e)
    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
    assert all(kept_blocks(mod))


def test_collecting_a_module_releases_its_blocks(monkeypatch):
    released = []

    def recording(release, compiled):
        released.append(compiled)
        release()
    monkeypatch.setattr(llvm_module, "_release", recording)
    mod = _build(scale=3.0, cache=False)     # not kept alive by the in-memory build cache
    _check(mod, scale=3.0)
    del mod
    gc.collect()
    assert len(released) == 1


def test_a_module_without_temporaries_keeps_nothing():
    A = sl.placeholder((N, M), name="A")
    B = sl.compute((N, M), lambda i, j: A[i, j] * 2.0, name="B")
    mod = sl.build(sl.create_schedule(B.op), [A, B], target="llvm")
    assert release_symbol(function_symbol(mod.name)) not in mod.get_source()


def test_an_exported_library_keeps_and_releases_its_blocks(tmp_path):
    mod = _build(scale=5.0)
    path = str(tmp_path / "kept.so")
    mod.export_library(path)
    loaded = sl.load_module(path)
    for seed in range(3):
        _check(loaded, scale=5.0, seed=seed)
    # The release function is exported; calling it between calls is harmless.
    ctypes.CFUNCTYPE(None)(loaded._compiled.address(release_symbol(function_symbol(loaded.name))))()
    _check(loaded, scale=5.0, seed=7)
