"""What the reductions, norms and matmuls share: the dtype they accumulate in (float16
and bfloat16 compute in float32, as torch's CPU kernels do), casts back to the result
dtype, dtype arguments, and the dims a reduction runs over."""
from __future__ import annotations

from typing import Callable, Sequence, Tuple

import torch

import schedlang as sl
from schedlang.expr.nodes import Expr

from ..dtypes import to_sl
from .registry import Unsupported

# Dtypes computed in a wider one; the result is rounded once at the end.
ACCUMULATE = {"float16": "float32", "bfloat16": "float32"}


def acc_dtype(dtype) -> str:
    """The dtype a value of dtype is accumulated and computed in."""
    return ACCUMULATE.get(str(dtype), str(dtype))


def upcast(value: Expr) -> Expr:
    """value in its accumulation dtype."""
    return sl.cast(acc_dtype(value.dtype), value)


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


# ---- dims and computes (TODO: share torchcore's ops/common.py once it is on its branch)

_AXIS_NAMES = "ijklmn"


def axis_names(ndim: int):
    return list(_AXIS_NAMES[:ndim]) if ndim <= len(_AXIS_NAMES) else [f"i{d}" for d in range(ndim)]


def compute(shape: Sequence, fcompute: Callable, name: str):
    """sl.compute(shape, fcompute, name) where fcompute takes the axes as one list."""
    import inspect

    def body(*axes):
        return fcompute(list(axes))
    body.__signature__ = inspect.Signature(
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_ONLY) for n in axis_names(len(shape))])
    return sl.compute(tuple(shape), body, name=name)


def norm_dim(dim, ndim: int, op: str) -> int:
    """A dimension in 0..ndim-1 from torch's possibly negative one (a 0-d tensor takes 0 and -1)."""
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise Unsupported(f"{op}: dim {dim!r} is not a static int")
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"{op}: dim {dim} is out of range for a tensor of {ndim} dimensions")
    return dim % n if ndim else 0


def norm_dims(dims, ndim: int, op: str) -> Tuple[int, ...]:
    """The sorted dims a reduction runs over; None or [] means all of them."""
    if dims is None or (isinstance(dims, (list, tuple)) and not dims):
        return tuple(range(ndim))
    dims = [dims] if isinstance(dims, int) else list(dims)
    out = sorted({norm_dim(d, ndim, op) for d in dims})
    if len(out) != len(dims):
        raise ValueError(f"{op}: dim {dims} names a dimension twice")
    return tuple(d for d in out if d < ndim)


def is_one(extent) -> bool:
    return isinstance(extent, int) and extent == 1


def same_extent(a, b) -> bool:
    """Whether two extents (ints or symbolic expressions) are known to be equal."""
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    if isinstance(a, int) or isinstance(b, int):
        return False
    from schedlang.expr.equality import equal
    return a is b or equal(a, b)


def broadcast_shape(op: str, *shapes: Sequence) -> tuple:
    """torch's broadcast of shapes (aligned on the right; extent 1 stretches)."""
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for d in range(ndim):
        chosen = 1
        for s in shapes:
            e = s[d - ndim + len(s)] if d - ndim + len(s) >= 0 else 1
            if is_one(e):
                continue
            if is_one(chosen):
                chosen = e
            elif not same_extent(chosen, e):
                raise Unsupported(f"{op}: shapes {', '.join(str(tuple(s)) for s in shapes)} do not broadcast")
        out.append(chosen)
    return tuple(out)


def read_broadcast(t: sl.Tensor, shape: Sequence, index: Sequence) -> Expr:
    """t read at index of a tensor of the broadcast shape (its extent-1 dims read 0)."""
    lead = len(shape) - len(t.shape)
    idx = [0 if is_one(e) and not is_one(shape[lead + d]) else index[lead + d] for d, e in enumerate(t.shape)]
    return t[tuple(idx)]


def numel(shape: Sequence):
    n = 1
    for e in shape:
        n = n * e
    return n
