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
    times = time_on_cpu(one, one.schedule(), arrays, number=1, repeat=3)["times"]
    assert times == [1.0]       # the CPU clock read: 1 s a call, slower than SLOW_CALL_S, so timed once
    two = SearchTask(tensors=[A, B, C], target="llvm -num-cores=2")
    times = time_on_cpu(two, two.schedule(), arrays, number=1, repeat=3)["times"]
    assert all(t < 0.5 for t in times)       # wall time of a 4x4 GEMM
