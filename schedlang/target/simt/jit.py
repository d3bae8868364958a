"""Whether the SIMT engine's race check and profile use their numba-compiled kernels
(jit_kernels.py) or the numpy code (races.py, profile.py: the reference; both give the same
results, tests/target/simt/test_jit.py checks it).

The kernels are used where numba is installed, unless SCHEDLANG_SIMT_JIT=0 (read at each
call, so a test may set it), and only once one checker (a chunk's race check, a kernel's
global writes or profile) has checked WARMUP_ELEMENTS accessed elements with numpy: importing
numba and loading its cached machine code costs about two CPU seconds, which a small kernel
(a test's) never wins back and a large one (a 512^3 GEMM checks some 10^8 elements) does
many times over. Compiled code is cached (numba's cache=True, in the package's __pycache__):
the first process of a new install compiles it once (about 12 CPU s on a Zen 1)."""
from __future__ import annotations

import functools
import os

ENV = "SCHEDLANG_SIMT_JIT"
WARMUP_ELEMENTS = 1 << 23


class Warmup:
    """One checker's choice: numpy until it has checked WARMUP_ELEMENTS elements, then the
    kernels where they can be used."""

    def __init__(self):
        self.checked = 0

    def kernels(self, elements: int):
        """jit_kernels, to check an access of `elements` elements with; None: use numpy (numba
        is missing, SCHEDLANG_SIMT_JIT=0, or this checker is still warming up)."""
        if self.checked < WARMUP_ELEMENTS:
            self.checked += elements
            return None
        if os.environ.get(ENV, "1") == "0":
            return None
        return _load()


@functools.lru_cache(maxsize=None)
def _load():
    try:
        from . import jit_kernels       # lazy: numba is an optional, heavy import
    except (ImportError, RuntimeError):     # (RuntimeError: numba finds no folder to cache compiled code in)
        return None
    return jit_kernels
