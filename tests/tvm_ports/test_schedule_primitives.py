# Ported from apache/tvm v0.18 gallery/how_to/work_with_schedules/schedule_primitives.py
# ("Schedule Primitives in TVM"): `from tvm import te` became `import schedlang as sl`.
# The tutorial's symbolic n, m become static shapes (the symbolic versions are at the end,
# expected to fail until symbolic shapes land); bind is a GPU primitive and is skipped.
# The tutorial's one-stage programs (B = A, B = A * 2) are written once, in `_one_stage`.
import numpy as np
import pytest

import schedlang as sl
from tests.tvm_ports.check import assert_close, build_and_run

n, m = 37, 24          # the tutorial's te.var("n"), te.var("m"); 37 leaves split tails
RNG = np.random.default_rng(0)


def _elementwise():
    A = sl.placeholder((m, n), name="A")
    B = sl.placeholder((m, n), name="B")
    C = sl.compute((m, n), lambda i, j: A[i, j] * B[i, j], name="C")
    return A, B, C


def _check_elementwise(s, A, B, C):
    a, b = RNG.random((m, n), "float32"), RNG.random((m, n), "float32")
    (c,) = build_and_run(s, [A, B, C], [a, b], [np.empty((m, n), "float32")])
    assert_close(c, a * b)


def _one_stage(shape, body=lambda a: a):
    """The tutorial's one-stage programs: B = body(A) (a copy, or A * 2), and its schedule."""
    A = sl.placeholder(shape, name="A")
    index = (lambda i: body(A[i])) if len(shape) == 1 else (lambda i, j: body(A[i, j]))
    B = sl.compute(shape, index, name="B")
    return A, B, sl.create_schedule(B.op)


def _check_one_stage(s, A, B, body=lambda a: a):
    a = RNG.random(tuple(int(x) for x in A.shape), "float32")
    (b,) = build_and_run(s, [A, B], [a], [a])
    assert_close(b, body(a))


def twice(a):
    return a * 2


def test_default_schedule_prints_the_plain_nest():
    A, B, C = _elementwise()
    s = sl.create_schedule(C.op)
    text = sl.lower(s, [A, B, C])
    assert "for i in 0..24:" in text and "for j in 0..37:" in text
    _check_elementwise(s, A, B, C)


def test_split_by_factor():
    A, B, s = _one_stage((m,), twice)
    xo, xi = s[B].split(B.op.axis[0], factor=32)
    assert "for i.inner in 0..32" in sl.lower(s, [A, B])
    _check_one_stage(s, A, B, twice)


def test_split_by_nparts():
    A, B, s = _one_stage((m,))
    bx, tx = s[B].split(B.op.axis[0], nparts=32)
    assert "for i.outer in 0..32" in sl.lower(s, [A, B])
    _check_one_stage(s, A, B)


def test_tile():
    A, B, s = _one_stage((m, n))
    xo, yo, xi, yi = s[B].tile(B.op.axis[0], B.op.axis[1], x_factor=10, y_factor=5)
    assert s[B].leaf_iter_vars == [xo, yo, xi, yi]
    _check_one_stage(s, A, B)


def test_fuse():
    A, B, s = _one_stage((m, n))
    xo, yo, xi, yi = s[B].tile(B.op.axis[0], B.op.axis[1], x_factor=10, y_factor=5)
    fused = s[B].fuse(xi, yi)
    assert "for i.inner.j.inner.fused in 0..50" in sl.lower(s, [A, B])
    _check_one_stage(s, A, B)


def test_reorder():
    A, B, s = _one_stage((m, n))
    xo, xi = s[B].split(B.op.axis[0], factor=32)
    yo, yi = s[B].split(B.op.axis[1], factor=32)
    s[B].reorder(xi, yo, xo, yi)
    assert s[B].leaf_iter_vars == [xi, yo, xo, yi]
    _check_one_stage(s, A, B)


def _chain():
    A = sl.placeholder((m,), name="A")
    B = sl.compute((m,), lambda i: A[i] + 1, name="B")
    C = sl.compute((m,), lambda i: B[i] * 2, name="C")
    return A, B, C


def _check_chain(s, A, C):
    a = RNG.random(m, "float32")
    (c,) = build_and_run(s, [A, C], [a], [a])
    assert_close(c, (a + 1) * 2)


def test_compute_at():
    A, B, C = _chain()
    s = sl.create_schedule(C.op)
    s[B].compute_at(s[C], C.op.axis[0])
    text = sl.lower(s, [A, C])
    assert text.index("B[") > text.index("for i in 0..24")        # B is computed inside C's loop
    _check_chain(s, A, C)


def test_compute_inline():
    A, B, C = _chain()
    s = sl.create_schedule(C.op)
    s[B].compute_inline()
    assert "(A[i] + 1.0) * 2.0" in sl.lower(s, [A, C])
    _check_chain(s, A, C)


def test_compute_root():
    A, B, C = _chain()
    s = sl.create_schedule(C.op)
    s[B].compute_at(s[C], C.op.axis[0])
    s[B].compute_root()
    assert "alloc B: f32[24]" in sl.lower(s, [A, C])
    _check_chain(s, A, C)


def test_bind_is_a_gpu_primitive():
    A, B, s = _one_stage((m,), twice)
    bx, tx = s[B].split(B.op.axis[0], factor=64)
    s[B].bind(bx, sl.thread_axis("blockIdx.x"))
    s[B].bind(tx, sl.thread_axis("threadIdx.x"))
    assert "blockIdx.x" in sl.lower(s, [A, B])
    with pytest.raises(sl.ScheduleError, match="GPU thread axis"):
        sl.build(s, [A, B])


# ---- the tutorial as written, with symbolic shapes: needs symbolic shapes (issue 5) --------
def test_split_with_symbolic_shape():
    A, B, s = _one_stage((sl.var("n"),), twice)
    s[B].split(B.op.axis[0], factor=32)
    a = RNG.random(50, "float32")
    b = np.zeros(50, "float32")
    sl.build(s, [A, B])(a, b)
    assert_close(b, a * 2)


def test_tile_and_fuse_with_symbolic_shape():
    A, B, s = _one_stage((sl.var("m"), sl.var("n")))
    xo, yo, xi, yi = s[B].tile(B.op.axis[0], B.op.axis[1], x_factor=10, y_factor=5)
    s[B].fuse(xi, yi)
    a = RNG.random((13, 17), "float32")
    b = np.zeros((13, 17), "float32")
    sl.build(s, [A, B])(a, b)
    assert_close(b, a)
