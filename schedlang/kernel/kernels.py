"""split_kernels: cut a lowered function into kernels with their launch geometry.

Each stage computed at the root becomes one kernel. Root temporaries become module
buffers (global memory). A parallel outermost loop becomes the kernel's CPU workers;
loops bound to blockIdx/threadIdx become its GPU grid and block.
"""
from __future__ import annotations

import re
from typing import Dict, List, Tuple

from ..errors import InternalError, LoweringError
from ..expr.nodes import Buffer
from ..loop.functor import StmtMutator, buffers_used, substitute_stmt
from ..loop.nodes import BOUND, PARALLEL, Allocate, For, Seq, StageNest, Stmt
from .nodes import Kernel, KernelModule, LaunchAxis, LaunchKind


def stage_symbol(stage: str) -> str:
    """A stage's name as a kernel's name spells it."""
    return re.sub(r"\W", "_", stage)


def kernel_name(module: str, stage: str) -> str:
    """The name of the module's kernel whose root stage is `stage` (before a repeat's _2, _3)."""
    stage = stage_symbol(stage)
    return f"{module}_{stage}" if stage != module else f"{module}_kernel"


def root_stage(kernel: str, module: str) -> str:
    """kernel_name's inverse: the (spelled) root stage of the module's kernel named `kernel`."""
    if kernel == f"{module}_kernel":
        return module
    return kernel[len(module) + 1:] if kernel.startswith(f"{module}_") else kernel


class _LiftThreads(StmtMutator):
    """Remove loops bound to GPU thread axes, recording them as launch dimensions."""

    def __init__(self):
        self.axes: Dict[str, LaunchAxis] = {}

    def visit_For(self, s: For) -> Stmt:
        if s.kind != BOUND:
            return s.with_body(self.visit(s.body))
        seen = self.axes.get(s.thread_tag)
        if seen is not None and seen.extent != s.extent:
            raise LoweringError("kernel launch", f"{s.thread_tag} is bound to loops of extents {seen.extent} and "
                                f"{s.extent} in one kernel; bind loops of equal extent")
        if seen is None:     # the outermost loop names the axis (a cooperative fetch's loops are inner)
            self.axes[s.thread_tag] = LaunchAxis(s.thread_tag, s.var, s.extent, LaunchKind.of_thread_tag(s.thread_tag))
        body = self.visit(s.body)
        if seen is not None and seen.var is not s.var:
            body = substitute_stmt(body, {s.var: seen.var})
        return body


def split_kernels(name: str, params: Tuple[Buffer, ...], body: Stmt) -> KernelModule:
    temps: List[Buffer] = []
    while isinstance(body, Allocate):
        temps.append(body.buffer)
        body = body.body
    parts = list(body.stmts) if isinstance(body, Seq) else [body]
    module_buffers = list(params) + temps
    kernels = []
    used_names = set()
    for nest in parts:
        if not isinstance(nest, StageNest):
            raise InternalError(f"Kernel IR expects one stage nest per root stage, found {type(nest).__name__}")
        part = nest.body
        kname = kernel_name(name, nest.stage)
        base, n = kname, 1
        while kname in used_names:
            n += 1
            kname = f"{base}_{n}"
        used_names.add(kname)
        launch: List[LaunchAxis] = []
        if isinstance(part, For) and part.kind == PARALLEL:
            launch.append(LaunchAxis(LaunchKind.CPU_WORKER.value, part.var, part.extent, LaunchKind.CPU_WORKER))
            part = part.body
        lifter = _LiftThreads()
        part = lifter.visit(part)
        launch += sorted(lifter.axes.values(), key=lambda a: a.tag)
        used = [b for b in buffers_used(part) if b in module_buffers]
        ordered = tuple(b for b in module_buffers if b in used)
        kernels.append(Kernel(kname, ordered, tuple(launch), part))
    return KernelModule(name, tuple(params), tuple(temps), tuple(kernels))
