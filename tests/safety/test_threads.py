"""One module called from many threads at once, and modules built from several threads."""
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import schedlang as sl

CHECKED = sl.Target.create("llvm").with_options(bounds_check=True)


def test_out_of_bounds_is_reported_to_the_call_that_made_it():
    A = sl.placeholder((16,), name="A")
    idx = sl.placeholder((64,), dtype="int32", name="idx")
    B = sl.compute((64,), lambda i: A[idx[i]], name="B")
    mod = sl.build(sl.create_schedule(B.op), [A, idx, B], target=CHECKED)
    a = np.arange(16, dtype="float32")

    def call(k):
        """Odd k read A[1000 + k] (data-dependent, so only the bounds check can see it)."""
        where = np.arange(64, dtype="int32") % 16
        if k % 2:
            where[k] = 1000 + k
        b = np.zeros(64, "float32")
        for _ in range(50):
            try:
                mod(a, where, b)
            except IndexError as e:
                return str(e)
        return None if np.array_equal(b, a[where]) else "wrong result"

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(call, range(32)))
    for k, err in enumerate(results):
        if k % 2:
            assert err is not None and f"the first touched A[{1000 + k}]" in err, (k, err)
        else:
            assert err is None, (k, err)


def _build_scaled(factor: int):
    A = sl.placeholder((32, 40), name="A")
    B = sl.compute((32, 40), lambda i, j: sl.exp(A[i, j]) * float(factor) + A[i, j], name="B")
    s = sl.create_schedule(B.op)
    jo, ji = s[B].split(B.op.axis[1], factor=factor)
    s[B].vectorize(ji)
    s[B].parallel(B.op.axis[0])
    return sl.build(s, [A, B])


def test_modules_build_from_several_threads_at_once():
    factors = [1, 2, 3, 4, 5, 8, 16, 7] * 2
    with ThreadPoolExecutor(4) as pool:
        mods = list(pool.map(_build_scaled, factors))
    a = np.random.default_rng(0).random((32, 40)).astype("float32")
    for f, mod in zip(factors, mods):
        b = np.zeros_like(a)
        mod(a, b)
        np.testing.assert_allclose(b, np.exp(a) * f + a, rtol=1e-5)


def test_out_of_bounds_in_a_parallel_loop_reaches_the_call():
    # The status record travels through GOMP_parallel's context to the worker threads.
    A = sl.placeholder((16,), name="A")
    idx = sl.placeholder((64,), dtype="int32", name="idx")
    B = sl.compute((64,), lambda i: A[idx[i]], name="B")
    s = sl.create_schedule(B.op)
    s[B].parallel(B.op.axis[0])
    mod = sl.build(s, [A, idx, B], target=CHECKED)
    where = np.zeros(64, "int32")
    where[50] = 77
    with pytest.raises(IndexError, match=r"B: 1 out-of-bounds access\(es\); the first touched A\[77\]"):
        mod(np.ones(16, "float32"), where, np.zeros(64, "float32"))
    where[50] = 3
    b = np.zeros(64, "float32")
    mod(np.arange(16, dtype="float32"), where, b)      # the next call starts with a clean record
    assert np.array_equal(b, np.arange(16, dtype="float32")[where])
