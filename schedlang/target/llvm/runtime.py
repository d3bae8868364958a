"""The parallel runtime: OpenMP's libgomp, loaded into the process so JIT code can call
GOMP_parallel (about 1 µs a launch). Without it, parallel loops run serially."""
from __future__ import annotations

import ctypes
import ctypes.util
import glob
import importlib.util
import os
from functools import lru_cache
from typing import Optional

import llvmlite.binding as llvm


def _candidates():
    yield "libgomp.so.1"
    found = ctypes.util.find_library("gomp")
    if found:
        yield found
    try:   # PyTorch wheels bundle one
        spec = importlib.util.find_spec("torch")
        if spec and spec.origin:
            yield from sorted(glob.glob(os.path.join(os.path.dirname(spec.origin), "lib", "libgomp*.so*")))
    except (ImportError, ValueError):
        pass


@lru_cache(maxsize=1)
def openmp_library() -> Optional[str]:
    """Load libgomp for the JIT; returns its path, or None when it cannot be found."""
    for path in _candidates():
        try:
            ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
            llvm.load_library_permanently(path)
            return path
        except OSError:
            continue
    return None
