"""Files schedlang writes: the per-user cache folder, and whole-file writes that a
concurrent reader sees complete or not at all.

Caches live in $SCHEDLANG_CACHE_DIR, else $XDG_CACHE_HOME/schedlang, else
~/.cache/schedlang (never a shared temp folder, where anyone can plant a folder or a file
before us). A cache folder is used only if it is a directory owned by this user that no
group or other user may write; otherwise a fresh private temporary folder is used for this
process, with a warning. Point SCHEDLANG_CACHE_DIR at a folder of your own (a test
session's, a CI cache) to start cold or to share a warm cache between runs.
"""
from __future__ import annotations

import os
import stat
import tempfile
import warnings
from pathlib import Path
from typing import Dict

ENV = "SCHEDLANG_CACHE_DIR"
_fallback: Dict[str, Path] = {}       # unsafe folder -> the private folder used instead


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
    path = os.path.abspath(path)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=os.path.basename(path) + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, mode & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
