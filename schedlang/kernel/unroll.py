"""unroll_loops: replace each unrolled loop by copies of its body (and honour the
auto_unroll_max_step pragma for the loops nested inside one); a loop of one iteration
becomes its body."""
from __future__ import annotations

import math

from ..expr.nodes import Const
from ..schedule.annotate import MAX_UNROLL
from ..loop.functor import StmtMutator, substitute_stmt, walk_stmts
from ..loop.nodes import BOUND, SERIAL, UNROLLED, For, Stmt, seq


MAX_UNROLLED_STMTS = 1 << 15     # statements one auto-unrolled loop may expand to


class _Unroll(StmtMutator):
    def __init__(self):
        self.auto_limit = 0

    def visit_For(self, s: For) -> Stmt:
        limit = dict(s.pragmas).get("auto_unroll_max_step")
        saved = self.auto_limit
        if limit is not None:
            self.auto_limit = int(limit)
        body = self.visit(s.body)
        self.auto_limit = saved
        if not isinstance(s.extent, int):     # a symbolic trip count: the loop stays a loop
            return s.with_body(body)
        trips = _inner_trips(s.body)     # the nest before unrolling: copies of unrolled loops count
        # Whatever the pragma's value, auto-unrolling makes at most MAX_UNROLL copies of the
        # nest and MAX_UNROLLED_STMTS statements (a huge value would otherwise hang the build).
        auto = (limit is None and s.kind == SERIAL and self.auto_limit > 0
                and trips is not None and s.extent * trips <= min(self.auto_limit, MAX_UNROLL)
                and s.extent * _stmt_count(body) <= MAX_UNROLLED_STMTS)
        one_trip = s.extent == 1 and s.kind != BOUND     # a loop of one iteration is just its body
        if s.kind == UNROLLED or auto or one_trip:
            return seq(*(substitute_stmt(body, {s.var: Const(i, s.var.dtype)}) for i in range(s.extent)))
        return s.with_body(body)


def _stmt_count(s: Stmt) -> int:
    return sum(1 for _ in walk_stmts(s))


def _inner_trips(s: Stmt):
    """Iterations of the loops nested in s, or None when one has a symbolic extent."""
    trips = [x.extent for x in walk_stmts(s) if isinstance(x, For)]
    if any(not isinstance(t, int) for t in trips):
        return None
    return math.prod(trips) if trips else 1


def unroll_loops(body: Stmt) -> Stmt:
    return _Unroll().visit(body)
