"""Building many independent modules at once (the kernels of a model).

A build is Python lowering followed by LLVM work (the O3 pipeline and the JIT). llvmlite
releases the GIL inside LLVM but lets one thread into LLVM's global context at a time (its
own global lock, and target/llvm/jit.py's), so threads overlap one build's Python lowering
with another's LLVM work; only a many-kernel module's LLVM modules are optimised and compiled
two at once, each in a context of its own (target/llvm/private.py). Measured with
benchmarks/compile.py.

Results do not depend on the number of workers or on their timing: every build is
independent (sl.build's cache is locked), each result lands at its item's index, and an
error raised by several builds is the one of the first item in order.
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, List, Optional, Sequence, TypeVar

T = TypeVar("T")
R = TypeVar("R")

# Two threads are enough to hide the Python lowering behind LLVM's work (one lock lets one
# thread into LLVM at a time); more only add contention for the GIL.
MAX_WORKERS = 2
ENV = "SCHEDLANG_BUILD_THREADS"


def default_workers() -> int:
    """SCHEDLANG_BUILD_THREADS when set (1: build one after another), else up to MAX_WORKERS,
    never more than the cores this process may use. Fewer than 2 also keeps a many-nest
    function's Kernel IR lowering in this process (kernel/forked.py)."""
    value = os.environ.get(ENV, "")
    if value:
        try:
            workers = int(value)
        except ValueError:
            raise ValueError(f"{ENV} must be a whole number of threads, got {value!r}") from None
        if workers < 1:
            raise ValueError(f"{ENV} must be at least 1, got {workers}")
        return workers
    return max(1, min(MAX_WORKERS, len(os.sched_getaffinity(0))))


def build_each(build: Callable[[T], R], items: Sequence[T], workers: Optional[int] = None) -> List[R]:
    """[build(item) for item in items], by `workers` threads (default_workers()); results in
    item order. When builds fail, the error of the first failing item is raised, after the
    others have finished."""
    items = list(items)
    if len(items) < 2 and workers is None:      # nothing to share (a compiled module's call packs nothing)
        return [build(item) for item in items]
    workers = default_workers() if workers is None else workers
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    if workers == 1 or len(items) < 2:
        return [build(item) for item in items]
    with ThreadPoolExecutor(max_workers=min(workers, len(items)), thread_name_prefix="sl-build") as pool:
        futures = [pool.submit(build, item) for item in items]
    return [f.result() for f in futures]     # all done; the first failure in item order raises
