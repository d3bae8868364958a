"""set_store_predicate on ordinary stages (TVM's Stage.set_store_predicate): the stores happen
only where the predicate holds, placed inside the deepest loop it names (a whole chunk of a
vectorized loop skipped at once); a predicate naming a loop that is not around the stage is a
ScheduleError; the build key tells schedules apart by their predicates."""
import numpy as np
import pytest

import schedlang as sl
from schedlang.build_key import build_key
from tests.helpers import CHECKED


def _scaled(n):
    A = sl.placeholder((n,), name="A")
    return A, sl.compute((n,), lambda i: A[i] * 2.0, name="B")


def test_plain_stage_stores_only_where_the_predicate_holds():
    n = 37                                   # a tail: the split's guard and the predicate both apply
    A, B = _scaled(n)
    s = sl.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=8)
    s[B].vectorize(xi)
    s[B].set_store_predicate(xo.var * 8 < 20)
    assert "if i.outer * 8 < 20:" in str(sl.lower(s, [A, B]))
    a, b = np.arange(n, dtype="float32"), np.full(n, -1.0, dtype="float32")
    sl.build(s, [A, B], target=CHECKED)(a, b)
    np.testing.assert_array_equal(b, np.where(np.arange(n) < 24, a * 2, -1))


def test_reduction_skips_the_updates_where_the_predicate_fails():
    n = 37
    A = sl.placeholder((n,), name="A")
    k = sl.reduce_axis((0, n), name="k")
    C = sl.compute((4,), lambda i: sl.sum(A[k] * (i + 1).astype("float32"), axis=k), name="C")
    s = sl.create_schedule(C.op)
    ko, _ = s[C].split(k, factor=8)
    s[C].set_store_predicate(ko.var * 8 < 16)        # a reduce loop: the init still runs
    a, c = np.random.default_rng(0).random(n, dtype="float32"), np.full(4, 7.0, dtype="float32")
    sl.build(s, [A, C], target=CHECKED)(a, c)
    np.testing.assert_allclose(c, a[:16].sum() * np.arange(1, 5), rtol=1e-5)


def test_a_loop_not_around_the_stage_is_refused():
    A = sl.placeholder((16,), name="A")
    D = sl.compute((16,), lambda i: A[i] + 1.0, name="D")
    E = sl.compute((16,), lambda i: D[i] * 2.0, name="E")
    s = sl.create_schedule(E.op)
    eo, _ = s[E].split(E.op.axis[0], factor=4)
    s[D].set_store_predicate(eo.var < 3)               # D is computed at the root, outside E's loops
    with pytest.raises(sl.ScheduleError, match="set_store_predicate.*'D'.*not a loop around"):
        sl.build(s, [A, E])
    s[D].compute_at(s[E], eo)                          # now inside it
    a, e = np.arange(16, dtype="float32"), np.zeros(16, dtype="float32")
    sl.build(s, [A, E], target=CHECKED)(a, e)
    np.testing.assert_array_equal(e[:12], (a[:12] + 1) * 2)


def test_the_build_key_tells_predicates_apart():
    def key(bound):
        A, B = _scaled(32)
        s = sl.create_schedule(B.op)
        xo, _ = s[B].split(B.op.axis[0], factor=8)
        if bound is not None:
            s[B].set_store_predicate(xo.var < bound)
        return build_key(s, [A, B], sl.Target.create("llvm"), None)
    assert key(2) == key(2) and len({key(None), key(2), key(3)}) == 3


def test_a_predicate_is_undone_with_the_other_primitives():
    A, B = _scaled(16)
    s = sl.create_schedule(B.op)
    xo, _ = s[B].split(B.op.axis[0], factor=8)
    with pytest.raises(ValueError):
        with s.all_or_nothing():
            s[B].set_store_predicate(xo.var < 1)
            raise ValueError("give up")
    assert s[B].store_predicate is None
