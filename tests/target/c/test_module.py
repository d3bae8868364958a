"""The c target's module: its source and stages, its target options, the same call checks and
errors as the llvm target, symbolic shapes, parallel loops, heap buffers, the compile cache,
and export_library / load_module."""
from __future__ import annotations

import os

import numpy as np
import pytest

import schedlang as sl
from tests.cpu_targets import needs_cc
from tests.programs import gemm

pytestmark = needs_cc


def _scaled_sum(n=None):
    """B[i] = A[i, :].sum() * 2 + A[i, 0], over a (rows, 37) input; rows symbolic when n is given."""
    rows = n if n is not None else 50
    A = sl.placeholder((rows, 37), name="A")
    k = sl.reduce_axis((0, 37), name="k")
    S = sl.compute((rows,), lambda i: sl.sum(A[i, k], axis=k), name="S")
    B = sl.compute((rows,), lambda i: S[i] * 2.0 + A[i, 0], name="B")
    return A, S, B


def _want(a):
    return a.sum(axis=1) * 2 + a[:, 0]


def test_source_stages_and_result():
    A, S, B = _scaled_sum()
    s = sl.create_schedule(B.op)
    mod = sl.build(s, [A, B], target="c")
    assert list(mod.ir) == ["tensor", "loop", "tile", "kernel", "c"] and mod.get_source() == mod.ir["c"]
    src = mod.get_source()
    assert "int32_t B(void** args, int64_t* sl_failed)" in src and "S = (float*)malloc(" in src
    assert sl.get_backend("c").stage_names(mod.target) == ("c", "cc")
    a = np.random.default_rng(0).random((50, 37), dtype=np.float32)
    b = np.zeros(50, np.float32)
    mod(a, b)
    np.testing.assert_allclose(b, _want(a), rtol=1e-5)
    assert repr(mod) == "<schedlang module B(A: float32[50, 37], B: float32[50]) target=c>"
    with pytest.raises(ValueError, match="unknown source format 'll'"):
        mod.get_source("ll")


def test_target_string_options():
    t = sl.Target.create("c -mcpu=x86-64 -num-cores=2")
    assert (t.kind, t.cpu, t.num_threads, t.vector_bits, str(t)) == ("c", "x86-64", 2, 128, "c -mcpu=x86-64")
    # the host's vector width has one detection, LLVM's host features (target/host.py), for both
    # host targets; the --host-lacks test option switches features off for both alike
    assert sl.Target.create("c").vector_bits == sl.Target.create("llvm").vector_bits in (128, 256, 512)
    with pytest.raises(ValueError, match="unknown option -mattr in target 'c -mattr=\\+avx2'"):
        sl.Target("c -mattr=+avx2")
    with pytest.raises(ValueError, match="unknown threading"):
        sl.Target("c", threading="tbb")


def test_gpu_axes_are_refused():
    A, S, B = _scaled_sum()
    s = sl.create_schedule(B.op)
    s[B].bind(B.op.axis[0], sl.thread_axis("threadIdx.x"))
    with pytest.raises(sl.ScheduleError, match="which the c \\(CPU\\) target cannot run"):
        sl.build(s, [A, B], target="c")


# (description, call arguments built from (a, b)): each wrong in one way
BAD_CALLS = [
    ("too few arrays", lambda a, b: (a,)),
    ("wrong dtype", lambda a, b: (a.astype(np.float64), b)),
    ("wrong shape", lambda a, b: (a[:10], b)),
    ("not contiguous", lambda a, b: (np.asfortranarray(a), b)),
    ("read-only output", lambda a, b: (a, np.frombuffer(b.tobytes(), np.float32))),
    ("output overlaps input", lambda a, b: (a, a.reshape(-1)[:50])),
    ("not an array", lambda a, b: ([[1.0]], b)),
]


@pytest.mark.parametrize("what, bad", BAD_CALLS, ids=[w for w, _ in BAD_CALLS])
def test_bad_calls_raise_what_the_llvm_target_raises(what, bad):
    A, S, B = _scaled_sum()
    a, b = np.ones((50, 37), np.float32), np.zeros(50, np.float32)
    errors = []
    for target in ("llvm", "c"):
        with pytest.raises((TypeError, ValueError)) as e:
            sl.build(sl.create_schedule(B.op), [A, B], target=target)(*bad(a, b))
        errors.append((type(e.value), str(e.value)))
    assert errors[0] == errors[1]


def test_symbolic_sizes_and_size_arguments():
    n = sl.size_var("n")
    A, S, B = _scaled_sum(n)
    s = sl.create_schedule(B.op)
    s[B].parallel(B.op.axis[0])
    mod = sl.build(s, [A, B], target="c")
    llvm = sl.build(s, [A, B])
    rng = np.random.default_rng(1)
    for rows in (1, 7, 300):
        a = rng.random((rows, 37), dtype=np.float32)
        b = np.zeros(rows, np.float32)
        mod(a, b)
        np.testing.assert_allclose(b, _want(a), rtol=1e-5)
    for m in (mod, llvm):      # the same size checks
        with pytest.raises(ValueError, match="size variable 'n' is 3 from A.shape\\[0\\] but 4 from B.shape\\[0\\]"):
            m(np.zeros((3, 37), np.float32), np.zeros(4, np.float32))
    C = sl.compute((n,), lambda i: sl.const(1.5), name="C")
    given = sl.build(sl.create_schedule(C.op), [C, n], target="c")
    c = np.zeros(9, np.float32)
    given(c, 9)
    assert (c == 1.5).all()
    with pytest.raises(TypeError, match="argument 'n' is a size variable and takes an int"):
        given(c, 9.0)


@pytest.mark.parametrize("threading", ["openmp", "serial"])
def test_parallel_loops_give_the_same_results(threading):
    M, N, K = 67, 45, 33
    A, B, C = gemm(M, N, K)
    s = sl.create_schedule(C.op)
    CC = s.cache_write(C, "local")
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], 16, 8)
    s[CC].compute_at(s[C], jo)
    s[CC].vectorize(s[CC].op.axis[1])
    s[C].parallel(io)
    mod = sl.build(s, [A, B, C], target=sl.Target("c", threading=threading, num_threads=3))
    assert ("#pragma omp parallel for schedule(static) num_threads(3)" in mod.get_source()) == (threading == "openmp")
    rng = np.random.default_rng(2)
    a, b = rng.random((M, K), dtype=np.float32), rng.random((K, N), dtype=np.float32)
    c, want = np.zeros((M, N), np.float32), np.zeros((M, N), np.float32)
    for _ in range(3):
        mod(a, b, c)
        sl.build(s, [A, B, C])(a, b, want)
        np.testing.assert_allclose(c, want, rtol=1e-5)


def test_local_buffers_beyond_a_mebibyte_live_on_the_heap():
    A = sl.placeholder((2, 640, 512), name="A")
    T = sl.compute(A.shape, lambda b, i, j: A[b, i, j] * 3.0, name="T")
    B = sl.compute(A.shape, lambda b, i, j: T[b, i, j] + 1.0, name="B")
    s = sl.create_schedule(B.op)
    s[T].compute_at(s[B], B.op.axis[0])      # 640 * 512 floats a batch: 1.25 MiB
    mod = sl.build(s, [A, B], target="c")
    assert "T = (float*)malloc(1310720ll);" in mod.get_source()
    a = np.random.default_rng(3).random((2, 640, 512), dtype=np.float32)
    b = np.zeros_like(a)
    mod(a, b)
    np.testing.assert_allclose(b, a * 3 + 1, rtol=1e-6)


def test_each_source_is_compiled_once(tmp_path, monkeypatch):
    monkeypatch.setenv("SCHEDLANG_CACHE_DIR", str(tmp_path))
    A, S, B = _scaled_sum()
    for _ in range(2):
        sl.build(sl.create_schedule(B.op), [A, B], target="c", cache=False)
    assert len(os.listdir(tmp_path / "c")) == 1
    sl.build(sl.create_schedule(B.op), [A, B], target="c -mcpu=x86-64", cache=False)   # other flags
    assert len(os.listdir(tmp_path / "c")) == 2


def test_export_library_round_trip(tmp_path):
    n = sl.size_var("n")
    A, S, B = _scaled_sum(n)
    s = sl.create_schedule(B.op)
    s[B].parallel(B.op.axis[0])
    mod = sl.build(s, [A, B], target="c")
    path = str(tmp_path / "scaled_sum.so")
    mod.export_library(path)
    loaded = sl.load_module(path)
    assert loaded.target.kind == "c" and repr(loaded) == repr(mod)
    a = np.random.default_rng(4).random((13, 37), dtype=np.float32)
    b1, b2 = np.zeros(13, np.float32), np.zeros(13, np.float32)
    mod(a, b1)
    loaded(a, b2)
    np.testing.assert_array_equal(b1, b2)
    with pytest.raises(TypeError, match="argument 'A' must have dtype float32, got float64"):
        loaded(a.astype(np.float64), b2)
    with pytest.raises(ValueError, match="keeps no source"):
        loaded.get_source()
    with open(path, "r+b") as f:         # a damaged file is refused before it is loaded
        f.seek(100)
        f.write(b"\x00" * 8)
    with pytest.raises(ValueError):
        sl.load_module(path)


def test_names_that_c_or_its_library_has_are_renamed():
    A = sl.placeholder((8,), name="int32_t")
    B = sl.compute((8,), lambda i: sl.exp(A[i]) + 1.0, name="expf")
    for_ = sl.compute((8,), lambda i: B[i] * 2.0, name="for")
    mod = sl.build(sl.create_schedule(for_.op), [A, B, for_], target="c")
    a, b, c = np.ones(8, np.float32), np.zeros(8, np.float32), np.zeros(8, np.float32)
    mod(a, b, c)
    np.testing.assert_allclose(c, (np.exp(a) + 1) * 2, rtol=1e-6)
    assert "int32_t for_(void** args" in mod.get_source()
