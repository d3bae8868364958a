"""Run a snippet in a fresh Python process with a timeout: for checks that could hang,
crash or exhaust the process (a fork deadlock, an allocation failure, a leak measure)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_child(code: str, timeout: float = 300) -> str:
    """stdout of `python -c code`; fails the test when it exits non-zero or hangs (the timeout is a
    hang guard: a child that imports torch and builds takes seconds alone, minutes on a loaded machine)."""
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    try:
        done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                              timeout=timeout, env=env, cwd=ROOT)
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"the child process hung for {timeout} s; its output:\n{e.stdout}\n{e.stderr}") from None
    assert done.returncode == 0, f"the child process exited with {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


# Memory probes for a child's snippet (prepend it): rss() the resident set, heap_in_use() the
# bytes glibc's malloc has handed out and not had back, both in bytes; print_growth(step, warmup,
# total) the growth per call of a step run many times.
MEMORY_PROBES = """
import ctypes
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096
def heap_in_use():
    class MallInfo2(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in "arena ordblks smblks hblks hblkhd usmblks fsmblks "
                                                  "uordblks fordblks keepcost".split()]
    libc = ctypes.CDLL(None)
    libc.mallinfo2.restype = MallInfo2
    return libc.mallinfo2().uordblks
def print_growth(step, warmup, total):
    # step(n) for n = 1..total; prints the RSS and malloc heap kept per call (KB) between call
    # `warmup` (one-time allocations done by then) and the last
    import gc
    marks = []
    for n in range(1, total + 1):
        step(n)
        if n in (warmup, total):
            gc.collect()
            marks.append((rss(), heap_in_use()))
    calls = (total - warmup) * 1024
    print("rss", (marks[1][0] - marks[0][0]) / calls, "heap", (marks[1][1] - marks[0][1]) / calls)
"""
