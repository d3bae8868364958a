"""Launch facts of a kernel, read from its Kernel IR: threads a block, grid and block
dimensions, static shared memory. Backends and the SIMT emulator share them."""
from __future__ import annotations

import math

from ..expr.extent import evaluate_extent
from ..loop.functor import walk_stmts
from ..loop.nodes import Allocate
from .nodes import Kernel, LaunchKind


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
