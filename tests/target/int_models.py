"""Exact Python models of integer arithmetic with schedlang's defined results (README, "Defined
behaviour"): wrap-around, division and modulo by zero, INT_MIN // -1, shifts by the bit width or
more; the operands that reach each case for every integer dtype. Every target's defined-behaviour
tests check against them (target/cuda, target/c)."""
from __future__ import annotations

import numpy as np

import schedlang as sl


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
