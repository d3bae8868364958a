"""Temporaries of a kernel module placed in one arena, sharing memory where their lifetimes
do not overlap (a static memory plan, as Inductor's buffer reuse and TVM's storage rewrite).

A module runs its kernels in order (the entry function); a temporary is live from the
first kernel that takes it to the last one. Two temporaries live in one kernel call never
overlap, so a kernel's buffer parameters stay distinct (they are declared noalias); two
whose intervals are disjoint may take the same bytes. A model's intermediate activations
then fit in the few largest ones live at a time, and one arena of that size, freed and
allocated again at the next call, is served from the allocator's heap, not by fresh pages
from the kernel (a page fault per 4 KiB of every intermediate, each call).
"""
from __future__ import annotations

from typing import Dict, Sequence, Tuple

from ..expr.extent import ceil_div
from ..expr.nodes import Buffer


def plan_arena(temps: Sequence[Buffer], calls: Sequence[Sequence[Buffer]], nbytes,
               align: int) -> Tuple[int, Dict[Buffer, int]]:
    """(arena bytes, byte offset of each temporary) for temps (of static sizes, nbytes(b)
    bytes each) used by the kernel calls in order (calls[i]: the buffers call i takes).
    Offsets are multiples of align; temporaries live in a common call never overlap.
    First fit, the largest temporaries placed first."""
    live: Dict[Buffer, Tuple[int, int]] = {}
    for i, params in enumerate(calls):
        for b in params:
            if b in live:
                live[b] = (live[b][0], i)
            else:
                live[b] = (i, i)
    whole = (0, max(len(calls) - 1, 0))
    size = {b: ceil_div(nbytes(b), align) * align for b in temps}
    order = {b: i for i, b in enumerate(temps)}
    placed: list = []            # (offset, end, first, last)
    offsets: Dict[Buffer, int] = {}
    for b in sorted(temps, key=lambda t: (-size[t], order[t])):
        first, last = live.get(b, whole)
        busy = sorted((o, e) for o, e, f, l in placed if f <= last and first <= l)
        offset = 0
        for o, e in busy:
            if offset + size[b] <= o:
                break
            offset = max(offset, e)
        offsets[b] = offset
        placed.append((offset, offset + size[b], first, last))
    return max((e for _, e, _, _ in placed), default=0), offsets
