"""Measuring candidates: what a worker does for one (build, random inputs, timed runs),
and the Measurer that sends candidates to an Executor (LocalExecutor by default, see
executor.py; a Dask client through dask_measure.py, with a timing lock per machine; with
any other executor it submits one candidate at a time, so timed runs never overlap, and
bounds only how long it waits).
"""
from __future__ import annotations

import concurrent.futures as cf
import os
import statistics
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence

import numpy as np

from ..driver import build
from ..target.registry import get_backend
from .executor import BUILD_TIMEOUT_S, RUN_TIMEOUT_S, LocalExecutor, WorkerError, phase  # noqa: F401
from .records import register_file, this_cpu
from .task import SearchTask


# ---- what a worker does for one candidate --------------------------------------------

def random_inputs(tensors: Sequence, seed: int = 0) -> List[np.ndarray]:
    """Arrays for the tensors: floats uniform in [-1, 1), integers small, bools random."""
    rng = np.random.default_rng(seed)
    out = []
    for t in tensors:
        dt = np.dtype(t.dtype_obj.numpy)
        if t.dtype_obj.is_float:       # not dt.kind: numpy's kind of bfloat16 is "V"
            out.append(rng.uniform(-1.0, 1.0, size=t.shape).astype(dt))
        elif dt.kind == "b":
            out.append(rng.integers(0, 2, size=t.shape).astype(dt))
        else:
            out.append(rng.integers(-8, 9, size=t.shape).astype(dt))
    return out


# A candidate whose first timed call takes longer than SLOW_CALL_S is timed by that call
# alone, and rounds of calls are cut to about ROUND_S: a slow candidate is far from the best
# and needs no precise time, and timing it 1 + repeat * number times would spend most of a
# search's minutes on the worst candidates.
SLOW_CALL_S = 0.2
ROUND_S = 0.05


def run_candidate(program_json: str, steps_json: str, target: str, number: int, repeat: int) -> dict:
    """Build the candidate and measure it as its target's backend does (Backend.measure_candidate:
    time_on_cpu for llvm; GPU timings or an estimate for cuda, gpu_estimate.py). Returns
    {"times": [...], "build_s", "load"} (seconds per call) and what the target adds."""
    task = SearchTask.from_json(program_json, target)
    s = task.schedule()
    s.apply_json(steps_json)
    arrays = random_inputs(task.inputs) + [np.zeros(t.shape, np.dtype(t.dtype_obj.numpy)) for t in task.outputs]
    return get_backend(task.target.kind).measure_candidate(task, s, arrays, number, repeat)


# The modules this worker built last, so that the search's second measurement of a candidate
# (search.RETIME_WITHIN, the round just measured) costs runs, not a build; its inputs are fresh
# arrays all the same.
RECENT_MODULES = 8
_recent: "OrderedDict[tuple, Any]" = OrderedDict()


def _build_recent(task, s):
    """The module of schedule s of the task: one of the RECENT_MODULES built last, else built."""
    key = (task.program_json, s.to_json(), task.target)
    mod = _recent.pop(key, None)
    if mod is None:
        mod = build(s, task.args, target=task.target, cache=False)
    _recent[key] = mod
    while len(_recent) > RECENT_MODULES:
        _recent.popitem(last=False)
    return mod


def time_on_cpu(task, s, arrays: List[np.ndarray], number: int, repeat: int) -> dict:
    """Build schedule s of the task and time it on arrays (CPU time where the target runs one
    thread, else wall time), at the target's threads (the result's "threads"): a warm-up call and one timed call,
    then `repeat` timings of up to `number` calls each (fewer when a call is long, see ROUND_S;
    none when it is slower than SLOW_CALL_S)."""
    start = time.perf_counter()
    mod = _build_recent(task, s)
    build_s = time.perf_counter() - start
    phase("run")
    load = os.getloadavg()
    # one thread: its CPU time, which the other processes of a shared machine do not inflate as
    # they do wall time (a 300 s conv2d search at load 8 on 2 cores read 18-25 ms for ~7 ms kernels)
    threads = get_backend(task.target.kind).worker_threads(task.target)
    clock = time.process_time if threads == 1 else time.perf_counter
    first = mod.time(*arrays, number=1, repeat=1, clock=clock)
    if first > SLOW_CALL_S:
        times = [first]
    else:
        n = max(1, min(number, int(ROUND_S / max(first, 1e-9))))
        times = [mod.time(*arrays, number=n, repeat=1, clock=clock) for _ in range(repeat)]
    return {"times": times, "build_s": build_s, "load": list(load), "cpu": this_cpu(),
            "register_file": register_file(task.target), "threads": threads}


# what a measurement adds to its record: the CPU that timed it, the code's register file and
# the threads it ran on (CPU targets, records.py), the estimate's figures (cuda without a GPU)
EXTRA_FIELDS = ("estimated", "timing", "profile", "cpu", "register_file", "threads")


@dataclass
class MeasureResult:
    times: List[float] = field(default_factory=list)
    error: Optional[str] = None
    build_s: Optional[float] = None
    load: Optional[List[float]] = None
    extra: Dict[str, Any] = field(default_factory=dict)    # cuda: estimated, timing, profile

    @property
    def median(self) -> Optional[float]:
        return statistics.median(self.times) if self.times else None


def _describe(err: BaseException) -> str:
    return f"{type(err).__name__}: {err}"


class Measurer:
    """Measures candidates (program JSON, step JSON) through an Executor."""

    def __init__(self, executor: Optional[cf.Executor] = None, number: int = 5, repeat: int = 3,
                 build_timeout: float = BUILD_TIMEOUT_S, run_timeout: float = RUN_TIMEOUT_S,
                 worker_fn: Callable[..., dict] = run_candidate):
        from . import dask_measure
        self.own_executor = executor is None
        self.dask = dask_measure.is_dask(executor)
        if self.dask:
            executor = dask_measure.as_executor(executor)
        self.executor = executor if executor is not None else LocalExecutor(1, build_timeout, run_timeout)
        self.number, self.repeat = number, repeat
        self.wait_s = build_timeout + run_timeout + 5.0
        self.worker_fn = worker_fn
        self.measured = 0      # candidates sent for measurement

    def measure(self, program_json: str, target, steps_jsons: Sequence[str]) -> Iterator[MeasureResult]:
        """The results in order, each as soon as it is in (so an interrupted search keeps it).
        target: a Target (sent as its worker_string: its thread count kept) or a target string."""
        spec = target if isinstance(target, str) else target.worker_string()
        args = lambda sj: (program_json, sj, spec, self.number, self.repeat)     # noqa: E731
        if self.dask:
            from .dask_measure import call_with_timing_lock
            call = lambda sj: self.executor.submit(call_with_timing_lock, self.worker_fn, *args(sj),  # noqa: E731
                                                   pure=False)
        else:
            call = lambda sj: self.executor.submit(self.worker_fn, *args(sj))    # noqa: E731
        if isinstance(self.executor, LocalExecutor) or self.dask:
            futures = [call(sj) for sj in steps_jsons]
            try:
                for f in futures:
                    yield self._result(f)
            finally:                    # interrupted: what is not measured yet is not run
                for f in futures:
                    f.cancel()
        else:
            for sj in steps_jsons:      # one at a time: timed runs never overlap
                yield self._result(call(sj))

    def _result(self, future: cf.Future) -> MeasureResult:
        self.measured += 1
        try:
            out: Any = future.result(timeout=self.wait_s)
        except cf.TimeoutError as err:     # the same class as the builtin TimeoutError since 3.11
            if future.done():
                return MeasureResult(error=_describe(err))
            future.cancel()
            return MeasureResult(error=f"TimeoutError: no result within {self.wait_s:g} s")
        except (KeyboardInterrupt, SystemExit):
            future.cancel()
            raise
        except BaseException as err:  # noqa: BLE001 - a failed candidate is a record, not a crash
            return MeasureResult(error=_describe(err))
        if not isinstance(out, dict) or not out.get("times"):
            return MeasureResult(error=f"ValueError: the measure function returned {out!r}, not a dict with times")
        extra = {k: out[k] for k in EXTRA_FIELDS if k in out}
        return MeasureResult(times=[float(t) for t in out["times"]], build_s=out.get("build_s"), load=out.get("load"),
                             extra=extra)

    def close(self, interrupted: bool = False) -> None:
        """Shut down the executor this measurer started (at once after an interrupt)."""
        if not self.own_executor:
            return
        self.executor.shutdown(wait=not interrupted, cancel_futures=True)
        if interrupted:
            self.executor.kill_workers()
