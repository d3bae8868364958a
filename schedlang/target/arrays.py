"""check_arguments: the arrays of a call checked against a module's parameters (number,
dtype, shape, layout, writability, overlap), giving their data pointers. Every backend's
module calls it."""
from __future__ import annotations

from typing import List, Optional, Sequence

import numpy as np


def describe_type(x) -> str:
    """The module-qualified type name of x (torch.Tensor, numpy.ndarray)."""
    return type(x).__module__ + "." + type(x).__name__


def check_arguments(name: str, params: Sequence, is_output: Sequence[bool], arrays: Sequence,
                    device: str = "cpu", shapes: Optional[Sequence[tuple]] = None) -> List[int]:
    """The data pointers of the arrays for a call of `name`, after checking their number,
    dtypes, shapes, layout and writability, and that no output overlaps another argument.
    shapes: the concrete shapes wanted (symbolic shapes bound to sizes); by default the
    parameters' own. device="cuda" takes torch CUDA tensors only (the cuda backend's GPU launch)."""
    if len(arrays) != len(params):
        names = ", ".join(b.name for b in params)
        raise TypeError(f"{name} takes {len(params)} arrays ({names}), got {len(arrays)}")
    if shapes is None:
        shapes = [tuple(b.shape) for b in params]
    ptrs, spans = [], []
    for b, x, is_out, shape in zip(params, arrays, is_output, shapes):
        ptr, nbytes = _pointer(b, x, is_out, shape, device)
        ptrs.append(ptr)
        spans.append((ptr, ptr + nbytes, b.name, is_out))
    for i, (lo, hi, first, out) in enumerate(spans):
        for lo2, hi2, second, out2 in spans[i + 1:]:
            if (out or out2) and lo < hi2 and lo2 < hi:
                raise ValueError(f"arrays for '{first}' and '{second}' overlap in memory; "
                                 "an output must not share memory with another argument")
    return ptrs


def _pointer(b, x, is_out: bool, shape, device: str = "cpu"):
    want = str(b.dtype)
    if isinstance(x, np.ndarray) and device != "cpu":
        raise TypeError(f"argument '{b.name}' is a numpy array; a GPU call takes torch {device} tensors "
                        "(or use mod.emulate for numpy arrays)")
    if isinstance(x, np.ndarray):
        got, xshape = str(x.dtype), tuple(x.shape)
        contiguous = x.flags.c_contiguous
        writable = x.flags.writeable
        ptr = x.ctypes.data
        nbytes = x.nbytes
    elif describe_type(x).startswith("torch."):
        if x.device.type != device:
            raise ValueError(f"argument '{b.name}' is a torch tensor on {x.device}; "
                             + ("the llvm target needs CPU tensors" if device == "cpu" else f"it must be on {device}"))
        if x.requires_grad and is_out:
            raise ValueError(f"output '{b.name}' requires grad; pass a tensor detached from autograd")
        got, xshape = str(x.dtype).replace("torch.", ""), tuple(x.shape)
        contiguous = x.is_contiguous()
        writable = True
        ptr = x.data_ptr()
        nbytes = x.numel() * x.element_size()
    else:
        raise TypeError(f"argument '{b.name}' must be a numpy array or a CPU torch tensor, got {describe_type(x)}")
    if got != want:
        raise TypeError(f"argument '{b.name}' must have dtype {want}, got {got}")
    if xshape != shape:
        raise ValueError(f"argument '{b.name}' must have shape {shape}, got {xshape}")
    if not contiguous:
        raise ValueError(f"argument '{b.name}' is not C-contiguous; pass np.ascontiguousarray(x) / x.contiguous()")
    if is_out and not writable:
        raise ValueError(f"output '{b.name}' is read-only")
    return ptr, nbytes
