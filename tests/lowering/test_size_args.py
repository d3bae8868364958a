"""Size variables as module arguments (TVM's build(s, [A, B, n])) and splits by a symbolic
factor (s[C].split(x, factor=m) with m = sl.var("m")).

Every module is built bounds-checked and normally; each is run over many sizes and
factors, tails included, against the reference evaluator."""
from __future__ import annotations

import json

import numpy as np
import pytest

import schedlang as sl
from tests import programs
from tests.helpers import CHECKED, assert_close

RNG = np.random.default_rng(0)


def _both(s, args):
    return [sl.build(s, args, target=CHECKED, cache=False), sl.build(s, args, cache=False)]


def _check(s, args, calls):
    """calls: lists of call arguments (arrays for tensors, ints for sizes); the outputs are
    the arrays of args that are not placeholders, compared with sl.reference."""
    mods = _both(s, args)
    for call in calls:
        feed = {t: x for t, x in zip(args, call) if isinstance(t, sl.Tensor) and isinstance(s[t].op, sl.tensor.PlaceholderOp)}
        sizes = {t: x for t, x in zip(args, call) if isinstance(t, sl.Var)}
        outs = [(t, x) for t, x in zip(args, call) if isinstance(t, sl.Tensor) and t not in feed]
        want = sl.reference([t for t, _ in outs], {**feed, **sizes})
        for mod in mods:
            for _, x in outs:
                x.fill(7)
            mod(*call)
            for (t, got), exp in zip(outs, want):
                assert_close(got, exp, str(t.dtype), name=f"{t.name} with {[getattr(c, 'shape', c) for c in call]}")


def _vector_add(n):
    A = sl.placeholder((n,), name="A")
    B = sl.compute((n,), lambda i: A[i] * 2.0 + 1.0, name="B")
    return A, B


def _arrays(*shapes):
    return [RNG.standard_normal(sh).astype("float32") for sh in shapes]


# ---- size variables in the argument list --------------------------------------------

def test_size_var_argument_is_printed_where_listed_and_checked_against_shapes():
    n = sl.size_var("n")
    A, B = _vector_add(n)
    s = sl.create_schedule(B.op)
    text = sl.lower(s, [A, n, B])
    assert text.splitlines()[0] == "func B(A: f32[n], n: i32, B: f32[n]):"
    assert "module B(A: f32[n], n: i32, B: f32[n]):" in sl.lower(s, [A, n, B], level="kernel")
    _check(s, [A, n, B], [[a, len(a), b] for a, b in (_arrays(k, k) for k in (0, 1, 5, 64))])
    mod = sl.build(s, [A, n, B])
    with pytest.raises(ValueError, match=r"size variable 'n' is 4 from the argument 'n' but 5 from A.shape\[0\]"):
        mod(np.zeros(5, "float32"), 4, np.zeros(5, "float32"))
    with pytest.raises(TypeError, match=r"takes 3 arguments \(A, n, B\), got 2"):
        mod(np.zeros(5, "float32"), np.zeros(5, "float32"))
    with pytest.raises(TypeError, match="'n' is a size variable and takes an int, got float"):
        mod(np.zeros(5, "float32"), 5.0, np.zeros(5, "float32"))
    with pytest.raises(ValueError, match="'n' is a size_var \\(>= 0\\), got -1"):
        mod(np.zeros(0, "float32"), -1, np.zeros(0, "float32"))
    mod(np.zeros(3, "float32"), np.int64(3), np.zeros(3, "float32"))     # numpy ints are ints


def test_size_that_only_an_expression_gives_can_be_passed():
    """n * n cannot be solved for n from a shape; listing n as an argument gives it."""
    n = sl.size_var("n")
    A = sl.placeholder((n * n,), name="A")
    B = sl.compute((n * n,), lambda i: A[i] + 1.0, name="B")
    s = sl.create_schedule(B.op)
    with pytest.raises(ValueError, match=r"list the variable itself as an argument \(build\(s, \[\.\.\., n\]\)\)"):
        sl.build(s, [A, B])
    _check(s, [A, B, n], [[*_arrays(k * k, k * k), k] for k in (0, 1, 3, 9)])
    with pytest.raises(ValueError, match=r"B.shape\[0\] = 9, but its extent 'n \* n' is 4 with n=2"):
        sl.build(s, [A, B, n])(np.zeros(4, "float32"), np.zeros(9, "float32"), 2)


def test_size_argument_that_the_program_never_uses_is_accepted():
    n, unused = sl.size_var("n"), sl.var("unused")
    A, B = _vector_add(n)
    s = sl.create_schedule(B.op)
    _check(s, [A, B, unused], [[*_arrays(6, 6), 12345]])


def test_bad_size_arguments():
    n = sl.size_var("n")
    A, B = _vector_add(n)
    s = sl.create_schedule(B.op)
    with pytest.raises(ValueError, match="argument 'n' is listed twice"):
        sl.lower(s, [A, B, n, n])
    with pytest.raises(TypeError, match="must be a scalar integer variable, got dtype float32"):
        sl.lower(s, [A, B, sl.var("x", "float32")])


# ---- split by a symbolic factor --------------------------------------------------------

def test_split_by_symbolic_factor_guards_the_tail_for_every_factor():
    n, m = sl.size_var("n"), sl.var("m")
    A, B = _vector_add(n)
    s = sl.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=m)
    text = sl.lower(s, [A, B, m])
    assert "for i.outer in 0..(n + m - 1) // m:" in text and "if i.outer * m + i.inner < n:" in text
    _check(s, [A, B, m], [[*_arrays(k, k), f] for k in (0, 1, 7, 64) for f in (1, 3, 8, 100)])


def test_split_factor_below_one_is_refused_at_call():
    m = sl.var("m")
    A, B = _vector_add(10)
    s = sl.create_schedule(B.op)
    s[B].split(B.op.axis[0], factor=m)
    mod = sl.build(s, [A, B, m])
    for bad in (0, -3):
        with pytest.raises(ValueError, match=rf"the split factor of B.i is 'm' = {bad} with m={bad}; it must be at least 1"):
            mod(*_arrays(10, 10), bad)


def test_split_by_symbolic_nparts_with_parallel_outer():
    m = sl.var("m")
    A, B = _vector_add(17)
    s = sl.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], nparts=m)
    s[B].parallel(xo)
    _check(s, [A, B, m], [[*_arrays(17, 17), f] for f in (1, 2, 5, 17, 40)])


def test_symbolic_factor_with_constant_inner_split_vectorized():
    m = sl.var("m")
    A, B = _vector_add(37)
    s = sl.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=m)
    xio, xii = s[B].split(xi, factor=4)
    s[B].vectorize(xii)
    _check(s, [A, B, m], [[*_arrays(37, 37), f] for f in (1, 3, 8, 65)])


def test_split_of_a_reduce_axis_by_a_symbolic_factor():
    n, m = sl.size_var("n"), sl.var("m")
    A, B = programs.row_sum(n, 10)
    (k,) = B.op.reduce_axis
    s = sl.create_schedule(B.op)
    s[B].split(k, factor=m)
    _check(s, [A, B, m], [[*_arrays((r, 10), r), f] for r in (1, 5) for f in (1, 3, 10, 11)])


def test_gemm_tiled_by_a_symbolic_factor_with_cache_write_at_the_tile():
    m = sl.var("m")
    N = 19
    A, Bm = sl.placeholder((N, N), name="A"), sl.placeholder((N, N), name="Bm")
    k = sl.reduce_axis((0, N), "k")
    C = sl.compute((N, N), lambda i, j: sl.sum(A[i, k] * Bm[k, j], axis=k), name="C")
    s = sl.create_schedule(C.op)
    CC = s.cache_write(C, "local")
    io, ii = s[C].split(C.op.axis[0], factor=m)
    jo, ji = s[C].split(C.op.axis[1], factor=4)
    s[C].reorder(io, jo, ii, ji)
    s[CC].compute_at(s[C], jo)
    _check(s, [A, Bm, C, m], [[*_arrays((N, N), (N, N), (N, N)), f] for f in (1, 5, 19, 30)])


@pytest.mark.slow
def test_symbolic_factor_near_2_31_of_symbolic_extent_is_exact():
    # Slow: each call runs up to 2**31 - 1 guarded inner iterations. The guards themselves are
    # checked for every such factor, cheaply, in test_index_wrap.py.
    # (n + m - 1) // m passes 2**31 - 1 in its numerator: it is computed in 64 bits
    # (kernel/widen.py; the call refused such a factor before), as is the tail guard.
    n, m = sl.size_var("n"), sl.var("m")
    A, B = _vector_add(n)
    s = sl.create_schedule(B.op)
    s[B].split(B.op.axis[0], factor=m)
    _check(s, [A, B, m], [[*_arrays(5, 5), f] for f in (2 ** 31 - 1, 2 ** 31 - 3, 2 ** 30 + 1)])


def test_unroll_of_a_symbolic_inner_loop_is_a_schedule_error():
    m = sl.var("m")
    A, B = _vector_add(16)
    s = sl.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=m)
    with pytest.raises(sl.ScheduleError, match="extent 'm' is symbolic"):
        s[B].unroll(xi)


def test_split_factor_must_be_a_size_not_a_loop_variable():
    A, B = _vector_add(16)
    s = sl.create_schedule(B.op)
    with pytest.raises(sl.ScheduleError, match="factor 'i' is a loop variable"):
        s[B].split(B.op.axis[0], factor=B.op.axis[0].var)
    with pytest.raises(sl.ScheduleError, match="must be a scalar integer variable"):
        s[B].split(B.op.axis[0], factor=sl.var("f", "float32"))
    assert not s.steps


def test_symbolic_split_replays_from_json_and_python_with_the_same_variable():
    n, m = sl.size_var("n"), sl.var("m")
    A, B = _vector_add(n)
    s = sl.create_schedule(B.op)
    s[B].split(B.op.axis[0], factor=m)
    data = json.loads(s.to_json())
    assert data["steps"][0]["factor"] == "m"
    assert "split(B_i, factor=m)" in s.to_python()
    again = sl.create_schedule(B.op)
    again._register_size_var("split", "B", m)        # the caller's m, as a first split would register it
    again.apply_json(s.to_json())
    assert sl.lower(again, [A, B, m]) == sl.lower(s, [A, B, m])
    fresh = sl.create_schedule(B.op).apply_json(s.to_json())     # a new 'm', named as recorded
    (v,) = [x for x in fresh._size_vars.values()]
    assert v.name == "m" and v is not m
    _check(fresh, [A, B, v], [[*_arrays(9, 9), 4]])


def test_two_size_variables_of_one_name_are_refused():
    m1, m2 = sl.var("m"), sl.var("m")
    A = sl.placeholder((16, 16), name="A")
    B = sl.compute((16, 16), lambda i, j: A[i, j], name="B")
    s = sl.create_schedule(B.op)
    s[B].split(B.op.axis[0], factor=m1)
    with pytest.raises(sl.ScheduleError, match="another size variable is also called 'm'"):
        s[B].split(B.op.axis[1], factor=m2)
