"""Kernel IR: kernels with parameters and launch geometry, over flat buffers.

A KernelModule is what one build produces: argument buffers, global temporaries and a
sequence of kernels run in order. A kernel's launch is either a set of CPU workers (a
parallel loop lifted out of the body) or a GPU grid and block (loops bound to
blockIdx/threadIdx). Inside kernels, statements are the shared ones of loop/nodes.py
with these invariants: every Load/Store has one flat index (a Ramp or vector for vector
accesses), loops are serial or parallel only, and allocations carry their scope
(local, shared).
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Optional, Tuple

from ..expr.nodes import Buffer, Expr, Var
from ..loop.nodes import Stmt


class LaunchKind(Enum):
    """What runs the iterations of one launch dimension."""

    CPU_WORKER = "worker"     # a parallel loop's iterations, shared out among CPU threads
    BLOCK = "block"           # a GPU grid dimension (blockIdx.x/y/z)
    THREAD = "thread"         # a GPU block dimension (threadIdx.x/y/z)
    VTHREAD = "vthread"       # a virtual thread (vthread), serialised within a GPU thread

    @staticmethod
    def of_thread_tag(tag: str) -> "LaunchKind":
        """The kind of a loop bound to thread_axis(tag)."""
        if tag.startswith("blockIdx."):
            return LaunchKind.BLOCK
        if tag.startswith("threadIdx."):
            return LaunchKind.THREAD
        if tag == "vthread":
            return LaunchKind.VTHREAD
        raise ValueError(f"unknown thread tag {tag!r}")


@dataclass(frozen=True)
class LaunchAxis:
    """One launch dimension: its variable inside the kernel, its extent (which may be
    symbolic), what runs it, and its tag ("worker" on the CPU, the thread tag "blockIdx.x"
    ... on the GPU)."""

    tag: str
    var: Var
    extent: object
    kind: LaunchKind


@dataclass(frozen=True, eq=False)
class Kernel:
    """sizes: the size variables (int scalars) the kernel takes after its buffers."""

    name: str
    params: Tuple[Buffer, ...]
    launch: Tuple[LaunchAxis, ...]
    body: Stmt
    sizes: Tuple[Var, ...] = ()

    @property
    def workers(self) -> Optional[LaunchAxis]:
        for a in self.launch:
            if a.kind is LaunchKind.CPU_WORKER:
                return a
        return None

    def __str__(self) -> str:
        from .printer import print_kernel    # the printer imports these nodes
        return print_kernel(self)


@dataclass(frozen=True, eq=False)
class KernelCopy:
    """A kernel that is an earlier kernel of its module with the buffers and variables renamed
    (kernel/dedup.py: a model's repeated layer): a backend may run that kernel's code with
    these buffers and sizes, given in that kernel's parameter order."""

    of: int
    params: Tuple[Buffer, ...]
    sizes: Tuple[Var, ...]


@dataclass(frozen=True, eq=False)
class KernelModule:
    name: str
    params: Tuple[Buffer, ...]
    temps: Tuple[Buffer, ...]
    kernels: Tuple[Kernel, ...]
    sizes: Tuple[Var, ...] = ()    # size variables, read from the argument arrays at call time
    size_args: Tuple[Tuple[int, Var], ...] = ()   # those passed as integer arguments, at their call positions
    size_checks: Tuple[Tuple[Expr, str], ...] = ()   # (size expression, what it is): must be >= 1 when called
    copies: Tuple[Optional[KernelCopy], ...] = ()    # per kernel, when it repeats an earlier one (else empty)

    def __str__(self) -> str:
        from .printer import print_module    # (as Kernel.__str__)
        return print_module(self)
