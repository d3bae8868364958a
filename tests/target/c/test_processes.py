"""The c target at the process level, each check in a child process with a timeout: parallel
loops in a child forked after the parent ran them (libgomp's pool is there without its
threads: the child runs them serially instead of waiting forever), and heap allocations that
fail (MemoryError, as on the llvm target)."""
from tests.cpu_targets import needs_cc
from tests.safety.child import run_child
from tests.safety.test_processes import ALLOC, CALL_UNDER_LIMIT, LOCAL_256MIB

pytestmark = needs_cc


def test_parallel_module_runs_in_a_forked_child():
    out = run_child("""
import os, numpy as np, schedlang as sl
A = sl.placeholder((64, 64), name="A")
B = sl.compute((64, 64), lambda i, j: A[i, j] * 2.0, name="B")
s = sl.create_schedule(B.op)
s[B].parallel(B.op.axis[0])
mod = sl.build(s, [A, B], target="c")
assert "#pragma omp parallel for" in mod.get_source()
a = np.random.default_rng(0).random((64, 64)).astype("float32")
b = np.zeros_like(a)
mod(a, b)                       # the parent runs a parallel loop: libgomp's thread pool exists
pid = os.fork()
if pid == 0:
    c = np.zeros_like(a)
    mod(a, c)
    mod(a, c)
    os._exit(0 if np.array_equal(c, a * 2) else 3)
_, status = os.waitpid(pid, 0)
print("child", os.waitstatus_to_exitcode(status))
c = np.zeros_like(a)
mod(a, c)                       # the parent keeps its threads
print("parent", np.array_equal(c, a * 2))
""", timeout=120)
    assert "child 0" in out and "parent True" in out


def test_failed_temporary_allocation_raises_memory_error():
    out = run_child(ALLOC + """
N, M = 1 << 16, 1 << 10
A = sl.placeholder((N,), name="A")
T = sl.compute((N, M), lambda i, j: A[i] * 2.0, name="T")
k = sl.reduce_axis((0, M), name="k")
B = sl.compute((N,), lambda i: sl.sum(T[i, k], axis=k), name="B")
mod = sl.build(sl.create_schedule(B.op), [A, B], target="c")
""" + CALL_UNDER_LIMIT)
    assert "MemoryError: B: could not allocate 268435456 bytes" in out


def test_failed_heap_allocation_in_a_parallel_loop_raises_memory_error():
    # T is computed at B's row loop: a 256 MiB local buffer, allocated by each OpenMP thread.
    out = run_child(ALLOC + LOCAL_256MIB + """
s[B].parallel(B.op.axis[0])
mod = sl.build(s, [A, B], target="c")
assert "malloc(268435456ll)" in mod.get_source()
""" + CALL_UNDER_LIMIT)
    assert "MemoryError: B: could not allocate 268435456 bytes" in out
