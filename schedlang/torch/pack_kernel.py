"""A schedlang kernel for the full panels of a large weight (pack_fast.pack_panels): the
transposed copy [P * width, K] -> [P, K, width] in 8 x 8 blocks.

numpy's copy of the transposed view calls its strided-copy loop once per `width` elements
(16 with AVX2): ~2.5x a plain copy of the same bytes. This kernel copies one 8 x 8 block per
step, unrolled (64 loads and stores, no loop or call between them): a [5632, 2048] float32
weight in 11-15 ms where numpy takes 23 and a plain copy 9 (one thread, CPU time, loaded
Zen 1). Llama's ~800 MB of panels are most of its warm first call beside the forward; in
BERT's first call (weights under MIN_ELEMENTS, rows 3 KiB or 12 KiB apart) the kernel
measured no faster than numpy (pack 0.40-0.62 vs 0.36-0.49 s of CPU, loaded), so it is not used.

It is built once per (width, dtype) for any sizes (size variables P and K8, the weight
[P * width, K8 * 8]) and kept in the kernel cache (kernel_cache.build_default), so a process
that finds it on disk only loads it (a few ms): only weights of MIN_ELEMENTS or more use it.
Without the kernel cache it is not used at all (numpy's copy), so that no process builds it
(~1 s) for one call.
"""
from __future__ import annotations

import threading
from typing import Dict, Optional, Tuple

from .dtypes import name_of

BLOCK = 8                  # the block's rows (panel lanes) and columns (K)
MIN_ELEMENTS = 1 << 22     # smaller weights: numpy's copy (BERT's [3072, 768]: as fast, 2.9 vs 2.8 ms)
DTYPES = ("float32",)

_lock = threading.Lock()   # PackCache packs from several threads: one build
_built: Dict[Tuple[int, str, object], object] = {}   # this process's modules: build_default reads disk each call


def usable(w, width: int) -> bool:
    """Whether the kernel packs the full panels of the 2-d contiguous CPU tensor w."""
    n, k = w.shape
    return (w.numel() >= MIN_ELEMENTS and width % BLOCK == 0 and k % BLOCK == 0 and n >= width
            and name_of(w.dtype) in DTYPES)


def transposer(width: int, dtype: str) -> Optional[object]:
    """The built module (weight [P * width, K8 * 8], panels [P, K8 * 8, width]), or None where
    the kernel cache is off for the host."""
    import schedlang as sl
    from schedlang import kernel_cache
    target = sl.Target.create("llvm").with_options(num_threads=1)
    if not kernel_cache.cacheable(target):
        return None
    key = (width, dtype, target)
    with _lock:
        module = _built.get(key)
        if module is None:
            weight, panels = program(width, dtype)
            module = _built[key] = kernel_cache.build_default(
                [weight], [panels], target, lambda: schedule(panels),
                lambda s: sl.build(s, [weight, panels], target=target))
    return module


def program(width: int, dtype: str):
    """(weight, panels): panels[p, k, j] = weight[p * width + j, k]."""
    import schedlang as sl
    p_var, k_var = sl.size_var("P"), sl.size_var("K8")
    weight = sl.placeholder((p_var * width, k_var * BLOCK), dtype=dtype, name="weight")
    panels = sl.compute((p_var, k_var * BLOCK, width), lambda p, k, j: weight[p * width + j, k], name="panels")
    return weight, panels


def schedule(panels):
    """Per panel, per 8 columns of K, per 8 lanes: one 8 x 8 block, both loops unrolled."""
    import schedlang as sl
    s = sl.create_schedule(panels.op)
    p, k, j = panels.op.axis
    ko, ki = s[panels].split(k, BLOCK)
    jo, ji = s[panels].split(j, BLOCK)
    s[panels].reorder(p, ko, jo, ji, ki)
    s[panels].unroll(ji)
    s[panels].unroll(ki)
    return s
