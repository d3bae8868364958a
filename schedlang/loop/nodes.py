"""Statement nodes shared by Loop IR, Tile IR and Kernel IR.

Each level uses a subset: Loop IR has serial loops over whole stages; Tile IR adds loop
kinds (unrolled, vectorized, parallel, bound to a thread axis) and allocations at
attach points; Kernel IR has flat one-index buffer accesses, vector expressions and
only serial or parallel loops. Loops always start at 0.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

from ..expr.nodes import Buffer, Expr, Var

SERIAL, UNROLLED, VECTORIZED, PARALLEL, BOUND = "serial", "unrolled", "vectorized", "parallel", "bound"
# The loop pragma Stage.prefetch leaves: its value is (tensor name, iterations ahead) on a
# stage, (the tensor's Buffer, iterations ahead) on a loop of Loop IR and below (loop/build.py).
PREFETCH = "prefetch"


class Stmt:
    """Base of statements."""

    def __str__(self) -> str:
        from .printer import stmt_lines    # the printer imports these nodes
        return "\n".join(stmt_lines(self))


@dataclass(frozen=True, eq=False, repr=False)
class For(Stmt):
    """for var in 0..extent: body. kind says how the iterations run."""

    var: Var
    extent: int
    body: Stmt
    kind: str = SERIAL
    thread_tag: str = ""
    pragmas: Tuple[Tuple[str, object], ...] = ()

    def with_body(self, body: Stmt) -> "For":
        return self if body is self.body else For(self.var, self.extent, body, self.kind, self.thread_tag, self.pragmas)


@dataclass(frozen=True, eq=False, repr=False)
class Store(Stmt):
    """buffer[indices] = value, for the lanes where predicate holds (None: all)."""

    buffer: Buffer
    indices: Tuple[Expr, ...]
    value: Expr
    predicate: Optional[Expr] = None


@dataclass(frozen=True, eq=False, repr=False)
class IfThen(Stmt):
    cond: Expr
    then_body: Stmt
    else_body: Optional[Stmt] = None


@dataclass(frozen=True, eq=False, repr=False)
class Seq(Stmt):
    stmts: Tuple[Stmt, ...]


@dataclass(frozen=True, eq=False, repr=False)
class Allocate(Stmt):
    """buffer exists (uninitialised) while body runs."""

    buffer: Buffer
    body: Stmt


@dataclass(frozen=True, eq=False, repr=False)
class Let(Stmt):
    """var = value, visible in body."""

    var: Var
    value: Expr
    body: Stmt


@dataclass(frozen=True, eq=False, repr=False)
class StageNest(Stmt):
    """The loop nest that computes one stage at the root of a function. It marks where one
    stage's code ends and the next begins (Kernel IR makes one kernel of each); printers
    show only its body."""

    stage: str
    body: Stmt


@dataclass(frozen=True, eq=False, repr=False)
class Barrier(Stmt):
    """All threads of a block wait here (GPU shared memory); a no-op for CPU workers."""

    scope: str = "shared"


@dataclass(frozen=True, eq=False, repr=False)
class ThreadAllReduce(Stmt):
    """A cross-thread reduction (TVM's tvm_thread_allreduce): each thread of the block holds a
    partial value in buffers[i][0] for each value i of combiner (a CommReducer: one value, or a
    tuple such as argmax's); afterwards every thread holds there the combination of the
    partials of the threads that differ only in var, the loop bound to thread_tag with extent
    threads. GPU backends lower it."""

    buffers: Tuple[Buffer, ...]
    combiner: object
    var: Var
    extent: int
    thread_tag: str

    @property
    def buffer(self) -> Buffer:
        """The buffer of the first value."""
        return self.buffers[0]


@dataclass(frozen=True, eq=False, repr=False)
class CallPacked(Stmt):
    """A call of the packed function registered as func (an extern stage); args are whole
    buffers or constant scalars."""

    func: str
    args: Tuple[object, ...]

    @property
    def buffers(self) -> Tuple[Buffer, ...]:
        return tuple(a for a in self.args if isinstance(a, Buffer))


@dataclass(frozen=True, eq=False, repr=False)
class Evaluate(Stmt):
    """value computed for its effect (TVM's Evaluate): a call of an extern C function or an LLVM
    intrinsic that a tensorized loop nest became (schedule/tensorize.py)."""

    value: Expr


@dataclass(frozen=True, eq=False, repr=False)
class Func:
    """A function over argument buffers: the unit of Loop IR and Tile IR.

    size_args: size variables passed as integer arguments (TVM's build(s, [A, B, n])), each
    with its position in the call's argument list. size_checks: (expression, what it is)
    of sizes that must be at least 1 when called (symbolic split factors)."""

    name: str
    params: Tuple[Buffer, ...]
    body: Stmt
    size_args: Tuple[Tuple[int, Var], ...] = ()
    size_checks: Tuple[Tuple[Expr, str], ...] = ()


def seq(*stmts: Optional[Stmt]) -> Stmt:
    """A sequence, flattening nested ones and dropping Nones; a single statement stays itself."""
    flat = []
    for s in stmts:
        if s is None:
            continue
        if isinstance(s, Seq):
            flat.extend(s.stmts)
        else:
            flat.append(s)
    if len(flat) == 1:
        return flat[0]
    return Seq(tuple(flat))
