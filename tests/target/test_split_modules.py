"""A module of many kernels is rendered as several LLVM modules, optimised while the next is
rendered, then linked for the JIT (target/llvm/split.py): same results as one module, the
library export still works, small modules keep their one-module text."""
import os
import shutil

import numpy as np
import pytest

import schedlang as sl
from schedlang.target.llvm import split


def _chain(n: int, stages: int, parallel: bool):
    """A chain of elementwise stages, each its own kernel (distinct constants: no copies),
    the odd ones parallel and vectorized (an outlined body per kernel, math calls)."""
    A = sl.placeholder((n,), name="A")
    t, ts = A, []
    for k in range(stages):
        prev = t
        if k % 2:
            t = sl.compute((n,), lambda i, p=prev, k=k: sl.exp(p[i] * 0.01) + float(k), name=f"S{k}")
        else:
            t = sl.compute((n,), lambda i, p=prev, k=k: p[i] * (1.0 + 0.001 * k), name=f"S{k}")
        ts.append(t)
    s = sl.create_schedule(t.op)
    for k, st in enumerate(ts):
        if k % 2 and parallel:
            xo, xi = s[st].split(st.op.axis[0], 64)
            s[st].parallel(xo)
            s[st].vectorize(xi)
    return s, [A, t]


def _reference(a: np.ndarray, stages: int) -> np.ndarray:
    t = a.astype(np.float64)
    for k in range(stages):
        t = np.exp(t * 0.01) + k if k % 2 else t * (1.0 + 0.001 * k)
    return t


@pytest.fixture
def small_split(monkeypatch):
    """Split from 4 distinct kernels on, 3 kernel functions per LLVM module."""
    monkeypatch.setattr(split, "MIN_KERNELS", 4)
    monkeypatch.setattr(split, "KERNELS_PER_MODULE", 3)


@pytest.mark.parametrize("parallel", [False, True])
def test_split_module_computes_as_one(small_split, parallel):
    n, stages = 1003, 8                         # a tail after the 64-wide chunks
    s, args = _chain(n, stages, parallel)
    mod = sl.build(s, args, cache=False)
    # 8 kernels: modules of 3, 3, 2 kernels, then the entry's
    assert mod.ir["llvm"].count(split.MODULE_BREAK) == 3
    assert mod.ir["llvm.opt"].count("; ModuleID") == 1             # linked: one module for the JIT
    a = np.random.default_rng(0).random(n, dtype=np.float32)
    out = np.zeros(n, np.float32)
    mod(a, out)
    np.testing.assert_allclose(out, _reference(a, stages), rtol=1e-5)
    assert "S7" in mod.get_source("asm")


def test_split_module_text_of_one_module_below_threshold(monkeypatch):
    stages = split.MIN_KERNELS - 1                  # one kernel short of a split
    s, args = _chain(257, stages, True)
    one = sl.build(s, args, cache=False).ir["llvm"]
    monkeypatch.setattr(split, "MIN_KERNELS", stages + 2)
    assert sl.build(s, args, cache=False).ir["llvm"] == one
    assert split.MODULE_BREAK not in one


def test_split_module_kernels_are_hidden_and_declared(small_split):
    s, args = _chain(100, 8, False)
    texts = sl.build(s, args, cache=False).ir["llvm"].split(split.MODULE_BREAK)
    entry = texts[-1]
    assert [t.count("define hidden void @") for t in texts[:-1]] == [3, 3, 2]
    assert entry.count("declare hidden void @") == 8
    assert entry.count("define i32 @") == 1 and "define hidden" not in entry   # the entry, no kernel


def test_split_module_with_bounds_checks_stays_one(small_split):
    s, args = _chain(100, 8, False)
    mod = sl.build(s, args, target="llvm -bounds-check", cache=False)
    assert split.MODULE_BREAK not in mod.ir["llvm"]


@pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None,
                    reason="export_library links with the system C compiler")
def test_split_module_exports_a_library(small_split, tmp_path):
    n, stages = 515, 8
    s, args = _chain(n, stages, True)
    mod = sl.build(s, args, cache=False)
    path = os.path.join(tmp_path, "chain.so")
    mod.export_library(path)
    loaded = sl.load_module(path)
    a = np.random.default_rng(1).random(n, dtype=np.float32)
    want, got = np.zeros(n, np.float32), np.zeros(n, np.float32)
    mod(a, want)
    loaded(a, got)
    np.testing.assert_array_equal(got, want)
