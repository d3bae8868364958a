"""Scalar and vector data types, spelled as in TVM: "float32", "int32x4", "bool"."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Union

import numpy as np

# "bfloat" is bfloat16 (TVM's kDLBfloat): float32's exponent with an 8-bit significand. numpy
# has no such type; ml_dtypes provides it (and registers the name "bfloat16" with numpy) when
# first needed (numpy_bfloat16).
_KINDS = {"float": (16, 32, 64), "bfloat": (16,), "int": (8, 16, 32, 64), "uint": (8, 16, 32, 64), "bool": (1,)}


@dataclass(frozen=True)
class DType:
    """A data type: kind ("float", "bfloat", "int", "uint", "bool"), bit width and vector lanes."""

    kind: str
    bits: int
    lanes: int = 1

    def __post_init__(self):
        if self.kind not in _KINDS or self.bits not in _KINDS[self.kind]:
            raise ValueError(f"unsupported dtype {self.kind}{self.bits}; supported: {', '.join(SUPPORTED)}")
        if self.lanes < 1:
            raise ValueError(f"dtype lanes must be positive, got {self.lanes}")

    def __str__(self) -> str:
        base = "bool" if self.kind == "bool" else f"{self.kind}{self.bits}"
        return base if self.lanes == 1 else f"{base}x{self.lanes}"

    __repr__ = __str__

    def __eq__(self, other) -> bool:
        # As in TVM, where dtypes are strings: expr.dtype == "float16" holds.
        if isinstance(other, str):
            return str(self) == other
        if isinstance(other, DType):
            return (self.kind, self.bits, self.lanes) == (other.kind, other.bits, other.lanes)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(str(self))

    @property
    def is_float(self) -> bool:
        """Any floating-point kind: float16/32/64 and bfloat16."""
        return self.kind in ("float", "bfloat")

    @property
    def is_bfloat(self) -> bool:
        return self.kind == "bfloat"

    @property
    def is_int(self) -> bool:
        return self.kind in ("int", "uint")

    @property
    def is_bool(self) -> bool:
        return self.kind == "bool"

    @property
    def bytes(self) -> int:
        """Bytes one lane occupies in memory (bool is stored as one byte)."""
        return max(self.bits, 8) // 8

    @property
    def short(self) -> str:
        """Compact spelling used by the IR printers: f32, i64, u8, bool, bf16, f32x16."""
        base = "bool" if self.is_bool else "bf16" if self.is_bfloat else f"{self.kind[0]}{self.bits}"
        return base if self.lanes == 1 else f"{base}x{self.lanes}"

    def with_lanes(self, lanes: int) -> "DType":
        return self if lanes == self.lanes else DType(self.kind, self.bits, lanes)

    def element(self) -> "DType":
        return self.with_lanes(1)

    @property
    def min_int(self) -> int:
        """The smallest value of an integer (or bool) dtype."""
        return -(1 << (self.bits - 1)) if self.kind == "int" else 0

    @property
    def max_int(self) -> int:
        """The largest value of an integer (or bool) dtype."""
        return (1 << (self.bits - 1)) - 1 if self.kind == "int" else (1 << self.bits) - 1

    @property
    def numpy(self) -> np.dtype:
        if self.is_bfloat:
            return numpy_bfloat16()
        return np.dtype(np.bool_ if self.is_bool else f"{self.kind}{self.bits}")


def numpy_bfloat16() -> np.dtype:
    """numpy's bfloat16 (ml_dtypes'). Imported here, on first use, not with schedlang: the
    import registers its types and ufuncs with numpy, 1.6 s of CPU on a Zen 3 (numpy itself
    0.25 s), which every process would pay (auto-scheduler workers, the CLI) for a type most
    never use. After the first call numpy also knows the name: np.dtype("bfloat16")."""
    import ml_dtypes
    return np.dtype(ml_dtypes.bfloat16)


SUPPORTED = ("float16", "float32", "float64", "bfloat16", "int8", "int16", "int32", "int64",
             "uint8", "uint16", "uint32", "uint64", "bool")


def dtype(value: Union[str, DType, np.dtype, type]) -> DType:
    """Parse a dtype given as a string ("float32", "float32x8"), a numpy dtype or a DType."""
    if isinstance(value, DType):
        return value
    if not isinstance(value, str):
        try:
            value = np.dtype(value).name
        except TypeError:
            raise TypeError(f"expected a dtype such as 'float32', got {value!r}") from None
    text = value.strip()
    lanes = 1
    if "x" in text:
        text, _, lane_text = text.partition("x")
        if not lane_text.isdigit():
            raise ValueError(f"bad dtype {value!r}: lanes after 'x' must be a number")
        lanes = int(lane_text)
    if text == "bool":
        return DType("bool", 1, lanes)
    if text in ("float", "int", "uint"):   # TVM reads a bare kind as its 32-bit type
        return DType(text, 32, lanes)
    if text == "bfloat":                   # ... and a bare "bfloat" as bfloat16
        return DType("bfloat", 16, lanes)
    for kind in ("bfloat", "float", "uint", "int"):
        if text.startswith(kind) and text[len(kind):].isdigit():
            bits = int(text[len(kind):])
            if bits in _KINDS[kind]:
                return DType(kind, bits, lanes)
    raise ValueError(f"unsupported dtype {value!r}; supported: {', '.join(SUPPORTED)}")



def to_bfloat16(values) -> np.ndarray:
    """values rounded to bfloat16 as torch converts them: through float32, so an int or
    float64 value is rounded twice (to float32, then to bfloat16; each to nearest even).
    ml_dtypes' own int and float64 casts round once from 0.7 on and through float32 before,
    so every conversion to bfloat16 in schedlang goes through here, not through astype."""
    values = np.asarray(values)
    bf16 = numpy_bfloat16()
    if values.dtype == bf16:
        return values
    with np.errstate(over="ignore"):
        return values.astype(np.float32).astype(bf16)

float16 = DType("float", 16)
float32 = DType("float", 32)
float64 = DType("float", 64)
bfloat16 = DType("bfloat", 16)
int32 = DType("int", 32)
int64 = DType("int", 64)
boolean = DType("bool", 1)


def promote(a: DType, b: DType) -> DType:
    """The common type of a binary operation: float beats int beats bool, wider beats narrower;
    float16 with bfloat16 is float32 (neither holds the other), as in torch."""
    if a == b:
        return a
    lanes = max(a.lanes, b.lanes)
    if a.is_float and b.is_float and a.kind != b.kind:
        bits = max(a.bits, b.bits, 32)
        return DType("float", bits, lanes)
    rank = {"bool": 0, "uint": 1, "int": 2, "float": 3, "bfloat": 3}
    if rank[a.kind] != rank[b.kind]:
        winner = a if rank[a.kind] > rank[b.kind] else b
        other = b if winner is a else a
        bits = max(winner.bits, other.bits) if winner.is_float and other.is_float else winner.bits
        return DType(winner.kind, bits, lanes)
    return DType(a.kind, max(a.bits, b.bits), lanes)
