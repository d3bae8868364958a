"""simplify_stmt: simplify every expression with the ranges of the loops around it, and
drop branches whose condition is decided."""
from __future__ import annotations

from dataclasses import replace
from typing import Dict, Tuple

from ..expr.nodes import Const, Expr, Var
from ..expr.ranges import LoopRanges
from ..expr.simplify import Simplifier
from .functor import StmtMutator
from .nodes import For, Func, IfThen, Stmt, seq


class _Simplify(StmtMutator):
    def __init__(self, ranges: Dict[Var, Tuple[int, int]]):
        self.ranges = LoopRanges(ranges)
        self.simplify = Simplifier(self.ranges)     # reads self.ranges as loops come and go

    def visit_expr(self, e: Expr) -> Expr:
        return self.simplify(e)

    def visit_For(self, s: For) -> Stmt:
        with self.ranges.loop(s.var, s.extent):
            body = self.visit(s.body)
        return s.with_body(body)

    def visit_IfThen(self, s: IfThen) -> Stmt:
        cond = self.visit_expr(s.cond)
        if isinstance(cond, Const):
            chosen = s.then_body if cond.value else s.else_body
            return self.visit(chosen) if chosen is not None else seq()
        then = self.visit(s.then_body)
        other = None if s.else_body is None else self.visit(s.else_body)
        return IfThen(cond, then, other)


def simplify_stmt(s: Stmt, ranges: Dict[Var, Tuple[int, int]] = None) -> Stmt:
    return _Simplify(ranges or {}).visit(s)


def simplify_func(func: Func) -> Func:
    """The function with its body simplified (simplify_stmt)."""
    return replace(func, body=simplify_stmt(func.body))
