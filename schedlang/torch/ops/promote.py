"""Torch's type promotion, made explicit for Tensor IR.

schedlang's own promotion is Halide-like (a Python literal adapts to the other operand,
integer `/` floors), so every lowering computes its result dtype here and casts its
operands explicitly. The rules are torch's `result_type`: operands are ranked by
priority (tensors with dimensions, then 0-d tensors, then Python scalars), and a
lower-priority operand only changes the result when it is of a higher category
(bool < integer < floating), as `torch.ones(3, dtype=torch.int32) * 2.5` is float32.
"""
from __future__ import annotations

from typing import Optional

import torch

import schedlang as sl
from schedlang.expr.nodes import Expr

from ..dtypes import to_sl, to_torch

# Dtypes torch computes in a wider type and rounds once at the end (ours too); the
# reductions, norms and matmuls accumulate in the same type (ops/accum.py).
COMPUTE_DTYPE = {"float16": "float32", "bfloat16": "float32"}


def compute_dtype(dtype: str) -> str:
    """The dtype an elementwise op computes in to give a result of dtype."""
    return COMPUTE_DTYPE.get(str(dtype), str(dtype))


def _category(dtype: Optional[str]) -> int:
    if dtype is None:
        return -1
    d = sl.dtype(dtype)
    return 0 if d.is_bool else 1 if d.is_int else 2


def _promote(a: Optional[str], b: Optional[str]) -> Optional[str]:
    if a is None:
        return b
    if b is None:
        return a
    return to_sl(torch.promote_types(to_torch(a), to_torch(b)))


def promote_types(*dtypes: str) -> str:
    """torch.promote_types over dtypes (tensors of one priority: torch.cat's operands)."""
    out = None
    for d in dtypes:
        out = _promote(out, str(d))
    return out


def _combine(higher: Optional[str], lower: Optional[str]) -> Optional[str]:
    """torch's combine_categories: the higher-priority dtype wins unless the lower one is
    of a higher category (then their promotion)."""
    if higher is None:
        return lower
    if _category(higher) == 2:
        return higher
    if _category(higher) == 0 or _category(lower) == 2:
        return _promote(higher, lower)
    return higher


def scalar_dtype(value) -> str:
    """The dtype torch gives a Python scalar operand: bool, int64, or the default float."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return to_sl(torch.get_default_dtype())
    if isinstance(value, Expr):          # a symbolic size (SymInt), or a float made from sizes (SymFloat)
        return to_sl(torch.get_default_dtype()) if value.dtype.is_float else "int64"
    raise TypeError(f"unsupported operand {value!r} ({type(value).__name__}): expected a tensor or a number")


def is_tensor(value) -> bool:
    return isinstance(value, sl.Tensor)


def result_type(*operands) -> str:
    """The dtype torch gives an elementwise op on operands (sl.Tensors and Python numbers)."""
    dim = zero = wrapped = None
    for v in operands:
        if v is None:
            continue
        if is_tensor(v):
            if len(v.shape) > 0:
                dim = _promote(dim, v.dtype)
            else:
                zero = _promote(zero, v.dtype)
        else:
            wrapped = _promote(wrapped, scalar_dtype(v))
    result = _combine(dim, _combine(zero, wrapped))
    if result is None:
        raise TypeError("result_type needs at least one operand")
    return result


def is_float(dtype) -> bool:
    return sl.dtype(str(dtype)).is_float


def is_int(dtype) -> bool:
    return sl.dtype(str(dtype)).is_int


def is_bool(dtype) -> bool:
    return sl.dtype(str(dtype)).is_bool


def float_result(dtype: str) -> str:
    """The dtype of an op that always gives floats (true division, exp, sqrt ...): integer
    and bool inputs give the default float dtype, as torch."""
    return str(dtype) if is_float(dtype) else to_sl(torch.get_default_dtype())
