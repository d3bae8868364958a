"""Tile IR -> Kernel IR: run the target's Kernel IR passes, top to bottom, then cut kernels.

standard_passes() is the target-neutral list; a backend's kernel_passes(target) returns
it, or a list built on it.
"""
from __future__ import annotations

from functools import partial
from typing import Callable, List, Sequence, Tuple

from .. import verify
from ..loop.nodes import Func
from ..loop.simplify import simplify_stmt
from ..loop.verify import size_vars, verify_stmt
from ..target.target import Target
from .flatten import flatten_buffers
from .kernels import split_kernels
from .nodes import KernelModule
from .sizes import add_size_params
from .unroll import unroll_loops
from .vectorize import vectorize_loops
from .widen import widen_index_arith
from .verify import verify_kernel_module


def standard_passes(target: Target) -> List[Tuple[str, Callable]]:
    """The Kernel IR passes every target runs, in order."""
    return [
        ("flatten_buffers", flatten_buffers),     # one flat index per access
        ("unroll_loops", unroll_loops),
        ("simplify", simplify_stmt),
        ("widen_index_arith", widen_index_arith),   # int64 where int32 terms may wrap
        ("vectorize_loops", partial(vectorize_loops, target=target)),   # lanes from target.native_lanes
        ("simplify", simplify_stmt),
    ]


def lower_to_kernel_ir(func: Func, passes: Sequence[Tuple[str, Callable]]) -> KernelModule:
    """Run the passes (from the target's backend) over the function body, then split it into
    kernels. With verification on (schedlang.verify), the IR is checked after every pass."""
    body = verify.run_passes(func.body, passes, partial(_verify_body, func))
    module = add_size_params(split_kernels(func.name, func.params, body), func.size_args, func.size_checks)
    return verify_kernel_module(module) if verify.ENABLED else module


def _verify_body(func: Func, body, after: str) -> None:
    free = size_vars(func.params) + [v for _, v in func.size_args]
    verify_stmt(body, func.params, free, flat=True, where=f"Kernel IR of '{func.name}' after {after}")
