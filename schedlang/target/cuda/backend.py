"""The cuda backend: NVIDIA GPUs, through CUDA C and NVRTC.

Stages after Kernel IR, in order, each one's text kept in mod.ir:
  "cuda"  Kernel IR rendered as CUDA C (codegen.py)
  "ptx"   NVRTC's PTX for the target's architecture (nvrtc.py); ptxas -v gives mod.ptxas_info
A GPU launch is not written yet; mod.emulate() runs the CUDA C on the CPU (shim.py).
"""
from __future__ import annotations

from typing import Dict, Sequence

from ...errors import LoweringError, ScheduleError
from ...kernel.lower import standard_passes
from ...kernel.nodes import KernelModule, LaunchKind
from ...loop.functor import StmtMutator, walk_stmts
from ...loop.nodes import VECTORIZED, SERIAL, Allocate, For, Stmt
from ...schedule.annotate import PARALLEL
from ...tensor.op import PlaceholderOp
from ..backend import Backend
from ..target import Target
from .codegen import render_cuda, threads_per_block
from .module import CUDAModule
from .nvrtc import compile_ptx, ptxas_info


class _SerialVectorLoops(StmtMutator):
    """Vectorized loops run as serial loops: GPU vector loads and stores come later."""

    def visit_For(self, s: For) -> Stmt:
        body = self.visit(s.body)
        if s.kind == VECTORIZED:
            return For(s.var, s.extent, body, SERIAL, s.thread_tag, s.pragmas)
        return s.with_body(body)


def serial_vector_loops(body: Stmt) -> Stmt:
    return _SerialVectorLoops().visit(body)


class CUDABackend(Backend):
    kind = "cuda"

    def check_schedule(self, schedule, target: Target) -> None:
        for st in schedule.stages:
            if isinstance(st.op, PlaceholderOp) or st.attach_type == "inline":
                continue
            for ivar, ann in st.annotations.items():   # (bind() itself refuses reduction axes)
                if ann.kind == PARALLEL:
                    raise ScheduleError("parallel", st.name, "parallel() is a CPU loop kind; the cuda target runs "
                                        "loops on GPU threads", axis=ivar.name,
                                        hint="bind the loop to blockIdx.x / threadIdx.x instead")

    def kernel_passes(self, target: Target):
        return [(name, serial_vector_loops) if name == "vectorize_loops" else (name, run)
                for name, run in standard_passes(target)]

    def stage_names(self, target: Target) -> Sequence[str]:
        return ("cuda", "ptx")

    def build(self, kernel: KernelModule, target: Target, is_output: Sequence[bool],
              texts: Dict[str, str]) -> CUDAModule:
        check_kernels(kernel, target)
        source = render_cuda(kernel)                             # "cuda"
        ptx = compile_ptx(source, target.arch, kernel.name)      # "ptx"
        info = ptxas_info(ptx, target.arch)
        return CUDAModule(kernel, is_output, target, {**texts, "cuda": source, "ptx": ptx}, info)


# CUDA's grid limits: x up to 2**31 - 1 blocks, y and z up to 65535.
MAX_GRID = {"blockIdx.x": 2 ** 31 - 1, "blockIdx.y": 65535, "blockIdx.z": 65535}


def shared_bytes(kernel) -> int:
    """Static shared memory of a kernel: every shared allocation, as if all were live at once."""
    return sum(s.buffer.size * s.buffer.dtype.bytes for s in walk_stmts(kernel.body)
               if isinstance(s, Allocate) and s.buffer.scope == "shared")


def check_kernels(kernel: KernelModule, target: Target) -> None:
    """Every kernel runs on a grid, within the target's launch limits."""
    for k in kernel.kernels:
        if not any(a.kind in (LaunchKind.BLOCK, LaunchKind.THREAD) for a in k.launch):
            raise ScheduleError("bind", None, f"kernel {k.name} has no loop bound to a GPU axis, so it would run "
                                "on a single GPU thread", hint="bind an outer loop to blockIdx.x and an inner one "
                                "to threadIdx.x: xo, xi = s[T].split(axis, factor=64); "
                                "s[T].bind(xo, sl.thread_axis('blockIdx.x')); "
                                "s[T].bind(xi, sl.thread_axis('threadIdx.x'))")
        n = threads_per_block(k)
        if n > target.max_threads_per_block:
            shape = " x ".join(f"{a.tag}={a.extent}" for a in k.launch if a.kind is LaunchKind.THREAD)
            raise LoweringError("kernel launch", f"kernel {k.name} has {n} threads a block ({shape}); "
                                f"{target.arch} allows at most {target.max_threads_per_block}: split the "
                                "thread-bound loops with a smaller factor, and bind the outer part to blockIdx")
        for a in k.launch:
            if a.tag in MAX_GRID and a.extent > MAX_GRID[a.tag]:
                raise LoweringError("kernel launch", f"kernel {k.name} has {a.extent} blocks along {a.tag}; CUDA "
                                    f"allows at most {MAX_GRID[a.tag]}: bind the longest loop to blockIdx.x")
        smem = shared_bytes(k)
        if smem > target.max_shared_memory_per_block:
            raise LoweringError("kernel launch", f"kernel {k.name} needs {smem} bytes of shared memory; "
                                f"{target.arch} allows {target.max_shared_memory_per_block} a block "
                                "(CUDAOptions.max_shared_memory_per_block): cache smaller tiles")


BACKEND = CUDABackend()
