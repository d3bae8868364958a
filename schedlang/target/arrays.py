"""check_arguments: the arrays of a call checked against a module's parameters (number,
dtype, shape, layout, writability, overlap), giving their data pointers; resolve_arguments:
torch tensors with no plain memory behind their data pointer. Every backend's module calls them.

A tensor with a lazy negation or conjugation bit (`x.conj().imag`, `x.conj()`) stores
the un-negated values: read through its pointer it would give wrong results. Inputs are
resolved into a plain copy for the call; outputs are refused, since writing through the
pointer would store the values negated (or unconjugated) from torch's point of view.
Sparse and meta tensors have no strided storage at all.
"""
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
    # only pairs with an output can conflict: each output against every other argument, not all
    # pairs (a model's module takes dozens of weights and writes one result)
    for i, (lo, hi, _, out) in enumerate(spans):
        if not out:
            continue
        for j, (lo2, hi2, _, _) in enumerate(spans):
            if j != i and lo < hi2 and lo2 < hi:
                first, second = spans[min(i, j)][2], spans[max(i, j)][2]
                raise ValueError(f"arrays for '{first}' and '{second}' overlap in memory; "
                                 "an output must not share memory with another argument")
    return ptrs


def is_on(x, device: str) -> bool:
    """Whether the torch tensor x is on a device of type device ("cpu", "cuda"): x.is_cpu
    for the CPU, a property read; x.device builds a torch.device object, about 10x as long
    (a model's call checks a hundred tensors)."""
    return x.is_cpu if device == "cpu" else x.device.type == device


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
        if not is_on(x, device):
            raise ValueError(f"argument '{b.name}' is a torch tensor on {x.device}; "
                             + ("the llvm target needs CPU tensors" if device == "cpu" else f"it must be on {device}"))
        if x.requires_grad and is_out:
            raise ValueError(f"output '{b.name}' requires grad; pass a tensor detached from autograd")
        got, xshape = _torch_dtype_name(x.dtype), x.shape      # a torch.Size: a tuple
        contiguous = x.is_contiguous()
        writable = True
        ptr = x.data_ptr()
        nbytes = x.numel() * x.element_size()
    else:
        raise TypeError(f"argument '{b.name}' must be a numpy array or a CPU torch tensor, got {describe_type(x)}")
    if got != want:
        raise TypeError(f"argument '{b.name}' must have dtype {want}, got {got}")
    if xshape != shape:
        raise ValueError(f"argument '{b.name}' must have shape {shape}, got {tuple(xshape)}")
    if not contiguous:
        raise ValueError(f"argument '{b.name}' is not C-contiguous; pass np.ascontiguousarray(x) / x.contiguous()")
    if is_out and not writable:
        raise ValueError(f"output '{b.name}' is read-only")
    return ptr, nbytes


_TORCH_DTYPE_NAMES: dict = {}


def _torch_dtype_name(dtype) -> str:
    """torch.float32 -> "float32" (str() of a torch dtype, once per dtype)."""
    name = _TORCH_DTYPE_NAMES.get(dtype)
    if name is None:
        name = _TORCH_DTYPE_NAMES[dtype] = str(dtype).replace("torch.", "")
    return name


def _is_torch(x) -> bool:
    return type(x).__module__.startswith("torch")


def resolve_arguments(params, arrays: Sequence, is_output: Sequence[bool]) -> List:
    """arrays with lazily negated/conjugated torch inputs replaced by resolved copies (keep the
    list alive for the call); TypeError for storage-less tensors, ValueError for lazy outputs."""
    out = list(arrays)
    for i, (b, x, is_out) in enumerate(zip(params, arrays, is_output)):
        if not _is_torch(x) or not hasattr(x, "is_neg"):
            continue
        if x.is_meta or str(x.layout) != "torch.strided":
            raise TypeError(f"argument '{b.name}' is a {x.layout} tensor on {x.device}, which has no strided "
                            "memory to pass; pass a dense CPU tensor (x.to_dense(), x.to('cpu'))")
        lazy = [bit for bit, on in (("negation", x.is_neg()), ("conjugation", x.is_conj())) if on]
        if lazy and is_out:
            raise ValueError(f"output '{b.name}' has a lazy {' and '.join(lazy)} bit, so writes through its memory "
                             "would not be the values torch shows; pass a plain tensor (x.resolve_neg().resolve_conj() "
                             "is a copy)")
        if lazy:
            out[i] = x.resolve_neg().resolve_conj()
    return out
