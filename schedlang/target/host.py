"""The host CPU as LLVM reports it: its name, its feature string, and the widest vector register
a feature string enables. Every backend that runs on the host asks here (llvm resolves "llvm" to
this CPU, c sizes its vectors by it), so one fact of the machine has one detection."""
from __future__ import annotations

import threading
from functools import lru_cache
from typing import Tuple

import llvmlite.binding as llvm

_lock = threading.Lock()
_initialized = False


def init_llvm() -> None:
    """Initialise LLVM's native target, printer and parser once per process."""
    global _initialized
    with _lock:
        if not _initialized:
            # llvmlite 0.50: llvm.initialize() raises; initialise the pieces one by one.
            llvm.initialize_native_target()
            llvm.initialize_native_asmprinter()
            llvm.initialize_native_asmparser()
            _initialized = True


@lru_cache(maxsize=1)
def host_cpu() -> Tuple[str, str]:
    """(cpu name, feature string) of this machine; the features matter more than the
    name, which LLVM sometimes reports as an older model."""
    init_llvm()
    return llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten()


def switched_on(features: str) -> set:
    """The features a flat feature string ("+avx2,-avx512f,...") switches on."""
    return {f[1:] for f in features.split(",") if f.startswith("+")}


def vector_bits_of(features: str) -> int:
    """The widest vector register a flat feature string enables (x86 names)."""
    on = switched_on(features)
    return 512 if "avx512f" in on else 256 if on & {"avx", "avx2"} else 128


def host_vector_bits() -> int:
    """The widest vector register of this machine's CPU."""
    return vector_bits_of(host_cpu()[1])
