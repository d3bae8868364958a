"""What the reductions, norms and matmuls share: the dtype they accumulate in (float16
and bfloat16 compute in float32, as torch's CPU kernels do), casts back to the result
dtype, dtype arguments, and the dims a reduction runs over."""
from __future__ import annotations

from typing import Tuple

import torch

import schedlang as sl

from ..dtypes import to_sl
from .common import compute, norm_dim
from .promote import compute_dtype
from .registry import NeedsStaticShape, Unsupported

def acc_dtype(dtype) -> str:
    """The dtype a value of dtype is accumulated and computed in (promote.COMPUTE_DTYPE:
    one table for elementwise ops and reductions)."""
    return compute_dtype(dtype)


def is_float(dtype) -> bool:
    return str(dtype).startswith(("float", "bfloat"))


def dtype_arg(dtype, op: str):
    """A `dtype=` argument (a torch.dtype, a schedlang dtype string or None) as a string."""
    if dtype is None or isinstance(dtype, str):
        return dtype
    if isinstance(dtype, torch.dtype):
        try:
            return to_sl(dtype)
        except TypeError as e:
            raise Unsupported(f"{op}: {e}") from None
    raise Unsupported(f"{op}: dtype={dtype!r} is not a dtype")


def require_float(op: str, *tensors: sl.Tensor) -> None:
    """Unsupported unless every tensor is floating point."""
    for t in tensors:
        if not is_float(t.dtype):
            raise Unsupported(f"{op} of a {t.dtype} tensor is not lowered (floating point only)")


def cast_stage(t: sl.Tensor, dtype, name: str) -> sl.Tensor:
    """t itself when it already has dtype, else a compute casting it, named name."""
    if str(t.dtype) == str(dtype):
        return t
    return compute(t.shape, lambda idx: sl.cast(dtype, t[tuple(idx)]), name)


def acc_and_result_names(name: str, acc: str, result: str) -> Tuple[str, str]:
    """The names of a stage computed in dtype acc and of the result of dtype result it is
    cast to: the stage is the result when the dtypes agree, else it is `<name>_acc`."""
    return (name, name) if str(acc) == str(result) else (f"{name}_acc", name)


# ---- the dims a reduction runs over

def norm_dims(dims, ndim: int, op: str) -> Tuple[int, ...]:
    """The sorted dims a reduction runs over; None or [] means all of them."""
    if dims is None or (isinstance(dims, (list, tuple)) and not dims):
        return tuple(range(ndim))
    dims = [dims] if isinstance(dims, int) else list(dims)
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, int):
            error = NeedsStaticShape if isinstance(d, sl.expr.nodes.Expr) else Unsupported   # (only a size gets known)
            raise error(f"{op}: dim {d!r} is not a static int")
    out = sorted({norm_dim(d, ndim, f"{op}: dim") for d in dims})
    if len(out) != len(dims):
        raise ValueError(f"{op}: dim {dims} names a dimension twice")
    return tuple(d for d in out if d < ndim)
