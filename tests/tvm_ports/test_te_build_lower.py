# Ported from apache/tvm v0.18 tests/python/te/test_te_build_lower.py: `from tvm import te`
# became `import schedlang as sl`. test_lower_rfactor binds the reduction to threadIdx.x
# (a cross-thread reduction, GPU only); its CPU part (split, rfactor, compute_at at the new
# reduction axis) is kept. test_dependent_output_shape passes the size x as an argument.
import numpy as np
import pytest

import schedlang as sl
from tests.helpers import CHECKED
from tests.tvm_ports.check import assert_close, build_and_run


def test_lower_rfactor_cpu_part():
    n, m = 40, 50
    A = sl.placeholder((n, m), name="A")
    k = sl.reduce_axis((0, m), "k")
    B = sl.compute((n,), lambda i: sl.sum(A[i, k], axis=k), name="B")
    s = sl.create_schedule(B.op)
    ko, ki = s[B].split(B.op.reduce_axis[0], factor=16)
    BF = s.rfactor(B, ki)
    xo, xi = s[B].split(s[B].op.axis[0], factor=32)
    s[BF].compute_at(s[B], s[B].op.reduce_axis[0])
    assert sl.lower(s, [A, B])
    a = np.random.default_rng(0).random((n, m), "float32")
    (b,) = build_and_run(s, [A, B], [a], [np.zeros(n, "float32")])
    assert_close(b, a.sum(axis=1))


def test_split_uneven_unique_likely():
    a = sl.placeholder((16, 16), name="a")
    b = sl.placeholder((16, 16), name="b")
    c = sl.compute((16, 16), lambda x, y: a[x, y] + b[x, y], name="c")
    x, y = c.op.axis
    sch = sl.create_schedule(c.op)
    xo, xi = sch[c].split(x, 5)
    text = sl.lower(sch, [a, b, c])
    assert text.count("if ") == 1               # one guard for the tail of the uneven split
    av, bv = np.random.default_rng(1).random((2, 16, 16), "float32")
    (cv,) = build_and_run(sch, [a, b, c], [av, bv], [np.zeros((16, 16), "float32")])
    assert_close(cv, av + bv)


def test_dependent_output_shape():
    n, m, x = sl.size_var("n"), sl.size_var("m"), sl.size_var("x")
    A = sl.placeholder((n, m))
    B = sl.compute((m, n // x), lambda i, j: A[i, j], name="B")
    s = sl.create_schedule(B.op)
    mod = sl.build(s, [A, B, x])
    assert mod
    # beyond TVM's test: run it (x is an argument; B's second extent n // x is checked against it)
    a = np.random.default_rng(2).random((6, 4), "float32")
    for target in (CHECKED, "llvm"):
        b = np.zeros((4, 3), "float32")
        sl.build(s, [A, B, x], target=target)(a, b, 2)
        assert_close(b, a[:4, :3])
    with pytest.raises(ValueError, match=r"extent 'n // x' is 2 with x=3 \(from the argument 'x'\)"):
        mod(a, np.zeros((4, 3), "float32"), 3)
