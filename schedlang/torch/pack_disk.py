"""A compiled module's packed constants (prepack.py) kept on disk, so that a later process
with the same weights maps them instead of packing them again.

What a warm first call spent packing is mostly memory, not arithmetic: BERT's ~340 MB of
panels are fresh pages (the kernel zeroes each at its first touch, ~0.2 s of CPU on a 2-core
Zen 3 VM) and a transposed copy, ResNet-50's Winograd weights float64 products (~0.4 s).
A file in the page cache maps with no zeroing and no copy (~5 ms for 340 MB, the pages
mapped as the kernels first read them), and checking that the weights are the ones the
file was made from is a plain comparison of their bytes (~35 ms for 340 MB, one thread).

An entry (folder "packed" of the cache, disk.py) holds, for one set of constants, each
constant's bytes and a copy of the bytes of every source tensor it was made from. Its key
text names the constants (kind, width, params, sources), the sources' shapes and dtypes, a
few of their bytes (so that two models of one architecture keep two entries), and what the
packing's arithmetic depends on: schedlang's source hash (kernel_cache.versions()),
torch's and numpy's versions, torch's CPU capability and the host CPU (float64 products
may round differently elsewhere). A constant is taken from the entry only when every one of
its sources equals, byte for byte, the copy stored beside it: a changed weight is packed
again, never answered by a stale value. Hashing the weights instead would cost more than
comparing them (sha1, the fastest of hashlib's with SHA-NI: 0.2 s for 340 MB; the
comparison, 0.035 s).

The file is written whole and renamed into place (concurrent readers see it complete or not
at all; the last of two writers wins) and mapped copy-on-write (MAP_PRIVATE): a tensor made
from it is a private copy of a page once written, and a file replaced or removed by another
process leaves the mapped one intact. Only its header carries a checksum: the payload's
(sha256 of hundreds of MB) would cost what the entry saves. An entry is stored by the first
call of a process that packed a storable constant (CPU, contiguous tensors), written behind
that call by the kernel cache's writer thread (kernel_cache.later: the call does not wait
for hundreds of MB to reach the disk; a load in the process waits for it) and put in place
only if no source was written in place meanwhile (its version unchanged), and counts
towards the cache's size cap like any other (disk.evict); none is written bigger than the
cap. The cache is off with the kernel cache (SCHEDLANG_KERNEL_CACHE=0, kernel_cache.ENABLED)
or with ENABLED = False here.
"""
from __future__ import annotations

import hashlib
import json
import mmap
import os
import struct
from functools import lru_cache
from typing import Dict, List, Optional

import numpy as np
import torch

from .. import kernel_cache
from ..disk import DiskStats, code_cache_enabled, entry_path, evict, max_bytes, touch, write_parts_atomically
from .state import key_of

ENABLED = True
FOLDER = "packed"
MAGIC = b"schedlang-packed 1\n"
ALIGN = 4096               # every block starts on a page: a tensor's data as aligned as torch.empty's
SAMPLE = 64                # bytes of each end of a source in the key text
WORDS = 1 << 16            # 8-byte words compared per step (512 KiB each side: the L2 holds both)


stats = DiskStats()        # loads: constants taken from disk


def enabled() -> bool:
    return ENABLED and kernel_cache.ENABLED and code_cache_enabled()


def storable(t) -> bool:
    """Whether a tensor's bytes are its values, in order (what an entry stores and compares)."""
    return (type(t) in (torch.Tensor, torch.nn.Parameter) and t.device.type == "cpu" and t.layout == torch.strided
            and t.is_contiguous() and not t.is_neg() and not t.is_conj() and not t.is_quantized)


def can_store(spec, state: Dict[str, object], value=None) -> bool:
    """Whether an entry holds the constant of spec (made from state; value: the constant);
    never a folded value (const_fold.py: computed by torch ops, not by a packing rule)."""
    return spec.kind != "fold" and (value is None or storable(value)) \
        and all(s is None or storable(state[s]) for s in spec.sources)


def _bytes(t) -> np.ndarray:
    """The bytes of a storable tensor, a uint8 numpy view (no copy)."""
    return t.detach().reshape(-1).view(torch.uint8).numpy()


def key_text(specs: Dict[str, object], state: Dict[str, object]) -> Optional[str]:
    """The key of the entry of these constants (prepack.PackSpec by name) made from state,
    or None when no constant can be stored."""
    from ..kernel_cache import versions
    from ..target.llvm.jit import host_cpu
    names = [n for n, spec in specs.items() if can_store(spec, state)]
    if not names:
        return None
    sources = {}
    for n in names:
        for s in specs[n].sources:
            if s is not None and s not in sources:
                raw = _bytes(state[s])
                sample = hashlib.sha256(raw[:SAMPLE].tobytes() + raw[-SAMPLE:].tobytes()).hexdigest()[:16]
                sources[s] = [list(state[s].shape), str(state[s].dtype), sample]
    constants = {n: [specs[n].kind, specs[n].width, list(specs[n].sources), list(specs[n].params)] for n in names}
    return json.dumps({"versions": versions(), "torch": torch.__version__, "numpy": np.__version__,
                       "capability": torch.backends.cpu.get_cpu_capability(), "host": list(host_cpu()),
                       "constants": constants, "sources": sources}, sort_keys=True, default=str)


def load(key: str, specs: Dict[str, object], state: Dict[str, object]) -> Dict[str, torch.Tensor]:
    """name -> constant for each constant of the entry of key whose sources in state equal
    the ones it was made from (none where there is no usable entry)."""
    kernel_cache.wait_for(FOLDER, key)
    path = entry_path(FOLDER, key)
    try:
        with open(path, "rb") as f:
            found = _read_header(f, key)
            if found is None:
                stats.rejected += 1
                return {}
            header, base = found
            if os.fstat(f.fileno()).st_size != base + header["size"]:
                stats.rejected += 1
                return {}
            mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY) if header["size"] else None
    except (OSError, ValueError):
        return {}
    same: Dict[str, bool] = {}

    def matches(source: str) -> bool:
        if source not in same:
            offset, nbytes = header["sources"][source]
            same[source] = _equal(_bytes(state[source]), np.frombuffer(mapped, np.uint8, nbytes, base + offset))
        return same[source]

    out = {}
    for name, (offset, shape, dtype, sources) in header["constants"].items():
        spec = specs.get(name)
        if spec is None or list(spec.sources) != sources or not all(s is None or matches(s) for s in sources):
            continue
        dtype = getattr(torch, dtype.split(".")[-1])
        numel = int(np.prod(shape, dtype=np.int64))
        out[name] = (torch.frombuffer(mapped, dtype=dtype, count=numel, offset=base + offset).view(shape)
                     if numel else torch.empty(shape, dtype=dtype))
    stats.loads += len(out)
    touch(path)
    return out


def store(key: str, specs: Dict[str, object], state: Dict[str, object], values: Dict[str, torch.Tensor]) -> None:
    """Write the entry of key: each storable constant of values and its sources' bytes (a
    failure to write is counted, never raised)."""
    names = [n for n, spec in specs.items() if can_store(spec, state, values[n])]
    blocks: List[np.ndarray] = []
    at = 0

    def place(raw: np.ndarray) -> int:
        nonlocal at
        offset = at
        blocks.append(raw)
        at = _aligned(at + raw.size)
        return offset

    sources: Dict[str, list] = {}
    constants: Dict[str, list] = {}
    for n in names:
        for s in specs[n].sources:
            if s is not None and s not in sources:
                raw = _bytes(state[s])
                sources[s] = [place(raw), raw.size]
        v = values[n]
        constants[n] = [place(_bytes(v)), list(v.shape), str(v.dtype), list(specs[n].sources)]
    header = {"key": key, "size": at, "sources": sources, "constants": constants}
    try:
        limit = max_bytes()
    except ValueError:
        limit = 0
    if limit and at > limit:          # it would evict everything else and still not fit
        return
    head = json.dumps(header).encode()
    prefix = MAGIC + struct.pack("<Q", len(head)) + head + hashlib.sha256(head).digest()
    parts = [prefix + bytes(_aligned(len(prefix)) - len(prefix))]
    for raw in blocks:
        parts.append(raw)
        if _aligned(raw.size) != raw.size:
            parts.append(bytes(_aligned(raw.size) - raw.size))
    path = entry_path(FOLDER, key)
    versions = {s: key_of(state[s]) for s in sources}

    def unchanged() -> bool:
        # a source written in place after it was packed (its version moves) may have been
        # copied half old, half new: no entry rather than one that answers a stale pack
        return all(key_of(state[s]) == v for s, v in versions.items())

    def write() -> None:
        try:
            if not write_parts_atomically(path, parts, mode=0o600, keep=unchanged):
                return
        except OSError:
            stats.failed += 1
            return
        stats.stores += 1
        if limit:
            evict(limit, keep=path)
    # behind the call inside kernel_cache.deferred() (a compiled module's calls): the first
    # call need not wait for hundreds of MB on disk (Llama's 1.6 GB: 3.3 s)
    kernel_cache.later(write, FOLDER, key)


def _aligned(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def _read_header(f, key: str):
    """(header, offset of the first block) of an open entry written for exactly key, or None."""
    start = f.read(len(MAGIC) + 8)
    if len(start) != len(MAGIC) + 8 or not start.startswith(MAGIC):
        return None
    (size,) = struct.unpack_from("<Q", start, len(MAGIC))
    head = f.read(size)
    digest = f.read(32)
    if len(head) != size or hashlib.sha256(head).digest() != digest:
        return None
    try:
        header = json.loads(head)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(header, dict) or header.get("key") != key:
        return None
    return header, _aligned(len(MAGIC) + 8 + size + 32)


def _equal(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two uint8 arrays hold the same bytes: the C library's memcmp (340 MB in ~0.03 s,
    one thread), else compared 8 bytes at a time, a block at a time (~0.045 s; np.array_equal's
    whole-array temporary would be fresh pages, ~2x the time)."""
    if a.size != b.size:
        return False
    memcmp = _memcmp()
    if memcmp is not None:
        return a.size == 0 or memcmp(a.ctypes.data, b.ctypes.data, a.size) == 0
    words = a.size // 8
    wa, wb = a[:words * 8].view(np.uint64), b[:words * 8].view(np.uint64)
    flags = np.empty(min(words, WORDS), dtype=bool)
    for lo in range(0, words, WORDS):
        hi = min(words, lo + WORDS)
        step = flags[:hi - lo]
        np.equal(wa[lo:hi], wb[lo:hi], out=step)
        if not step.all():
            return False
    return bool(np.array_equal(a[words * 8:], b[words * 8:]))


@lru_cache(maxsize=1)
def _memcmp():
    """The C library's memcmp through ctypes (the GIL released while it runs), or None."""
    import ctypes
    try:
        fn = ctypes.CDLL(None).memcmp
    except (OSError, AttributeError, TypeError):
        return None
    fn.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)
    fn.restype = ctypes.c_int
    return fn
