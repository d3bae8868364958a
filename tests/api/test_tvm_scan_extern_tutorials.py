"""TVM's "Scan and Recurrent Kernel" and "External Tensor Functions" tutorials (v0.18
gallery/how_to/work_with_schedules/scan.py and extern_op.py), ported by changing the import.

Differences: static shapes instead of te.var extents; the CPU target (parallel/vectorize
instead of bind to blockIdx/threadIdx); numpy arrays instead of tvm.nd arrays; our own
registered matmul instead of tvm.contrib.cblas; a constant bias instead of a scalar argument.
"""
import numpy as np

import schedlang as te   # the tutorials' `from tvm import te`
import schedlang as tvm  # tvm.lower / tvm.build / tvm.register_func / tvm.tir.call_packed
from tests.helpers import assert_matches_reference

call_packed = te.call_packed   # tvm.tir.call_packed


def test_scan_tutorial_cumsum():
    m, n = 10, 1024
    X = te.placeholder((m, n), name="X")
    s_state = te.placeholder((m, n))
    s_init = te.compute((1, n), lambda _, i: X[0, i])
    s_update = te.compute((m, n), lambda t, i: s_state[t - 1, i] + X[t, i])
    s_scan = tvm.scan(s_init, s_update, s_state, inputs=[X])

    s = te.create_schedule(s_scan.op)
    num_thread = 256
    xo, xi = s[s_init].split(s_init.op.axis[1], factor=num_thread)
    s[s_init].parallel(xo)
    s[s_init].vectorize(xi)
    xo, xi = s[s_update].split(s_update.op.axis[1], factor=num_thread)
    s[s_update].parallel(xo)
    s[s_update].vectorize(xi)
    assert "for scan.idx in 0..9:" in tvm.lower(s, [X, s_scan])

    fscan = tvm.build(s, [X, s_scan], "llvm", name="myscan")
    a_np = np.random.uniform(size=(m, n)).astype(str(s_scan.dtype))
    b = np.zeros((m, n), dtype=str(s_scan.dtype))
    fscan(a_np, b)
    np.testing.assert_allclose(b, np.cumsum(a_np, axis=0), rtol=1e-5)


def test_scan_tutorial_multi_stage_cell():
    m, n = 10, 100
    X = te.placeholder((m, n), name="X")
    s_state = te.placeholder((m, n))
    s_init = te.compute((1, n), lambda _, i: X[0, i])
    s_update_s1 = te.compute((m, n), lambda t, i: s_state[t - 1, i] * 2, name="s1")
    s_update_s2 = te.compute((m, n), lambda t, i: s_update_s1[t, i] + X[t, i], name="s2")
    s_scan = tvm.scan(s_init, s_update_s2, s_state, inputs=[X])

    s = te.create_schedule(s_scan.op)
    xo, xi = s[s_update_s2].split(s_update_s2.op.axis[1], factor=32)
    s[s_update_s1].compute_at(s[s_update_s2], xo)
    text = tvm.lower(s, [X, s_scan])
    assert "alloc s1: f32[1, 32] local" in text
    assert_matches_reference(s, [X, s_scan])


def test_scan_tutorial_multiple_states():
    m, n, l = 10, 20, 7
    X = te.placeholder((m, n), name="X")
    s_state1 = te.placeholder((m, n))
    s_state2 = te.placeholder((m, l))
    s_init1 = te.compute((1, n), lambda _, i: X[0, i])
    s_init2 = te.compute((1, l), lambda _, i: te.const(0.0))
    s_update1 = te.compute((m, n), lambda t, i: s_state1[t - 1, i] + X[t, i])
    s_update2 = te.compute((m, l), lambda t, i: s_state2[t - 1, i] + s_state1[t - 1, 0])
    s_scan1, s_scan2 = tvm.scan([s_init1, s_init2], [s_update1, s_update2], [s_state1, s_state2], inputs=[X])
    s = te.create_schedule(s_scan1.op)
    assert "scan.v1" in tvm.lower(s, [X, s_scan1, s_scan2])
    assert_matches_reference(s, [X, s_scan1, s_scan2])


def test_extern_tutorial_matmul_plus_bias():
    @tvm.register_func("test.tutorial.cblas_matmul", override=True)
    def matmul(a, b, c, transa, transb):
        np.matmul(a.T if transa else a, b.T if transb else b, out=c)

    n, l, m = 1024, 128, 235
    bias = 10.0
    A = te.placeholder((n, l), name="A")
    B = te.placeholder((l, m), name="B")
    C = te.extern(
        (n, m),
        [A, B],
        lambda ins, outs: call_packed("test.tutorial.cblas_matmul", ins[0], ins[1], outs[0], False, False),
        name="C",
    )
    D = te.compute(C.shape, lambda i, j: C[i, j] + bias, name="D")
    s = te.create_schedule(D.op)
    f = tvm.build(s, [A, B, D], "llvm")
    a = np.random.uniform(size=(n, l)).astype(str(A.dtype))
    b = np.random.uniform(size=(l, m)).astype(str(B.dtype))
    d = np.zeros((n, m), dtype=str(D.dtype))
    f(a, b, d)
    np.testing.assert_allclose(d, np.dot(a, b) + 10, rtol=1e-5)


def test_extern_tutorial_python_callback_addone():
    seen = []

    @tvm.register_func("test.tutorial.my_tvm_addone", override=True)
    def my_tvm_addone(x, y):
        seen.append((type(x), type(y)))
        y[:] = x + 1

    n = 1024
    A = te.placeholder((n,), name="A")
    B = te.extern(A.shape, [A], lambda ins, outs: call_packed("test.tutorial.my_tvm_addone", ins[0], outs[0]),
                  name="C")
    s = te.create_schedule(B.op)
    f = tvm.build(s, [A, B], "llvm")
    a = np.random.uniform(size=(n,)).astype(str(A.dtype))
    b = np.random.uniform(size=(n,)).astype(str(B.dtype))
    f(a, b)
    np.testing.assert_allclose(b, a + 1, rtol=1e-5)
    assert seen == [(np.ndarray, np.ndarray)]
