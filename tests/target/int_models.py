"""Exact Python models of integer arithmetic with schedlang's defined results (README, "Defined
behaviour"): wrap-around, division and modulo by zero, INT_MIN // -1, shifts by the bit width or
more; the operands that reach each case for every integer dtype; and the programs (integer ops,
float -> int, float // and %) that every target's defined-behaviour tests run against them
(target/cuda, target/c)."""
from __future__ import annotations

import numpy as np

import schedlang as sl
from tests.target.test_float_to_int import INTS, edge_values, model
from tests.target.test_numerics import same_bits


def wrap(v: int, dt: str) -> int:
    bits = np.iinfo(dt).bits
    v &= (1 << bits) - 1
    return v - (1 << bits) if np.iinfo(dt).min < 0 and v >= 1 << (bits - 1) else v


def trunc_div(a, b):
    return 0 if b == 0 else (abs(a) // abs(b)) * (1 if (a < 0) == (b < 0) else -1)


MODELS = {
    "floordiv": lambda a, b, bits: 0 if b == 0 else a // b,
    "floormod": lambda a, b, bits: 0 if b == 0 else a % b,
    "truncdiv": lambda a, b, bits: trunc_div(a, b),
    "truncmod": lambda a, b, bits: 0 if b == 0 else a - trunc_div(a, b) * b,
    # numpy's: the amount as an unsigned number, 0 (or -1) from the bit width on
    "shl": lambda a, b, bits: a << b if 0 <= b < bits else 0,
    "shr": lambda a, b, bits: a >> b if 0 <= b < bits else (-1 if a < 0 else 0),
    "add": lambda a, b, bits: a + b,
    "sub": lambda a, b, bits: a - b,
    "mul": lambda a, b, bits: a * b,
    "wraps": lambda a, b, bits: int(a + 1 > a),     # x + 1 > x, after wrap-around (below)
}
BUILD = {"floordiv": lambda x, y: x // y, "floormod": lambda x, y: x % y, "truncdiv": sl.truncdiv,
         "truncmod": sl.truncmod, "shl": lambda x, y: x << y, "shr": lambda x, y: x >> y,
         "add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
         "wraps": lambda x, y: sl.select(x + 1 > x, 1, 0).astype(x.dtype)}
SIGNED, UNSIGNED = ("int8", "int16", "int32", "int64"), ("uint8", "uint16", "uint32", "uint64")


def int_operands(dt: str):
    info = np.iinfo(dt)
    lo, hi = int(info.min), int(info.max)
    a = [5, -5, 7, -7, 0, 3, lo, hi, 100, -100, lo, 1, hi, lo, 1, -1, 3, 255]
    b = [0, 0, -1, 2, 0, -2, -1, -1, 7, 7, 1, hi, 2, hi, info.bits, info.bits - 1, -1, 3]
    return np.array([wrap(v, dt) for v in a], dt), np.array([wrap(v, dt) for v in b], dt)


def model_of(op: str, dt: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    bits = np.iinfo(dt).bits
    if op == "wraps":
        return np.array([int(wrap(int(x) + 1, dt) > int(x)) for x in a], dt)
    return np.array([wrap(MODELS[op](int(x), int(y), bits), dt) for x, y in zip(a, b)], dt)


# -- the defined-behaviour programs every non-llvm target runs (target/c, target/cuda) --

def integer_ops_program():
    """(placeholders, outputs, input arrays, wanted outputs): every integer op (BUILD) on every
    integer dtype, one output per op and dtype, wanted as the models give (which agree with
    numpy's floor_divide and mod, checked here)."""
    inputs, args, outs, want = [], [], [], []
    for dt in SIGNED + UNSIGNED:
        a, b = int_operands(dt)
        A = sl.placeholder(a.shape, dt, name=f"A_{dt}")
        B = sl.placeholder(a.shape, dt, name=f"B_{dt}")
        inputs += [a, b]
        args += [A, B]
        for op in BUILD:
            outs.append(sl.compute(a.shape, lambda i, f=BUILD[op], A=A, B=B: f(A[i], B[i]), name=f"{op}_{dt}"))
            want.append(model_of(op, dt, a, b))
        with np.errstate(all="ignore"):
            assert np.array_equal(want[-10], np.floor_divide(a, b)) and np.array_equal(want[-9], np.mod(a, b))
    return args, outs, inputs, want


def float_to_int_program(src: str):
    """(placeholders, outputs, input arrays, wanted outputs): the edge values of float dtype src
    converted to every integer dtype, wanted as the saturating model gives."""
    a = edge_values(src)
    A = sl.placeholder((len(a),), src, name="A")
    outs = [sl.compute(A.shape, lambda i, t=t: A[i].astype(t), name=f"to_{t}") for t in INTS]
    return [A, *outs], outs, [a], [np.array([model(float(x), t) for x in a], dtype=t) for t in INTS]


def float_div_program(dtype: str):
    """(placeholders, outputs, input arrays, wanted outputs): float // and % on signed zeros,
    infinities, NaN and tiny/huge quotients, wanted as numpy's floor_divide and mod give."""
    a = np.array([1, -1, np.inf, 1, 0, -0.0, 5, 1, -7.5, 7.5, np.nan, -np.inf, 6, -6, 0.3, -1e-30], dtype)
    b = np.array([0.1, np.inf, 1, 0, 0, 3, -0.0, -np.inf, 2, -2, 1, 3, 3, 3, 0.1, 1e30], dtype)
    A, B = (sl.placeholder(a.shape, dtype, name=n) for n in "AB")
    outs = [sl.compute(a.shape, lambda i: A[i] // B[i], name="fdiv"),
            sl.compute(a.shape, lambda i: A[i] % B[i], name="fmod")]
    with np.errstate(all="ignore"):
        return [A, B, *outs], outs, [a, b], [np.floor_divide(a, b), np.mod(a, b)]


def assert_same_bits(results, want, outs, inputs):
    """results: {runner name: output arrays}; each output bit for bit as wanted (NaNs alike)."""
    for name, got in results.items():
        for o, g, w in zip(outs, got, want):
            bad = np.flatnonzero(~np.array([same_bits(x, y) for x, y in zip(g, w)]))
            assert not len(bad), (f"{name}: {o.name} at {bad[:5]}: inputs {[x[bad[:5]] for x in inputs]} "
                                  f"gave {g[bad[:5]]}, want {w[bad[:5]]}")
