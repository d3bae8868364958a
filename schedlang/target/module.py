"""BuiltModule: what the module of every backend shares — its target, name, argument
buffers and which are outputs, the size variables of symbolic shapes (a SizeBinder), the
text of every level and stage (ir), get_source and export_library."""
from __future__ import annotations

from typing import Dict, Sequence

from ..kernel.nodes import KernelModule
from ..kernel.sizes import symbolic_buffers, symbolic_extents
from .shapes import SizeBinder
from .target import Target


class BuiltModule:
    """Base of the modules that Backend.build returns."""

    def __init__(self, kernel_ir: KernelModule, is_output: Sequence[bool], target: Target, texts: Dict[str, str]):
        self.target = target
        self.name = kernel_ir.name
        self.params = list(kernel_ir.params)
        self._is_output = list(is_output)
        self.ir = dict(texts)
        self._sizes = (SizeBinder(self.params, kernel_ir.sizes, symbolic_buffers(kernel_ir),
                                  symbolic_extents(kernel_ir), kernel_ir.size_args, kernel_ir.size_checks)
                       if kernel_ir.sizes else None)

    def get_source(self, fmt: str) -> str:
        """The generated code in a format the backend names."""
        raise NotImplementedError(f"the {self.target.kind} target keeps no source")

    def export_library(self, path: str) -> None:
        """Write the module as a shared library that sl.load_module(path) loads."""
        raise NotImplementedError(f"the {self.target.kind} target cannot export a shared library; "
                                  "export_library is the llvm (CPU) target's")
