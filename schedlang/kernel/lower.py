"""Tile IR -> Kernel IR: the pipeline of Kernel IR passes, top to bottom."""
from __future__ import annotations

from functools import partial

from .. import verify
from ..loop.nodes import Func
from ..loop.simplify import simplify_stmt
from ..loop.verify import verify_stmt
from ..target.target import Target
from .flatten import flatten_buffers
from .kernels import split_kernels
from .nodes import KernelModule
from .unroll import unroll_loops
from .vectorize import vectorize_loops
from .verify import verify_kernel_module


def lower_to_kernel_ir(func: Func, target: Target) -> KernelModule:
    passes = [flatten_buffers, unroll_loops, simplify_stmt, partial(vectorize_loops, target=target), simplify_stmt]
    body = verify.run_passes(func.body, passes, partial(_verify_body, func))
    module = split_kernels(func.name, func.params, body)
    return verify_kernel_module(module) if verify.ENABLED else module


def _verify_body(func: Func, body, after: str) -> None:
    verify_stmt(body, func.params, flat=True, where=f"Kernel IR of '{func.name}' after {after}")
