"""Compiler limits refuse clearly instead of hanging or crashing: shared subexpressions
lower in linear time, deep expressions and oversized unrolls are refused, large locals
leave the stack."""

import numpy as np
import pytest

import schedlang as sl
from schedlang.limits import MAX_EXPR_DEPTH
from schedlang.schedule.annotate import MAX_UNROLL

from .child import run_child

LEVELS = 30      # as trees, these expressions would have 2**30 nodes


def _doubled(e, levels=LEVELS):
    for _ in range(levels):
        e = e + e
    return e


def test_shared_subexpressions_lower_and_build_in_linear_time():
    # Each pass that walked the DAG as a tree (mutators, inlining, vectorizing, printers, the
    # LLVM emitter, the reference evaluator) would take ~2**30 steps here: the suite would hang.
    A = sl.placeholder((64,), name="A")
    B = sl.compute((64,), lambda i: _doubled(A[i] * 0.5), name="B")
    producers = [sl.compute((64,), lambda i: A[i] + 1.0, name="P0")]
    for k in range(1, LEVELS):           # each stage reads its producer twice, all inlined
        producers.append(sl.compute((64,), (lambda p: lambda i: p[i] + p[i])(producers[-1]), name=f"P{k}"))
    C = sl.compute((64,), lambda i: producers[-1][i] + B[i], name="C")
    s = sl.create_schedule(C.op)
    for st in producers + [B]:
        s[st].compute_inline()
    io, ii = s[C].split(C.op.axis[0], factor=8)
    s[C].vectorize(ii)
    s[C].parallel(io)
    text = sl.lower(s, [A, C], level="all")
    assert len(text) < 50_000 and ":=" in text          # shared parts printed once, by name
    a = np.random.default_rng(0).random(64).astype("float32")
    want = (a + 1) * 2.0 ** (LEVELS - 1) + a * 0.5 * 2.0 ** LEVELS
    np.testing.assert_allclose(sl.reference([C], {A: a})[0], want, rtol=1e-6)
    for target in ("llvm", sl.Target.create("llvm").with_options(bounds_check=True)):
        mod = sl.build(s, [A, C], target=target)
        assert mod.get_source().count("fadd") < 10 * LEVELS    # each shared value emitted once
        c = np.zeros_like(a)
        mod(a, c)
        np.testing.assert_allclose(c, want, rtol=1e-6)


def test_shared_subexpression_prints_once_by_name():
    # Small shared parts print in full (as after inlining a load twice); big ones once, by name.
    A = sl.placeholder((4,), name="A")
    small = str(sl.compute((4,), lambda i: _doubled(A[i], 2), name="B").op.body)
    assert small == "A[i] + A[i] + (A[i] + A[i])"
    text = str(sl.compute((4,), lambda i: _doubled(A[i], 20), name="B").op.body)
    assert len(text) < 500 and text.count("A[i]") == 8 and text.endswith(" + _1"), text
    assert text.startswith("(_1 := (_2 := "), text


def test_expression_deeper_than_the_limit_is_refused_when_defined():
    A = sl.placeholder((8,), name="A")

    def chain(i):
        e = A[i]
        for k in range(5000):
            e = e + float(k)
        return e

    with pytest.raises(ValueError, match=f"nested 5002 levels deep; schedlang lowers at most {MAX_EXPR_DEPTH}"):
        sl.compute((8,), chain, name="B")


def test_expression_at_the_depth_limit_builds():
    A = sl.placeholder((8,), name="A")

    def chain(i):
        e = A[i]
        for _ in range(MAX_EXPR_DEPTH - 2):
            e = e + 1.0
        return e

    B = sl.compute((8,), chain, name="B")
    mod = sl.build(sl.create_schedule(B.op), [A, B])
    a, b = np.zeros(8, "float32"), np.zeros(8, "float32")
    mod(a, b)
    assert np.all(b == MAX_EXPR_DEPTH - 2)


def test_too_deep_after_inlining_is_a_lowering_error_not_a_crash():
    # In a child process: a recursion this deep must not take the test runner with it.
    out = run_child("""
import schedlang as sl
def chain(e):
    for k in range(200):
        e = e + float(k)
    return e
A = sl.placeholder((8,), name="A")
ts = [A]
for k in range(6):
    ts.append(sl.compute((8,), (lambda p: lambda i: chain(p[i]))(ts[-1]), name=f"T{k}"))
s = sl.create_schedule(ts[-1].op)
for t in ts[1:-1]:
    s[t].compute_inline()
try:
    sl.build(s, [A, ts[-1]])
except sl.LoweringError as e:
    print("LoweringError:", e)
""")
    assert "LoweringError: lower: an expression nests too deeply to lower" in out


def _unroll_program():
    A = sl.placeholder((64, 64), name="A")
    B = sl.compute((64, 64), lambda i, j: A[i, j] + 1.0, name="B")
    C = sl.compute((64, 64), lambda i, j: B[i, j] * 2.0, name="C")
    return A, B, C


def test_nested_unrolls_past_the_limit_are_refused_with_the_product():
    A, B, C = _unroll_program()
    s = sl.create_schedule(C.op)
    i, j = C.op.axis
    io, ii = s[C].split(i, factor=32)
    jo, ji = s[C].split(j, factor=64)
    s[C].unroll(ii)
    with pytest.raises(sl.ScheduleError, match=r"unroll: stage 'C', axis 'j.inner': nested unrolled loops would "
                       r"make i.inner\(32\) \* j.inner\(64\) = 2048 copies of the body, more than the limit "
                       f"of {MAX_UNROLL}"):
        s[C].unroll(ji)


def test_unrolls_nested_through_compute_at_past_the_limit_are_refused_at_build():
    A, B, C = _unroll_program()
    s = sl.create_schedule(C.op)
    i, j = C.op.axis
    io, ii = s[C].split(i, factor=64)
    s[C].unroll(ii)
    s[B].compute_at(s[C], ii)
    s[B].unroll(s[B].op.axis[1])
    with pytest.raises(sl.ScheduleError, match=r"i.inner\(64\) \* j\(64\) = 4096 copies"):
        sl.build(s, [A, C])


def test_local_buffers_beyond_the_stack_budget_go_to_the_heap():
    # Four 512 KiB local buffers in one kernel: the first two fit the 1 MiB stack budget.
    A = sl.placeholder((4, 1 << 17), name="A")
    outs = [sl.compute((4, 1 << 17), (lambda k: lambda i, j: A[i, j] + float(k))(k), name=f"T{k}") for k in range(4)]
    D = sl.compute((4, 1 << 17), lambda i, j: outs[0][i, j] + outs[1][i, j] + outs[2][i, j] + outs[3][i, j], name="D")
    s = sl.create_schedule(D.op)
    for t in outs:
        s[t].compute_at(s[D], D.op.axis[0])
    mod = sl.build(s, [A, D])
    src = mod.get_source()
    assert src.count("call ptr @aligned_alloc") == 2 and src.count("alloca [131072 x float]") == 2
    a = np.random.default_rng(0).random((4, 1 << 17)).astype("float32")
    d = np.zeros_like(a)
    mod(a, d)
    np.testing.assert_allclose(d, 4 * a + 6, rtol=1e-6)



def test_local_buffers_of_a_parallel_loop_body_beyond_the_stack_budget_go_to_the_heap():
    # The body of a parallel loop runs on OpenMP workers: its own budget, two 768 KiB buffers.
    n = 192 * 1024
    A = sl.placeholder((4, n), name="A")
    T0 = sl.compute((4, n), lambda i, j: A[i, j] + 1.0, name="T0")
    T1 = sl.compute((4, n), lambda i, j: A[i, j] * 2.0, name="T1")
    D = sl.compute((4, n), lambda i, j: T0[i, j] + T1[i, j], name="D")
    s = sl.create_schedule(D.op)
    s[T0].compute_at(s[D], D.op.axis[0])
    s[T1].compute_at(s[D], D.op.axis[0])
    s[D].parallel(D.op.axis[0])
    mod = sl.build(s, [A, D])
    src = mod.get_source()
    assert "GOMP_parallel" in src
    assert src.count("call ptr @aligned_alloc") == 1 and src.count(f"alloca [{n} x float]") == 1
    a = np.random.default_rng(0).random((4, n)).astype("float32")
    d = np.zeros_like(a)
    mod(a, d)
    np.testing.assert_allclose(d, 3 * a + 1, rtol=1e-6)

@pytest.mark.parametrize("kind", ["index", "if_then_else"])
def test_shared_subexpressions_in_indices_and_branches_lower_in_linear_time(kind):
    # Integer DAGs go through the simplifier's linear forms, structural keys and interval
    # bounds; if_then_else DAGs through the guarded branches of the emitter and the reference.
    A = sl.placeholder((64, 64), name="A")

    def index(i):
        e = i
        for _ in range(LEVELS):
            e = (e * e + e) % 64
        return e

    def branches(x):
        for _ in range(LEVELS):
            x = sl.if_then_else(x > 0.5, x + x, x * 0.5)
        return x

    if kind == "index":
        B = sl.compute((64, 64), lambda i, j: A[index(i), j], name="B")
    else:
        B = sl.compute((64, 64), lambda i, j: branches(A[i, j]), name="B")
    C = sl.compute((64, 64), lambda i, j: B[i, j] + 1.0, name="C")
    s = sl.create_schedule(C.op)
    s[B].compute_at(s[C], C.op.axis[0])
    mod = sl.build(s, [A, C])
    a = np.random.default_rng(0).random((64, 64)).astype("float32")
    c = np.zeros_like(a)
    mod(a, c)
    np.testing.assert_allclose(c, sl.reference([C], {A: a})[0], rtol=1e-6)
