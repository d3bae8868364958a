# Ported from apache/tvm v0.18 tests/python/codegen/test_target_codegen_llvm.py, the tests
# written with `te`: `from tvm import te` became `import schedlang as sl`, tvm.nd arrays
# became numpy arrays. Each test names the TVM test it follows. Not ported, with the reason
# in docs/differences-from-tvm.md: the tests of TIR / ir_builder / TVMScript programs
# (intrinsics by id, atomics, assume, shuffle, scalar concat, subroutines, packed calls by
# TIR), vector-dtype tensors (vadd_pipeline), DWARF debug info, the CRT static library,
# `import_llvm`, bfloat16 (its own branch) and the alignment assumptions.
import re

import numpy as np
import pytest

import schedlang as sl
from tests.tvm_ports.check import assert_close, build_and_run

te = sl
RNG = np.random.default_rng(0)


def test_llvm_large_uintimm():
    value = (1 << 63) + 123
    other = sl.const(3, "uint64")
    A = te.compute((), lambda: sl.const(value, "uint64") + other, name="A")
    s = te.create_schedule(A.op)
    (a,) = build_and_run(s, [A], [], [np.empty((), "uint64")])
    assert int(a) == value + 3


def test_llvm_persist_parallel():
    n = 128
    A = te.placeholder((n,), name="A")
    B = te.compute(A.shape, lambda *i: A(*i) + 1, name="B")
    C = te.compute(A.shape, lambda *i: te.sqrt(B(*i)) * 2 + 2, name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=8)
    xo1, xo2 = s[C].split(xo, nparts=1)
    s[B].compute_at(s[C], xo1)
    s[B].parallel(s[B].op.axis[0])
    s[B].pragma(s[B].op.axis[0], "parallel_barrier_when_finish")
    s[C].parallel(xi)
    s[C].pragma(xo1, "parallel_launch_point")
    s[C].pragma(xi, "parallel_stride_pattern")
    a = RNG.uniform(size=n).astype(A.dtype)
    (c,) = build_and_run(s, [A, C], [a], [np.zeros(n, C.dtype)])
    assert_close(c, np.sqrt(a + 1) * 2 + 2, rtol=1e-5)


@pytest.mark.parametrize("nn, base", [(4, 0), (128, 8), (3, 0), (128, 1)])
def test_llvm_flip_pipeline(nn, base):
    A = te.placeholder((nn + base,), name="A")
    C = te.compute((nn,), lambda i: A(nn + base - i - 1), name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=4)
    s[C].parallel(xo)
    s[C].vectorize(xi)
    a = RNG.uniform(size=nn + base).astype(A.dtype)
    (c,) = build_and_run(s, [A, C], [a], [np.zeros(nn, C.dtype)])
    assert_close(c, a[::-1][:nn])


@pytest.mark.parametrize("nn, base, stride", [(64, 0, 2), (4, 0, 1), (4, 0, 3)])
def test_llvm_madd_pipeline(nn, base, stride):
    A = te.placeholder((nn + base, stride), name="A")
    C = te.compute((nn, stride), lambda i, j: A(base + i, j) + 1, name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=4)
    s[C].parallel(xo)
    s[C].vectorize(xi)
    a = RNG.uniform(size=(nn + base, stride)).astype(A.dtype)
    (c,) = build_and_run(s, [A, C], [a], [np.zeros((nn, stride), C.dtype)])
    assert_close(c, a[base:] + 1)


def test_llvm_temp_space():
    n = 1024
    A = te.placeholder((n,), name="A")
    B = te.compute(A.shape, lambda i: A(i) + 1, name="B")
    C = te.compute(A.shape, lambda i: B(i) + 1, name="C")
    s = te.create_schedule(C.op)
    a = RNG.uniform(size=n).astype(A.dtype)
    (c,) = build_and_run(s, [A, C], [a], [np.zeros(n, C.dtype)])
    np.testing.assert_array_equal(c, (a + np.float32(1)) + np.float32(1))     # IEEE: exactly numpy's
    assert "alloc B" in sl.lower(s, [A, C])     # the temporary TVM's test is named after


def test_multiple_func():
    n = 1024
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute(A.shape, lambda *i: A(*i) + B(*i), name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=4)
    s[C].parallel(xo)
    s[C].vectorize(xi)
    f2 = sl.lower(s, [A, B, C], name="fadd1")
    f1 = sl.lower(s, [A, B, C], name="fadd2")
    m = sl.build([f1, f2], "llvm")
    fadd2 = m["fadd2"]
    fadd1 = m["fadd1"]
    a, b = RNG.uniform(size=(2, n)).astype("float32")
    for f in (fadd1, fadd2):
        c = np.zeros(n, C.dtype)
        f(a, b, c)
        assert_close(c, a + b)
    with pytest.raises(KeyError, match="no function 'fadd3' in this module; it has 'fadd2', 'fadd1'"):
        m["fadd3"]
    with pytest.raises(ValueError, match="distinct names; 'fadd1' is given twice"):
        sl.build([f2, f2])


def test_llvm_condition():
    n, offset = 64, 8
    A = te.placeholder((n,), name="A")
    C = te.compute((n,), lambda i: sl.if_then_else(i >= offset, A[i], 0.0), name="C")
    s = te.create_schedule(C.op)
    a = RNG.uniform(size=(n,)).astype(A.dtype)
    (c,) = build_and_run(s, [A, C], [a], [np.empty((n,), A.dtype)])
    want = a.copy()
    want[:offset] = 0
    assert_close(c, want)


def test_llvm_bool():
    n = 64
    A = te.placeholder((n,), name="A", dtype="int32")
    C = te.compute((n,), lambda i: A[i].equal(1).astype("float"), name="C")
    s = te.create_schedule(C.op)
    a = RNG.integers(0, 2, size=(n,)).astype(A.dtype)
    (c,) = build_and_run(s, [A, C], [a], [np.empty((n,), C.dtype)])
    assert_close(c, a == 1)


@pytest.mark.parametrize("bounds_checked", [False, True])   # test_rank_zero, test_rank_zero_bound_checkers
def test_rank_zero(bounds_checked):
    n = 64
    A = te.placeholder((n,), name="A")
    scale = te.placeholder((), name="scale")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((), lambda: te.sum(A[k] * scale(), axis=k), name="C")
    D = te.compute((), lambda: C() + 1)
    s = te.create_schedule(D.op)
    f = sl.build(s, [A, scale, D], sl.Target("llvm", bounds_check=bounds_checked))
    a = RNG.integers(0, 2, size=(n,)).astype(A.dtype)
    sc = RNG.integers(0, 2, size=()).astype(scale.dtype)
    d = np.empty((), D.dtype)
    f(a, sc, d)
    assert_close(d, np.sum(a) * sc + 1)


@pytest.mark.parametrize("start, end, dstart, dend", [(-12, -12, -11, -1), (0, 11, 2, 2), (-11, 11, -11, 11)])
@pytest.mark.parametrize("dtype", ["int32", "int8"])
def test_llvm_div(start, end, dstart, dend, dtype):
    """truncdiv/truncmod and floordiv/floormod over every pair of a dividend and a divisor
    range (clipped with min/max so that the simplifier knows the ranges), as TVM's test;
    a zero divisor is replaced by 1 as there (ours would give 0, see README)."""
    for floor in (False, True):
        div = sl.floordiv if floor else sl.truncdiv
        mod = sl.floormod if floor else sl.truncmod
        A = te.placeholder((end - start + 1,), name="A", dtype=dtype)
        B = te.placeholder((dend - dstart + 1,), name="B", dtype=dtype)

        def clipa(x):
            return sl.const(start, dtype) if start == end else \
                sl.min(sl.const(end, dtype), sl.max(sl.const(start, dtype), x))

        def clipb(x):
            return sl.const(dstart, dtype) if dstart == dend else \
                sl.min(sl.const(dend, dtype), sl.max(sl.const(dstart, dtype), x))

        D, M = te.compute((end - start + 1, dend - dstart + 1),
                          lambda i, j: (div(clipa(A[i]), clipb(B[j])), mod(clipa(A[i]), clipb(B[j]))))
        s = te.create_schedule([D.op, M.op])
        a = np.arange(start, end + 1, dtype=dtype)
        b = np.arange(dstart, dend + 1, dtype=dtype)
        if dstart <= 0 <= dend:
            b[-dstart] = 1
        shape = (len(a), len(b))
        d, m = build_and_run(s, [A, B, D, M], [a, b], [np.empty(shape, dtype), np.empty(shape, dtype)])
        i, j = np.meshgrid(a.astype(int), b.astype(int), indexing="ij")
        if floor:
            want_d, want_m = i // j, i % j
        else:
            want_d = np.trunc(i / j).astype(int)
            want_m = np.fmod(i, j)
        np.testing.assert_array_equal(d, want_d.astype(dtype), err_msg=f"{div.__name__}")
        np.testing.assert_array_equal(m, want_m.astype(dtype), err_msg=f"{mod.__name__}")


@pytest.mark.parametrize("n", [4, 8, 16])
def test_llvm_fp_math(n):
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: te.div(1.0, (1e37 * A[i])), name="B")
    (b,) = build_and_run(te.create_schedule(B.op), [A, B], [np.full((n,), 100, "float32")], [np.empty(n, "float32")])
    assert_close(b, np.zeros((n,), "float32"))
    B = te.compute((n,), lambda i: te.sigmoid(A[i]), name="B")
    (b,) = build_and_run(te.create_schedule(B.op), [A, B], [np.full((n,), -1000, "float32")], [np.empty(n, "float32")])
    assert_close(b, np.zeros((n,), "float32"))


def test_llvm_target_attributes():
    """Every function the code generator makes (the entry, each stage's, the parallel
    body and worker) carries the target's CPU and features."""
    n = te.var()
    A = te.placeholder((n,), name="A", dtype="float32")
    B = te.compute((n,), lambda i: A[i], name="B")
    C = te.compute((n,), lambda i: B[i] + sl.const(1, A.dtype), name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], nparts=2)
    s[C].parallel(xo)
    target_llvm = "llvm -mtriple=x86_64-linux-gnu -mcpu=skylake -mattr=+avx512f"
    module = sl.build(s, [A, B, C, n], target=target_llvm, name="test_func")
    definitions, attributes = {}, {}
    for line in module.get_source().split("\n"):
        func = re.match(r"define.* @(?P<name>[^(]*)\(.* #(?P<attr>[0-9]+) (!.* |)\{$", line)
        if func:
            definitions[func.group("name")] = func.group("attr")
        attr = re.match(r"attributes #(?P<attr>[0-9]+) = \{(?P<list>.*)\}", line)
        if attr:
            attributes[attr.group("attr")] = attr.group("list")
    assert {"test_func", "test_func_B", "test_func_C"} <= set(definitions)
    assert any(name.startswith("test_func_C.par") for name in definitions)     # the parallel body
    for name, attr in definitions.items():
        assert re.match('.*"target-cpu"="skylake".*', attributes[attr]), name
        assert re.match('.*"target-features"=".*[+]avx512f.*".*', attributes[attr]), name


def test_mtriple_of_another_machine_is_refused():
    with pytest.raises(ValueError, match="not this machine's .*no cross-compilation"):
        sl.Target.create("llvm -mtriple=aarch64-linux-gnu")
