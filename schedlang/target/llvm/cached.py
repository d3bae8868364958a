"""CachedModule: a built CPU module brought back from the on-disk kernel cache
(schedlang/kernel_cache.py) — the shared library export_library wrote, loaded with no
lowering or LLVM code generation, plus the text of every level the build kept, so that it
answers mod.ir, get_source() and export_library() as the module sl.build returned did."""
from __future__ import annotations

from typing import Dict

from ...disk import write_atomically
from ..target import Target
from .loaded import LoadedModule


class CachedModule(LoadedModule):
    """A module from the kernel cache: called, checked and timed as the built one."""

    def __init__(self, name: str, library: bytes, target: Target, texts: Dict[str, str]):
        super().__init__(name, library)
        self.target = target          # the build's resolved target (the library stores its options)
        self.ir = dict(texts)
        self._source = self.ir.get("llvm")
        self._library = library

    def get_source(self, fmt: str = "ll") -> str:
        """"ll" and "ll.opt" as built; "asm" is generated again from "ll.opt" (on demand only)."""
        if fmt == "ll" and self._source is not None:
            return self._source
        if fmt == "ll.opt" and "llvm.opt" in self.ir:
            return self.ir["llvm.opt"]
        if fmt in ("asm", "s") and "llvm.opt" in self.ir:
            import llvmlite.binding as llvm
            from .jit import target_machine
            return target_machine(self.target.cpu, self.target.features).emit_assembly(
                llvm.parse_assembly(self.ir["llvm.opt"]))
        raise ValueError(f"unknown source format {fmt!r}; use 'll', 'll.opt' or 'asm'")

    def export_library(self, path: str) -> None:
        """Write the library this module was loaded from (what export_library wrote)."""
        write_atomically(path, self._library)
