"""Process-level safety, each check in a child process with a timeout: parallel modules
after fork(), allocation failures (on every CPU target: llvm, and c where a C compiler is
found), and memory growth over many builds."""
import pytest

from tests.cpu_targets import CPU_TARGETS

from .child import MEMORY_PROBES, run_child

# what each CPU target's source shows of a parallel loop, and of a 256 MiB heap allocation
PARALLEL = {"llvm": "GOMP_parallel", "c": "#pragma omp parallel for"}
HEAP = {"llvm": "@aligned_alloc", "c": "malloc(268435456ll)"}


def parallel_module(target: str) -> str:
    return f"TARGET = {target!r}\n" + PARALLEL_MODULE


PARALLEL_MODULE = """
import os, sys, warnings, numpy as np, schedlang as sl
A = sl.placeholder((64, 64), name="A")
B = sl.compute((64, 64), lambda i, j: A[i, j] * 2.0, name="B")
s = sl.create_schedule(B.op)
s[B].parallel(B.op.axis[0])
mod = sl.build(s, [A, B], target=TARGET)
assert getattr(mod, "parallel_runtime", True), "libgomp is needed for this test"
a = np.random.default_rng(0).random((64, 64)).astype("float32")
b = np.zeros_like(a)
mod(a, b)                       # the parent runs a parallel loop: libgomp's thread pool exists
assert np.array_equal(b, a * 2)
"""


@pytest.mark.parametrize("target", CPU_TARGETS)
def test_parallel_module_runs_in_a_forked_child(target):
    """libgomp's pool is in the child without its threads: the child runs the loops serially
    (the llvm target warns once; the c target's prelude switches to serial silently)."""
    out = run_child(parallel_module(target) + f"assert {PARALLEL[target]!r} in mod.get_source()" + """
pid = os.fork()
if pid == 0:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        c = np.zeros_like(a)
        mod(a, c)
        mod(a, c)
    warned = len(caught) == 1 and "run serially" in str(caught[0].message)
    ok = np.array_equal(c, a * 2) and (warned if TARGET == "llvm" else not caught)
    os._exit(0 if ok else 3)
_, status = os.waitpid(pid, 0)
print("child", os.waitstatus_to_exitcode(status))
c = np.zeros_like(a)
mod(a, c)                       # the parent keeps its threads
print("parent", np.array_equal(c, a * 2))
""")
    assert "child 0" in out and "parent True" in out


def test_parallel_module_runs_in_multiprocessing_fork_workers():
    out = run_child(parallel_module("llvm") + """
import multiprocessing as mp

def work(seed):
    x = np.random.default_rng(seed).random((64, 64)).astype("float32")
    y = np.zeros_like(x)
    mod(x, y)
    return bool(np.array_equal(y, x * 2))

if __name__ == "__main__":
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with mp.get_context("fork").Pool(2) as pool:
            print("workers", pool.map(work, range(4)))
""")
    assert "workers [True, True, True, True]" in out


ALLOC = """
import resource, numpy as np, schedlang as sl
def limit_address_space(extra):
    with open("/proc/self/statm") as f:
        size = int(f.read().split()[0]) * resource.getpagesize()
    resource.setrlimit(resource.RLIMIT_AS, (size + extra, resource.RLIM_INFINITY))
target = sl.Target.create(TARGET).with_options(threading="serial")
"""


def alloc(target: str) -> str:
    return f"TARGET = {target!r}\n" + ALLOC


# A 256 MiB local buffer T, computed at B's row loop (on the heap: above HEAP_THRESHOLD).
LOCAL_256MIB = """
N, M = 2, 1 << 26
A = sl.placeholder((N,), name="A")
T = sl.compute((N, M), lambda i, j: A[i] * 2.0, name="T")
k = sl.reduce_axis((0, M), name="k")
B = sl.compute((N,), lambda i: sl.sum(T[i, k], axis=k), name="B")
s = sl.create_schedule(B.op)
s[T].compute_at(s[B], B.op.axis[0])
"""
# Call mod on small arrays with the address space limited to 64 MiB; print the error if any.
CALL_UNDER_LIMIT = """
a, b = np.ones(N, "float32"), np.zeros(N, "float32")
limit_address_space(64 << 20)
try:
    mod(a, b)
    print("no error")
except MemoryError as e:
    print("MemoryError:", e)
"""


@pytest.mark.parametrize("target", CPU_TARGETS)
def test_failed_temporary_allocation_raises_memory_error(target):
    # T is a 256 MiB temporary of the entry function; the address space left is 64 MiB.
    out = run_child(alloc(target) + """
N, M = 1 << 16, 1 << 10
A = sl.placeholder((N,), name="A")
T = sl.compute((N, M), lambda i, j: A[i] * 2.0, name="T")
k = sl.reduce_axis((0, M), name="k")
B = sl.compute((N,), lambda i: sl.sum(T[i, k], axis=k), name="B")
mod = sl.build(sl.create_schedule(B.op), [A, B], target=target)
""" + CALL_UNDER_LIMIT)
    assert "MemoryError: B: could not allocate 268435456 bytes" in out


@pytest.mark.parametrize("target", CPU_TARGETS)
def test_failed_local_heap_allocation_raises_memory_error(target):
    # T is computed at B's row loop: a 256 MiB local buffer, on the heap (above HEAP_THRESHOLD).
    out = run_child(alloc(target) + LOCAL_256MIB + f"""
mod = sl.build(s, [A, B], target=target)
assert {HEAP[target]!r} in mod.get_source()
""" + CALL_UNDER_LIMIT)
    assert "MemoryError: B: could not allocate 268435456 bytes" in out


@pytest.mark.parametrize("target", CPU_TARGETS)
def test_failed_heap_allocation_in_a_parallel_loop_raises_memory_error(target):
    # The same 256 MiB local buffer, allocated by each OpenMP worker in its own row.
    out = run_child(alloc(target) + LOCAL_256MIB + f"""
s[B].parallel(B.op.axis[0])
mod = sl.build(s, [A, B], target=TARGET)
assert {HEAP[target]!r} in mod.get_source() and {PARALLEL[target]!r} in mod.get_source()
""" + """
W = sl.placeholder((64,), name="W")     # start the OpenMP workers (and map their stacks) first
V = sl.compute((64,), lambda i: W[i] + 1.0, name="V")
sw = sl.create_schedule(V.op)
sw[V].parallel(V.op.axis[0])
sl.build(sw, [W, V], target=TARGET)(np.ones(64, "float32"), np.zeros(64, "float32"))
""" + CALL_UNDER_LIMIT)
    assert "MemoryError: B: could not allocate 268435456 bytes" in out


GROWTH = MEMORY_PROBES + """
import numpy as np, schedlang as sl
a, b = np.ones((64, 64), "float32"), np.zeros((64, 64), "float32")
def build_call_drop():
    A = sl.placeholder((64, 64), name="A")
    B = sl.compute((64, 64), lambda i, j: sl.exp(A[i, j]) + 1.0, name="B")
    s = sl.create_schedule(B.op)
    s[B].vectorize(B.op.axis[1])
    s[B].parallel(B.op.axis[0])
    mod = sl.build(s, [A, B], cache=False)     # the cache would answer every build after the first
    mod(a, b)
    assert np.allclose(b, np.exp(a) + 1.0)
print_growth(lambda n: build_call_drop(), 40, 200)     # LLVM's and Python's one-time allocations done by 40
"""


def test_memory_growth_per_build_is_bounded():
    # Measured on 300 builds: about 4 KB per build kept (1.5 KB of it a PassInstrumentationCallbacks
    # that llvmlite 0.50 never frees, see target/llvm/jit.py), against 86 KB while the O3 pass
    # manager was never deleted. The bound leaves 3 MB of noise over the 160 measured builds.
    out = run_child(GROWTH, timeout=300)
    rss, heap = (float(w) for w in out.split()[1::2])
    assert rss < 20, f"{rss:.1f} KB per build kept (malloc heap in use: {heap:.1f} KB per build)"


TORCH_GROWTH = MEMORY_PROBES + """
import warnings, torch
import schedlang.torch as st
from schedlang import build_cache
assert build_cache.ENABLED and build_cache.MAX_MODULES <= 10   # keeps its few; the warm-up fills them
warnings.simplefilter("ignore")
class M(torch.nn.Module):
    def __init__(self, k):
        super().__init__()
        self.k = float(k)
        self.lin = torch.nn.Linear(8, 8 + k % 5)
        self.register_buffer("b", torch.randn(8 + k % 5))
    def forward(self, x):
        return torch.relu(self.lin(x) * self.k) + self.b
def compile_call_drop(k):       # a distinct module each time: its constant and shapes differ
    m = M(k)
    x = torch.randn(3, 8)
    cm = st.compile(m, (x,))
    with torch.no_grad():
        torch.testing.assert_close(cm(x), m(x), rtol=1e-4, atol=1e-4)
print_growth(compile_call_drop, 10, 40)     # torch's and LLVM's one-time allocations done by 10
"""


# -m slow (CI runs it after the README's command): 50 compiles in a child process, about 25 s of
# CPU on a 2-core Zen 1, the suite's third-longest test; the build cache's retention, the cause
# of the growth it was written for, is checked per build above in the README's command too.
@pytest.mark.slow
def test_memory_growth_per_torch_compile_is_bounded():
    # Each part is built through the build cache, which used to keep the last 64 modules alive
    # (about 850 KB of LLVM code each: 857 KB kept per compile). It now keeps 8 and finds live
    # modules weakly; capture forgets the source torch.fx keeps of each graph module (16 KB
    # more). Measured over 55 compiles: about 39 KB RSS per compile, 4 KB of it malloc heap;
    # over compiles 10-35, 10-45 and 10-70 of one run: 20, 20 and 22 KB RSS, 6 KB heap (so 30
    # compiles after 10 measure the same, at 4/7 of the cost; the bug kept 857 KB each).
    out = run_child(TORCH_GROWTH, timeout=600)
    rss, heap = (float(w) for w in out.split()[1::2])
    assert heap < 30 and rss < 50, f"{rss:.1f} KB per schedlang.torch.compile kept (malloc heap in use: {heap:.1f} KB)"
