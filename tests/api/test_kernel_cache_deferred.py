"""kernel_cache.deferred(): entries stored inside it are written by the writer thread, in
order; a read of one not yet written in this process waits for it (the same module comes
back from disk); flush() leaves every entry on disk; outside it, stores are written at once."""
import threading

import numpy as np

import schedlang as sl
from schedlang import build_cache, kernel_cache
from schedlang.target.llvm.cached import CachedModule

from .test_kernel_cache import cache, inputs, program  # noqa: F401  (the fixture too)


def test_written_behind_and_found(cache, monkeypatch):  # noqa: F811
    gate = threading.Event()
    write = kernel_cache._write_module

    def slow_write(*args):
        gate.wait(30)                       # held until the build has returned
        write(*args)
    monkeypatch.setattr(kernel_cache, "_write_module", slow_write)
    s, args = program()
    with kernel_cache.deferred():
        mod = sl.build(s, args)
    assert kernel_cache.stats.stores == 0 and isinstance(mod.disk_key, str)
    gate.set()
    build_cache.clear()
    again = sl.build(s, args)               # the read waits for the pending entry
    assert isinstance(again, CachedModule) and kernel_cache.stats.loads == 1
    kernel_cache.flush()
    assert kernel_cache.stats.stores == 1
    a, b, want = inputs()
    got = want.copy()
    mod(a, b, want)
    again(a, b, got)
    np.testing.assert_array_equal(got, want)


def test_outside_deferred_written_at_once(cache):  # noqa: F811
    s, args = program(9, 17, 5)
    sl.build(s, args)
    assert kernel_cache.stats.stores == 1 and not kernel_cache._pending_keys
