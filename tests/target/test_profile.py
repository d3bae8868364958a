"""Kernels that time themselves ("llvm -profile", target/llvm/profile.py): every kernel call of
a module gets its time and the module's call count, read and reset by kernel_times(); the
results are those of the module built without the option; an exported library keeps them;
a module split into several LLVM modules times its kernels too."""
import numpy as np
import pytest

import schedlang as sl
from schedlang.target.llvm import split
from schedlang.topi import nn


def _matmul_then_add(n: int):
    """A matmul (n^3 multiply-adds) then an elementwise add (n^2): two kernels, the first far heavier."""
    A = sl.placeholder((n, n), name="A")
    B = sl.placeholder((n, n), name="B")
    M = nn.matmul(A, B, name="M")
    C = sl.compute((n, n), lambda i, j: M[i, j] + 1.0, name="C")
    s = sl.create_schedule(C.op)
    return s, [A, B, C]


def _run(mod, n: int, calls: int):
    rng = np.random.default_rng(0)
    a, b = rng.random((n, n), dtype=np.float32), rng.random((n, n), dtype=np.float32)
    c = np.zeros((n, n), np.float32)
    for _ in range(calls):
        mod(a, b, c)
    np.testing.assert_allclose(c, a @ b + 1.0, rtol=1e-4)


def test_each_kernel_is_timed_and_the_times_reset():
    n = 96
    s, args = _matmul_then_add(n)
    mod = sl.build(s, args, target="llvm -profile", cache=False)
    assert mod.target.profile
    _run(mod, n, 3)
    times = mod.kernel_times()
    assert [t.name for t in times] == mod.kernel_names and len(times) == 2
    assert [t.calls for t in times] == [3, 3]
    matmul, add = times
    assert matmul.seconds > 0 and add.seconds > 0
    assert matmul.per_call > 5 * add.per_call            # 96x the work
    again = mod.kernel_times()                           # reset by the read before
    assert [(t.calls, t.seconds) for t in again] == [(0, 0.0), (0, 0.0)]
    _run(mod, n, 1)
    assert [t.calls for t in mod.kernel_times(reset=False)] == [1, 1]
    assert [t.calls for t in mod.kernel_times()] == [1, 1]


def test_the_option_adds_only_the_clock():
    s, args = _matmul_then_add(8)
    plain = sl.build(s, args, cache=False).get_source()
    timed = sl.build(s, args, target=sl.Target("llvm", profile=True), cache=False).get_source()
    assert "clock_gettime" not in plain and "schedlang_kernel_ns" not in plain
    assert timed.count("call i32 @clock_gettime") == 4          # before and after each of two kernels


def test_a_module_built_without_the_option_says_how_to_get_times():
    s, args = _matmul_then_add(8)
    mod = sl.build(s, args, cache=False)
    with pytest.raises(ValueError, match="llvm -profile"):
        mod.kernel_times()


def test_an_exported_library_times_its_kernels(tmp_path):
    n = 32
    s, args = _matmul_then_add(n)
    mod = sl.build(s, args, target="llvm -profile", cache=False)
    path = str(tmp_path / "timed.so")
    mod.export_library(path)
    loaded = sl.load_module(path)
    _run(loaded, n, 2)
    times = loaded.kernel_times()
    assert [t.name for t in times] == [t.name for t in mod.kernel_times()]
    assert [t.calls for t in times] == [2, 2] and all(t.seconds > 0 for t in times)


def test_a_split_module_times_every_kernel(monkeypatch):
    monkeypatch.setattr(split, "MIN_KERNELS", 4)
    monkeypatch.setattr(split, "KERNELS_PER_MODULE", 3)
    n, stages = 1003, 7
    A = sl.placeholder((n,), name="A")
    t = A
    for k in range(stages):
        t = sl.compute((n,), lambda i, p=t, k=k: p[i] * 2.0 + float(k), name=f"S{k}")
    s = sl.create_schedule(t.op)
    mod = sl.build(s, [A, t], target="llvm -profile", cache=False)
    assert mod.ir["llvm"].count(split.MODULE_BREAK) == 3        # really split
    a = np.random.default_rng(1).random(n, dtype=np.float32)
    out = np.zeros(n, np.float32)
    mod(a, out)
    want = a.astype(np.float64)
    for k in range(stages):
        want = want * 2.0 + k
    np.testing.assert_allclose(out, want, rtol=1e-5)
    times = mod.kernel_times()
    assert len(times) == stages and all(t.calls == 1 and t.seconds > 0 for t in times)
