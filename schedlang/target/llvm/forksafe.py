"""Parallel loops after os.fork().

libgomp keeps a pool of worker threads once a parallel region has run; a child forked
after that has the pool's state but not its threads, and its first GOMP_parallel waits
for them forever (plain os.fork and fork-based multiprocessing alike, TOOLCHAIN.md). So
a child forked after the parent ran a parallel loop runs its parallel loops serially:
every parallel launch in the generated code first reads the process-wide flag
`sl.serial_only` (a global of this module, bound into the JIT by name) and calls the loop
body directly when it is set. The child warns once, at its first call of a module with
parallel loops. Spawn or forkserver workers start clean and keep full parallelism.
"""
from __future__ import annotations

import ctypes
import os
import threading
import warnings

import llvmlite.binding as llvm

SERIAL_FLAG = "sl.serial_only"     # the symbol's name in the generated code

_serial_only = ctypes.c_int32(0)
_library_flags = []                # the flags of loaded shared libraries (each defines its own copy)
_lock = threading.Lock()
_parallel_ran = False              # a parallel loop has been launched in this process
_warn_pending = False              # a forked child that has not warned yet


def bind_flag() -> None:
    """Make the flag's address known to the JIT (idempotent)."""
    llvm.add_symbol(*flag_symbol())


def flag_symbol():
    """(name, address) of the process's flag, for a JIT told symbols one library at a time (orc.py)."""
    return SERIAL_FLAG, ctypes.addressof(_serial_only)


def add_library_flag(address: int) -> None:
    """A loaded library's own copy of the flag (export_library defines one in each library, so
    that it loads without this process's symbol): set it with ours, now and after a fork."""
    flag = ctypes.c_int32.from_address(address)
    flag.value = _serial_only.value
    _library_flags.append(flag)


def serial_only() -> bool:
    return bool(_serial_only.value)


def before_parallel_call() -> None:
    """Called before a module with parallel loops runs: record that libgomp's pool may now
    exist, and in a forked child warn (once) that its parallel loops run serially."""
    global _parallel_ran, _warn_pending
    _parallel_ran = True
    if _warn_pending:
        with _lock:
            if _warn_pending:
                _warn_pending = False
                warnings.warn("schedlang: this process was forked after its parent ran parallel loops; OpenMP cannot "
                              "start threads here, so parallel loops run serially (use the 'spawn' or 'forkserver' "
                              "start method for full speed)", RuntimeWarning, stacklevel=3)


def _after_fork_in_child() -> None:
    global _lock, _warn_pending
    _lock = threading.Lock()       # a lock held by another parent thread stays held in the child
    if _parallel_ran:
        _serial_only.value = 1
        for flag in _library_flags:
            flag.value = 1
        _warn_pending = True


os.register_at_fork(after_in_child=_after_fork_in_child)
