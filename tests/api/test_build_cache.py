"""The in-memory build cache: an identical build is a hit (no compile), anything that
changes the code is a miss, arguments follow the caller's order, and it can be turned off."""
import gc

import numpy as np
import pytest

import schedlang as sl
from schedlang.topi import nn
from schedlang import build_cache
from tests import programs


@pytest.fixture(autouse=True)
def fresh_cache(monkeypatch):
    monkeypatch.setattr(build_cache, "ENABLED", True)
    build_cache.clear()
    yield
    build_cache.clear()


def _gemm(factor=4, axis=1, names=("A", "B", "C")):
    A = sl.placeholder((8, 6), name=names[0])
    B = sl.placeholder((6, 8), name=names[1])
    C = nn.matmul(A, B, name=names[2])
    s = sl.create_schedule(C.op)
    s[C].split(C.op.axis[axis], factor=factor)
    return s, [A, B, C]


def _check_gemm(mod, order=("A", "B", "C")):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((8, 6)).astype("float32"), rng.standard_normal((6, 8)).astype("float32")
    c = np.zeros((8, 8), "float32")
    arrays = {"A": a, "B": b, "C": c}
    mod(*(arrays[n] for n in order))
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


def test_identical_build_is_a_hit_without_compiling(monkeypatch):
    from schedlang.target.llvm.jit import CompiledModule
    compiles = []
    original = CompiledModule.__init__

    def counting(self, *a, **kw):
        compiles.append(1)
        original(self, *a, **kw)

    monkeypatch.setattr(CompiledModule, "__init__", counting)
    s1, args1 = _gemm()
    m1 = sl.build(s1, args1)
    assert (build_cache.stats.hits, build_cache.stats.misses, len(compiles)) == (0, 1, 1)
    s2, args2 = _gemm()                     # built separately from the same definition
    m2 = sl.build(s2, args2)
    assert m2 is m1
    assert (build_cache.stats.hits, build_cache.stats.misses, len(compiles)) == (1, 1, 1)   # no LLVM work
    _check_gemm(m2)
    sl.build(s2, args2, cache=False)
    assert len(compiles) == 2


@pytest.mark.parametrize("change", ["split factor", "split axis", "target option", "module name",
                                    "tensor name", "extra step"])
def test_anything_that_changes_the_code_misses(change):
    s, args = _gemm()
    first = sl.build(s, args)
    target = "llvm"
    name = None
    if change == "split factor":
        s, args = _gemm(factor=2)
    elif change == "split axis":
        s, args = _gemm(axis=0)
    elif change == "target option":
        s, args = _gemm()
        target = sl.Target.create("llvm").with_options(threading="serial")
    elif change == "module name":
        s, args = _gemm()
        name = "other"
    elif change == "tensor name":
        s, args = _gemm(names=("A", "B", "D"))
    else:
        s, args = _gemm()
        s[args[2]].parallel(s[args[2]].leaf_iter_vars[0])
    second = sl.build(s, args, target=target, name=name)
    assert second is not first
    assert (build_cache.stats.hits, build_cache.stats.misses) == (0, 2)
    _check_gemm(second)


def test_argument_order_is_the_callers():
    s, (A, B, C) = _gemm()
    first = sl.build(s, [A, B, C])
    swapped = sl.build(s, [B, A, C])
    assert swapped is not first
    _check_gemm(first, ("A", "B", "C"))
    _check_gemm(swapped, ("B", "A", "C"))
    assert sl.build(s, [B, A, C]) is swapped


def test_cache_can_be_turned_off(monkeypatch):
    s, args = _gemm()
    m1 = sl.build(s, args, cache=False)
    m2 = sl.build(s, args, cache=False)
    assert m1 is not m2
    assert (build_cache.stats.hits, build_cache.stats.misses, build_cache.size()) == (0, 0, 0)
    monkeypatch.setattr(build_cache, "ENABLED", False)
    assert sl.build(s, args) is not sl.build(s, args)
    assert build_cache.size() == 0
    m3 = sl.build(s, args, cache=True)            # an explicit cache=True wins over the switch
    assert sl.build(s, args, cache=True) is m3


def test_cache_is_bounded_lru(monkeypatch):
    monkeypatch.setattr(build_cache, "MAX_MODULES", 2)
    m2 = sl.build(*_gemm(factor=2))
    m4 = sl.build(*_gemm(factor=4))
    assert sl.build(*_gemm(factor=2)) is m2          # 2 is now the most recent
    sl.build(*_gemm(factor=8))                       # lets 4, the least recently used, go
    assert build_cache.size() == 2
    assert sl.build(*_gemm(factor=2)) is m2
    assert sl.build(*_gemm(factor=4)) is m4          # still alive here: found, not built again
    del m4
    for factor in (8, 2):                            # 4 is let go again, and nothing else holds it
        sl.build(*_gemm(factor=factor))
    gc.collect()
    misses = build_cache.stats.misses
    sl.build(*_gemm(factor=4))
    assert build_cache.stats.misses == misses + 1, "a dropped module the cache let go is built again"


def test_programs_differing_in_expression_do_not_collide():
    A, B, C = programs.gemm(8, 8, 8)
    A2 = sl.placeholder((8, 8), name="A")
    B2 = sl.placeholder((8, 8), name="B")
    k = sl.reduce_axis((0, 8), name="k")
    C2 = sl.compute((8, 8), lambda i, j: sl.sum(A2[i, k] * B2[j, k], axis=k), name="C")   # B transposed
    m1 = sl.build(sl.create_schedule(C.op), [A, B, C])
    m2 = sl.build(sl.create_schedule(C2.op), [A2, B2, C2])
    assert m1 is not m2
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((8, 8)).astype("float32"), rng.standard_normal((8, 8)).astype("float32")
    c = np.zeros((8, 8), "float32")
    m2(a, b, c)
    np.testing.assert_allclose(c, a @ b.T, rtol=1e-5, atol=1e-5)


def test_a_failing_build_is_not_cached():
    s, (A, B, C) = _gemm()
    with pytest.raises(ValueError, match="missing from the argument list"):   # keyed, then fails
        sl.build(s, [A, C])
    assert build_cache.size() == 0


def test_bad_arguments_still_get_builds_errors():
    s, (A, B, C) = _gemm()
    with pytest.raises(TypeError, match="expected a schedule"):
        sl.build(C, [A, B, C])
    with pytest.raises(TypeError, match="args must be a non-empty list"):
        sl.build(s, (t for t in [A, B, C]))
    assert build_cache.size() == 0
