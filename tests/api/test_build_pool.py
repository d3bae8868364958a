"""build_pool.build_each: many builds by a few threads, results and errors as a loop gives them."""
import threading

import numpy as np
import pytest

import schedlang as sl
from schedlang import build_pool
from tests import programs


def test_results_in_item_order_whatever_the_timing():
    import time
    out = build_pool.build_each(lambda i: (time.sleep(0.01 * (5 - i)), i * i)[1], range(6), workers=3)
    assert out == [i * i for i in range(6)]


def test_first_failing_item_raises_after_all_ran():
    ran = []
    lock = threading.Lock()

    def build(i):
        with lock:
            ran.append(i)
        if i in (2, 4):
            raise ValueError(f"item {i}")
        return i
    with pytest.raises(ValueError, match="item 2"):
        build_pool.build_each(build, range(6), workers=2)
    assert sorted(ran) == list(range(6))


def test_workers_from_the_environment(monkeypatch):
    monkeypatch.setenv(build_pool.ENV, "1")
    assert build_pool.default_workers() == 1
    monkeypatch.setenv(build_pool.ENV, "zero")
    with pytest.raises(ValueError, match="SCHEDLANG_BUILD_THREADS"):
        build_pool.default_workers()
    monkeypatch.setenv(build_pool.ENV, "0")
    with pytest.raises(ValueError, match="at least 1"):
        build_pool.default_workers()
    monkeypatch.delenv(build_pool.ENV)
    assert 1 <= build_pool.default_workers() <= build_pool.MAX_WORKERS


def test_modules_built_by_threads_are_the_serial_ones():
    """Real builds, two threads: the same LLVM IR as built one after another, and correct results."""
    def job(n):
        A, B, C = programs.gemm(n, n + 3, 7)
        s = sl.create_schedule(C.op)
        _, yi = s[C].split(C.op.axis[1], factor=4)
        s[C].vectorize(yi)
        s[C].parallel(C.op.axis[0])
        return s, [A, B, C]

    sizes = [5, 9, 16, 33]
    serial = [sl.build(*job(n), cache=False) for n in sizes]
    threaded = build_pool.build_each(lambda n: sl.build(*job(n), cache=False), sizes, workers=2)
    for n, a, b in zip(sizes, serial, threaded):
        assert a.get_source("ll") == b.get_source("ll")
        rng = np.random.default_rng(n)
        x, y = rng.random((n, 7), dtype=np.float32), rng.random((7, n + 3), dtype=np.float32)
        out = np.zeros((n, n + 3), dtype=np.float32)
        b(x, y, out)
        np.testing.assert_allclose(out, x @ y, rtol=1e-5, atol=1e-5)
