"""lower_thread_allreduce: a ThreadAllReduce becomes warp shuffles and shared memory (TVM's
LowerThreadAllreduce).

The threads of the reduced axis (threadIdx.x, extent T) are consecutive lanes of a warp
(x varies fastest in a block). With T <= 32 (a power of two) a shuffle tree of width T
combines them; lane 0 of each segment then broadcasts the result with a shuffle. With
T > 32 (a multiple of 32) each warp reduces itself, its lane 0 writes the warp's value to
shared memory, the first warp's lanes of each row reduce those values, and the result
goes back to every thread through shared memory. Barriers come from insert_barriers,
which runs after this pass.

A shuffle's value is bound to a let before it is combined, so that every lane takes part
in it even when the combiner's select evaluates only one side.
"""
from __future__ import annotations

import math
from typing import Dict, List, Tuple

from ..dtypes import DType
from ..errors import LoweringError
from ..expr.functor import substitute
from ..expr.simplify import simplify
from ..expr.nodes import Buffer, Call, Const, Expr, Load, Var, select
from ..loop.functor import StmtMutator
from ..loop.nodes import BOUND, Allocate, For, IfThen, Let, Stmt, Store, ThreadAllReduce, seq

UINT32 = DType("uint", 32)
SHUFFLES = ("shfl_down_sync", "shfl_sync")
WARP = 32


def _combine(s: ThreadAllReduce, a: Expr, b: Expr) -> Expr:
    c = s.combiner
    return substitute(c.result[0], {c.lhs[0]: a, c.rhs[0]: b})


def _shuffle_step(s: ThreadAllReduce, kind: str, mask: int, lane_arg: int, width: int) -> Stmt:
    """buffer[0] = combine(buffer[0], shuffle(buffer[0])) (or the shuffled value itself for a broadcast)."""
    dt = s.buffer.dtype
    mine = Load(s.buffer, (Const(0),))
    other = Var(f"{s.buffer.name}.{'down' if kind == 'shfl_down_sync' else 'lane0'}", dt)
    value = Call(kind, (Const(mask, UINT32), mine, Const(lane_arg), Const(width)), dt)
    new = _combine(s, mine, other) if kind == "shfl_down_sync" else other
    return Let(other, value, Store(s.buffer, (Const(0),), new))


def _tree(s: ThreadAllReduce, mask: int, lanes: int, width: int) -> List[Stmt]:
    """Shuffle-down steps that combine lanes 0..lanes-1 of each width-wide segment into its lane 0."""
    steps, offset = [], lanes // 2
    while offset >= 1:
        steps.append(_shuffle_step(s, "shfl_down_sync", mask, offset, width))
        offset //= 2
    return steps


def lower_one(s: ThreadAllReduce, threads: Dict[str, Tuple[Var, int]]) -> Stmt:
    T = s.extent
    n = math.prod(e for _, e in threads.values())
    if not isinstance(T, int) or not isinstance(n, int):
        raise LoweringError("cross-thread reduction", f"the threads of '{s.var.name}' have a symbolic extent; a "
                            "cross-thread reduction needs a constant block size")
    if (T <= WARP and T & (T - 1)) or (T > WARP and T % WARP) or (n > WARP and n % WARP):
        raise LoweringError("cross-thread reduction", f"'{s.var.name}' reduces over {T} threads of {s.thread_tag} "
                            f"in a block of {n}; a cross-thread reduction needs a power of two up to 32 threads, or "
                            "a multiple of 32, in blocks of whole warps: split the reduce axis by such a factor")
    mask = 0xFFFFFFFF if n >= WARP else (1 << n) - 1
    if T <= WARP:
        return seq(*_tree(s, mask, T, T), _shuffle_step(s, "shfl_sync", mask, 0, T))
    x, dt = s.var, s.buffer.dtype
    row: Expr = Const(0)
    stride = T
    for tag in ("threadIdx.y", "threadIdx.z"):      # the other thread axes: which row of the block
        if tag in threads:
            v, e = threads[tag]
            row = v * (stride // T) if isinstance(row, Const) and row.value == 0 else row + v * (stride // T)
            stride *= e
    rows, warps = n // T, T // WARP
    per_warp = Buffer(f"{s.buffer.name}.warps", (rows * warps,), dt, "shared")
    result = Buffer(f"{s.buffer.name}.result", (rows,), dt, "shared")
    mine = Load(s.buffer, (Const(0),))
    identity = s.combiner.identity[0]
    row = simplify(row)
    body = seq(
        *_tree(s, mask, WARP, WARP),
        IfThen(x % WARP == 0, Store(per_warp, (simplify(row * warps + x // WARP),), mine)),
        Store(s.buffer, (Const(0),), select(x < warps, Load(per_warp, (simplify(row * warps + x),)), identity, guarded=True)),
        *_tree(s, mask, 1 << (warps - 1).bit_length(), WARP),
        IfThen(x == 0, Store(result, (row,), mine)),
        Store(s.buffer, (Const(0),), Load(result, (row,))))
    return Allocate(per_warp, Allocate(result, body))


class _LowerAllReduce(StmtMutator):
    def __init__(self):
        self.threads: Dict[str, Tuple[Var, int]] = {}     # the enclosing thread loops, outermost per tag

    def visit_For(self, s: For) -> Stmt:
        fresh = s.kind == BOUND and s.thread_tag.startswith("threadIdx.") and s.thread_tag not in self.threads
        if fresh:
            self.threads[s.thread_tag] = (s.var, s.extent)
        try:
            return s.with_body(self.visit(s.body))
        finally:
            if fresh:
                del self.threads[s.thread_tag]

    def visit_ThreadAllReduce(self, s: ThreadAllReduce) -> Stmt:
        return lower_one(s, self.threads)


def lower_thread_allreduce(body: Stmt) -> Stmt:
    """The body with every cross-thread reduction lowered to shuffles and shared memory."""
    return _LowerAllReduce().visit(body)
