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

A stage pipelined over N buffers (schedule/pipeline.py; the pragma ("pipeline_stages", (buffer
name, N))) fetches iterations 0 .. N-2 before the loop, and iteration i fetches i + N - 1 into
buffer (i + N - 1) % N, which iteration i - 1 read before its closing barrier. A fetch of
asynchronous copies (cp.async) lands later: each fetch commits its copies as a group.
Iteration i first waits until its own group has landed (only the N - 2 newest in flight) and
for the block's other threads (a barrier); only then does it issue the fetch of i + N - 1,
into the buffer iteration i - 1 read, which every thread has left behind at that barrier, so
the one barrier a step also closes the previous step and the body's closing barrier goes
(one barrier a step instead of two, as CUTLASS's multistage main loop; one after the loop
orders the last step against what follows):

    fetch(0) commit .. fetch(N-2) commit
    for i in 0..n:
      wait_group(N - 2); barrier
      if i + N - 1 < n: fetch(i + N - 1) -> buffer (i + N - 1) % N
      commit
      compute(i) from buffer i % N
    barrier

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
from ..loop.functor import StmtMutator, substitute_stmt, walk_stmts
from ..loop.simplify import simplify_stmt
from ..loop.nodes import SERIAL, Allocate, Barrier, For, IfThen, Seq, Stmt, Store, seq
from ..schedule.placement import FRAGMENT_SCOPES
from .thread_sync import call_output, read_exprs

STAGE = "double buffer"
PRAGMA = "double_buffer_scope"
STAGES_PRAGMA = "pipeline_stages"      # (buffer name, n) of a stage pipelined over n > 2 buffers
ALIGN_BYTES = 16       # each half starts 16-byte aligned, so float4 accesses stay aligned
FRAGMENT_LANES = 32    # a fragment-scope buffer (tensor-core registers) is held by a warp's 32 lanes


def _top_items(s: Stmt, allocs: List[Buffer]) -> List[Stmt]:
    """The statements at the top of a loop body, through sequences and allocations (collected,
    each buffer once: an unrolled loop's copies allocate the same buffer in turn)."""
    if isinstance(s, Seq):
        return [x for c in s.stmts for x in _top_items(c, allocs)]
    if isinstance(s, Allocate):
        if s.buffer not in allocs:
            allocs.append(s.buffer)
        return _top_items(s.body, allocs)
    return [s]


def _stores(s: Stmt) -> Set[Buffer]:
    """The buffers s writes: by stores, and through a library call's output address (cp.async)."""
    return {x.buffer if isinstance(x, Store) else call_output(x) for x in walk_stmts(s)
            if isinstance(x, Store) or call_output(x) is not None}


def _loads(s: Stmt) -> Set[Buffer]:
    """The buffers s reads (a library call's output address is no read)."""
    out: Set[Buffer] = set()
    for x in walk_stmts(s):
        for e in read_exprs(x):
            out |= {n.buffer for n in walk(e) if isinstance(n, Load)}
    return out


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


def double_buffer_loop(loop: For, names: List[str], stages: int = 2, copies=None) -> Stmt:
    """The loop with the stages whose buffers are named double-buffered (module docstring), or
    pipelined over `stages` buffers; copies (the target's asynchronous copies: issues(stmt),
    commit(), wait(n)) turns a fetch of async copies into commit + wait_group + barrier."""
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
        # a fragment buffer's elements are spread over the warp's lanes and its accesses index
        # one lane's part: its copies are a lane's part apart
        lanes = FRAGMENT_LANES if b.scope in FRAGMENT_SCOPES else 1
        align = max(1, ALIGN_BYTES // b.dtype.bytes)
        stride = ceil_div(ceil_div(b.size, lanes), align) * align
        remap[b] = (Buffer(b.name, (stages * stride * lanes,), b.dtype, b.scope), stride)
    i, n = loop.var, loop.extent
    fetch = seq(*producers)
    asynchronous = copies is not None and any(copies.issues(x) for x in producers)
    prologue = []
    for j in range(stages - 1):           # iterations 0 .. stages - 2 into buffers 0 .. stages - 2
        if isinstance(n, int) and j >= n:
            break
        first = _Halves(remap, Const(j, i.dtype)).visit(substitute_stmt(fetch, {i: Const(j, i.dtype)}))
        prologue.append(simplify_stmt(first if j == 0 or isinstance(n, int) else IfThen(Const(j, i.dtype) < n, first)))
        prologue += [copies.commit()] if asynchronous else []
    ahead = _Halves(remap, (i + (stages - 1)) % stages).visit(substitute_stmt(fetch, {i: i + (stages - 1)}))
    head, after = [IfThen(i + (stages - 1) < n, ahead)], None
    if asynchronous:
        # this iteration's group landed (all but the stages - 2 newest), for every thread; then
        # the next fetch, whose buffer the previous iteration read (module docstring)
        head = [copies.wait(stages - 2), Barrier("shared") if shared else None, *head, copies.commit()]
        if shared and rest and isinstance(rest[-1], Barrier):
            rest, after = rest[:-1], Barrier("shared")     # the next iteration's first barrier closes this one
    body = seq(*head, *(_Halves(remap, i % stages).visit(x) for x in rest))
    out = seq(*prologue, Barrier("shared") if shared and not asynchronous else None,
              For(i, n, body, SERIAL, loop.thread_tag, loop.pragmas), after)
    for b in reversed(allocs):
        out = Allocate(remap[b][0] if b in remap else b, out)
    return out


class _InjectDoubleBuffer(StmtMutator):
    def __init__(self, copies=None):
        self.copies = copies

    def visit_For(self, s: For) -> Stmt:
        body = self.visit(s.body)
        names = [v for k, v in s.pragmas if k == PRAGMA]
        s = s.with_body(body)
        if not names:
            return s
        stages = dict(v for k, v in s.pragmas if k == STAGES_PRAGMA)
        counts = {stages.get(name, 2) for name in names}
        if len(counts) > 1:
            _refuse(s, f"the stages computed at it have different pipeline depths ({sorted(counts)}); one loop "
                    "runs one pipeline")
        return double_buffer_loop(s, names, counts.pop(), self.copies)


def inject_double_buffer(body: Stmt, copies=None) -> Stmt:
    """Every loop marked with the double_buffer_scope pragma double-buffered (module docstring),
    or pipelined (pipeline_stages)."""
    return _InjectDoubleBuffer(copies).visit(body)
