"""The fast path of prepack.py's weight panels: what a model's first call spends packing.

A Llama of a few layers packs ~800 MB of weights at its first call. Done as
`torch.zeros(...)` then one strided `copy_` of the whole weight, that cost ~0.75 s of CPU
(2-core Zen 5): the fresh tensor's pages zeroed twice (by the kernel at the first touch,
then by torch), and a transposing copy that torch's intra-op threads split badly. Here the
packed tensor is not zeroed where every element is written, and the copy goes one panel at
a time ([width, K] rows -> [K, width]): a panel's rows stay in cache while they are read,
and each copy is one small torch op that releases the GIL, so several weights are packed
at once by a few threads (the caller: prepack.PackCache with build_pool.build_each).
The result is the same tensor, element for element.

(Transparent huge pages for the packed tensor were tried: on the development VM a fresh
2 MiB page costs more to fault in than 512 small ones, 0.40 vs 0.09 s of CPU for 138 MB.)
"""
from __future__ import annotations

from typing import Optional


def pack_panels(w, width: int) -> Optional[object]:
    """prepack.pack(w, width) for a 2-d contiguous CPU tensor w: [ceil(N / width), K, width]
    panels, zero past N; None for any other tensor (the caller's general path)."""
    import torch
    if w.device.type != "cpu" or w.dim() != 2 or not w.is_contiguous():
        return None
    n, k = w.shape
    full, tail = divmod(n, width)
    out = torch.empty((full + (tail > 0), k, width), dtype=w.dtype)
    with torch.no_grad():             # a constant: no autograd record of the copies
        rows = w[:full * width].reshape(full, width, k)
        for p in range(full):
            out[p].copy_(rows[p].t())
        if tail:                      # the last panel's columns past N are zero
            out[full].zero_()
            out[full, :, :tail].copy_(w[full * width:].t())
    return out
