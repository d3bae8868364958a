"""C functions that JIT code calls by name (call_pure_extern, libm per lane): libm is
loaded into the JIT's symbol search, and a name that resolves nowhere is refused when
the code is generated, not when the JIT links it."""
from __future__ import annotations

import ctypes.util
from functools import lru_cache

import llvmlite.binding as llvm


@lru_cache(maxsize=1)
def _load_libm() -> None:
    path = ctypes.util.find_library("m") or "libm.so.6"
    try:
        llvm.load_library_permanently(path)
    except RuntimeError:
        pass   # a static libm: its symbols are in the process, found through the JIT engine


def check_symbol(name: str) -> None:
    """Raise ValueError unless the C function `name` can be linked by the JIT."""
    _load_libm()
    if llvm.address_of_symbol(name) is None:
        raise ValueError(f"call_pure_extern: the C function '{name}' is not found in this process or libm; "
                         "the llvm target can call functions of the C math library (expf, log10, ...) or of "
                         "libraries loaded with llvmlite's load_library_permanently")
