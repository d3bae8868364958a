"""widen_index_arith: integer arithmetic that could wrap around in its dtype is done in int64.

Loop variables, indices and guards are int32. int32 add, sub and mul wrap modulo 2**32, so a
wrapped intermediate still gives the true value wherever that value fits: the index of an
element that is accessed (buffers hold at most 2**31 - 1 elements, checked at build or
call time) is right even when a term of it wrapped. Only an operation that is not modular
sees the wrap: a comparison (a split's tail guard `o * 3 + i < n`), a division or modulo,
min/max, a shift, a cast. So, before each such operation, an int32 operand whose add, sub
or mul terms are not proven to stay within int32 is rebuilt in int64, and an int32 result
is cast back (its operands now exact). The proof takes the loop ranges, the bounds of let
values, and the dtype range of the size variables (the call checks their values).

Terms that depend on loaded data keep the semantics of their dtype: nothing bounds them.
Ordinary programs are unchanged (their terms are proven far from 2**31), so their code is
byte-identical; a symbolic extent (n + 2) // 3 is computed in int64 as n may be 2**31 - 1.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Set

from ..dtypes import int64
from ..expr.bounds import const_bounds
from ..expr.functor import children, rewrite_post_order, var_set
from ..expr.ranges import LoopRanges
from ..expr.nodes import Binary, Cast, Compare, Expr, Load, Var, cast
from ..loop.functor import StmtMutator
from ..loop.nodes import For, Let, Stmt

ARITH_OPS = ("add", "sub", "mul")                    # can leave the dtype's range
MODULAR_OPS = ARITH_OPS + ("bitand", "bitor", "bitxor", "shl")   # exact modulo 2**bits


def _is_narrow_int(e: Expr) -> bool:
    """A signed integer narrower than 64 bits (index arithmetic; unsigned wrap-around is
    the meaning of uint arithmetic, left as it is)."""
    return e.dtype.kind == "int" and e.dtype.bits < 64


class _Widen(StmtMutator):
    def __init__(self):
        self.ranges = LoopRanges()
        self.opaque: Set[Var] = set()      # let variables of unknown bounds (loaded data)

    def visit_For(self, s: For) -> Stmt:
        extent = self.visit_expr(s.extent) if isinstance(s.extent, Expr) else s.extent
        with self.ranges.loop(s.var, extent):
            body = self.visit(s.body)
        if extent is s.extent and body is s.body:
            return s
        return replace(s, extent=extent, body=body)

    def visit_Let(self, s: Let) -> Stmt:
        value = self.visit_expr(s.value)
        lo, hi = const_bounds(value, self.ranges) if value.dtype.is_int else (None, None)
        known = not (lo is None or hi is None or self._opaque(value, ({}, {})))
        if known:
            self.ranges.bind(s.var, lo, hi)
        else:
            self.opaque.add(s.var)
        body = self.visit(s.body)
        if known:
            self.ranges.leave(s.var)
        else:
            self.opaque.discard(s.var)
        return s if value is s.value and body is s.body else Let(s.var, value, body)

    def visit_expr(self, e: Expr) -> Expr:
        for v in var_set(e):         # size variables: any value of their dtype (the call checks it)
            if v not in self.ranges and v not in self.opaque and v.dtype.is_int:
                self.ranges.add(v, 0 if v.nonnegative else v.dtype.min_int, v.dtype.max_int)
        memo = ({}, {})     # const_bounds' and _opaque's, each id -> (node, answer)
        return rewrite_post_order(e, lambda node: self._widen_operands(node, memo))

    def _opaque(self, e: Expr, memo) -> bool:
        """Whether e depends on loaded data (a load, or a let variable bound to one); memo is
        visit_expr's pair, whose second dict holds these answers."""
        hit = memo[1].get(id(e))
        if hit is None:      # from the children's answers: a walk from every node is quadratic
            answer = (isinstance(e, Load) or (isinstance(e, Var) and e in self.opaque)
                      or any(self._opaque(x, memo) for x in children(e)))
            hit = memo[1][id(e)] = (e, answer)
        return hit[1]

    def _may_wrap(self, e: Expr, memo) -> bool:
        """Whether a modular term of e (above its non-modular operations, already exact) is
        not proven to stay within its dtype, leaving aside terms of loaded data."""
        if not (isinstance(e, Binary) and e.op in MODULAR_OPS and _is_narrow_int(e)):
            return False
        if e.op in ARITH_OPS:
            lo, hi = const_bounds(e, self.ranges, memo[0])
            if lo is not None and hi is not None:
                if not e.dtype.min_int <= lo <= hi <= e.dtype.max_int:
                    return True
            elif not self._opaque(e, memo):
                return True
        return self._may_wrap(e.a, memo) or self._may_wrap(e.b, memo)

    def _widen_operands(self, e: Expr, memo) -> Expr:
        if isinstance(e, Binary) and e.op in MODULAR_OPS or not isinstance(e, (Binary, Compare, Cast)):
            return e      # (an intrinsic Call computes in its operands' dtype: left as written)
        operands = [e.value] if isinstance(e, Cast) else [e.a, e.b]
        if not any(_is_narrow_int(x) and self._may_wrap(x, memo) for x in operands):
            return e
        if isinstance(e, Cast):
            wide = _to_int64(e.value, self, memo)
            return wide if wide.dtype == e.dtype else cast(e.dtype, wide)
        a, b = _to_int64(e.a, self, memo), _to_int64(e.b, self, memo)
        wide = type(e)(e.op, a, b)
        return wide if isinstance(e, Compare) else cast(e.dtype, wide)


def _to_int64(e: Expr, w: _Widen, memo) -> Expr:
    """e computed in int64: the modular terms that may wrap are rebuilt, the rest cast."""
    dt = int64.with_lanes(e.dtype.lanes)
    if isinstance(e, Cast) and e.value.dtype == dt and _is_narrow_int(e):
        return e.value       # a result cast back from int64 by _widen_operands: take it exact
    if isinstance(e, Binary) and e.op in MODULAR_OPS and _is_narrow_int(e) and w._may_wrap(e, memo):
        return Binary(e.op, _to_int64(e.a, w, memo), _to_int64(e.b, w, memo))
    return cast(dt, e)


def widen_index_arith(body: Stmt) -> Stmt:
    return _Widen().visit(body)
