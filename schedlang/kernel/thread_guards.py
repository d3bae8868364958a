"""sink_thread_guards: a guard that depends on threadIdx moves below the barriers and the
cooperative stages it encloses, onto the statements that need it.

Tile IR guards a consumer's tail at the loop its condition mentions, and the stages
computed inside that loop sit under the guard. On a GPU two things must run on every
thread of a block whatever its own element's guard says:
  - __syncthreads(): a barrier some threads skip hangs or corrupts the block;
  - a cooperative fetch (a stage whose loops are bound again to the block's thread axes):
    each thread copies its share of the tile for all the others.
Such a guard is distributed over the statements it encloses: barriers, warp shuffles,
cooperative stages (a stage guards its own domain) and register-only stores (a shuffle
tree's combine steps must run on every lane) are left unguarded; everything else keeps
the guard. A let whose value reads memory keeps it behind the guard with a select.
"""
from __future__ import annotations

from typing import FrozenSet, Set

from ..expr.functor import free_vars, walk
from ..expr.nodes import Call, Const, Expr, Load, select
from ..loop.functor import StmtMutator
from .thread_allreduce import SHUFFLES
from ..loop.nodes import BOUND, Allocate, Barrier, For, IfThen, Let, Seq, Stmt, Store, seq

Tags = FrozenSet[str]


def _thread_loop(s: Stmt) -> bool:
    return isinstance(s, For) and s.kind == BOUND and s.thread_tag.startswith("threadIdx.")


def _shuffles(e: Expr) -> bool:
    return any(isinstance(n, Call) and n.name in SHUFFLES for n in walk(e))


def needs_all_threads(s: Stmt, tags: Tags) -> bool:
    """Whether s holds a barrier, a warp shuffle or a cooperative stage (a loop bound to a
    thread axis that an enclosing loop, one of tags, is bound to already)."""
    if isinstance(s, Barrier) or (isinstance(s, Let) and _shuffles(s.value)):
        return True
    if _thread_loop(s) and s.thread_tag in tags:
        return True
    if isinstance(s, For):
        inner = tags | {s.thread_tag} if _thread_loop(s) else tags
        return needs_all_threads(s.body, inner)
    if isinstance(s, (Allocate, Let)):
        return needs_all_threads(s.body, tags)
    if isinstance(s, IfThen):
        return needs_all_threads(s.then_body, tags) or (s.else_body is not None and
                                                       needs_all_threads(s.else_body, tags))
    if isinstance(s, Seq):
        return any(needs_all_threads(x, tags) for x in s.stmts)
    return False


def register_only(s: Stmt) -> bool:
    """Whether s only moves values between a thread's own registers (local buffers): it needs no
    guard, and a cross-thread reduction's combine steps must run on every lane."""
    if not isinstance(s, Store) or s.buffer.scope != "local":
        return False
    exprs = (*s.indices, s.value) + ((s.predicate,) if s.predicate is not None else ())
    return all(n.buffer.scope == "local" for e in exprs for n in walk(e) if isinstance(n, Load))


def distribute(cond: Expr, s: Stmt, tags: Tags) -> Stmt:
    """`if cond: s`, with cond pushed below the statements every thread must run."""
    if register_only(s):
        return s
    if not needs_all_threads(s, tags):
        return IfThen(cond, s)
    if isinstance(s, Barrier) or (_thread_loop(s) and s.thread_tag in tags):
        return s
    if isinstance(s, Seq):     # one guard for each run of statements that may keep it
        out, run = [], []
        for x in s.stmts:
            if needs_all_threads(x, tags) or register_only(x):
                out += [IfThen(cond, seq(*run))] if run else []
                out.append(distribute(cond, x, tags))
                run = []
            else:
                run.append(x)
        return seq(*out, IfThen(cond, seq(*run)) if run else None)
    if isinstance(s, For):
        inner = tags | {s.thread_tag} if _thread_loop(s) else tags
        return s.with_body(distribute(cond, s.body, inner))
    if isinstance(s, Allocate):
        return Allocate(s.buffer, distribute(cond, s.body, tags))
    if isinstance(s, Let):
        value = s.value
        if not _shuffles(value) and any(isinstance(n, Load) for n in walk(value)):
            # the load may be out of bounds where cond fails (a shuffle reads a register: every lane runs it)
            value = select(cond, value, Const(0.0 if value.dtype.is_float else 0, value.dtype), guarded=True)
        return Let(s.var, value, distribute(cond, s.body, tags))
    if isinstance(s, IfThen):
        other = None if s.else_body is None else distribute(cond, s.else_body, tags)
        return IfThen(s.cond, distribute(cond, s.then_body, tags), other)
    return IfThen(cond, s)


class _SinkThreadGuards(StmtMutator):
    def __init__(self):
        self.tags: Tags = frozenset()
        self.thread_vars: Set[int] = set()     # ids of the enclosing thread loops' variables

    def visit_For(self, s: For) -> Stmt:
        if not _thread_loop(s):
            return s.with_body(self.visit(s.body))
        if s.thread_tag in self.tags:
            return s     # a cooperative stage: its own guards keep it in its domain, and it has no barriers
        outer_tags, outer_vars = self.tags, self.thread_vars
        self.tags, self.thread_vars = self.tags | {s.thread_tag}, self.thread_vars | {id(s.var)}
        try:
            return s.with_body(self.visit(s.body))
        finally:
            self.tags, self.thread_vars = outer_tags, outer_vars

    def visit_IfThen(self, s: IfThen) -> Stmt:
        s = super().visit_IfThen(s)      # inner guards first
        if (isinstance(s, IfThen) and s.else_body is None and any(id(v) in self.thread_vars for v in free_vars(s.cond))
                and needs_all_threads(s.then_body, self.tags)):
            return distribute(s.cond, s.then_body, self.tags)
        return s


def sink_thread_guards(body: Stmt) -> Stmt:
    """The body with every thread-dependent guard moved off barriers and cooperative stages."""
    return _SinkThreadGuards().visit(body)
