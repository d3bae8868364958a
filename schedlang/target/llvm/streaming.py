"""Streaming (non-temporal) stores: the large outputs a module only writes bypass the caches.

An ordinary store first reads its cache line (a core owns a line before it modifies it), so
a kernel that writes a 128 MiB output moves 256 MiB: every output line is read once and
written once. A non-temporal store writes whole lines to memory without reading them, as
memcpy and torch's copy_ do for large copies. The llvm target uses them where that pays and
is safe:

- the buffer is a parameter of the module at least as large as the last-level cache (a
  smaller output is likely read back soon, from the cache), that no kernel of the module
  loads and none passes to an extern call;
- the store is one unmasked contiguous vector of a power-of-two size of at least 32 bytes,
  whose offset in the buffer is a provable multiple of its size (up to 64 bytes), so that
  with an aligned buffer every such store is aligned;
- at run time the buffer's address is aligned to the store (up to 64 bytes); an unaligned
  buffer (numpy gives 16-byte alignment) takes the ordinary store: x86 has no unaligned
  vector non-temporal store, and LLVM would split it into 8-byte ones;
- x86-64 only, without bounds checks; a function that issued them ends with sfence (they
  are weakly ordered), before it returns to the OpenMP barrier or its caller.
"""
from __future__ import annotations

import os
from functools import lru_cache
from typing import FrozenSet, Iterable

from ...expr.functor import walk
from ...expr.nodes import Buffer, Const, Load, Ramp
from ...expr.linear import is_multiple
from ...loop.functor import stmt_exprs, walk_stmts
from ...loop.nodes import CallPacked, Store

MIN_STORE_BYTES = 32
MAX_ALIGN = 64                   # a cache line; a wider vector is stored as aligned 64-byte parts
DEFAULT_LLC_BYTES = 32 << 20     # where the cache size cannot be read
SFENCE = "llvm.x86.sse.sfence"
METADATA = "!nontemporal !{i32 1}"


@lru_cache(maxsize=None)
def last_level_cache_bytes() -> int:
    """The size of the host's largest cache (Linux sysfs), or DEFAULT_LLC_BYTES."""
    best = 0
    root = "/sys/devices/system/cpu/cpu0/cache"
    try:
        names = os.listdir(root)
    except OSError:
        return DEFAULT_LLC_BYTES
    for name in names:
        try:
            with open(os.path.join(root, name, "size")) as f:
                text = f.read().strip().upper()
        except OSError:
            continue
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit():
            best = max(best, int(digits) * scale)
    return best or DEFAULT_LLC_BYTES


def streaming_buffers(params: Iterable[Buffer], kernels, triple: str, bounds_check: bool) -> FrozenSet[Buffer]:
    """The module parameters whose vector stores may be non-temporal (see the module docstring)."""
    if bounds_check or not triple.startswith("x86_64"):
        return frozenset()
    min_bytes = last_level_cache_bytes()
    big = [b for b in params if not b.is_symbolic and b.size * b.dtype.bytes >= min_bytes]
    if not big:
        return frozenset()
    read = set()
    walked: set = set()          # nodes shared between statements are walked once
    for k in kernels:
        for s in walk_stmts(k.body):
            if isinstance(s, CallPacked):
                read.update(id(b) for b in s.buffers)
            for e in stmt_exprs(s):
                read.update(id(n.buffer) for n in walk(e, walked) if isinstance(n, Load))
    return frozenset(b for b in big if id(b) not in read)


def streaming_alignment(s: Store) -> int:
    """The alignment (bytes) a non-temporal form of store s needs, or 0 when s has none."""
    index = s.indices[0] if len(s.indices) == 1 else None
    if (s.predicate is not None or not isinstance(index, Ramp) or not isinstance(index.stride, Const)
            or index.stride.value != 1):
        return 0
    elem = s.buffer.dtype.bytes
    nbytes = index.lanes * elem
    align = min(nbytes, MAX_ALIGN)
    if nbytes < MIN_STORE_BYTES or nbytes & (nbytes - 1) or not is_multiple(index.base, align // elem):
        return 0
    return align
