"""Calls from JIT code into registered Python functions (extern stages).

Generated code calls `sl_call_packed(call_id, buffer_pointers)`: one ctypes callback,
bound to that symbol for the JIT. call_id names a descriptor recorded at code generation
(the function's name and, per argument, a buffer's shape and dtype or a constant
scalar); the callback rebuilds numpy views of the buffers and calls the function. An
exception cannot cross the C frames: it is recorded per thread and re-raised by the
module call once the generated code returns.
"""
from __future__ import annotations

import ctypes
import threading
from typing import Dict, List, Tuple

import llvmlite.binding as llvm
import numpy as np

from ...expr.nodes import Buffer
from ...loop.nodes import CallPacked
from ...packed import get_global_func

SYMBOL = "sl_call_packed"
_descriptors: List[Tuple[str, Tuple]] = []
_ids: Dict[Tuple, int] = {}
_lock = threading.Lock()
_pending = threading.local()


def descriptor_id(call: CallPacked) -> int:
    """A process-wide id for the call's function name and argument layout."""
    specs = tuple(("buffer", tuple(a.shape), a.dtype.numpy.str) if isinstance(a, Buffer) else ("scalar", a)
                  for a in call.args)
    key = (call.func, tuple(s + (type(s[1]).__name__,) if s[0] == "scalar" else s for s in specs))
    with _lock:
        if key not in _ids:
            _ids[key] = len(_descriptors)
            _descriptors.append((call.func, specs))
        install()
        return _ids[key]


def descriptor(call_id: int) -> Tuple[str, Tuple]:
    """(function name, argument specs) of a call id of this process (export_library saves them)."""
    return _descriptors[call_id]


def _call(call_id: int, argv: int) -> None:
    if not 0 <= call_id < len(_descriptors):
        record_error(RuntimeError(f"extern call id {call_id} is unknown in this process: the code was generated "
                                  "in another process, whose registry of extern calls this one does not have"))
        return
    call_descriptor(*_descriptors[call_id], argv)


def record_error(e: BaseException) -> None:
    """Keep the first exception of a call, for raise_pending in the calling thread."""
    if getattr(_pending, "error", None) is None:
        _pending.error = e


def call_descriptor(func: str, specs, argv: int) -> None:
    """Call the function registered as func (looked up now, by name) on numpy views of the
    buffers whose pointers argv holds; an exception is kept for raise_pending."""
    try:
        n = sum(1 for s in specs if s[0] == "buffer")
        pointers = (ctypes.c_void_p * max(n, 1)).from_address(argv)
        args, k = [], 0
        for spec in specs:
            if spec[0] == "scalar":
                args.append(spec[1])
                continue
            shape, dtype = spec[1], np.dtype(spec[2])
            nbytes = int(np.prod(shape)) * dtype.itemsize
            raw = (ctypes.c_char * nbytes).from_address(pointers[k])
            args.append(np.frombuffer(raw, dtype=dtype).reshape(shape))
            k += 1
        get_global_func(func)(*args)
    except BaseException as e:   # noqa: BLE001 — re-raised by the module call
        record_error(e)


CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_void_p)
_TRAMPOLINE = CALLBACK(_call)
_installed = False


def install() -> None:
    """Bind the JIT symbol to the callback (once per process)."""
    global _installed
    if not _installed:
        llvm.add_symbol(SYMBOL, ctypes.cast(_TRAMPOLINE, ctypes.c_void_p).value)
        _installed = True


def trampoline_symbol():
    """(name, address) of the JIT symbol extern calls go through, once install() bound it; else None."""
    return (SYMBOL, ctypes.cast(_TRAMPOLINE, ctypes.c_void_p).value) if _installed else None


def raise_pending() -> None:
    """Re-raise the first exception a registered function raised during the last call."""
    error = getattr(_pending, "error", None)
    if error is not None:
        _pending.error = None
        raise error
