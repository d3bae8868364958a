# Ported from apache/tvm tests/python/te/test_te_verify_compute.py: `from tvm import te` became
# `import schedlang as sl`; TVM's TVMError is a ValueError naming the compute here, and the two
# valid computes are also built and run against numpy.
import numpy as np
import pytest

import schedlang as sl

n, m = sl.size_var("n"), sl.size_var("m")
A = sl.placeholder((n, m), name="A")
k = sl.reduce_axis((0, m), "k")
k_ = sl.reduce_axis((0, m - 1), "k_")


@pytest.mark.parametrize("body, want", [
    (lambda i: sl.sum(A[i, k], axis=k), lambda a: a.sum(1)),
    (lambda i: A[i, 0] + 1, lambda a: a[:, 0] + 1),
], ids=["reduction", "elementwise"])
def test_valid_computes(body, want):
    B = sl.compute((n,), body, name="B")
    a = np.random.rand(4, 5).astype("float32")
    b = np.zeros(4, "float32")
    sl.build(sl.create_schedule(B.op), [A, B])(a, b)
    np.testing.assert_allclose(b, want(a), rtol=1e-5)


@pytest.mark.parametrize("body, match", [
    (lambda i: sl.sum(A[i, k], axis=k) + 1, "whole body"),                       # not top level
    (lambda i: A[i, 0] * (sl.sum(A[i, k], axis=k) + 1), "whole body"),
    (lambda i: (sl.sum(A[i, k], axis=k), A[i, 0] + 1), "some outputs are reductions"),
    (lambda i: (sl.sum(A[i, k], axis=k), sl.sum(A[i, k_], axis=k_)), "another reduction"),
], ids=["reduction_inside", "reduction_deeper", "mixed_outputs", "unequal_reductions"])
def test_invalid_computes_are_refused(body, match):
    with pytest.raises(ValueError, match=match):
        sl.compute((n,), body, name="B")
