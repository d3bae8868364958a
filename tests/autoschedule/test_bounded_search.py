"""Every search step and annotation is bounded in time whatever the extents (issue 15, item 7).

The auto-scheduler enumerated the divisors of an extent in O(n) (minutes, then memory, for
2**31 - 1) before its first measurement, and an auto_unroll_max_step pragma of any size
unrolled whatever nest fit under it. Each check runs under an alarm: a hang fails it."""
from __future__ import annotations

import contextlib
import random
import signal

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import schedlang as sl
from schedlang.autoschedule.search import Evolver
from schedlang.autoschedule.task import SearchTask
from schedlang.schedule import legal

PRIME = 2**31 - 1


@contextlib.contextmanager
def deadline(seconds: int):
    """Fail (TimeoutError) instead of hanging; generous: it tells a hang from slow, not fast from slow."""
    def expire(signum, frame):
        raise TimeoutError(f"still running after {seconds} s")
    old = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 5000), limit=st.none() | st.integers(1, 100))
def test_divisors_match_the_definition(n, limit):
    want = [d for d in range(1, n + 1) if n % d == 0 and (limit is None or d <= limit)]
    assert legal.divisors(n, limit) == want


def test_divisors_and_random_factors_of_huge_extents_are_quick():
    with deadline(30):
        assert legal.divisors(PRIME) == [1, PRIME]
        assert legal.divisors(2**30) == [2**k for k in range(31)]
        rng = random.Random(0)
        for extent in (PRIME, 2**30, 2**31 - 2):
            for _ in range(50):
                assert legal.random_factor(rng, extent) >= 1


def _programs():
    A = sl.placeholder((7,), name="A")
    k = sl.reduce_axis((0, PRIME), name="k")
    yield "sum over a prime extent", [sl.compute((1,), lambda i: sl.sum(A[k % 7], axis=k), name="C")]
    X = sl.placeholder((PRIME,), name="X", dtype="int8")
    yield "elementwise over a prime extent", [sl.compute((PRIME,), lambda i: X[i] + 1, name="Y")]
    B = sl.placeholder((2**15, 2**15), name="B")
    r = sl.reduce_axis((0, 2**15), name="r")
    yield "row sums of 2**30 elements", [sl.compute((2**15,), lambda i: sl.sum(B[i, r], axis=r), name="R")]


@pytest.mark.parametrize("name, outputs", list(_programs()), ids=lambda x: x if isinstance(x, str) else "")
def test_the_search_proposes_candidates_for_huge_extents(name, outputs):
    # Proposing is everything before the first measurement: sketches, sampling, lowering, features.
    with deadline(90):
        evolver = Evolver(SearchTask(tensors=outputs), random.Random(0))
        cands = evolver.propose(4)
    assert cands, f"{name}: no candidate"


@pytest.mark.parametrize("step", [2**31 - 1, 10**12])
def test_a_huge_auto_unroll_max_step_builds_quickly(step):
    # The inner loop has 2**18 iterations: under the pragma's value, it was unrolled in full.
    A = sl.placeholder((2**20,), name="A")
    B = sl.compute((2**20,), lambda i: A[i] * 2, name="B")
    s = sl.create_schedule(B.op)
    o, i = s[B].split(B.op.axis[0], factor=2**18)
    s[B].pragma(o, "auto_unroll_max_step", step)
    with deadline(90):
        mod = sl.build(s, [A, B])
    a = np.arange(2**20, dtype="float32")
    b = np.zeros_like(a)
    mod(a, b)
    np.testing.assert_array_equal(b, a * 2)


def test_auto_unroll_within_the_bounds_still_unrolls():
    A = sl.placeholder((64,), name="A")
    B = sl.compute((64,), lambda i: A[i] + 1, name="B")
    s = sl.create_schedule(B.op)
    o, i = s[B].split(B.op.axis[0], factor=8)
    s[B].pragma(o, "auto_unroll_max_step", 2**31 - 1)
    kernel = str(sl.lower(s, [A, B], level="kernel"))
    assert "for i.inner" not in kernel and "B[i.outer * 8 + 7]" in kernel   # the loops inside: unrolled


@pytest.mark.parametrize("annotate", ["vectorize", "parallel", "split_vectorize_parallel"])
def test_annotations_of_a_prime_extent_near_2_31_build_quickly(annotate):
    X = sl.placeholder((PRIME,), name="X", dtype="int8")
    Y = sl.compute((PRIME,), lambda i: X[i] + 1, name="Y")
    s = sl.create_schedule(Y.op)
    if annotate == "split_vectorize_parallel":
        o, i = s[Y].split(Y.op.axis[0], factor=1000003)
        s[Y].vectorize(i)
        s[Y].parallel(o)
    else:
        getattr(s[Y], annotate)(Y.op.axis[0])
    with deadline(90):
        sl.build(s, [X, Y], cache=False)     # built, not run: the arrays would take 4 GiB


def test_unrolling_a_prime_extent_near_2_31_is_refused_at_once():
    X = sl.placeholder((PRIME,), name="X", dtype="int8")
    Y = sl.compute((PRIME,), lambda i: X[i] + 1, name="Y")
    s = sl.create_schedule(Y.op)
    with pytest.raises(sl.ScheduleError, match="unroll"):
        s[Y].unroll(Y.op.axis[0])
