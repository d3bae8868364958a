"""Files schedlang writes: the per-user cache folder, and whole-file writes that a
concurrent reader sees complete or not at all.

Caches live in $SCHEDLANG_CACHE_DIR, else $XDG_CACHE_HOME/schedlang, else
~/.cache/schedlang (never a shared temp folder, where anyone can plant a folder or a file
before us). A cache folder is used only if it is a directory owned by this user that no
group or other user may write; otherwise a fresh private temporary folder is used for this
process, with a warning. Point SCHEDLANG_CACHE_DIR at a folder of your own (a test
session's, a CI cache) to start cold or to share a warm cache between runs.

A file schedlang reads back ends with a checksum trailer (with_checksum / checksum); a
cache entry (write_entry / read_entry) also stores the full text of its key, compared on
reading, so an entry is used for exactly the key it was written for.

The entries of every cache folder together are kept under a size cap,
$SCHEDLANG_CACHE_MAX_BYTES (bytes, or with a K/M/G suffix; default 4G; 0: no cap): each
write_entry removes the least recently used entries beyond it (evict). Reading an entry
marks it used (its modification time is set to now), so the order is by last use across
processes. A process that still reads an entry another one removes keeps its open copy.
"""
from __future__ import annotations

import hashlib
import json
import os
import struct
import zlib
import stat
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Optional, Sequence, Tuple

ENV = "SCHEDLANG_CACHE_DIR"
TRAILER = b"\nschedlang-sha256:"     # + 64 hex digits of the bytes before it + "\n"
TRAILER_LEN = len(TRAILER) + 64 + 1
ENTRY_MAGIC = b"schedlang-cache-entry 1\n"
ENTRY_SUFFIX = ".entry"
CODE_CACHE_ENV = "SCHEDLANG_KERNEL_CACHE"      # "0": compiled code is neither stored nor loaded
MAX_BYTES_ENV = "SCHEDLANG_CACHE_MAX_BYTES"
DEFAULT_MAX_BYTES = 4 << 30
STALE_TMP_S = 3600      # a temporary file older than this was left by a writer that died
_fallback: Dict[str, Path] = {}       # unsafe folder -> the private folder used instead


@dataclass
class DiskStats:
    """A cache folder's counts: loads: entries used; stores: entries written; rejected: entries
    found but not usable (corrupt, truncated, another key); failed: stores that could not be
    written."""

    loads: int = 0
    stores: int = 0
    rejected: int = 0
    failed: int = 0


def cache_root() -> Path:
    """Where schedlang's caches live (not checked; cache_dir() checks)."""
    if os.environ.get(ENV):
        return Path(os.environ[ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "schedlang"


def unsafe_reason(path: Path):
    """Why a folder must not hold a cache of this user's (None when it may)."""
    try:
        link, st = os.lstat(path), os.stat(path)
    except OSError as e:
        return f"it cannot be read ({e.strerror})"
    if not stat.S_ISDIR(st.st_mode):
        return "it is not a directory"
    uid = os.getuid()
    if st.st_uid != uid or link.st_uid != uid:
        return f"it belongs to user id {st.st_uid if st.st_uid != uid else link.st_uid}, not to this user ({uid})"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"others may write in it (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def cache_dir(name: str) -> Path:
    """The checked folder of one cache (e.g. "cuda-shim"), created private if missing."""
    path = cache_root() / name
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        path.mkdir(mode=0o700, exist_ok=True)
    except OSError:
        pass                      # unsafe_reason says why it cannot be used
    why = unsafe_reason(path)
    if why is None:
        return path
    key = str(path)
    if key not in _fallback:
        _fallback[key] = Path(tempfile.mkdtemp(prefix=f"schedlang-{name}-"))
        warnings.warn(f"schedlang: not using the cache folder {path}: {why}; this process uses the private "
                      f"folder {_fallback[key]} instead (set {ENV} to a folder of your own)", RuntimeWarning,
                      stacklevel=2)
    return _fallback[key]


def _umask() -> int:
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1], 8) for line in f if line.startswith("Umask:"))
    except (OSError, StopIteration, ValueError):
        return 0o022


def write_atomically(path, data: bytes, mode: int = 0o755) -> None:
    """Write path whole: into a new file of the same folder, then renamed over path, so a
    reader (or a concurrent writer) never sees part of a file. mode is masked by the umask."""
    write_parts_atomically(path, [data], mode)


def write_parts_atomically(path, parts: Sequence, mode: int = 0o755,
                           keep: Optional[Callable[[], bool]] = None) -> bool:
    """write_atomically of the concatenation of parts (bytes-like objects: numpy arrays are
    written from their memory, never joined into one copy). keep: asked once every byte is
    written; False leaves no file (the parts changed while they were written). Returns
    whether the file was put in place."""
    path = os.path.abspath(path)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=os.path.basename(path) + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            for part in parts:
                f.write(part)
        if keep is not None and not keep():
            os.unlink(tmp)
            return False
        os.chmod(tmp, mode & ~_umask())
        os.replace(tmp, path)
        return True
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def with_checksum(data: bytes) -> bytes:
    """data followed by the trailer that checksum() verifies (a dynamic loader ignores bytes
    after a library's last header, so a library with it still loads)."""
    return data + TRAILER + hashlib.sha256(data).hexdigest().encode() + b"\n"


def checksum(data: bytes) -> Optional[bool]:
    """True when data ends with a trailer that matches it, False when the trailer does not
    match (the file changed after it was written), None when there is no trailer."""
    tail = data[-TRAILER_LEN:]
    if len(data) < TRAILER_LEN or not tail.startswith(TRAILER):
        return None
    return hashlib.sha256(data[:-TRAILER_LEN]).hexdigest().encode() == tail[len(TRAILER):-1]


# ---------------------------------------------------------------- cache entries
def code_cache_enabled() -> bool:
    """Whether compiled code (kernel_cache.py, NVRTC's output) is cached on disk: unless
    SCHEDLANG_KERNEL_CACHE=0 (read at each call, so a test may set it)."""
    return os.environ.get(CODE_CACHE_ENV, "1") != "0"


def entry_path(folder: str, key_text: str) -> Path:
    """The file of the entry for key_text in the cache folder `folder` (cache_dir(folder))."""
    return cache_dir(folder) / (hashlib.sha256(key_text.encode()).hexdigest()[:40] + ENTRY_SUFFIX)


def pack_entry(key_text: str, header: dict, payload: bytes) -> bytes:
    """An entry's bytes: ENTRY_MAGIC, the length and bytes of the header (zlib-compressed JSON
    holding the key text), the payload, a checksum trailer."""
    head = zlib.compress(json.dumps({"key": key_text, **header}).encode(), 1)
    return with_checksum(ENTRY_MAGIC + struct.pack("<Q", len(head)) + head + payload)


def unpack_entry(data: bytes, key_text: str) -> Optional[Tuple[dict, bytes]]:
    """(header, payload) of an entry's bytes when they are whole and were written for exactly
    key_text, else None."""
    if not data.startswith(ENTRY_MAGIC) or checksum(data) is not True:
        return None
    body, at = data[:-TRAILER_LEN], len(ENTRY_MAGIC) + 8
    if len(body) < at:
        return None
    (size,) = struct.unpack_from("<Q", body, len(ENTRY_MAGIC))
    if at + size > len(body):
        return None
    try:
        header = json.loads(zlib.decompress(body[at:at + size]))
    except (zlib.error, ValueError, UnicodeDecodeError):
        return None
    if not isinstance(header, dict) or header.get("key") != key_text:
        return None
    return header, body[at + size:]


def write_entry(folder: str, key_text: str, header: dict, payload: bytes) -> None:
    """Store an entry whole (write_atomically: concurrent readers and writers are safe), then
    keep the cache under its size cap (evict; never removing this entry)."""
    path = entry_path(folder, key_text)
    write_atomically(path, pack_entry(key_text, header, payload), mode=0o600)
    try:
        limit = max_bytes()
    except ValueError as e:       # a bad setting must not fail the build that stored
        warnings.warn(f"schedlang: {e}; the cache is not trimmed", RuntimeWarning, stacklevel=2)
        return
    evict(limit, keep=path)


def read_entry(folder: str, key_text: str) -> Tuple[Optional[Tuple[dict, bytes]], bool]:
    """((header, payload) or None, whether a file was there but unusable: corrupt, truncated
    or another key's)."""
    path = entry_path(folder, key_text)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None, False
    entry = unpack_entry(data, key_text)
    if entry is not None:
        touch(path)
    return entry, entry is None


def touch(path: Path) -> None:
    """Mark an entry used now (evict removes the least recently used first)."""
    try:
        os.utime(path)
    except OSError:               # removed meanwhile, or a read-only cache: the order is a hint only
        pass


# ---------------------------------------------------------------- the size cap
def max_bytes() -> int:
    """The cap on the bytes of all cache entries ($SCHEDLANG_CACHE_MAX_BYTES: an integer, or
    with a K, M or G suffix, powers of 1024; 0 means no cap)."""
    text = os.environ.get(MAX_BYTES_ENV, "").strip()
    if not text:
        return DEFAULT_MAX_BYTES
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1].upper(), 1)
    digits = text[:-1] if scale != 1 else text
    if not digits.isdigit():
        raise ValueError(f"{MAX_BYTES_ENV}={text!r} is not a size (bytes, or a number with K, M or G: 500M, 4G)")
    return int(digits) * scale


def all_entries():
    """(path, size, last use) of every entry in every cache folder, least recently used first."""
    found = []
    root = cache_root()
    for p in root.glob("*/*" + ENTRY_SUFFIX):
        try:
            st = p.stat()
        except OSError:           # removed by another process meanwhile
            continue
        found.append((p, st.st_size, st.st_mtime))
    return sorted(found, key=lambda e: e[2])


def evict(limit: int, keep: Optional[Path] = None) -> int:
    """Remove the least recently used entries of all cache folders until their bytes are at
    most limit (0: no cap), never keep; also temporary files older than STALE_TMP_S. Returns
    the number of entries removed."""
    for p in cache_root().glob("*/*.tmp"):
        try:
            if p.stat().st_mtime < time.time() - STALE_TMP_S:
                p.unlink()
        except OSError:
            pass
    if limit <= 0:
        return 0
    entries = all_entries()
    total = sum(size for _, size, _ in entries)
    removed = 0
    for path, size, _ in entries:
        if total <= limit:
            break
        if keep is not None and path == keep:
            continue
        try:
            path.unlink()
            removed += 1
        except FileNotFoundError:     # another process evicted it first
            pass
        except OSError:
            continue
        total -= size
    return removed


def folder_info(folder: str) -> Dict[str, object]:
    """{"path", "entries", "bytes"} of a cache folder."""
    path = cache_dir(folder)
    files = [p for p in path.glob("*" + ENTRY_SUFFIX) if p.is_file()]
    return {"path": str(path), "entries": len(files), "bytes": sum(_size(p) for p in files)}


def clear_folder(folder: str) -> int:
    """Remove every entry (and leftover temporary file) of a cache folder; the number of
    entries removed."""
    removed = 0
    for p in cache_dir(folder).iterdir():
        if p.is_file() and (p.suffix == ENTRY_SUFFIX or p.name.endswith(".tmp")):
            try:
                p.unlink()
                removed += p.suffix == ENTRY_SUFFIX
            except FileNotFoundError:      # another process removed it first
                pass
    return removed


def _size(p: Path) -> int:
    try:
        return p.stat().st_size
    except OSError:
        return 0
