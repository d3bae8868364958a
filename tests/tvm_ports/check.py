"""Helpers for the TVM ports: build a schedule both bounds-checked and normally, run it on
numpy arrays and compare the outputs with a numpy reference."""
from __future__ import annotations

import numpy as np

import schedlang as sl
from tests.helpers import CHECKED

RTOL = {"float32": 1e-4, "float64": 1e-10}
TARGET = "llvm"     # the CPU target of the normal build: "llvm" or "c" (conftest.py sets it per test)


def build_and_run(s, args, inputs, outputs_like, name=None):
    """Run the module for s on inputs (numpy arrays for the leading args); outputs_like gives
    the shape and dtype of each remaining argument. Both the bounds-checked llvm build and the
    normal build for TARGET run, and must agree (to rounding); returns the normal build's outputs."""
    results = []
    for target in (CHECKED, TARGET):
        outs = [np.full(o.shape, 7, o.dtype) for o in outputs_like]
        sl.build(s, args, target=target, name=name)(*inputs, *outs)
        results.append(outs)
    for checked, plain in zip(*results):   # contraction (fma) may differ between the two builds
        np.testing.assert_allclose(plain, checked, rtol=1e-5, atol=1e-6)
    return results[1]


def assert_close(got, want, rtol=None):
    want = np.asarray(want)
    rtol = rtol if rtol is not None else RTOL.get(str(want.dtype), 0)
    np.testing.assert_allclose(got, want.astype(got.dtype), rtol=rtol, atol=rtol)


def check_chain(s, A, C, seed=0):
    """Run programs.chain's schedule s (arguments A, C) on random input: C = A * 2 + 1."""
    a = np.random.default_rng(seed).random(tuple(int(x) for x in A.shape), "float32")
    (c,) = build_and_run(s, [A, C], [a], [a])
    assert_close(c, a * 2 + 1)
