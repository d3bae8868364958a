"""Weights packed once: a module's constant [N, K] matrix (a Linear's weight) re-laid as
[ceil(N / width), K, width] panels, so a matmul kernel reads B contiguously along its
output columns (benchmarks/sl_kernels.py's packed register-tiled GEMM).

The lowering reads the packed placeholder (`ctx.packed(weight, width)`); the compiled
module computes the packed tensor in torch at its first call and keeps it. It is computed
again when the parameter changes as torch sees it: a new storage (data_ptr) or an in-place
write through the tensor (`_version`: `w.copy_(...)` or an optimizer step under no_grad).
A write through `w.data` bumps no version and is not seen (as autograd does not see it).
The packed copy costs one more weight's worth of memory.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Tuple

from ..expr.extent import ceil_div
from .state import Version


@dataclass(frozen=True)
class PackSpec:
    """packed[p, k, z] = source[p * width + z, k], zero past source's last row."""

    source: str        # the state input (parameter, buffer, constant) it is computed from
    width: int         # columns of a panel


def panels(n: int, width: int) -> int:
    return ceil_div(n, width)


def pack(w, width: int):
    """The [ceil(N / width), K, width] panels of the 2-d torch tensor w (a fresh contiguous tensor)."""
    import torch
    n, k = w.shape
    p = panels(n, width)
    out = torch.zeros((p, k, width), dtype=w.dtype, device=w.device)
    full = n // width
    if full:
        out[:full].copy_(w[:full * width].reshape(full, width, k).transpose(1, 2))
    if n % width:                     # the last panel's rows past N stay zero
        out[full, :, :n % width].copy_(w[full * width:].transpose(0, 1))
    return out


class PackCache:
    """The packed tensors of one compiled module, each with the version of its source it was made from."""

    def __init__(self, specs: Dict[str, PackSpec]):
        self.specs = dict(specs)
        self._made: Dict[str, Tuple[object, object]] = {}

    def values(self, state: Dict[str, object]) -> Dict[str, object]:
        """name -> packed tensor for every spec, computed again for a source that changed."""
        out = {}
        for name, spec in self.specs.items():
            src = state[spec.source]
            hit = self._made.get(name)
            if hit is None or hit[0].changed(src):
                hit = self._made[name] = (Version(src), pack(src, spec.width))
            out[name] = hit[1]
        return out
