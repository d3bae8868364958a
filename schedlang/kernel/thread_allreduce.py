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


def _combine(s: ThreadAllReduce, a: List[Expr], b: List[Expr]) -> List[Expr]:
    c = s.combiner
    env = dict(zip(c.lhs, a))
    env.update(zip(c.rhs, b))
    return [substitute(r, env) for r in c.result]


def _mine(s: ThreadAllReduce) -> List[Expr]:
    return [Load(b, (Const(0),)) for b in s.buffers]


def _store_all(s: ThreadAllReduce, values: List[Expr], tag: str) -> Stmt:
    """buffers[i][0] = values[i] for every i, each value bound first: every new value reads the
    old ones (a tuple reducer's combiner compares one value and selects all)."""
    if len(values) == 1:
        return Store(s.buffers[0], (Const(0),), values[0])
    temps = [Var(f"{b.name}.{tag}", b.dtype) for b in s.buffers]
    out: Stmt = seq(*(Store(b, (Const(0),), t) for b, t in zip(s.buffers, temps)))
    for t, v in reversed(list(zip(temps, values))):
        out = Let(t, v, out)
    return out


def _shuffle_step(s: ThreadAllReduce, kind: str, mask: int, lane_arg: int, width: int) -> Stmt:
    """buffers[0] = combine(buffers[0], shuffle(buffers[0])) (or the shuffled value itself for a
    broadcast), for every value of the combiner at once."""
    name = "down" if kind == "shfl_down_sync" else "lane0"
    others = [Var(f"{b.name}.{name}", b.dtype) for b in s.buffers]
    new = _combine(s, _mine(s), others) if kind == "shfl_down_sync" else others
    out = _store_all(s, new, "new")
    for b, other in reversed(list(zip(s.buffers, others))):
        value = Call(kind, (Const(mask, UINT32), Load(b, (Const(0),)), Const(lane_arg), Const(width)), b.dtype)
        out = Let(other, value, out)
    return out


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
    x = s.var
    row: Expr = Const(0)
    stride = T
    for tag in ("threadIdx.y", "threadIdx.z"):      # the other thread axes: which row of the block
        if tag in threads:
            v, e = threads[tag]
            row = v * (stride // T) if isinstance(row, Const) and row.value == 0 else row + v * (stride // T)
            stride *= e
    rows, warps = n // T, T // WARP
    row = simplify(row)
    per_warp = [Buffer(f"{b.name}.warps", (rows * warps,), b.dtype, "shared") for b in s.buffers]
    result = [Buffer(f"{b.name}.result", (rows,), b.dtype, "shared") for b in s.buffers]
    mine = _mine(s)
    body = seq(
        *_tree(s, mask, WARP, WARP),
        IfThen(x % WARP == 0, seq(*(Store(w, (simplify(row * warps + x // WARP),), v) for w, v in zip(per_warp, mine)))),
        *(Store(b, (Const(0),), select(x < warps, Load(w, (simplify(row * warps + x),)), identity, guarded=True))
          for b, w, identity in zip(s.buffers, per_warp, s.combiner.identity)),
        *_tree(s, mask, 1 << (warps - 1).bit_length(), WARP),
        IfThen(x == 0, seq(*(Store(r, (row,), v) for r, v in zip(result, mine)))),
        *(Store(b, (Const(0),), Load(r, (row,))) for b, r in zip(s.buffers, result)))
    for buffer in reversed(per_warp + result):
        body = Allocate(buffer, body)
    return body


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
