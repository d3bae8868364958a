"""Symbolic shapes (sl.var sizes) on the cuda target: the grid and loops are computed from the
size variables when called (mod.emulate's two engines here; a GPU launch the same way), tails
guarded for every size; a block's threads and its shared buffers must stay constant."""
import re

import numpy as np
import pytest

import schedlang as sl
from tests.helpers import assert_close

pytest.importorskip("cuda.bindings")


def bind(s, t, axis, factor, x="x"):
    outer, inner = s[t].split(axis, factor=factor)
    s[t].bind(outer, sl.thread_axis(f"blockIdx.{x}"))
    s[t].bind(inner, sl.thread_axis(f"threadIdx.{x}"))


def two_stage(rows_per_block=1):
    """B = exp(A) * 2 in global memory (a temporary of symbolic size), C = B + A row sums; both
    m x n, rows on blockIdx.y, columns split by 32 over blockIdx.x / threadIdx.x."""
    m, n = sl.var("m"), sl.var("n")
    A = sl.placeholder((m, n), name="A")
    B = sl.compute((m, n), lambda i, j: sl.exp(A[i, j]) * 2.0, name="B")
    k = sl.reduce_axis((0, n), name="k")
    S = sl.compute((m,), lambda i: sl.sum(A[i, k], axis=k), name="S")
    C = sl.compute((m, n), lambda i, j: B[i, j] + S[i], name="C")
    s = sl.create_schedule(C.op)
    for t in (B, C):
        s[t].bind(t.op.axis[0], sl.thread_axis("blockIdx.y"))
        bind(s, t, t.op.axis[1], 32)
    bind(s, S, S.op.axis[0], 16)
    return s, [A, C]


@pytest.mark.parametrize("engine", ["shim", "simt"])
def test_symbolic_shapes_with_tails_and_a_temporary(engine):
    s, (A, C) = two_stage()
    mod = sl.build(s, [A, C], target="cuda")
    src = mod.get_source()
    assert re.search(r"void __launch_bounds__\(32\) C_kernel\(float\* __restrict__ C, .*, int [mn], int [mn]\) \{", src)
    rng = np.random.default_rng(0)
    for shape in [(1, 1), (3, 31), (5, 32), (17, 33), (2, 100)]:
        a = rng.standard_normal(shape).astype(np.float32)
        c = np.full(shape, 7, np.float32)
        mod.emulate(a, c, engine=engine)
        want = sl.reference([C], {A: a})[0]
        assert_close(c, want, "float32", name=f"C{shape}")


def test_symbolic_shapes_under_the_sanitizers_and_a_size_argument():
    """The sanitizer builds read the call's geometry too; a size variable listed as an
    argument is an int among the arrays, as on the llvm target."""
    n = sl.var("n")
    A = sl.placeholder((n,), name="A")
    B = sl.compute((n,), lambda i: A[i] * 3.0 - 1.0, name="B")
    s = sl.create_schedule(B.op)
    bind(s, B, B.op.axis[0], 64)
    mod = sl.build(s, [A, n, B], target="cuda")
    assert "n: int32" in repr(mod)
    for size in (1, 65, 130):
        a = np.arange(size, dtype=np.float32)
        for options in ({}, {"sanitize": "thread"}, {"sanitize": "undefined"}, {"engine": "simt"}):
            b = np.full(size, 7, np.float32)
            mod.emulate(a, size, b, **options)
            np.testing.assert_array_equal(b, a * 3 - 1, err_msg=str((size, options)))
    with pytest.raises(ValueError, match="'n'"):
        mod.emulate(np.zeros(4, np.float32), 5, np.zeros(4, np.float32))


def test_a_grid_beyond_cudas_limit_is_refused_at_the_call():
    m = sl.var("m")
    A = sl.placeholder((m,), name="A")
    B = sl.compute((m,), lambda i: A[i] + 1.0, name="B")
    s = sl.create_schedule(B.op)
    bind(s, B, B.op.axis[0], 1, x="y")
    mod = sl.build(s, [A, B], target="cuda")
    a = np.zeros(70000, np.float32)
    with pytest.raises(ValueError, match=r"kernel B_kernel would launch 70000 blocks along blockIdx.y with m=70000; "
                                         r"CUDA allows at most 65535"):
        mod.emulate(a, a.copy())


def test_symbolic_thread_extents_and_shared_buffers_are_refused():
    n = sl.var("n")
    A = sl.placeholder((n,), name="A")
    B = sl.compute((n,), lambda i: A[i] + 1.0, name="B")
    s = sl.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], nparts=4)
    s[B].bind(xo, sl.thread_axis("blockIdx.x"))
    s[B].bind(xi, sl.thread_axis("threadIdx.x"))
    with pytest.raises(sl.LoweringError, match=r"binds threadIdx.x to a loop of symbolic extent '.*n.*'; the threads "
                                               "of a block are fixed"):
        sl.build(s, [A, B], target="cuda")

    m, k = sl.var("m"), sl.var("k")
    X = sl.placeholder((m, k), name="X")
    r = sl.reduce_axis((0, k), name="r")
    S = sl.compute((m,), lambda i: sl.sum(X[i, r], axis=r), name="S")
    s = sl.create_schedule(S.op)
    XS = s.cache_read(X, "shared", [S])
    bo, bi = s[S].split(S.op.axis[0], factor=32)
    s[S].bind(bo, sl.thread_axis("blockIdx.x"))
    s[S].bind(bi, sl.thread_axis("threadIdx.x"))
    s[XS].compute_at(s[S], bo)
    with pytest.raises(sl.LoweringError, match=r"shared buffer 'X.shared' with the symbolic size"):
        sl.build(s, [X, S], target="cuda")


def test_bad_arguments_are_refused_as_on_the_llvm_target():
    """CUDAModule binds a call through BuiltModule.bind_call, as the llvm and c modules do: the
    same error class and message for a wrong count or type (TypeError) and a wrong shape (ValueError)."""
    n = sl.var("n")
    A = sl.placeholder((n,), name="A")
    B = sl.compute((n,), lambda i: A[i] + 1.0, name="B")
    s = sl.create_schedule(B.op)
    llvm = sl.build(s, [A, B])
    bind(s, B, B.op.axis[0], 32)
    cuda = sl.build(s, [A, B], target="cuda")
    a = np.zeros(4, np.float32)
    for args, error in [((a,), TypeError), ((a, [0.0] * 4), TypeError), ((a, np.zeros((4, 1), np.float32)), ValueError),
                        ((a, np.zeros(5, np.float32)), ValueError), ((a, np.zeros(4, np.float64)), TypeError)]:
        with pytest.raises(error) as want:
            llvm(*args)
        with pytest.raises(error, match=re.escape(str(want.value).replace(llvm.name, cuda.name))):
            cuda.emulate(*args)
