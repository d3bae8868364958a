"""Non-temporal (streaming) stores for large outputs a module only writes
(schedlang/target/llvm/streaming.py): used where they are safe, never where a store is
unaligned, masked, read back or small, and the results equal numpy's whatever the
alignment of the output (an unaligned buffer takes the ordinary stores)."""
import platform

import numpy as np
import pytest

import schedlang as sl
from tests import programs
from schedlang.target.llvm import streaming

pytestmark = pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"),
                                reason="non-temporal stores are used on x86-64 only")


@pytest.fixture
def small_cache(monkeypatch):
    """Outputs of 64 KiB and more count as larger than the last-level cache."""
    monkeypatch.setattr(streaming, "last_level_cache_bytes", lambda: 64 << 10)


def scaled(rows, cols, factor=16, parallel=True, **target):
    X = sl.placeholder((rows, cols), name="X")
    Y = sl.compute((rows, cols), lambda i, j: sl.exp(X[i, j]) * 0.5 + X[i, j], name="Y")
    s = sl.create_schedule(Y.op)
    i, j = Y.op.axis
    _, ji = s[Y].split(j, factor=factor)
    s[Y].vectorize(ji)
    if parallel:
        s[Y].parallel(i)
    return sl.build(s, [X, Y], target=sl.Target("llvm", **target))


def misaligned(shape, dtype="float32"):
    """A C-contiguous array whose data starts 4 bytes past a 64-byte boundary."""
    raw = np.empty(int(np.prod(shape)) + 32, dtype)
    start = (-raw.ctypes.data % 64) // raw.itemsize + 1
    return raw[start:start + int(np.prod(shape))].reshape(shape)


def aligned(shape, dtype="float32"):
    raw = np.empty(int(np.prod(shape)) + 16, dtype)
    start = (-raw.ctypes.data % 64) // raw.itemsize
    return raw[start:start + int(np.prod(shape))].reshape(shape)


def test_large_written_outputs_get_non_temporal_stores_and_a_fence(small_cache):
    ll = scaled(64, 512).get_source("ll")
    assert "!nontemporal" in ll and "llvm.x86.sse.sfence" in ll
    asm = scaled(64, 512).get_source("asm")
    assert "movnt" in asm and "sfence" in asm
    off = scaled(64, 512, streaming_stores=False).get_source("ll")
    assert "!nontemporal" not in off and "sfence" not in off


def test_no_streaming_where_it_would_not_pay_or_not_be_aligned(small_cache):
    assert "!nontemporal" not in scaled(8, 512).get_source("ll")             # 16 KiB: stays in cache
    assert "!nontemporal" not in scaled(64, 513).get_source("ll")            # rows start unaligned
    assert "!nontemporal" not in scaled(64, 512, factor=4).get_source("ll")  # 16-byte vectors
    assert "!nontemporal" not in scaled(64, 512, bounds_check=True).get_source("ll")
    # an output the module reads back (a reduction accumulating in place) keeps ordinary stores
    A, B, C = programs.gemm(64, 512, 512)
    s = sl.create_schedule(C.op)
    i, j = C.op.axis
    _, ji = s[C].split(j, factor=16)
    s[C].reorder(i, s[C].op.reduce_axis[0], ji)
    s[C].vectorize(ji)
    assert "!nontemporal" not in sl.build(s, [A, B, C]).get_source("ll")


@pytest.mark.parametrize("cols, factor", [(512, 16), (1008, 32), (1000, 16)])   # a tail; unaligned rows
@pytest.mark.parametrize("parallel", [True, False])
@pytest.mark.parametrize("alloc", [aligned, misaligned])
def test_streamed_results_equal_numpy_at_any_alignment(small_cache, cols, factor, parallel, alloc):
    rows = 96
    mod = scaled(rows, cols, factor, parallel=parallel)
    assert ("!nontemporal" in mod.get_source("ll")) == (cols % 16 == 0)
    x = np.random.default_rng(cols).standard_normal((rows, cols), dtype=np.float32)
    y = alloc((rows, cols))
    y[...] = np.nan
    mod(x, y)
    np.testing.assert_allclose(y, np.exp(x) * 0.5 + x, rtol=1e-5, atol=1e-6)
