"""Generic traversal of expressions: rebuild with mapped children, substitute, collect."""
from __future__ import annotations

from dataclasses import fields
from typing import Callable, Dict, Iterator, Mapping

from .nodes import Expr, Var


def map_children(e: Expr, fn: Callable[[Expr], Expr]) -> Expr:
    """Rebuild e with fn applied to each child expression; returns e itself if nothing changed."""
    changed = False
    values = []
    for f in fields(e):
        value = getattr(e, f.name)
        if isinstance(value, Expr):
            new = fn(value)
        elif isinstance(value, tuple) and any(isinstance(v, Expr) for v in value):
            new = tuple(fn(v) if isinstance(v, Expr) else v for v in value)
            if all(a is b for a, b in zip(new, value)):
                new = value
        else:
            new = value
        changed = changed or new is not value
        values.append(new)
    return type(e)(*values) if changed else e


def children(e: Expr) -> Iterator[Expr]:
    for f in fields(e):
        value = getattr(e, f.name)
        if isinstance(value, Expr):
            yield value
        elif isinstance(value, tuple):
            yield from (v for v in value if isinstance(v, Expr))


class ExprMutator:
    """Rewrites bottom-up; subclasses override visit_<NodeName> for the nodes they care about."""

    def visit(self, e: Expr) -> Expr:
        method = getattr(self, "visit_" + type(e).__name__, None)
        if method is not None:
            return method(e)
        return map_children(e, self.visit)


def substitute(e: Expr, mapping: Mapping[Var, Expr]) -> Expr:
    """Replace variables by expressions (keys compared by identity)."""
    if not mapping:
        return e

    def go(node: Expr) -> Expr:
        if isinstance(node, Var):
            return mapping.get(node, node)
        return map_children(node, go)

    return go(e)


def walk(e: Expr) -> Iterator[Expr]:
    """Every node of e, parents before children."""
    stack = [e]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(list(children(node))))


def free_vars(e: Expr) -> Dict[Var, None]:
    """The variables e mentions, in first-seen order (a dict used as an ordered set)."""
    return {n: None for n in walk(e) if isinstance(n, Var)}


def uses_var(e: Expr, var: Var) -> bool:
    return any(n is var for n in walk(e))
