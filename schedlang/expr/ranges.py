"""LoopRanges: the inclusive range of each loop variable (and bound let) in force at a point of
a walk over a statement, kept as the walk enters and leaves loops.

It is a dict Var -> (lo, hi), so it goes straight to simplify, const_bounds and
fits_without_wrap; it changes only through its methods, which keep what those readers want
without a scan: `version` (a new number whenever a range comes or goes), `proof_memo()` (a memo
that holds while the ranges do) and `symbolic` (whether some end is an expression of size
variables).
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Dict, Iterator, List, Mapping, Tuple

from ..errors import InternalError
from .nodes import Expr, Var

_ABSENT = object()      # no range for the variable before it was entered


class LoopRanges(dict):
    """Var -> inclusive (lo, hi): ints, or expressions of size variables.

    enter(var, extent) / leave(var) around a loop's body (or `with ranges.loop(var, extent):`);
    bind(var, lo, hi) / leave(var) for any other scoped range (a let's value); add(var, lo, hi)
    for one that holds everywhere (a size variable, a loop of bound inference). Scopes nest: leave
    undoes the innermost enter or bind, restoring what a shadowed variable had before.

    constant_only: a loop of symbolic extent gives its variable no range (the renderers' proofs
    that index arithmetic cannot wrap work on int bounds)."""

    def __init__(self, outer: Mapping[Var, Tuple[object, object]] = (), constant_only: bool = False):
        super().__init__(outer)
        self.constant_only = constant_only
        self._scopes: List[Tuple[Var, object]] = []      # (var, its range before), innermost last
        self.version = 0
        self._symbolic_at = (-1, False)                  # (version, answer)
        self._memo_at = (-1, None)                       # (version, proof_memo's pair)

    def enter(self, var: Var, extent) -> None:
        """var runs over [0, extent) until leave(var); extent an int, an expression, or None
        (no range known: the variable has none until leave)."""
        if extent is None or (self.constant_only and not isinstance(extent, int)):
            self._scopes.append((var, self.get(var, _ABSENT)))
            self.pop(var, None)
            self.version += 1
        else:
            self.bind(var, 0, extent - 1)

    def bind(self, var: Var, lo, hi) -> None:
        """var lies in [lo, hi] until leave(var)."""
        self._scopes.append((var, self.get(var, _ABSENT)))
        self.add(var, lo, hi)

    def add(self, var: Var, lo, hi) -> None:
        """var lies in [lo, hi] from now on."""
        self[var] = (lo, hi)
        self.version += 1

    def leave(self, var: Var) -> None:
        """End the innermost scope, which must be var's."""
        inner, before = self._scopes.pop() if self._scopes else (None, _ABSENT)
        if inner is not var:
            raise InternalError(f"LoopRanges.leave({var.name}) outside its scope "
                                f"(innermost: {'none' if inner is None else inner.name})")
        if before is _ABSENT:
            self.pop(var, None)         # (none where the scope gave it no range)
        else:
            self[var] = before
        self.version += 1

    @contextmanager
    def loop(self, var: Var, extent) -> Iterator[None]:
        """enter(var, extent) for the body of a with statement."""
        self.enter(var, extent)
        try:
            yield
        finally:
            self.leave(var)

    def proof_memo(self) -> Tuple[Dict, Dict]:
        """A memo for proofs under the ranges in force (fits_without_wrap's pair of dicts): the
        same pair until a range comes or goes, as what is proven depends on the ranges."""
        version, memo = self._memo_at
        if version != self.version:
            memo = ({}, {})
            self._memo_at = (self.version, memo)
        return memo

    @property
    def symbolic(self) -> bool:
        """Whether some range has an end that is an expression (simplify's symbolic=)."""
        version, answer = self._symbolic_at
        if version != self.version:
            answer = any(isinstance(lo, Expr) or isinstance(hi, Expr) for lo, hi in self.values())
            self._symbolic_at = (self.version, answer)
        return answer
