# Ported from apache/tvm v0.18 gallery/how_to/work_with_schedules/reduction.py ("Reduction"),
# its GPU part ("Cross Thread Reduction"): `from tvm import te` became `import schedlang as sl`
# and `fcuda.imported_modules[0].get_source()` became `fcuda.get_source()`. The symbolic n, m
# stay symbolic. With no GPU here, the module runs on both CPU engines, each with its race
# check (the shim under ThreadSanitizer, the SIMT interpreter), against numpy.
import numpy as np
import pytest

import schedlang as sl
from tests.tvm_ports.check import assert_close

pytest.importorskip("cuda.bindings")

te = sl
rng = np.random.default_rng(0)


def row_sum():
    n = te.var("n")
    m = te.var("m")
    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), "k")
    B = te.compute((n,), lambda i: te.sum(A[i, k], axis=k), name="B")
    return A, B


def run_both_engines(fcuda, a, want, out_shape):
    for engine, options in (("shim", {"sanitize": "thread"}), ("simt", {})):
        b = np.full(out_shape, 7, "float32")
        fcuda.emulate(a, b, engine=engine, **options)
        assert_close(b, want)


def tutorial_schedule(B, s=None):
    """The tutorial's steps up to where its rfactor stage is placed (tests/target/cuda places it
    elsewhere too): k split by 16 and the inner part factored out, rows over blockIdx.x and
    threadIdx.y, the factored reduction axis over threadIdx.x; in s (a schedule of B's own when
    None). Returns (s, BF, xo, tx)."""
    s = te.create_schedule(B.op) if s is None else s
    ko, ki = s[B].split(B.op.reduce_axis[0], factor=16)
    BF = s.rfactor(B, ki)
    xo, xi = s[B].split(s[B].op.axis[0], factor=32)
    s[B].bind(xo, te.thread_axis("blockIdx.x"))
    s[B].bind(xi, te.thread_axis("threadIdx.y"))
    tx = te.thread_axis("threadIdx.x")
    s[B].bind(s[B].op.reduce_axis[0], tx)
    return s, BF, xo, tx


@pytest.mark.parametrize("shape", [(37, 70), (64, 16)])
def test_cross_thread_reduction(shape):
    """The tutorial's schedule: rows over blockIdx.x / threadIdx.y, the factored reduction axis
    over threadIdx.x, the rfactor stage computed at it, and thread 0 storing each row."""
    A, B = row_sum()
    s, BF, xo, tx = tutorial_schedule(B)
    s[BF].compute_at(s[B], s[B].op.reduce_axis[0])
    s[B].set_store_predicate(tx.var.equal(0))
    fcuda = sl.build(s, [A, B], "cuda")
    src = fcuda.get_source()
    assert "float B_rf[1];" in src, "each thread's partial sum is one register"
    assert "__shfl_down_sync(0xffffffffu, B_red[0], 8, 16)" in src
    a = rng.random(shape).astype("float32")
    run_both_engines(fcuda, a, a.sum(axis=1), shape[0])


def test_cross_thread_reduction_one_row_a_block():
    """The variant with the row bound to blockIdx.x alone, and no store predicate."""
    A, B = row_sum()
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(B.op.reduce_axis[0], factor=32)
    BF = s.rfactor(B, ki)
    s[B].bind(s[B].op.axis[0], te.thread_axis("blockIdx.x"))
    s[B].bind(s[B].op.reduce_axis[0], te.thread_axis("threadIdx.x"))
    s[BF].compute_at(s[B], s[B].op.reduce_axis[0])
    fcuda = sl.build(s, [A, B], "cuda")
    a = rng.random((5, 100)).astype("float32")
    run_both_engines(fcuda, a, a.sum(axis=1), 5)


def test_cross_thread_reduction_of_a_whole_vector():
    """All of A summed into B[0] by one block of 32 threads (rfactor, then the factored axis
    over threadIdx.x)."""
    n = 1000
    A = te.placeholder((n,), name="A")
    k = te.reduce_axis((0, n), name="k")
    B = te.compute((1,), lambda i: te.sum(A[k], axis=k), name="B")
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(B.op.reduce_axis[0], factor=32)
    BF = s.rfactor(B, ki)
    s[B].bind(s[B].op.reduce_axis[0], te.thread_axis("threadIdx.x"))
    s[BF].compute_at(s[B], s[B].op.reduce_axis[0])
    fcuda = sl.build(s, [A, B], "cuda")
    a = rng.random(n).astype("float32")
    run_both_engines(fcuda, a, a.sum(keepdims=True), 1)
