"""Launch facts of a kernel, read from its Kernel IR: threads a block, grid and block
dimensions, shared memory (and where it lies when it is dynamic). Backends and the SIMT
emulator share them."""
from __future__ import annotations

import math

from ..expr.extent import ceil_div, evaluate_extent
from ..loop.functor import walk_stmts
from ..loop.nodes import Allocate
from .nodes import Kernel, LaunchKind

# Shared memory a block may declare statically; more is dynamic shared memory, which a
# kernel must opt into at launch (CUDA's limit for every architecture since sm_20).
STATIC_SHARED_LIMIT = 48 * 1024
DYNAMIC_ALIGN = 16         # each buffer's offset: the widest access (16-byte cp.async, float4)


def threads_per_block(k: Kernel) -> int:
    """Threads of a block (thread extents are constants: the cuda backend checks so)."""
    return math.prod(a.extent for a in k.launch if a.kind is LaunchKind.THREAD)


def launch_dims(k: Kernel, sizes=None):
    """(grid, block) of a kernel as (x, y, z) triples; sizes (size variable -> value) gives
    symbolic extents their values for a call."""
    extent = {a.tag: evaluate_extent(a.extent, sizes or {}) for a in k.launch
              if a.kind in (LaunchKind.BLOCK, LaunchKind.THREAD)}
    return (tuple(extent.get(f"blockIdx.{c}", 1) for c in "xyz"),
            tuple(extent.get(f"threadIdx.{c}", 1) for c in "xyz"))


def shared_bytes(kernel) -> int:
    """Static shared memory of a kernel: every shared allocation, as if all were live at once."""
    return sum(s.buffer.size * s.buffer.dtype.bytes for s in walk_stmts(kernel.body)
               if isinstance(s, Allocate) and s.buffer.scope == "shared")


def dynamic_shared_layout(kernel):
    """(offsets, total): where each shared buffer of a kernel over STATIC_SHARED_LIMIT lies in
    its dynamic shared memory (buffer -> byte offset, in the order they are allocated, each
    rounded up to DYNAMIC_ALIGN; none overlap, as static arrays would not), and the bytes the
    launch asks for; None for a kernel within the static limit."""
    if shared_bytes(kernel) <= STATIC_SHARED_LIMIT:
        return None
    offsets, total = {}, 0
    for s in walk_stmts(kernel.body):
        if isinstance(s, Allocate) and s.buffer.scope == "shared" and s.buffer not in offsets:
            offsets[s.buffer] = total
            total += ceil_div(s.buffer.size * s.buffer.dtype.bytes, DYNAMIC_ALIGN) * DYNAMIC_ALIGN
    return offsets, total
