"""Torch tensors that have no plain memory behind their data pointer.

A tensor with a lazy negation or conjugation bit (`x.conj().imag`, `x.conj()`) stores
the un-negated values: read through its pointer it would give wrong results. Inputs are
resolved into a plain copy for the call; outputs are refused, since writing through the
pointer would store the values negated (or unconjugated) from torch's point of view.
Sparse and meta tensors have no strided storage at all.
"""
from __future__ import annotations

from typing import List, Sequence


def _is_torch(x) -> bool:
    return type(x).__module__.startswith("torch")


def resolve_arguments(params, arrays: Sequence, is_output: Sequence[bool]) -> List:
    """arrays with lazily negated/conjugated torch inputs replaced by resolved copies (keep the
    list alive for the call); TypeError for storage-less tensors, ValueError for lazy outputs."""
    out = list(arrays)
    for i, (b, x, is_out) in enumerate(zip(params, arrays, is_output)):
        if not _is_torch(x) or not hasattr(x, "is_neg"):
            continue
        if str(x.layout) != "torch.strided" or x.device.type == "meta":
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
