"""Generic statement traversal: a mutator that rebuilds only what changed."""
from __future__ import annotations

from typing import Dict, Iterator, List

from ..expr.functor import substitute, walk
from ..expr.nodes import Buffer, Expr, Load
from .nodes import Allocate, Barrier, CallPacked, Evaluate, For, IfThen, Let, Seq, StageNest, Stmt, Store, seq


class StmtMutator:
    """Rewrites statements; override visit_<Node> for statements and visit_expr for expressions."""

    def visit(self, s: Stmt) -> Stmt:
        return getattr(self, "visit_" + type(s).__name__)(s)

    def visit_expr(self, e: Expr) -> Expr:
        return e

    def visit_For(self, s: For) -> Stmt:
        return s.with_body(self.visit(s.body))

    def visit_Store(self, s: Store) -> Stmt:
        idx = tuple(self.visit_expr(i) for i in s.indices)
        value = self.visit_expr(s.value)
        pred = None if s.predicate is None else self.visit_expr(s.predicate)
        if value is s.value and pred is s.predicate and all(a is b for a, b in zip(idx, s.indices)):
            return s
        return Store(s.buffer, idx, value, pred)

    def visit_IfThen(self, s: IfThen) -> Stmt:
        cond = self.visit_expr(s.cond)
        then = self.visit(s.then_body)
        other = None if s.else_body is None else self.visit(s.else_body)
        if cond is s.cond and then is s.then_body and other is s.else_body:
            return s
        return IfThen(cond, then, other)

    def visit_Seq(self, s: Seq) -> Stmt:
        parts = [self.visit(x) for x in s.stmts]
        if all(a is b for a, b in zip(parts, s.stmts)):
            return s
        return seq(*parts)

    def visit_Allocate(self, s: Allocate) -> Stmt:
        # A chain of Allocates (a model's hundreds of intermediate buffers, one inside the
        # other) is walked in a loop, not by recursion; an override of visit_Allocate in a
        # subclass is still called for every one.
        chain = [s]
        if type(self).visit_Allocate is StmtMutator.visit_Allocate:
            while isinstance(chain[-1].body, Allocate):
                chain.append(chain[-1].body)
        out = self.visit(chain[-1].body)
        for a in reversed(chain):
            out = a if out is a.body else Allocate(a.buffer, out)
        return out

    def visit_Let(self, s: Let) -> Stmt:
        value, body = self.visit_expr(s.value), self.visit(s.body)
        return s if value is s.value and body is s.body else Let(s.var, value, body)

    def visit_Barrier(self, s: Barrier) -> Stmt:
        return s

    def visit_CallPacked(self, s: CallPacked) -> Stmt:
        return s

    def visit_ThreadAllReduce(self, s) -> Stmt:
        return s

    def visit_Evaluate(self, s: Evaluate) -> Stmt:
        value = self.visit_expr(s.value)
        return s if value is s.value else Evaluate(value)

    def visit_StageNest(self, s: StageNest) -> Stmt:
        body = self.visit(s.body)
        return s if body is s.body else StageNest(s.stage, body)


def walk_stmts(s: Stmt) -> Iterator[Stmt]:
    """Every statement, parents first."""
    while isinstance(s, Allocate):     # a chain of them: a loop, not recursion (see visit_Allocate)
        yield s
        s = s.body
    yield s
    if isinstance(s, (For, Allocate, Let, StageNest)):
        yield from walk_stmts(s.body)
    elif isinstance(s, IfThen):
        yield from walk_stmts(s.then_body)
        if s.else_body is not None:
            yield from walk_stmts(s.else_body)
    elif isinstance(s, Seq):
        for x in s.stmts:
            yield from walk_stmts(x)


def stmt_exprs(s: Stmt) -> Iterator[Expr]:
    """The expressions a statement holds directly (not those of nested statements)."""
    if isinstance(s, Store):
        yield from s.indices
        yield s.value
        if s.predicate is not None:
            yield s.predicate
    elif isinstance(s, IfThen):
        yield s.cond
    elif isinstance(s, (Let, Evaluate)):
        yield s.value


class _Substitute(StmtMutator):
    def __init__(self, mapping):
        self.mapping = mapping

    def visit_expr(self, e: Expr) -> Expr:
        return substitute(e, self.mapping)


def substitute_stmt(s: Stmt, mapping) -> Stmt:
    """Replace variables by expressions throughout a statement."""
    return _Substitute(mapping).visit(s)


def buffers_used(s: Stmt) -> List[Buffer]:
    """The buffers a statement loads from or stores to, in first-use order."""
    seen: Dict[Buffer, None] = {}
    walked: set = set()          # nodes shared between statements are walked once
    for x in walk_stmts(s):
        if isinstance(x, Store):
            seen.setdefault(x.buffer, None)
        if isinstance(x, CallPacked):
            for b in x.buffers:
                seen.setdefault(b, None)
        for e in stmt_exprs(x):
            for n in walk(e, walked):
                if isinstance(n, Load):
                    seen.setdefault(n.buffer, None)
    return list(seen)
