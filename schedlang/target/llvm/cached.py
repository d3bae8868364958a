"""CachedModule: a built CPU module brought back from the on-disk kernel cache
(schedlang/kernel_cache.py) — the shared library export_library wrote, loaded with no
lowering or LLVM code generation, plus the text of every level the build kept, so that it
answers mod.ir, get_source() and export_library() as the module sl.build returned did.
The texts come compressed (zlib JSON) and are decompressed on the first use of mod.ir:
a model's run needs only the library."""
from __future__ import annotations

import json
import zlib
from typing import Dict, Optional, Union

from ...disk import write_atomically
from ..target import Target
from .loaded import LoadedModule


class CachedModule(LoadedModule):
    """A module from the kernel cache: called, checked and timed as the built one."""

    def __init__(self, name: str, library: bytes, target: Target, texts: Union[Dict[str, str], bytes]):
        super().__init__(name, library)
        self.target = target          # the build's resolved target (the library stores its options)
        self._texts: Optional[Dict[str, str]] = dict(texts) if isinstance(texts, dict) else None
        self._packed_texts = texts if isinstance(texts, bytes) else None
        self._library = library

    @property
    def ir(self) -> Dict[str, str]:
        """Level name -> text, as the build kept them."""
        if self._texts is None:
            self._texts = json.loads(zlib.decompress(self._packed_texts)) if self._packed_texts else {}
            self._packed_texts = None
        return self._texts

    @ir.setter
    def ir(self, value) -> None:        # LoadedModule's __init__ sets it empty: the texts come from the cache
        pass

    def get_source(self, fmt: str = "ll") -> str:
        """"ll" and "ll.opt" as built; "asm" is generated again from "ll.opt" (on demand only)."""
        if fmt == "ll" and "llvm" in self.ir:
            return self.ir["llvm"]
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
