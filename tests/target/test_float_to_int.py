"""Float -> integer conversion is defined for every input: truncation toward zero, values
out of the integer dtype's range saturate to its limits, NaN gives 0 (LLVM's fptosi.sat,
Rust's `as`, Java). Checked bit for bit, scalar and vectorized, against an independent
Python model, for the compiled code, the reference evaluator and the simplifier's folding."""
from __future__ import annotations

import math

import numpy as np
import pytest

import schedlang as sl
from schedlang.dtypes import dtype as parse_dtype
from schedlang.expr.nodes import Cast, Const
from schedlang.expr.simplify import simplify
from tests.helpers import CHECKED

INTS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


def model(x: float, target: str) -> int:
    """The defined result, from Python's exact integers."""
    info = np.iinfo(target)
    if math.isnan(x):
        return 0
    if math.isinf(x):
        return int(info.max) if x > 0 else int(info.min)
    return min(max(math.trunc(x), int(info.min)), int(info.max))


def edge_values(src: str) -> np.ndarray:
    """NaN, infinities, zeros, fractions, and for every integer dtype the values just
    inside and just outside its range that src can represent."""
    ft = np.dtype(src).type
    with np.errstate(over="ignore"):       # limits beyond float16 become inf, which is wanted
        return _edge_values(ft, src)


def _edge_values(ft, src: str) -> np.ndarray:
    vals = [np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, -0.5, -0.9, 1.9, -1.9, 1e30, -1e30, 3.0, -7.0]
    for t in INTS:
        info = np.iinfo(t)
        for bound in (int(info.min), int(info.max)):
            f = ft(bound)                                     # nearest src value to the limit
            vals += [f, np.nextafter(f, ft(np.inf)), np.nextafter(f, ft(-np.inf)),
                     ft(bound + 1), ft(bound - 1), ft(bound + 0.5), ft(bound - 0.5)]
    return np.array([ft(v) for v in vals], dtype=src)


def _program(src: str, n: int, vectorize: bool):
    A = sl.placeholder((n,), src, name="A")
    outs = [sl.compute((n,), lambda i, t=t: A[i].astype(t), name=f"to_{t}") for t in INTS]
    s = sl.create_schedule([o.op for o in outs])
    if vectorize:
        for o in outs:
            xo, xi = s[o].split(o.op.axis[0], factor=8)
            s[o].vectorize(xi)
    return A, outs, s


@pytest.mark.parametrize("src", ["float16", "float32", "float64"])
def test_float_to_int_saturates_and_maps_nan_to_zero(src):
    a = edge_values(src)
    want = {t: np.array([model(float(x), t) for x in a], dtype=t) for t in INTS}
    for vectorize in (False, True):
        A, outs, s = _program(src, len(a), vectorize)
        targets = (CHECKED, "llvm") if vectorize else ("llvm",)
        for target in targets:
            mod = sl.build(s, [A, *outs], target=target)
            if vectorize:       # the vector forms of the intrinsic, not per-lane scalar code
                assert "llvm.fptosi.sat.v8i32.v8" in mod.get_source()
            got = [np.full(len(a), 7, t) for t in INTS]
            mod(a, *got)
            for t, g in zip(INTS, got):
                bad = np.flatnonzero(g != want[t])
                assert not len(bad), (f"{src} -> {t} ({'vector' if vectorize else 'scalar'}): "
                                      f"{a[bad[:5]]} gave {g[bad[:5]]}, want {want[t][bad[:5]]}")
    for t, got in zip(INTS, sl.reference(outs, {A: a})):        # the reference evaluator agrees
        np.testing.assert_array_equal(got, want[t], err_msg=f"reference {src} -> {t}")


def test_uses_the_saturating_intrinsics():
    A = sl.placeholder((4,), "float32", name="A")
    B = sl.compute((4,), lambda i: A[i].astype("uint16"), name="B")
    C = sl.compute((4,), lambda i: A[i].astype("int64"), name="C")
    text = sl.build(sl.create_schedule([B.op, C.op]), [A, B, C]).get_source()
    assert "@llvm.fptoui.sat.i16.f32" in text and "@llvm.fptosi.sat.i64.f32" in text
    assert "fptosi float" not in text and "fptoui float" not in text


def test_simplifier_folds_a_float_constant_with_saturation():
    for value, target, want in ((3e9, "int32", 2 ** 31 - 1), (-3e9, "int32", -2 ** 31), (300.7, "uint8", 255),
                                (-1.5, "uint8", 0), (-1.5, "int8", -1), (1e300, "int64", 2 ** 63 - 1)):
        folded = simplify(Cast(parse_dtype(target), Const(value, parse_dtype("float64"))))
        assert isinstance(folded, Const) and folded.value == want == model(value, target), (value, target, folded)
