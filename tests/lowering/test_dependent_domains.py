"""Reductions whose domain reads the stage's own axes (reduce_axis((0, j + 1)): prefix sums,
triangles), which TVM allows: the reference evaluator computes them, every loop order that
keeps the reduction inside the loops of what it reads builds and matches numpy (bounds-checked
too), and the orders that do not, and rfactor, are a ScheduleError."""
import numpy as np
import pytest

import schedlang as sl
from tests.helpers import CHECKED

R, C = 7, 13


def _prefix():
    X = sl.placeholder((R, C), name="X")

    def body(i, j):
        r = sl.reduce_axis((0, j + 1), name="r")
        return sl.sum(X[i, r] * 0.5, axis=r)
    Y = sl.compute((R, C), body, name="Y")
    Z = sl.compute((R, C), lambda i, j: Y[i, j] + X[i, j], name="Z")
    return X, Y, Z


def _want(x):
    return np.cumsum(x * 0.5, 1) + x


def test_the_reference_evaluates_prefixes_suffixes_and_reversed_reads():
    X, _, Z = _prefix()
    x = np.random.rand(R, C).astype("float32")
    np.testing.assert_allclose(sl.reference([Z], {X: x})[0], _want(x), rtol=1e-6)
    running_max = sl.compute((R, C), lambda i, j: sl.max(X[i, j - (r := sl.reduce_axis((0, j + 1)))], axis=r))
    np.testing.assert_array_equal(sl.reference([running_max], {X: x})[0], np.maximum.accumulate(x, 1))
    suffix = sl.compute((R, C), lambda i, j: sl.sum(X[i, j + (r := sl.reduce_axis((0, C - j)))], axis=r))
    np.testing.assert_allclose(sl.reference([suffix], {X: x})[0], np.cumsum(x[:, ::-1], 1)[:, ::-1], rtol=1e-5)


def _split(s, X, Y, Z):
    s[Y].split(Y.op.reduce_axis[0], factor=4)


def _unrolled(s, X, Y, Z):
    s[Y].unroll(s[Y].split(Y.op.reduce_axis[0], factor=4)[1])


def _attached(s, X, Y, Z):
    s[Y].compute_at(s[Z], Z.op.axis[0])
    s[Y].split(Y.op.reduce_axis[0], nparts=3)


def _cached(s, X, Y, Z):
    YY = s.cache_write(Y, "local")
    s[YY].split(YY.op.reduce_axis[0], factor=5)


def _parallel_rows(s, X, Y, Z):
    i, j = Y.op.axis
    s[Y].parallel(i)
    s[Z].vectorize(Z.op.axis[1])


@pytest.mark.parametrize("schedule", [_split, _unrolled, _attached, _cached, _parallel_rows],
                         ids=["split", "unrolled", "compute_at", "cache_write", "parallel"])
def test_schedules_that_keep_the_reduction_inside_match_numpy(schedule):
    X, Y, Z = _prefix()
    s = sl.create_schedule(Z.op)
    schedule(s, X, Y, Z)
    x = np.random.rand(R, C).astype("float32")
    for target in (CHECKED, "llvm"):
        z = np.full((R, C), np.nan, "float32")
        sl.build(s, [X, Z], target=target)(x, z)
        np.testing.assert_allclose(z, _want(x), rtol=1e-5)


def test_a_loop_of_what_the_domain_reads_inside_the_reduction_is_refused():
    X, Y, Z = _prefix()
    s = sl.create_schedule(Z.op)
    i, j = Y.op.axis
    jo, ji = s[Y].split(j, factor=4)
    s[Y].reorder(jo, Y.op.reduce_axis[0], ji)
    with pytest.raises(sl.ScheduleError, match="loop 'j.inner' of axis 'j' runs inside loop 'r'"):
        sl.build(s, [X, Z])


def test_rfactor_of_a_triangle_is_refused():
    X, Y, Z = _prefix()
    s = sl.create_schedule(Z.op)
    ro, ri = s[Y].split(Y.op.reduce_axis[0], factor=4)
    with pytest.raises(sl.ScheduleError, match="reads the stage's own axes"):
        s.rfactor(Y, ri)
