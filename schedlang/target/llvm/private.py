"""LLVM on threads of their own: each module parsed, optimised and compiled to an object (and
written out as bitcode) in an LLVM context that only its thread uses, so that two of them
run at once.

llvmlite lets one thread into LLVM at a time: one lock (ffi.lib._lock) around every call,
as its modules live in LLVM's global context, which is not thread-safe. LLVM itself is
thread-safe across contexts: a thread whose context, module, target machine and pass
builder are all its own needs no lock. A thread inside own_llvm() calls llvmlite without
taking that lock (the lock's class is switched once, for this process, to one that lets
such threads by); every other thread takes it as before. The objects are linked in memory
(orc.py); the bitcode is read into the global context only for the "llvm.opt" text and the
assembly (backend.compile_split).

Measured on a split ResNet-50 build (benchmarks/compile.py, 2-core Zen 4): the O3 pipeline
of its ~20 modules took 1.5 s on the one worker thread, most of it after the rendering had
ended, and the JIT of the linked module 0.6 s more, with the second core idle; on two
threads, code generation included, the cold compile took 15 % less
(benchmarks/results-compile-zen4-avx512.txt). The optimised modules are the same: read back,
they print the same but for use-list order (the `; preds` comments) and attribute numbering,
which bitcode does not keep.

Where llvmlite's lock is not the object this module knows (another llvmlite), supported()
is False and the O3 pipeline stays on one thread in the global context.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import llvmlite.binding as llvm

from ..host import init_llvm
from .jit import _llvm_lock, link_modules, run_o3, target_machine

_thread = threading.local()
_install_lock = threading.Lock()
_installed: Optional[bool] = None
_pool_lock = threading.Lock()
_machines: Dict[Tuple[str, str], List[object]] = {}      # (cpu, features) -> target machines not in use


def _own() -> bool:
    return getattr(_thread, "own", False)


def supported() -> bool:
    """Whether threads can run LLVM in contexts of their own (installs the lock switch once)."""
    global _installed
    with _install_lock:
        if _installed is None:
            _installed = _install()
        return _installed


def _install() -> bool:
    try:
        from llvmlite.binding import ffi
        lock = ffi.lib._lock
        base = type(lock)
    except (ImportError, AttributeError):
        return False
    if base.__name__ == "_OwnContextAwareLock":
        return True
    if base.__name__ != "_LLVMLock" or not hasattr(base, "__enter__") or not hasattr(lock, "_lock"):
        return False

    class _OwnContextAwareLock(base):
        """llvmlite's lock, passed by a thread working in its own LLVM context."""

        def __enter__(self):
            if _own():
                return None
            return base.__enter__(self)

        def __exit__(self, *exc):
            if _own():
                return None
            return base.__exit__(self, *exc)

    lock.__class__ = _OwnContextAwareLock
    return True


@contextmanager
def own_llvm():
    """This thread calls llvmlite without its lock: only on objects of contexts it made."""
    if not supported():
        raise RuntimeError("llvmlite's lock could not be switched: LLVM runs on one thread at a time")
    before = _own()
    _thread.own = True
    try:
        yield
    finally:
        _thread.own = before


@contextmanager
def _machine(cpu: str, features: str):
    """A target machine for (cpu, features) that no other thread uses meanwhile (a target
    machine makes its subtargets lazily, unlocked). Kept for the next call: made in a
    context-free way, it belongs to no thread, and it is not disposed at a thread's end
    (which would take llvmlite's lock)."""
    key = (cpu, features)
    with _pool_lock:
        free = _machines.setdefault(key, [])
        tm = free.pop() if free else None
    if tm is None:
        tm = target_machine(cpu, features)       # the JIT's settings: the objects are the JIT's
    try:
        yield tm
    finally:
        with _pool_lock:
            _machines[key].append(tm)


def compile_to_object(text: str, cpu: str, features: str,
                      out_of_line: Optional[Callable[[str], bool]] = None) -> Tuple[bytes, bytes]:
    """jit.optimize and the JIT's code generation, in a context of this thread's own, without
    llvmlite's lock: (the optimised module as bitcode, written before code generation, which
    changes the module in place (CodeGenPrepare, loop strength reduction); its
    position-independent object code, as jit.CompiledModule's: orc.py links the objects)."""
    init_llvm()
    with own_llvm():
        context = llvm.create_context()
        mod = None
        try:
            mod = llvm.parse_assembly(text, context=context)
            with _machine(cpu, features) as tm:
                run_o3(mod, tm, out_of_line)
                bitcode = mod.as_bitcode()
                return bitcode, tm.emit_object(mod)
        finally:
            if mod is not None:
                mod.close()
            context.close()


def in_global_context(bitcodes: Sequence[bytes]):
    """compile_to_object's optimised modules read into LLVM's global context and linked into
    one (the "llvm.opt" text, the assembly)."""
    with _llvm_lock:
        read = []
        for data in bitcodes:
            mod = llvm.parse_bitcode(data)
            mod.name = "<string>"         # as parse_assembly names a module (its "; ModuleID" line)
            read.append(mod)
        return link_modules(read)
