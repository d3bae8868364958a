"""Torch dtypes <-> schedlang dtype strings."""
from __future__ import annotations

from typing import Optional

import torch

_TO_SL = {
    torch.float16: "float16", torch.float32: "float32", torch.float64: "float64",
    torch.int8: "int8", torch.int16: "int16", torch.int32: "int32", torch.int64: "int64",
    torch.uint8: "uint8", torch.bool: "bool",
    torch.bfloat16: "bfloat16",
}
_TO_TORCH = {v: k for k, v in _TO_SL.items()}
# Dtypes of values that only torch computes (the complex results of torch.fft ...): they can
# flow between the ops that run in torch, never into a schedlang kernel.
TORCH_ONLY = {torch.complex32: "complex32", torch.complex64: "complex64", torch.complex128: "complex128"}
_SHORT = {"complex32": "c32", "complex64": "c64", "complex128": "c128"}


def to_sl(dtype: torch.dtype) -> str:
    """The schedlang dtype string of a torch dtype; TypeError for one we do not support."""
    try:
        return _TO_SL[dtype]
    except KeyError:
        raise TypeError(f"torch dtype {dtype} is not supported by schedlang "
                        f"(supported: {', '.join(str(d) for d in _TO_SL)})") from None


def ir_dtype(dtype: torch.dtype) -> str:
    """The Torch IR dtype string of a torch dtype: a schedlang dtype, or one of the dtypes
    only torch computes (TORCH_ONLY); TypeError for another (a quantized one ...)."""
    return TORCH_ONLY[dtype] if dtype in TORCH_ONLY else to_sl(dtype)


def torch_only(dtype) -> bool:
    """Whether a Torch IR dtype string names values only torch computes."""
    return str(dtype) in _SHORT


def short_name(dtype) -> Optional[str]:
    """The printed short name of a dtype only torch computes, or None."""
    return _SHORT.get(str(dtype))


def name_of(dtype: torch.dtype) -> Optional[str]:
    """The schedlang dtype string of a torch dtype, or None for one we do not support."""
    return _TO_SL.get(dtype)


def to_torch(dtype) -> torch.dtype:
    """The torch dtype of a schedlang dtype (string or DType)."""
    try:
        return _TO_TORCH[str(dtype)] if str(dtype) not in _SHORT else getattr(torch, str(dtype))
    except KeyError:
        raise TypeError(f"dtype {dtype} has no torch equivalent") from None
