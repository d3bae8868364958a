"""Index arithmetic never wraps: loop bounds, guards and indices near 2**31 (issue 15, item 1).

A split of an extent near 2**31 by a factor that does not divide it has a tail guard
`outer * f + inner < n` whose left side passes 2**31 - 1; in int32 it wrapped, the guard
let extra iterations through (a reduction counted too many, a store went below its array).
Kernel IR now computes such terms in int64 (kernel/widen.py). The checks here evaluate the
guards of the built Kernel IR with the wrap-around of each node's dtype and compare with
exact integer arithmetic, run small arrays whose index terms pass 2**31, and run one
reduction over 2**31 - 1 iterations (the loop body is one add)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import schedlang as sl
from schedlang.expr.nodes import Binary, Cast, Compare, Const, Var
from schedlang.loop.functor import walk_stmts
from schedlang.loop.nodes import For, IfThen
from tests.cpu_targets import CPU_TARGETS, needs_cc

INT32_MAX = 2**31 - 1
NEAR_LIMIT = st.integers(INT32_MAX - 2**20, INT32_MAX) | st.integers(2**30, INT32_MAX)
FACTORS = st.integers(2, INT32_MAX) | st.integers(2, 64) | st.sampled_from([3, 7, 1000, 2**16 + 1, 2**30 + 1])

_OPS = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
        "floordiv": lambda a, b: a // b, "floormod": lambda a, b: a % b,
        "lt": lambda a, b: a < b, "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b}


def _run(e, env, wrap: bool):
    """e's value: with wrap, each integer node wraps to its dtype as the generated code does;
    without, exact (Python ints)."""
    if isinstance(e, Const):
        return int(e.value)
    if isinstance(e, Var):
        return env[e]
    if isinstance(e, Cast):
        value = _run(e.value, env, wrap)
    else:
        assert isinstance(e, (Binary, Compare)), f"unexpected node in a guard: {e}"
        value = _OPS[e.op](_run(e.a, env, wrap), _run(e.b, env, wrap))
    if wrap and e.dtype.is_int:
        bits = e.dtype.bits
        value = (value + 2 ** (bits - 1)) % 2 ** bits - 2 ** (bits - 1)
    return value


def _guards(kernel_module):
    """(loop extents by variable, guard conditions) of every kernel."""
    extents, guards = {}, []
    for k in kernel_module.kernels:
        for s in walk_stmts(k.body):
            if isinstance(s, For):
                extents[s.var] = s.extent
            elif isinstance(s, IfThen):
                guards.append(s.cond)
    return extents, guards


def _reduction(extent, factor=None, nparts=None):
    k = sl.reduce_axis((0, extent), name="k")
    C = sl.compute((1,), lambda i: sl.sum(sl.const(1, "int64"), axis=k), name="C")
    s = sl.create_schedule(C.op)
    s[C].split(k, factor=factor, nparts=nparts)
    return s, C


def _check_guards_exact(s, args, sizes=None):
    """Every guard of the Kernel IR gives the exact answer at the last iteration of its loops
    (where the terms are largest) and at a few others."""
    kernel = sl.lower(s, args, level="kernel").ir["kernel"]
    extents, guards = _guards(kernel)
    assert guards, "the split was expected to need a tail guard"
    sizes = sizes or {}
    for cond in guards:
        loops = [v for v in extents if any(v is x for x in _vars(cond))]
        for pick in (lambda n: n - 1, lambda n: n // 2, lambda n: 0):
            env = dict(sizes)
            for v in loops:
                n = extents[v] if isinstance(extents[v], int) else _run(extents[v], sizes, wrap=False)
                env[v] = pick(n)
            assert _run(cond, env, wrap=True) == _run(cond, env, wrap=False), f"guard '{cond}' wraps at {env}"


def _vars(e):
    from schedlang.expr.functor import free_vars
    return list(free_vars(e))


@settings(max_examples=40, deadline=None)
@given(extent=NEAR_LIMIT, factor=FACTORS, by_nparts=st.booleans())
def test_split_tail_guards_near_2_31_are_exact(extent, factor, by_nparts):
    s, C = _reduction(extent, **({"nparts": factor} if by_nparts else {"factor": factor}))
    split_points = (factor if by_nparts else -(-extent // factor)) * (-(-extent // factor) if by_nparts else factor)
    if split_points == extent:
        return          # the split divides: no guard
    _check_guards_exact(s, [C])


@settings(max_examples=25, deadline=None)
@given(n=NEAR_LIMIT, factor=FACTORS)
def test_symbolic_split_guards_are_exact(n, factor):
    size = sl.size_var("n")
    s, C = _reduction(size, factor=factor)
    _check_guards_exact(s, [C, size], {size: n})


def test_symbolic_factor_guards_are_exact():
    n, f = sl.size_var("n"), sl.var("f")
    s, C = _reduction(n, factor=f)
    for sizes in ({n: INT32_MAX, f: 3}, {n: INT32_MAX - 5, f: 2**30 + 7}, {n: 2**31 - 2, f: INT32_MAX}):
        _check_guards_exact(s, [C, n, f], sizes)


@pytest.mark.parametrize("target", CPU_TARGETS)
def test_reduction_over_2_31_minus_1_with_a_tail_counts_each_iteration_once(target):
    # 2 * (2**30 + 1) iterations, the last two beyond the extent: int32 let them through.
    s, C = _reduction(INT32_MAX, factor=2**30 + 1)
    out = np.zeros(1, "int64")
    sl.build(s, [C], target=target)(out)
    assert out[0] == INT32_MAX


@pytest.mark.parametrize("target", CPU_TARGETS)
def test_small_arrays_with_index_terms_beyond_int32_match_numpy(target):
    A = sl.placeholder((7,), name="A")
    n = sl.size_var("n")
    C = sl.compute((20,), lambda i: A[(i * 2**30 + 5) % 7] + A[(i * n) % 7], name="C")
    D = sl.compute((20,), lambda i: sl.if_then_else(i * 1000000007 % 1000 < 500, A[i % 7], sl.const(0.0)), name="D")
    E = sl.compute((20,), lambda i: A[(i * n + (2**31 - 20)) // (n // 7 + 1) % 7], name="E")
    a, i = np.arange(7, dtype="float32") * 1.5, np.arange(20)
    for size in (INT32_MAX, 2**31 - 7, 12345):
        want = {C: a[(i * 2**30 + 5) % 7] + a[(i * size) % 7],
                D: np.where(i * 1000000007 % 1000 < 500, a[i % 7], 0),
                E: a[(i * size + 2**31 - 20) // (size // 7 + 1) % 7]}
        for out, expected in want.items():
            got = np.zeros(20, "float32")
            sl.build(sl.create_schedule(out.op), [A, out, n], target=target)(a, got, size)
            np.testing.assert_array_equal(got, expected, err_msg=f"{out.name} with n={size}")
            ref = sl.reference([out], {A: a, n: size})[0]
            np.testing.assert_array_equal(ref, expected)


@pytest.mark.parametrize("target", CPU_TARGETS)
def test_symbolic_extent_near_2_31_is_accepted_and_exact(target):
    # (n + 2) // 3 passed 2**31 - 1 for n near it; the call refused such sizes, now it is int64.
    n = sl.size_var("n")
    s, C = _reduction(n, factor=3)
    mod = sl.build(s, [C, n], target=target)
    out = np.zeros(1, "int64")
    mod(out, 10)
    assert out[0] == 10
    extents, _ = _guards(sl.lower(s, [C, n], level="kernel").ir["kernel"])
    outer = [e for e in extents.values() if not isinstance(e, int)][0]
    assert _run(outer, {n: INT32_MAX}, wrap=True) == -(-INT32_MAX // 3)


@pytest.mark.parametrize("target", CPU_TARGETS)
def test_parallel_chunks_of_a_loop_near_2_31_are_computed_in_64_bits(target):
    n = sl.size_var("n")
    A = sl.placeholder((n,), name="A")
    B = sl.compute((n,), lambda i: A[i] * 2, name="B")
    s = sl.create_schedule(B.op)
    s[B].parallel(B.op.axis[0])
    mod = sl.build(s, [A, B], target=target)
    assert target == "c" or "sdiv i64" in mod.get_source("ll")      # (c: OpenMP computes the chunks)
    a = np.arange(1001, dtype="float32")
    b = np.zeros_like(a)
    mod(a, b)
    np.testing.assert_array_equal(b, a * 2)


@pytest.mark.parametrize("bad", [0, -1, 2**31, 2**32, 2**32 + 4, 2**40, True, 2.0, "4"])
@pytest.mark.parametrize("primitive", ["factor", "nparts", "tile", "storage_align"])
def test_factors_outside_1_to_2_31_minus_1_are_refused(primitive, bad):
    A = sl.placeholder((16, 16), name="A")
    B = sl.compute((16, 16), lambda i, j: A[i, j] + 1, name="B")
    C = sl.compute((16, 16), lambda i, j: B[i, j] * 2, name="C")
    s = sl.create_schedule(C.op)
    i, j = C.op.axis
    with pytest.raises(sl.ScheduleError) as e:
        if primitive == "tile":
            s[C].tile(i, j, 4, bad)
        elif primitive == "storage_align":
            s[B].compute_at(s[C], i)
            s[B].storage_align(B.op.axis[0], bad, 0)
        else:
            s[C].split(i, **{primitive: bad})
    assert str(bad) in str(e.value)
    assert s.to_json() == s.to_json()    # nothing recorded half-way: the schedule still prints


@pytest.mark.parametrize("target", CPU_TARGETS)
def test_largest_factor_and_symbolic_factor_are_accepted(target):
    s, C = _reduction(100, factor=INT32_MAX)
    out = np.zeros(1, "int64")
    sl.build(s, [C], target=target)(out)
    assert out[0] == 100
    f = sl.var("f")
    s, C = _reduction(100, factor=f)
    sl.build(s, [C, f], target=target)(out, INT32_MAX)
    assert out[0] == 100


def _scaled(factor, annotate):
    n = sl.size_var("n")
    A = sl.placeholder((n,), name="A")
    B = sl.compute((n,), lambda i: A[i] * 2, name="B")
    s = sl.create_schedule(B.op)
    o, i = s[B].split(B.op.axis[0], factor=factor)
    annotate(s[B], o, i)
    return s, [A, B], n


def _bind(stage, o, i):
    stage.bind(o, sl.thread_axis("blockIdx.x"))
    stage.bind(i, sl.thread_axis("threadIdx.x"))


def _vectorize_parallel(stage, o, i):
    stage.vectorize(i)
    stage.parallel(o)


@pytest.mark.parametrize("target, annotate", [("cuda", _bind), ("llvm", _vectorize_parallel),
                                              pytest.param("c", _vectorize_parallel, marks=needs_cc)])
def test_widened_guards_of_gpu_and_vector_loops_run_right(target, annotate):
    s, args, n = _scaled(6, annotate)
    # The guard and the grid / worker extent (n + 5) // 6 are computed in 64 bits.
    text = str(sl.lower(s, args, level="kernel", target=target))
    assert "< int64(n)" in text or "< x6(int64(n))" in text, text
    assert "int32((int64(n) + 5) // 6)" in text, text
    mod = sl.build(s, args, target=target)
    for size in (1, 6, 100, 1001):
        a = np.arange(size, dtype="float32")
        b = np.zeros_like(a)
        mod.emulate(a, b) if target == "cuda" else mod(a, b)
        np.testing.assert_array_equal(b, a * 2)
