"""LLVM types and constants for schedlang dtypes.

Values are computed in registers in their "compute type" (float16 and bfloat16 are
computed as float, bool is i1) and stored in memory in their "memory type" (half, i16
for bfloat16, i8 for bool)."""
from __future__ import annotations

import struct

import numpy as np

from ...dtypes import DType, to_bfloat16


def scalar_compute(dt: DType) -> str:
    if dt.is_float:
        return {16: "float", 32: "float", 64: "double"}[dt.bits]
    if dt.is_bool:
        return "i1"
    return f"i{dt.bits}"


def scalar_memory(dt: DType) -> str:
    if dt.is_bfloat:
        return "i16"
    if dt.is_float:
        return {16: "half", 32: "float", 64: "double"}[dt.bits]
    if dt.is_bool:
        return "i8"
    return f"i{dt.bits}"


def vec(scalar: str, lanes: int) -> str:
    return scalar if lanes == 1 else f"<{lanes} x {scalar}>"


def compute_type(dt: DType) -> str:
    return vec(scalar_compute(dt), dt.lanes)


def memory_type(dt: DType) -> str:
    return vec(scalar_memory(dt), dt.lanes)


def float_literal(value: float, scalar: str) -> str:
    """LLVM writes float constants as hex doubles; a float one must be exactly representable."""
    if scalar in ("float", "half"):
        with np.errstate(over="ignore"):
            value = float(np.float32(value))
    return "0x%016X" % struct.unpack("<Q", struct.pack("<d", value))[0]


def literal(value, dt: DType) -> str:
    """A scalar constant in the compute type of dt (a bfloat16 one rounded to bfloat16)."""
    if dt.is_bfloat:
        value = to_bfloat16(value)
    if dt.is_float:
        return float_literal(float(value), scalar_compute(dt))
    if dt.is_bool:
        return "true" if value else "false"
    return str(int(value))


def constant(value, dt: DType) -> str:
    """A constant of dt in its compute type: a scalar literal, or a splat for a vector dtype
    (LLVM rejects a scalar literal where a vector operand is expected)."""
    scalar = literal(value, dt.element())
    return scalar if dt.lanes == 1 else f"splat ({scalar_compute(dt)} {scalar})"


def int_constant(value: int, lanes: int) -> str:
    """An i32 constant, splat over lanes."""
    return str(value) if lanes == 1 else f"splat (i32 {value})"


def signed(dt: DType) -> bool:
    return dt.kind == "int"


def suffix(ty: str) -> str:
    """The overload suffix of an intrinsic: float -> f32, <8 x float> -> v8f32."""
    base = {"float": "f32", "double": "f64", "half": "f16"}
    if ty.startswith("<"):
        lanes, _, elem = ty[1:-1].partition(" x ")
        return f"v{lanes}{base.get(elem, elem)}"
    return base.get(ty, ty)
