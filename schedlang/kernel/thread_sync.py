"""insert_barriers: __syncthreads() where threads of a block exchange data through shared
memory (TVM's ThreadSync("shared")).

A shared buffer written by some statement and read by a later one (read after write), or
read and then written again (write after read: the next iteration's cooperative fetch over
the tile the previous one still reads), needs a barrier between the two, since the other
threads of the block may be anywhere in between. Statements are walked in order; for each
one we know which shared buffers it reads and writes before its first barrier (its head)
and after its last one (its tail). A loop whose tail conflicts with its own head (the next
iteration) gets a barrier at the end of its body. Two writes of one buffer are not a
conflict: a cooperative fetch writes disjoint elements from every thread.

Loops bound to thread axes are the block's threads, not a sequence, so they carry nothing
from one iteration to the next.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Set, Tuple

from ..expr.functor import walk
from ..expr.nodes import Call, Expr, Load
from ..loop.functor import stmt_exprs
from ..loop.nodes import BOUND, Allocate, Barrier, Evaluate, For, IfThen, Let, Seq, StageNest, Stmt, Store, seq
from ..tensor.intrin_calls import ADDRESS_OF


@dataclass
class Access:
    """The shared buffers (by id) a stretch of code reads and writes."""

    reads: Set[int] = field(default_factory=set)
    writes: Set[int] = field(default_factory=set)

    def __or__(self, other: "Access") -> "Access":
        return Access(self.reads | other.reads, self.writes | other.writes)

    def conflicts(self, later: "Access") -> bool:
        """Whether later code, run by other threads, needs a barrier after this code."""
        return bool(self.writes & later.reads) or bool(self.reads & later.writes)


@dataclass
class Summary:
    """Accesses before the first barrier (head) and after the last one (tail); without a
    barrier, head and tail are both all of the statement's accesses."""

    head: Access
    tail: Access
    synced: bool = False


def _shared_loads(e: Expr) -> Set[int]:
    return {id(n.buffer) for n in walk(e) if isinstance(n, Load) and n.buffer.scope == "shared"}


def _own_access(s: Stmt) -> Access:
    """What s reads and writes itself (its expressions and its store, not nested statements).
    A library call's first argument, the address it writes through, is not a read: counted as
    one, a cooperative cp.async fetch looped over its chunks conflicted with itself and got a
    barrier (and so a wait for every copy in flight) after each chunk, which undid the
    pipeline, and fragment stores to one shared tile got a barrier between each two."""
    reads: Set[int] = set()
    for e in read_exprs(s):
        reads |= _shared_loads(e)
    written = s.buffer if isinstance(s, Store) else call_output(s)
    writes = {id(written)} if written is not None and written.scope == "shared" else set()
    return Access(reads, writes)


def read_exprs(s: Stmt):
    """The expressions s reads (not nested statements): all of its own, but of a library
    call's destination address (call_output) only the written element's indices."""
    if call_output(s) is None:
        return stmt_exprs(s)
    destination, *others = s.value.args
    return (*others, *destination.args[0].indices)


def call_output(s: Stmt):
    """The buffer a library call (an Evaluate of an extern call: cp.async, ldmatrix, mma) writes
    through its first argument, the address of an element; None for any other statement."""
    first = s.value.args[0] if isinstance(s, Evaluate) and isinstance(s.value, Call) and s.value.args else None
    return first.args[0].buffer if isinstance(first, Call) and first.name == ADDRESS_OF else None


def sync(s: Stmt) -> Tuple[Stmt, Summary]:
    """s with barriers inserted, and its summary."""
    if isinstance(s, Barrier):
        return s, Summary(Access(), Access(), synced=True)
    if isinstance(s, Seq):
        return _sync_seq(s.stmts)
    if isinstance(s, For):
        return _sync_loop(s)
    if isinstance(s, (Allocate, StageNest)):
        body, summary = sync(s.body)
        rebuilt = s if body is s.body else (Allocate(s.buffer, body) if isinstance(s, Allocate)
                                            else StageNest(s.stage, body))
        return rebuilt, summary
    if isinstance(s, Let):
        body, summary = _sync_seq((s.body,), first=_own_access(s))
        return (s if body is s.body else Let(s.var, s.value, body)), summary
    if isinstance(s, IfThen):
        return _sync_if(s)
    own = _own_access(s)
    return s, Summary(own, own)


def _sync_seq(stmts, first: Access = None) -> Tuple[Stmt, Summary]:
    out = []
    head = first or Access()
    pending = head          # accesses since the last barrier
    synced = False
    for x in stmts:
        x, sx = sync(x)
        if pending.conflicts(sx.head):
            out.append(Barrier("shared"))
            pending, synced = Access(), True
        out.append(x)
        if not synced:
            head = head | sx.head
        if sx.synced:
            pending, synced = sx.tail, True
        else:
            pending = pending | sx.tail
    changed = len(out) != len(stmts) or any(a is not b for a, b in zip(out, stmts))
    body = seq(*out) if changed else (stmts[0] if len(stmts) == 1 else Seq(tuple(stmts)))
    return body, Summary(head, pending, synced)


def _sync_loop(s: For) -> Tuple[Stmt, Summary]:
    body, summary = sync(s.body)
    if s.kind != BOUND and s.extent != 1 and summary.tail.conflicts(summary.head):
        # the next iteration would overwrite (or read) what this one still uses
        body = seq(body, Barrier("shared"))
        summary = Summary(summary.head, Access(), synced=True)
    return s.with_body(body), summary


def _sync_if(s: IfThen) -> Tuple[Stmt, Summary]:
    cond = _own_access(s)
    then, st = sync(s.then_body)
    other, so = (None, Summary(Access(), Access())) if s.else_body is None else sync(s.else_body)
    rebuilt = s if then is s.then_body and other is s.else_body else IfThen(s.cond, then, other)
    if st.synced and so.synced:
        return rebuilt, Summary(cond | st.head | so.head, st.tail | so.tail, synced=True)
    everything = cond | st.head | st.tail | so.head | so.tail    # some path has no barrier
    return rebuilt, Summary(everything, everything)


def insert_barriers(body: Stmt) -> Stmt:
    """The body with a shared-memory barrier wherever threads of a block exchange data."""
    return sync(body)[0]
