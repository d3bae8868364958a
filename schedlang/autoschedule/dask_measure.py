"""Measuring on a Dask `distributed` cluster (the optional `dask` extra).

`sl.auto_schedule(..., executor=client)` takes a `distributed.Client` or its
`concurrent.futures` wrapper `client.get_executor()`. What this path guarantees:

- every candidate of a round is submitted at once, so builds run in parallel on all the
  cluster's worker threads;
- the timed runs take a cluster-wide lock named after the machine (a `distributed.Lock`
  per host name, taken where phase("run") is called), so two candidates never time at once
  on one machine, whatever its number of Dask workers and threads; machines time in parallel;
- submissions are impure (`pure=False`): a candidate is run, never answered from Dask's
  cache;
- the Measurer waits at most build timeout + run timeout for each result and then records
  a TimeoutError. Dask cannot kill a task: a hanging candidate keeps its worker thread (and
  the machine's timing lock) until the worker is restarted, and a candidate that crashes
  its worker process is retried by the scheduler (`distributed.scheduler.allowed-failures`)
  before it fails with KilledWorker. The LocalExecutor isolates such candidates better; use
  Dask for fan-out over machines.
"""
from __future__ import annotations

import socket
from typing import Any, Callable

from . import executor as ex

LOCK_PREFIX = "schedlang-timing-"


def is_dask(executor: Any) -> bool:
    """Whether executor is a distributed Client or its ClientExecutor."""
    return type(executor).__module__.split(".")[0] == "distributed"


def as_executor(executor: Any):
    """A concurrent.futures executor over a Client; a ClientExecutor as is (the Measurer
    submits with pure=False either way)."""
    if hasattr(executor, "get_executor"):
        return executor.get_executor(pure=False)
    return executor


def call_with_timing_lock(fn: Callable, *args) -> Any:
    """Run fn(*args) in a Dask task; its phase("run") takes the host's timing lock, held until fn returns."""
    from distributed import Lock
    lock = Lock(LOCK_PREFIX + socket.gethostname())
    held = []

    def hook(name: str) -> None:
        if not held:
            lock.acquire()
            held.append(True)

    ex._HOOK.phase = hook
    try:
        return fn(*args)
    finally:
        ex._HOOK.phase = None
        if held:
            lock.release()
