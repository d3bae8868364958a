"""Interval analysis (expr/bounds.py) and bound inference (tile/bound.py).

Property tests: for random index expressions and loop ranges, every value the expression
takes (enumerated by brute force) lies inside the inferred interval; for the forms TVM's
bound inference proves exactly (linear indices, a fused axis that stays inside one row),
the interval is exact."""
import itertools

import numpy as np
from hypothesis import given, settings, strategies as st

import schedlang as sl
from schedlang.expr.bounds import const_bounds, relaxed_interval
from schedlang.expr.nodes import Binary, Const, Var, binary
from schedlang.expr.simplify import simplify
from tests.programs import chain as _chain
from tests.tvm_ports.check import assert_close, build_and_run, check_chain

X, Y, Z = Var("x"), Var("y"), Var("z")


def evaluate(e, env):
    """An independent integer evaluator (floor division and modulo, as the IR means them)."""
    if isinstance(e, Const):
        return int(e.value)
    if isinstance(e, Var):
        return env[e]
    a, b = evaluate(e.a, env), evaluate(e.b, env)
    return {"add": a + b, "sub": a - b, "mul": a * b, "min": min(a, b), "max": max(a, b),
            "floordiv": a // b if b else 0, "floormod": a % b if b else 0}[e.op]


def _leaf():
    return st.one_of(st.sampled_from([X, Y, Z]), st.integers(-6, 9).map(Const))


def _expr():
    def extend(children):
        return st.one_of(
            st.tuples(st.sampled_from(["add", "sub", "min", "max"]), children, children)
              .map(lambda t: binary(t[0], t[1], t[2])),
            st.tuples(children, st.integers(-4, 5)).map(lambda t: binary("mul", t[0], Const(t[1]))),
            st.tuples(st.sampled_from(["floordiv", "floormod"]), children, st.integers(1, 9))
              .map(lambda t: binary(t[0], t[1], Const(t[2]))),
        )
    return st.recursive(_leaf(), extend, max_leaves=6)


_range = st.tuples(st.integers(-5, 8), st.integers(0, 6)).map(lambda t: (t[0], t[0] + t[1]))


def _values(ranges, variables):
    return itertools.product(*(range(ranges[v][0], ranges[v][1] + 1) for v in variables))


@settings(max_examples=150, deadline=None)
@given(_expr(), _range, _range, _range)
def test_const_bounds_contain_every_value(e, rx, ry, rz):
    ranges = {X: rx, Y: ry, Z: rz}
    lo, hi = const_bounds(e, ranges)
    for x, y, z in _values(ranges, [X, Y, Z]):
        v = evaluate(e, {X: x, Y: y, Z: z})
        assert lo is None or lo <= v, (str(e), lo, v)
        assert hi is None or v <= hi, (str(e), hi, v)


@settings(max_examples=150, deadline=None)
@given(_expr(), _range, _range, _range)
def test_relaxed_interval_contains_every_value_for_each_fixed_value(e, rx, ry, rz):
    relax = {Y: ry, Z: rz}
    try:
        lo, hi = relaxed_interval(e, relax)
    except ValueError:
        return       # no bound claimed
    for x in range(rx[0], rx[1] + 1):
        lo_x, hi_x = evaluate(lo, {X: x}), evaluate(hi, {X: x})
        for y, z in _values(relax, [Y, Z]):
            v = evaluate(e, {X: x, Y: y, Z: z})
            assert lo_x <= v <= hi_x, (str(e), x, y, z, str(lo), str(hi))


@settings(max_examples=100, deadline=None)
@given(st.integers(-4, 5), st.integers(-4, 5), st.integers(-6, 6), _range, _range)
def test_linear_indices_are_exact(cy, cz, c0, ry, rz):
    e = binary("add", binary("add", binary("mul", Y, Const(cy)), binary("mul", Z, Const(cz))),
               binary("add", X, Const(c0)))
    lo, hi = relaxed_interval(e, {Y: ry, Z: rz})
    for x in (-3, 0, 4):
        values = [evaluate(e, {X: x, Y: y, Z: z}) for y, z in _values({Y: ry, Z: rz}, [Y, Z])]
        assert (evaluate(lo, {X: x}), evaluate(hi, {X: x})) == (min(values), max(values))
    clo, chi = const_bounds(e, {X: (-3, 4), Y: ry, Z: rz})
    every = [evaluate(e, {X: x, Y: y, Z: z}) for x, y, z in _values({X: (-3, 4), Y: ry, Z: rz}, [X, Y, Z])]
    assert (clo, chi) == (min(every), max(every))


@settings(max_examples=100, deadline=None)
@given(st.sampled_from([1, 2, 4, 8]), st.sampled_from([1, 2, 4]), st.sampled_from([8, 16]), st.integers(0, 3))
def test_a_fused_axis_inside_one_row_is_exact(factor, scale, row, offset):
    """fused = x*factor*scale + offset + y, y in [0, factor): row // and % are exact when
    the segment cannot cross a row boundary (TVM's PassUpDomain for fuse)."""
    step = factor * scale
    if row % step or offset + factor > step:
        return
    fused = binary("add", binary("add", binary("mul", X, Const(step)), Const(offset)), Y)
    for op in ("floordiv", "floormod"):
        e = binary(op, fused, Const(row))
        lo, hi = relaxed_interval(e, {Y: (0, factor - 1)})
        for x in range(0, 5):
            values = [evaluate(e, {X: x, Y: y}) for y in range(factor)]
            assert (evaluate(lo, {X: x}), evaluate(hi, {X: x})) == (min(values), max(values)), (str(e), x)


def test_const_bounds_of_a_modulo_keep_to_its_residues():
    assert const_bounds(binary("floormod", binary("mul", X, Const(4)), Const(8)), {X: (0, 15)}) == (0, 4)
    assert const_bounds(binary("floormod", binary("add", binary("mul", X, Const(4)), Const(1)), Const(8)),
                        {X: (0, 15)}) == (1, 5)


# ---- bound inference on schedules --------------------------------------------------------
def test_stage_at_the_outer_loop_of_a_fused_then_split_axis_needs_a_row_segment():
    A, B, C = _chain()
    s = sl.create_schedule(C.op)
    fo, fi = s[C].split(s[C].fuse(*C.op.axis), factor=4)
    s[B].compute_at(s[C], fo)
    text = sl.lower(s, [A, C])
    assert "alloc B: f32[1, 4] local" in text
    assert "if " not in text       # the segment provably stays in the row: no guard
    check_chain(s, A, C, seed=0)


def test_stage_at_a_fused_split_that_crosses_rows_keeps_whole_rows():
    A, B, C = _chain((6, 6))
    s = sl.create_schedule(C.op)
    fo, fi = s[C].split(s[C].fuse(*C.op.axis), factor=4)     # 4 does not divide 6: segments cross rows
    s[B].compute_at(s[C], fo)
    assert "alloc B: f32[2, 6] local" in sl.lower(s, [A, C])
    check_chain(s, A, C, seed=1)


def test_stage_at_the_inner_loop_of_a_fused_split_needs_one_element():
    A, B, C = _chain()
    s = sl.create_schedule(C.op)
    fo, fi = s[C].split(s[C].fuse(*C.op.axis), factor=4)
    s[B].compute_at(s[C], fi)
    assert "alloc B: f32[1, 1] local" in sl.lower(s, [A, C])


def test_root_temporary_is_sized_by_what_its_reader_needs():
    A = sl.placeholder((16, 16), name="A")
    B = sl.compute((16, 16), lambda i, j: A[i, j] * 2.0, name="B")
    C = sl.compute((8, 8), lambda i, j: B[i + 2, j + 1] + 1.0, name="C")
    s = sl.create_schedule(C.op)
    text = sl.lower(s, [A, C])
    assert "alloc B: f32[8, 8] global" in text and "B[i, j] = A[i + 2, j + 1] * 2.0" in text
    assert "alloc B: f32[16, 16]" in sl.lower(s, [A, C], level="loop")    # Loop IR: the whole domain
    a = np.random.default_rng(2).random((16, 16), "float32")
    (c,) = build_and_run(s, [A, C], [a], [np.empty((8, 8), "float32")])
    assert_close(c, a[2:10, 1:9] * 2 + 1)


def test_root_temporary_read_by_two_readers_covers_both():
    A = sl.placeholder((16,), name="A")
    B = sl.compute((16,), lambda i: A[i] + 1.0, name="B")
    C = sl.compute((4,), lambda i: B[i + 1] * B[i + 9], name="C")
    s = sl.create_schedule(C.op)
    assert "alloc B: f32[12] global" in sl.lower(s, [A, C])
    a = np.arange(16, dtype="float32")
    (c,) = build_and_run(s, [A, C], [a], [np.empty(4, "float32")])
    assert_close(c, (a[1:5] + 1) * (a[9:13] + 1))


def test_root_temporary_that_is_an_argument_keeps_its_shape():
    A = sl.placeholder((16,), name="A")
    B = sl.compute((16,), lambda i: A[i] + 1.0, name="B")
    C = sl.compute((4,), lambda i: B[i], name="C")
    s = sl.create_schedule(C.op)
    a = np.arange(16, dtype="float32")
    b, c = build_and_run(s, [A, B, C], [a], [a, a[:4]])
    assert_close(b, a + 1)
    assert_close(c, a[:4] + 1)


def test_simplify_cancels_the_aligned_extent():
    """The extent of a fused row segment folds to a constant, so the buffer is small."""
    fo = Var("fo")
    e = binary("floormod", binary("add", binary("mul", fo, Const(4)), Y), Const(8))
    lo, hi = relaxed_interval(e, {Y: (0, 3)})
    extent = simplify(binary("add", binary("sub", hi, lo), Const(1)), {fo: (0, 15)})
    assert isinstance(extent, Const) and extent.value == 4
    assert isinstance(e, Binary)


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 6), st.integers(-5, 5), st.integers(0, 12), st.integers(1, 8), st.integers(1, 3))
def test_span_bound_of_two_floor_divisions(k, a, w, c, m):
    """hi - lo <= span_bound for lo = (k*x + a) // c and hi = (k*x + a + w) // c, also when
    one side is written with the divisor scaled by m."""
    from schedlang.expr.simplify import span_bound
    base = binary("add", binary("mul", X, Const(k)), Const(a))
    lo = binary("floordiv", base, Const(c))
    hi = binary("floordiv", binary("mul", binary("add", base, Const(w)), Const(m)), Const(c * m))
    bound = span_bound(hi, lo, {X: (-4, 9)})
    assert bound is not None
    assert all(evaluate(hi, {X: x}) - evaluate(lo, {X: x}) <= bound for x in range(-4, 10))


@settings(max_examples=15, deadline=None)
@given(st.sampled_from([(6, 8), (8, 8), (5, 12), (4, 6)]), st.integers(1, 9), st.integers(0, 2),
       st.booleans(), st.sampled_from([0, 1]))
def test_compute_at_a_fused_split_loop_covers_every_read(shape, factor, level, stencil, shift):
    """The producer, computed at a loop of the consumer's fused-then-split nest, holds every
    element the consumer reads: the bounds-checked build would raise on a read outside its
    buffer, and the numerics would differ on a stale one."""
    m, n = shape
    A = sl.placeholder((m + 1, n + 1), name="A")
    B = sl.compute((m + 1, n + 1), lambda i, j: A[i, j] * 2.0, name="B")
    if stencil:
        C = sl.compute((m, n), lambda i, j: B[i + shift, j] + B[i, j + 1], name="C")
    else:
        C = sl.compute((m, n), lambda i, j: B[i + shift, j + shift] + 1.0, name="C")
    s = sl.create_schedule(C.op)
    fo, fi = s[C].split(s[C].fuse(*C.op.axis), factor=factor)
    if level == 2:
        fio, fii = s[C].split(fi, factor=2)
        s[B].compute_at(s[C], fio)
    else:
        s[B].compute_at(s[C], [fo, fi][level])
    a = np.random.default_rng(factor).random((m + 1, n + 1), "float32")
    (c,) = build_and_run(s, [A, C], [a], [np.empty((m, n), "float32")])
    b = a * 2
    want = b[shift:shift + m, :n] + b[:m, 1:n + 1] if stencil else b[shift:shift + m, shift:shift + n] + 1
    assert_close(c, want)
