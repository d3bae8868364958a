"""A candidate of a one-thread CPU target is timed with the process's CPU clock (the neighbours
of a shared machine inflate wall time, not it); a multi-thread one with wall time."""
import itertools
import time

import numpy as np

import schedlang as sl
from schedlang.autoschedule.measure import time_on_cpu
from schedlang.autoschedule.task import SearchTask

from .. import programs


def ticking(monkeypatch):
    """time.process_time replaced by a clock that advances one second per reading."""
    ticks = itertools.count()
    monkeypatch.setattr(time, "process_time", lambda: float(next(ticks)))


def test_module_time_reads_the_clock_it_is_given():
    A, B, C = programs.gemm(4, 4, 4)
    mod = sl.build(sl.create_schedule(C.op), [A, B, C])
    ticks = itertools.count()
    arrays = [np.ones((4, 4), "float32") for _ in range(3)]
    assert mod.time(*arrays, number=4, repeat=2, clock=lambda: float(next(ticks))) == 0.25


def test_one_thread_candidates_are_timed_in_cpu_time(monkeypatch):
    A, B, C = programs.gemm(4, 4, 4)
    arrays = [np.ones((4, 4), "float32") for _ in range(3)]
    ticking(monkeypatch)
    one = SearchTask(tensors=[A, B, C], target="llvm -num-cores=1")
    got = time_on_cpu(one, one.schedule(), arrays, number=1, repeat=3)
    assert got["times"] == [1.0]     # the CPU clock read: 1 s a call, slower than SLOW_CALL_S, so timed once
    assert got["threads"] == 1       # what the record says it was timed at
    two = SearchTask(tensors=[A, B, C], target="llvm -num-cores=2")
    got = time_on_cpu(two, two.schedule(), arrays, number=1, repeat=3)
    assert all(t < 0.5 for t in got["times"]) and got["threads"] == 2       # wall time of a 4x4 GEMM


def test_the_worker_gets_the_one_thread_target(monkeypatch):
    """A one-thread target's thread count reaches the measurement worker (str(target), the
    records' key, leaves it out: the worker once built every candidate for all cores and timed
    it by the wall clock), so the candidate is timed there in CPU time."""
    import concurrent.futures as cf
    from schedlang.autoschedule.measure import Measurer, run_candidate
    from schedlang.target.registry import get_backend
    A, B, C = programs.gemm(4, 4, 4)
    task = SearchTask(tensors=[A, B, C], target=sl.Target("llvm", num_threads=1))
    assert "num-cores" not in str(task.target)
    seen = []

    def worker(program_json, steps_json, target, number, repeat):
        seen.append((target.endswith("-num-cores=1"), get_backend("llvm").worker_threads(sl.Target.create(target))))
        return run_candidate(program_json, steps_json, target, number, repeat)
    ticking(monkeypatch)
    with cf.ThreadPoolExecutor(1) as ex:
        m = Measurer(ex, number=1, repeat=3, worker_fn=worker)
        (res,) = m.measure(task.program_json, task.target, [task.schedule().to_json()])
    assert seen == [(True, 1)] and res.error is None and res.times == [1.0]     # the ticking CPU clock
