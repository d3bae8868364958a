"""Stage "jit" of a module rendered as several LLVM modules (split.py): each one compiled to an
object on its own thread (private.py), the objects linked in memory by LLVM's ORC JIT.

MCJIT takes one object per engine (jit.link_modules says why), so a split module used to be
linked into one LLVM module and compiled on one thread after all of them were optimised:
ResNet-50's 0.6 s of code generation came last, with the second core idle. LLJIT links
several objects into one library as a linker would (each object's GOT its own), so each
module's code is generated on the worker that optimised it, while the next ones are
rendered. The objects are the position-independent ones export_library links (library.py
takes them all), so the kernel cache stores the module without generating code again.

Symbols the generated code reads from this process come from its loaded libraries (libgomp,
libm, extern functions' libraries) and the two that the JIT is told by name (llvm.add_symbol):
the fork flag (forksafe.py) and the extern-call trampoline (packed.py).
"""
from __future__ import annotations

import itertools
import re
import threading
from typing import Callable, Dict, Iterable, List

import llvmlite.binding as llvm

from . import forksafe, packed
from .jit import _llvm_lock, target_machine

_names = itertools.count()
_jit_lock = threading.Lock()
_jit = None

# Functions a module exports: defined, and neither internal, private nor hidden (its entry and
# the entry's release function; kernel functions are hidden).
_EXPORTED = re.compile(r"^define (?!internal |private |hidden )[^@]*@([\w.$]+)\(", re.MULTILINE)


def _lljit():
    global _jit
    with _jit_lock:
        if _jit is None:
            _jit = llvm.create_lljit_compiler()
        return _jit


def exported_functions(text: str) -> List[str]:
    """The functions an LLVM IR text defines for callers outside it."""
    return _EXPORTED.findall(text)


def process_symbols() -> Dict[str, int]:
    """name -> address of the symbols this process gives the JIT by name."""
    symbols = dict([forksafe.flag_symbol()])
    trampoline = packed.trampoline_symbol()
    if trampoline is not None:
        symbols[trampoline[0]] = trampoline[1]
    return symbols


class LinkedObjects:
    """Machine code of several objects, linked in memory (what jit.CompiledModule is for one
    object): functions by name (exports: those callers need), the objects themselves for
    export_library, and the assembly of linked(), the optimised modules linked into one."""

    def __init__(self, objects: Iterable[bytes], exports: Iterable[str], linked: Callable[[], object],
                 cpu: str, features: str):
        self.objects = list(objects)
        self.object = None                   # several: export_library takes self.objects
        self._linked, self._cpu, self._features = linked, cpu, features
        builder = llvm.JITLibraryBuilder()
        for data in self.objects:
            builder.add_object_img(data)
        builder.add_current_process()
        for name, address in process_symbols().items():
            builder.import_symbol(name, address)
        for name in exports:
            builder.export_symbol(name)
        with _llvm_lock:
            self._library = builder.link(_lljit(), f"schedlang.{next(_names)}")

    def address(self, name: str) -> int:
        try:
            address = self._library[name]
        except KeyError:
            address = 0
        if not address:
            raise KeyError(f"function {name} is not in the compiled module")
        return address

    def global_address(self, name: str) -> int:
        return self.address(name)

    def assembly(self) -> str:
        """The optimised modules linked into one, compiled to assembly by a target machine of
        the objects' settings (as jit.CompiledModule.assembly compiles its module again)."""
        linked = self._linked()
        with _llvm_lock:
            return target_machine(self._cpu, self._features).emit_assembly(linked)
