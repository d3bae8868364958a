"""The c backend: portable C99 for the CPU (TVM's "c" target), compiled by the system C compiler.

Stages after Kernel IR, in order, each one's text kept in mod.ir:
  "c"    Kernel IR rendered as C99 (codegen.py); mod.get_source() returns it
  "cc"   the shared library from the system C compiler, cached by source and flags (compile.py)
mod(*arrays) calls it through ctypes; mod.export_library(path) writes the library, which
sl.load_module(path) loads.
"""
from __future__ import annotations

from typing import Dict, Sequence

from ...kernel.flatten import flatten_buffers
from ...kernel.lower import ADD_SIZE_PARAMS, SPLIT_KERNELS
from ...kernel.nodes import KernelModule
from ...kernel.unroll import unroll_loops
from ...kernel.widen import widen_index_arith
from ...loop.simplify import simplify_stmt
from ..backend import BuildState, HostCPUBackend, run_stages
from ..host import host_vector_bits
from ..shapes import check_index_width
from ..target import Target
from .codegen import render_c
from .compile import build_library
from .module import CModule, load_module, module_info
from .vector_loops import serialize_vector_loops


class CBackend(HostCPUBackend):
    """TVM's "c" target: C99 compiled by the system C compiler, run on the host CPU (so the
    auto-scheduler and the torch frontend use the CPU sketch rules and default schedules)."""
    kind = "c"
    source_title = "C"

    def resolve_target(self, target: Target) -> Target:
        """vector_bits of the host CPU as LLVM reports it, as the llvm target's (for the schedules that
        size vectors by it); 128 for a named cpu, whose vectors the C compiler chooses."""
        if target.vector_bits is not None:
            return target
        return target.with_options(vector_bits=host_vector_bits() if not target.cpu else 128)

    def kernel_passes(self, target: Target):
        """The Kernel IR passes, in order."""
        return [
            ("flatten_buffers", flatten_buffers),     # one flat index per access
            ("unroll_loops", unroll_loops),
            ("simplify", simplify_stmt),
            ("widen_index_arith", widen_index_arith),   # int64 where int32 terms may wrap
            ("serialize_vector_loops", serialize_vector_loops),   # plain loops: the C compiler vectorizes
            ("split_kernels", SPLIT_KERNELS),         # a parallel outer loop becomes the CPU worker axis
            ("add_size_params", ADD_SIZE_PARAMS),
        ]

    def stages(self, target: Target):
        return [
            ("c", render_stage),     # Kernel IR rendered as C99 (codegen.py)
            ("cc", compile_stage),   # the shared library, from the system C compiler (compile.py)
        ]

    def build(self, kernel: KernelModule, target: Target, is_output: Sequence[bool],
              texts: Dict[str, str], trace=None) -> CModule:
        check_index_width(kernel)
        st = BuildState(kernel, target, texts)
        st.is_output = list(is_output)
        st = run_stages(self.stages(target), st, trace)
        return CModule(kernel, is_output, target, st.texts, st.library)

    def load_module(self, path: str):
        return load_module(path)


def render_stage(st: BuildState) -> str:
    return render_c(st.kernel, st.target, module_info(st.kernel, st.is_output, st.target))


def compile_stage(st: BuildState) -> None:
    st.library_path, st.library = build_library(st.texts["c"], st.target)


BACKEND = CBackend()
