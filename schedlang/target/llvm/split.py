"""A Kernel IR module of many kernels rendered as several LLVM modules, so that LLVM's work
on one overlaps the rendering of the next (backend.py: compile_split).

A model part (ResNet-50: 54 kernels, 30 distinct kernel functions) is one Kernel IR module;
as one LLVM module its O3 pipeline and JIT (about a third of its build) could start only
after the whole text was rendered. Rendered as a few kernels per module (their functions
and parallel loop bodies) and one module of the entry function, which declares the kernels
it calls, each module goes to LLVM's O3 pipeline as soon as it is rendered; the optimised
modules are then linked into one for the JIT (jit.link_modules says why not one engine of
several modules). The kernel functions are hidden, not internal, so that the entry's
module can call them before the link (hidden: not exported from a shared library). The
machine code of each kernel is the same as in one module but for the entry: O3 no longer
inlines the kernel functions (called once each) into it.

Small modules stay one LLVM module (MIN_KERNELS): their text, the one tests and
tests/lowering/static_llvm_digest.py pin, is unchanged. So does a module with bounds
checks (its report globals are defined in the module once).
"""
from __future__ import annotations

import re
from typing import Callable, List, Optional

from ...errors import InternalError
from ...kernel.nodes import KernelModule
from ..target import Target
from .codegen import _entry_function, _kernel_functions, module_state, module_text

# A module with fewer distinct kernel functions is rendered as one LLVM module. 8, where it was
# 16 before its modules were optimised and compiled on two threads (private.py): GPT-2's cold
# compile 2.45 -> 2.14 s, Llama's 1.78 -> 1.64 (benchmarks/compile.py, 2-core Zen 4).
MIN_KERNELS = 8
# Kernel functions per LLVM module: small, so that LLVM starts early; one module's fixed
# cost (an O3 pipeline and a code generator made and run) is ~5 ms of CPU.
KERNELS_PER_MODULE = 4

# Joins the texts of the modules of one build in mod.ir["llvm"] ("llvm.opt" is the linked module).
MODULE_BREAK = "; ---- schedlang: next module ----\n"

_DEFINITION = re.compile(r"define internal void @([\w.]+)\((.*)\) #0 \{")


def splits(m: KernelModule, target: Target) -> bool:
    """Whether m is rendered as several LLVM modules (render_llvm_split)."""
    if target.bounds_check:
        return False
    distinct = sum(1 for j in range(len(m.kernels)) if j >= len(m.copies) or m.copies[j] is None)
    return distinct >= MIN_KERNELS


def render_llvm_split(m: KernelModule, target: Target, triple: str, datalayout: str, parallel_runtime: bool,
                      emit: Callable[[str], None], per_module: Optional[int] = None) -> List[str]:
    """Render m as LLVM modules of per_module kernel functions each, then one of the entry
    function, calling emit(text) on each as soon as it is complete; returns the buffer names
    that bounds-check reports refer to by id (as render_llvm)."""
    per_module = per_module or KERNELS_PER_MODULE
    module = module_state(m, target, triple, parallel_runtime)
    declarations: List[str] = []
    cut = 0

    def flush() -> None:
        nonlocal cut
        emit(module_text(module, m.name, triple, datalayout, module.functions[cut:]))
        cut = len(module.functions)

    def rendered() -> None:
        text = module.functions[-1]
        found = _DEFINITION.match(text)
        if found is None:
            raise InternalError(f"a kernel function renders as {text.splitlines()[0]!r}")
        module.functions[-1] = text.replace("define internal", "define hidden", 1)
        types = ", ".join(p.rsplit(" %", 1)[0] for p in found.group(2).split(", "))
        declarations.append(f"declare hidden void @{found.group(1)}({types})")
        if len(declarations) % per_module == 0:
            flush()

    calls = _kernel_functions(module, m, rendered)
    if cut < len(module.functions):
        flush()
    entry = _entry_function(module, m, calls)
    module.declarations.update(declarations)
    module.definitions.clear()        # the entry calls no math library function
    emit(module_text(module, m.name, triple, datalayout, [entry]))
    return list(module.buffer_names)
