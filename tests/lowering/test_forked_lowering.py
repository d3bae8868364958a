"""The per-nest Kernel IR passes of a many-nest function, half of them run by a forked child
(kernel/forked.py): the same Kernel IR and LLVM text as in one process, the arguments'
buffers still this process's objects, the numbers right; a failing, warning or late child
leaves the work to this process; no fork while a build thread of schedlang runs."""
from __future__ import annotations

import os
import threading
import warnings

import numpy as np
import pytest

import schedlang as sl
from schedlang.kernel import forked

LAYERS, DISTINCT = 12, 9          # layer i adds i % 9: nine distinct nests, three repeated ones


def _layers():
    """x -> relu(x * w_i + i % DISTINCT), LAYERS times; the tensors in call order."""
    x = sl.placeholder((4, 24), name="x")
    args, cur = [x], x
    for i in range(LAYERS):
        w = sl.placeholder((4, 24), name=f"w{i}")
        prev = cur
        cur = sl.compute((4, 24), lambda a, b, p=prev, w=w, c=float(i % DISTINCT): sl.max(p[a, b] * w[a, b] + c, 0.0),
                         name=f"layer{i}")
        args.append(w)
    s = sl.create_schedule(cur.op)
    for t in s.stages:
        if t.op.name.startswith("layer"):
            s[t.op].vectorize(t.op.axis[1])
    return s, args + [cur]


def _reference(arrays):
    cur = arrays[0]
    for i in range(LAYERS):
        cur = np.maximum(cur * arrays[1 + i] + np.float32(i % DISTINCT), 0)
    return cur


@pytest.fixture
def forks(monkeypatch):
    """Two build workers, and the forks counted; build threads that other tests left idle do
    not stop the fork here (test_no_fork_while_a_build_thread_runs checks that rule)."""
    monkeypatch.setenv("SCHEDLANG_BUILD_THREADS", "2")
    monkeypatch.setattr(forked, "OWN_THREADS", ("sl-none-in-this-test",))
    count = []
    real = os.fork

    def fork():
        count.append(1)
        return real()
    monkeypatch.setattr(forked.os, "fork", fork)
    return count


def _lower(monkeypatch, threads: str):
    monkeypatch.setenv("SCHEDLANG_BUILD_THREADS", threads)
    s, args = _layers()
    return sl.lower(s, args, level="kernel")


def test_forked_lowering_gives_the_same_ir_and_numbers(monkeypatch, forks):
    two = _lower(monkeypatch, "2")
    assert forks == [1]                           # the nine distinct nests: one fork
    one = _lower(monkeypatch, "1")
    assert forks == [1]                           # one worker: no fork
    assert str(two) == str(one)
    assert sl.build(two).ir["llvm"] == sl.build(one).ir["llvm"]
    kernel = two.ir["kernel"]
    assert sum(c is not None for c in kernel.copies) == LAYERS - DISTINCT   # repeats still found
    # the kernels' buffers are the module's own objects, not copies the child sent back
    params = set(map(id, kernel.params + kernel.temps))
    assert all(id(b) in params for k in kernel.kernels for b in k.params)
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((4, 24)).astype(np.float32) for _ in range(LAYERS + 1)]
    out = np.zeros((4, 24), np.float32)
    sl.build(two)(*arrays, out)
    np.testing.assert_allclose(out, _reference(arrays), rtol=1e-5, atol=1e-5)


def _run_failing_in_child(monkeypatch, fail):
    """map_forked over 8 items whose run() calls fail() in the child only."""
    parent = os.getpid()

    def run(item):
        if os.getpid() != parent:
            fail()
        return item * 2
    return forked.map_forked(run, list(range(8)), {})


def test_a_child_that_raises_leaves_its_items_to_this_process(monkeypatch, forks):
    def fail():
        raise RuntimeError("only in the child")
    assert _run_failing_in_child(monkeypatch, fail) == [2 * i for i in range(8)]
    assert forks == [1]


def test_a_child_that_warns_leaves_its_items_to_this_process(monkeypatch, forks):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert _run_failing_in_child(monkeypatch, lambda: warnings.warn("only in the child")) == [2 * i for i in range(8)]
    assert forks == [1] and caught == []          # the work redone here does not warn


def test_the_first_failing_item_names_the_error(forks):
    def run(item):
        if item in (2, 6):              # the child meets 2, this process 6 first
            raise ValueError(f"item {item}")
        return item
    with pytest.raises(ValueError, match="item 2"):
        forked.map_forked(run, list(range(8)), {})
    assert forks == [1]


def test_a_late_child_is_stopped(monkeypatch, forks):
    monkeypatch.setattr(forked, "GRACE_S", 0.2)
    assert _run_failing_in_child(monkeypatch, lambda: threading.Event().wait(60)) == [2 * i for i in range(8)]


def test_no_fork_while_a_build_thread_runs(monkeypatch):
    monkeypatch.setenv("SCHEDLANG_BUILD_THREADS", "2")
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait, name="sl-build_0")
    thread.start()
    try:
        assert not forked.can_fork(100)
    finally:
        stop.set()
        thread.join()
    assert forked.can_fork(100) or any(t.name.startswith(forked.OWN_THREADS) for t in threading.enumerate())
    assert not forked.can_fork(forked.MIN_NESTS - 1)
    monkeypatch.setenv("SCHEDLANG_BUILD_THREADS", "1")
    assert not forked.can_fork(100)


def test_claims_meet_in_the_middle():
    claims = forked._Claims(4)
    assert claims.take(0, child=True) and claims.take(1, child=True)
    assert claims.take(3, child=False) and claims.take(2, child=False)
    assert not claims.take(1, child=False)        # the child has it: this process stops
    assert not claims.take(2, child=True)         # and the child stops at this process's
    claims.close()
