"""The fast path of prepack.py's weight panels and convolution blocks: what a model's first
call spends packing.

A Llama of a few layers packs ~800 MB of weights at its first call. Done as
`torch.zeros(...)` then one strided `copy_` of the whole weight, that cost ~0.75 s of CPU
(2-core Zen 5): the fresh tensor's pages zeroed twice (by the kernel at the first touch,
then by torch), and a transposing copy that torch's intra-op threads split badly. Here the
packed tensor is not zeroed where every element is written, and the full panels are one
numpy copy of the transposed view (`np.copyto`, which releases the GIL, so several
weights are packed at once by a few threads: the caller, prepack.PackCache with
build_pool.build_each). For dtypes numpy lacks (bfloat16) the copy goes one panel at a
time in torch ([width, K] rows -> [K, width]). The result is the same tensor, element for
element.

Where the time goes (Llama "full", 1 thread, 2-core Zen 3, CPU time in a fresh process,
benchmarks/compile.py's machine): about half is the first touch of the fresh tensor's
pages (~4 us per 4 KiB page on this VM; a plain clone of 400 MB costs ~0.3 s), which no
copy avoids; of the rest, numpy's strided copy took ~0.45 s for 411 MB where torch's
panel-by-panel transposes took ~0.70 s. MAP_POPULATE and madvise(MADV_HUGEPAGE) on the
fresh tensor were no faster in a fresh process (the huge pages slower: 0.40 vs 0.09 s of
CPU for 138 MB on the Zen 5 VM, 0.9-1.1 vs 0.6-0.9 s for 411 MB on the Zen 3 one).
A [5632, 2048] float32 weight (44 MB, 1 thread, 2-core Zen 3): first touch 21 ms, the
transposed copy into touched memory 22 ms (numpy in any loop order, or torch per panel
32 ms) where a plain copy takes 9 ms: the rest would take a vectorized transpose in
native code. A large float32 weight's full panels are copied by a schedlang kernel instead
(pack_kernel.py: unrolled 8 x 8 blocks, kept in the kernel cache): on Zen 1 (loaded, one
thread, CPU) [5632, 2048] 10.5 vs numpy's 22.3 ms, [2048, 5632] 10.9 vs 13.0 (numpy's rows
8 KiB apart alias in the cache: K = 2048 is its worst case), [3072, 768] 2.8 vs 2.9 (under
pack_kernel.MIN_ELEMENTS: numpy's copy).

A convolution's blocks [OC, *rest] -> [ceil(OC / width), *rest, width] are the same
transposed copy with rest flattened, and a folded batch norm's per-channel scale is applied
in the same pass (np.multiply computes in float64 and rounds once on the store, as
pack_conv's `(w.double() * scale).to(dtype)`): one pass and one fresh buffer instead of
five passes and four buffers. ResNet-50's first-call packing: 0.34 -> 0.15 s of CPU
(2-core Zen 3, loaded, both threads' CPU time).
"""
from __future__ import annotations

from typing import Optional

from . import pack_kernel
from .dtypes import name_of

# dtypes whose tensors numpy views without a copy (Tensor.numpy()); others pack in torch
_NUMPY_DTYPES = ("float32", "float64", "float16", "int8", "uint8", "int16", "int32", "int64")


def pack_panels(w, width: int, scale=None) -> Optional[object]:
    """prepack.pack(w, width) for a 2-d contiguous CPU tensor w: [ceil(N / width), K, width]
    panels, zero past N; and prepack.pack_conv's blocks for an n-d one [OC, *rest]:
    [ceil(OC / width), *rest, width], each row (output channel) times the float64 vector
    scale when given (the product rounded once, as pack_conv's general path). None for any
    other tensor (the caller's general path)."""
    import numpy as np
    import torch
    if w.device.type != "cpu" or w.dim() < 2 or not w.is_contiguous():
        return None
    numpy_ok = name_of(w.dtype) in _NUMPY_DTYPES and not w.is_neg()
    if (w.dim() > 2 or scale is not None) and not numpy_ok:
        return None                   # torch's general path (a dtype numpy lacks)
    n, rest = w.shape[0], tuple(w.shape[1:])
    k = w[0].numel()
    full, tail = divmod(n, width)
    out = torch.empty((full + (tail > 0),) + rest + (width,), dtype=w.dtype)
    blocks = out.view(full + (tail > 0), k, width)
    with torch.no_grad():             # a constant: no autograd record of the copies
        rows = w.reshape(n, k)
        if numpy_ok:
            # one pass over the weight: the transposed copy and the scaling (computed in
            # float64 by numpy's loop, rounded to w's dtype on the store) together
            src = rows.detach().numpy()
            dst = blocks.numpy()
            col = None if scale is None else scale.detach().cpu().double().numpy()
            done = 0                  # rows packed by the kernel (pack_kernel.py: a large weight's full panels)
            if scale is None and w.dim() == 2 and pack_kernel.usable(w, width):
                kernel = pack_kernel.transposer(width, name_of(w.dtype))
                if kernel is not None:
                    kernel(rows[:full * width], blocks[:full])
                    done = full * width
            pieces = ((done, full * width, slice(done // width, full)), (full * width, n, slice(full, full + 1)))
            for lo, hi, at in pieces:
                if hi == lo:
                    continue
                view = dst[at, :, :hi - lo]
                if hi - lo < width:   # the last block's lanes past N are zero
                    dst[at].fill(0)
                part = src[lo:hi].reshape(-1, min(width, hi - lo), k).transpose(0, 2, 1)
                if col is None:
                    np.copyto(view, part)
                else:
                    np.multiply(part, col[lo:hi].reshape(-1, 1, min(width, hi - lo)), out=view,
                                casting="same_kind")
        else:
            for p in range(full):
                blocks[p].copy_(rows[p * width:(p + 1) * width].t())
            if tail:                  # the last panel's columns past N are zero
                blocks[full].zero_()
                blocks[full, :, :tail].copy_(rows[full * width:].t())
    return out
