"""inject_double_buffer: TVM's InjectDoubleBuffer, for stages marked by Stage.double_buffer().

Tile IR marks the loop L a double-buffered stage is computed at with the pragma
("double_buffer_scope", buffer name). Its body starts with that stage's loop nest (the
producer: a cooperative fetch into shared memory, or a copy into registers), and the
barriers are already in place (this pass runs after insert_barriers):

    for i in 0..n:                      buffer: f32[2 * s]   (each half padded to 16 bytes)
      fetch(i) -> buffer                fetch(0) -> half 0
      barrier                     =>    barrier
      compute(i) from buffer            for i in 0..n:
      barrier                             if i + 1 < n: fetch(i + 1) -> half (i + 1) % 2
                                          compute(i) from half i % 2
                                          barrier

The barrier between the fetch and the compute goes: what iteration i reads was fetched in
iteration i - 1 (or before the loop) and the barrier at the end of that iteration orders it;
the same barrier keeps iteration i + 1 from overwriting the half iteration i still reads
(fetch(i + 2) writes it, one iteration later). The allocations at the top of L's body move
out of the loop.

Forms this pass does not handle raise LoweringError rather than change the result: a producer
that is not at the start of the loop body, a buffer that the rest of the body writes or that
the producer reads back, a producer that reads memory the loop body writes, shared memory
without a barrier after its last read in the body, a symbolic buffer size.
"""
from __future__ import annotations

from typing import List, Set

from ..errors import LoweringError
from ..expr.extent import ceil_div
from ..expr.functor import ExprMutator, map_children, walk
from ..expr.nodes import Broadcast, Buffer, Const, Expr, Load
from ..loop.functor import StmtMutator, stmt_exprs, substitute_stmt, walk_stmts
from ..loop.simplify import simplify_stmt
from ..loop.nodes import SERIAL, Allocate, Barrier, For, IfThen, Seq, Stmt, Store, seq

STAGE = "double buffer"
PRAGMA = "double_buffer_scope"
ALIGN_BYTES = 16       # each half starts 16-byte aligned, so float4 accesses stay aligned


def _top_items(s: Stmt, allocs: List[Buffer]) -> List[Stmt]:
    """The statements at the top of a loop body, through sequences and allocations (collected)."""
    if isinstance(s, Seq):
        return [x for c in s.stmts for x in _top_items(c, allocs)]
    if isinstance(s, Allocate):
        allocs.append(s.buffer)
        return _top_items(s.body, allocs)
    return [s]


def _stores(s: Stmt) -> Set[Buffer]:
    return {x.buffer for x in walk_stmts(s) if isinstance(x, Store)}


def _loads(s: Stmt) -> Set[Buffer]:
    return {n.buffer for x in walk_stmts(s) for e in stmt_exprs(x) for n in walk(e) if isinstance(n, Load)}


def _offset(index: Expr, half: Expr, stride: int) -> Expr:
    if isinstance(half, Const) and half.value == 0:
        return index
    off = half * stride
    lanes = index.dtype.lanes
    return index + (Broadcast(off, lanes) if lanes > 1 else off)


class _Halves(StmtMutator):
    """Accesses of the double buffers moved to one half: index + half * stride."""

    def __init__(self, remap, half: Expr):
        self.remap, self.half = remap, half
        self.loads = _HalfLoads(self)

    def visit_expr(self, e: Expr) -> Expr:
        return self.loads.visit(e)

    def visit_Store(self, s: Store) -> Stmt:
        s = super().visit_Store(s)
        hit = self.remap.get(s.buffer)
        if hit is None:
            return s
        new, stride = hit
        return Store(new, (_offset(s.indices[0], self.half, stride),), s.value, s.predicate)


class _HalfLoads(ExprMutator):
    def __init__(self, owner: _Halves):
        self.owner = owner

    def visit_Load(self, e: Load) -> Expr:
        hit = self.owner.remap.get(e.buffer)
        if hit is None:
            return map_children(e, self.visit)
        new, stride = hit
        pred = None if e.predicate is None else self.visit(e.predicate)
        return Load(new, (_offset(self.visit(e.indices[0]), self.owner.half, stride),), pred)


def _refuse(loop: For, problem: str):
    raise LoweringError(STAGE, f"loop '{loop.var.name}': {problem}; leave double_buffer() out for this stage "
                        "(the schedule computes the same result with one buffer)")


def double_buffer_loop(loop: For, names: List[str]) -> Stmt:
    """The loop with the stages whose buffers are named double-buffered (module docstring)."""
    if loop.kind != SERIAL:
        _refuse(loop, f"a {loop.kind} loop cannot fetch ahead; double_buffer needs a serial loop")
    allocs: List[Buffer] = []
    items = _top_items(loop.body, allocs)
    db = [b for b in allocs if b.name in names]
    missing = sorted(set(names) - {b.name for b in db})
    if missing:
        _refuse(loop, f"the buffer of {', '.join(missing)} is not allocated at the top of its body")
    dbs = set(db)
    p = 0
    while p < len(items) and _stores(items[p]) and _stores(items[p]) <= dbs:
        p += 1
    producers, rest = items[:p], items[p:]
    written, filled = set().union(*map(_stores, rest)), set().union(*map(_stores, producers))
    for b in db:
        if b not in filled:
            _refuse(loop, f"'{b.name}' is not filled at the start of the loop body")
        if b in written:
            _refuse(loop, f"'{b.name}' is written again after its fetch")
        if b.is_symbolic:
            _refuse(loop, f"'{b.name}' has a symbolic size")
    read_by_producers = set().union(*map(_loads, producers))
    if read_by_producers & (written | dbs):
        names_read = sorted(b.name for b in read_by_producers & (written | dbs))
        _refuse(loop, f"the fetch reads {', '.join(names_read)}, which the loop body writes: fetching the next "
                "iteration's data early would read it too soon")
    if rest and isinstance(rest[0], Barrier):
        rest = rest[1:]          # the end-of-iteration barrier orders the fetch (module docstring)
    shared = any(b.scope == "shared" for b in db)
    if shared:
        last_read = max((i for i, x in enumerate(rest) if _loads(x) & dbs), default=-1)
        if not any(isinstance(x, Barrier) for x in rest[last_read + 1:]):
            _refuse(loop, "no barrier follows the last read of the shared buffer in the loop body, so the next "
                    "fetch could overwrite data other threads still read")
    remap = {}
    for b in db:
        align = max(1, ALIGN_BYTES // b.dtype.bytes)
        stride = ceil_div(b.size, align) * align
        remap[b] = (Buffer(b.name, (2 * stride,), b.dtype, b.scope), stride)
    i, n = loop.var, loop.extent
    fetch = seq(*producers)
    prologue = simplify_stmt(_Halves(remap, Const(0, i.dtype)).visit(substitute_stmt(fetch, {i: Const(0, i.dtype)})))
    ahead = _Halves(remap, (i + 1) % 2).visit(substitute_stmt(fetch, {i: i + 1}))
    body = seq(IfThen(i + 1 < n, ahead), *(_Halves(remap, i % 2).visit(x) for x in rest))
    out = seq(prologue, Barrier("shared") if shared else None, For(i, n, body, SERIAL, loop.thread_tag, loop.pragmas))
    for b in reversed(allocs):
        out = Allocate(remap[b][0] if b in remap else b, out)
    return out


class _InjectDoubleBuffer(StmtMutator):
    def visit_For(self, s: For) -> Stmt:
        body = self.visit(s.body)
        names = [v for k, v in s.pragmas if k == PRAGMA]
        s = s.with_body(body)
        return double_buffer_loop(s, names) if names else s


def inject_double_buffer(body: Stmt) -> Stmt:
    """Every loop marked with the double_buffer_scope pragma double-buffered (module docstring)."""
    return _InjectDoubleBuffer().visit(body)
