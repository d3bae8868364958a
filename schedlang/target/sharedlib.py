"""Load a shared library from bytes already checked (target/elf.py), never by its path.

dlopen answers a path, or a file it has seen, with the library it already loaded: a module
re-exported to the same path would run the old code. So the checked bytes are loaded from
a private copy of their own (an anonymous memory file, kept open with its library, else a
fresh private temporary file, unlinked once loaded), which also means the file cannot
change between the check and the load. Equal bytes share one handle, so loading a file again and again holds one
library, not one per load.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import tempfile
import threading
from typing import Callable, Dict, Optional

_HANDLES: Dict[str, ctypes.CDLL] = {}
_lock = threading.Lock()


def _after_fork_in_child() -> None:
    global _lock
    _lock = threading.Lock()       # a lock held by another parent thread stays held in the child


os.register_at_fork(after_in_child=_after_fork_in_child)


def load_bytes(data: bytes, on_first_load: Optional[Callable[[ctypes.CDLL], None]] = None) -> ctypes.CDLL:
    """The library whose file contents are data (a handle shared by equal contents);
    on_first_load(lib) runs once, when these contents are loaded for the first time."""
    key = hashlib.sha256(data).hexdigest()
    with _lock:
        lib = _HANDLES.get(key)
        if lib is None:
            _keep_copy(data, key[:16])      # the memory file's name, as perf shows it
            lib = _HANDLES[key] = _dlopen_copy(data, key[:16])
            if on_first_load is not None:
                on_first_load(lib)
        return lib


def _keep_copy(data: bytes, name: str) -> None:
    """With SCHEDLANG_LIBRARY_DIR set, a copy of the library in that folder under the name its
    memory file has (schedlang-<name>.so): a profiler sampling the process (perf) sees the
    loaded file as deleted, and reads its symbols from the copy (benchmarks/model_perf.py)."""
    folder = os.environ.get("SCHEDLANG_LIBRARY_DIR")
    if folder:
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, f"schedlang-{name}.so"), "wb") as f:
            f.write(data)


def _dlopen_copy(data: bytes, name: str) -> ctypes.CDLL:
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create(f"schedlang-{name}.so", os.MFD_CLOEXEC)
        try:
            _write_all(fd, data)
            # The memory file stays open with its library: dlopen also matches a library by
            # the name it was given, and a reused fd number would name the old one.
            return ctypes.CDLL(f"/proc/self/fd/{fd}")
        except OSError:        # no /proc, or memory files may not be mapped executable here
            os.close(fd)
    fd, path = tempfile.mkstemp(prefix=f"schedlang-{name}-", suffix=".so")    # 0600, a name of its own
    try:
        _write_all(fd, data)
        os.close(fd)
        fd = -1
        return ctypes.CDLL(path)
    finally:
        if fd >= 0:
            os.close(fd)
        os.unlink(path)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
