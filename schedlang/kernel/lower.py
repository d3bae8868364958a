"""Tile IR -> Kernel IR: the pipeline of Kernel IR passes, top to bottom."""
from __future__ import annotations

from ..loop.nodes import Func
from ..loop.simplify import simplify_stmt
from ..target.target import Target
from .flatten import flatten_buffers
from .kernels import split_kernels
from .nodes import KernelModule
from .sizes import add_size_params
from .unroll import unroll_loops
from .vectorize import vectorize_loops


def lower_to_kernel_ir(func: Func, target: Target) -> KernelModule:
    body = flatten_buffers(func.body)
    body = unroll_loops(body)
    body = simplify_stmt(body)
    body = vectorize_loops(body, target)
    body = simplify_stmt(body)
    return add_size_params(split_kernels(func.name, func.params, body))
