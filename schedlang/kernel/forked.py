"""Running the per-nest Kernel IR passes of many stage nests in two processes (kernel/lower.py).

A model part's Kernel IR passes are pure Python (ResNet-50: 30 distinct nests, ~2.5 s of
CPU), so threads cannot share them out (the GIL). A forked child runs the passes on the
nests from the first on, this process from the last on, until they meet; the child sends
its results back pickled (ResNet-50's whole Kernel IR pickles in ~0.13 s and loads in
~0.09 s).

The same IR as in one process: each nest's passes read that nest alone. Variables and
buffers compare by identity, so those the nests held before the fork (parameters, sizes,
temporaries, loop variables) come back as the objects this process has: the child sends
them by their id(), which names the same object in its copy of this process's memory.
What the passes made is new in either case.

Forked only where that is safe: on Linux (macOS's system libraries may not survive a
fork), with two cores to use (build_pool's workers: SCHEDLANG_BUILD_THREADS=1 turns it
off), and not while another of schedlang's build threads runs (OWN_THREADS). The child
runs Python lowering only: it takes no lock, enters neither LLVM nor torch nor OpenMP
(whose threads it does not have), prints nothing and leaves by os._exit; the fork happens
with the GIL held, so no Python object is half-changed by another thread. When the child
fails, raises, warns or is late, this process lowers its nests itself, and when this
process's share raises, every nest is lowered again in order: errors and warnings are
those of a build in one process, and the IR is the same either way.
"""
from __future__ import annotations

import gc
import io
import mmap
import os
import pickle
import select
import signal
import sys
import threading
import time
import warnings
from typing import Callable, Dict, List, Optional, Sequence, TypeVar

from ..build_pool import default_workers

T = TypeVar("T")
R = TypeVar("R")

# Fewer nests to lower are lowered here: the fork of a process holding torch and a model
# took 50-110 ms (its page tables), and both processes then take copy-on-write faults.
MIN_NESTS = 8
# schedlang's threads that may hold a lock or be inside LLVM (build_pool's builds, the LLVM
# worker of a split build): while one of them is alive besides this one, nothing is forked.
# The kernel cache's writer is idle at any fork (kernel_cache.flush runs before one).
OWN_THREADS = ("sl-build", "sl-llvm")
# How long the child may take after this process lowered its share: PATIENCE times as long
# as that took, plus GRACE_S. A child still working then (it cannot be stuck on a lock: it
# takes none) is stopped and its nests are lowered here: slower, never another result.
PATIENCE = 4
GRACE_S = 5.0


def can_fork(count: int) -> bool:
    """Whether `count` nests are lowered by this process and a forked child (see the module docstring)."""
    this = threading.current_thread()
    return (count >= MIN_NESTS and sys.platform.startswith("linux") and default_workers() >= 2
            and not any(t.name.startswith(OWN_THREADS) for t in threading.enumerate() if t is not this))


def map_forked(run: Callable[[T], R], items: Sequence[T], known: Dict[int, object]) -> List[R]:
    """[run(item) for item in items], shared with a forked child when can_fork(len(items)):
    the child takes items from the front, this process from the back, until they meet
    (_Claims). known: id -> object of every variable and buffer that the items hold and the
    results may hold (sent back as references to this process's objects)."""
    items = list(items)
    if not can_fork(len(items)):
        return [run(item) for item in items]
    claims = _Claims(len(items))
    read_fd, write_fd = os.pipe()
    with warnings.catch_warnings():
        # Python 3.12 warns at a fork in a process with threads (torch's, OpenMP's): the
        # child here enters none of their code and takes no lock (the module docstring).
        warnings.filterwarnings("ignore", category=DeprecationWarning, message=".*fork")
        pid = os.fork()
    if pid == 0:                                   # the child: never returns
        os.close(read_fd)
        _child(run, items, claims, known, write_fd)
    os.close(write_fd)
    out: Dict[int, R] = {}
    data, failed = None, False
    try:
        start = time.monotonic()
        for i in reversed(range(len(items))):
            if not claims.take(i, child=False):
                break
            out[i] = run(items[i])
        data = _read(read_fd, time.monotonic() + PATIENCE * (time.monotonic() - start) + GRACE_S)
    except Exception:
        failed = True
    finally:
        os.close(read_fd)
        claims.close()
        if data is None:                           # raised here, or the child is late: stopped
            os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
    if failed:        # run again in order: the error of the first failing item, as in one process
        return [run(item) for item in items]
    if status == 0 and data:                       # else failed, raised, warned or late
        for i, result in _Receiver(io.BytesIO(data), known).load():
            out.setdefault(i, result)
    return [out[i] if i in out else run(items[i]) for i in range(len(items))]


class _Claims:
    """Which items each process has started, in memory both share: the child claims from the
    front, this process from the back, each stopping at an item the other has claimed. Two
    that claim one item at once may both run it, or neither (this process then runs it
    after): work done twice or late, never a different result."""

    def __init__(self, count: int):
        self.count = count
        self.flags = mmap.mmap(-1, 2 * count)     # anonymous, shared with a forked child

    def take(self, i: int, child: bool) -> bool:
        mine, theirs = (i, self.count + i) if child else (self.count + i, i)
        self.flags[mine] = 1
        return not self.flags[theirs]

    def close(self) -> None:
        self.flags.close()


def _read(fd: int, deadline: float) -> Optional[bytes]:
    """Everything written to fd until its writer closes it, or None at the deadline."""
    chunks = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return None
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


class _Sender(pickle.Pickler):
    def __init__(self, file, known: Dict[int, object]):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.known = known

    def persistent_id(self, obj):
        key = id(obj)
        return key if key in self.known and self.known[key] is obj else None


class _Receiver(pickle.Unpickler):
    def __init__(self, file, known: Dict[int, object]):
        super().__init__(file)
        self.known = known

    def persistent_load(self, pid):
        return self.known[pid]


def _child(run: Callable, items: Sequence, claims: _Claims, known: Dict[int, object], fd: int) -> None:
    status = 1
    try:
        gc.disable()          # a collection would touch (and copy) every page shared with the parent
        results = []
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for i in range(len(items)):
                if not claims.take(i, child=True):
                    break
                results.append((i, run(items[i])))
        if not caught:
            buffer = io.BytesIO()
            _Sender(buffer, known).dump(results)
            with os.fdopen(fd, "wb") as out:
                out.write(buffer.getbuffer())
            status = 0
    finally:
        os._exit(status)      # no atexit handlers, no flushing of the parent's buffers
