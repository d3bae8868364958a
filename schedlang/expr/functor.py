"""Generic traversal of expressions: rebuild with mapped children, substitute, collect."""
from __future__ import annotations

from dataclasses import fields
from typing import Callable, Dict, Iterator, Mapping, Optional, Set, Tuple

from .nodes import Expr, Var

_FIELD_NAMES: Dict[type, Tuple[str, ...]] = {}


def field_names(e) -> Tuple[str, ...]:
    """The dataclass field names of e's type, in order (dataclasses.fields, looked up once per
    type: every traversal asks for them at every node)."""
    names = _FIELD_NAMES.get(type(e))
    if names is None:
        names = _FIELD_NAMES[type(e)] = tuple(f.name for f in fields(e))
    return names


def map_children(e: Expr, fn: Callable[[Expr], Expr]) -> Expr:
    """Rebuild e with fn applied to each child expression; returns e itself if nothing changed."""
    changed = False
    values = []
    for name in field_names(e):
        value = getattr(e, name)
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


def children(e: Expr) -> Tuple[Expr, ...]:
    """The child expressions of e, in field order. Kept on the node after the first call
    (nodes are immutable): walks, printers and the simplifier ask again and again."""
    kids = e.__dict__.get("_children")
    if kids is None:
        found = []
        for name in field_names(e):
            value = getattr(e, name)
            if isinstance(value, Expr):
                found.append(value)
            elif isinstance(value, tuple):
                found.extend(v for v in value if isinstance(v, Expr))
        kids = tuple(found)
        object.__setattr__(e, "_children", kids)
    return kids


_NO_VARS: frozenset = frozenset()


def var_set(e: Expr) -> frozenset:
    """The variables e mentions, as a set (no order: free_vars keeps first-seen order). Kept
    on the node after the first call, as children are: substitute asks it of every subtree
    to skip those that mention no variable it replaces (unrolling substitutes into the same
    body once per copy)."""
    if isinstance(e, Var):          # (not kept on a variable: a set holding itself)
        return frozenset((e,))
    found = e.__dict__.get("_vars")
    if found is None:
        found = _NO_VARS
        for kid in children(e):
            kid_vars = var_set(kid)
            if not kid_vars <= found:
                found = kid_vars if not found else found | kid_vars
        object.__setattr__(e, "_vars", found)
    return found


def rewrite_post_order(e: Expr, post: Callable[[Expr], Expr]) -> Expr:
    """post applied to every node after its children were rewritten, once per distinct node:
    an expression that shares subexpressions (`e = e + e`, or a producer inlined twice) is
    a DAG, and rewriting it as a tree would take time exponential in its depth."""
    memo: Dict[int, tuple] = {}

    def go(node: Expr) -> Expr:
        hit = memo.get(id(node))
        if hit is not None:
            return hit[1]
        new = post(map_children(node, go))
        memo[id(node)] = (node, new)    # the node is kept alive, so its id is not reused
        return new

    try:
        return go(e)
    finally:
        go = None       # (see substitute)


class ExprMutator:
    """Rewrites bottom-up; subclasses override visit_<NodeName> for the nodes they care about.

    Within one top-level visit, each distinct node (by identity) is visited once and its
    result reused where the node is shared; so a mutator's result for a node must not
    depend on where in the expression the node sits."""

    _memo = None

    def visit(self, e: Expr) -> Expr:
        memo = self._memo
        if memo is None:
            self._memo = {}
            try:
                return self.visit(e)
            finally:
                self._memo = None
        hit = memo.get(id(e))
        if hit is not None:
            return hit[1]
        method = getattr(self, "visit_" + type(e).__name__, None)
        new = method(e) if method is not None else map_children(e, self.visit)
        memo[id(e)] = (e, new)
        return new


def substitute(e: Expr, mapping: Mapping[Var, Expr]) -> Expr:
    """Replace variables by expressions (keys compared by identity)."""
    if not mapping:
        return e
    memo: Dict[int, tuple] = {}

    def go(node: Expr) -> Expr:
        # nothing to replace below: the node itself (looked up from the smaller side: a mapping
        # may rename every loop of a program, a node may hold many variables)
        found = var_set(node)
        if (found.isdisjoint(mapping) if len(mapping) <= len(found)
                else not any(v in mapping for v in found)):
            return node
        if isinstance(node, Var):
            return mapping.get(node, node)
        hit = memo.get(id(node))
        if hit is None:
            hit = memo[id(node)] = (node, map_children(node, go))    # once per shared node, as rewrite_post_order
        return hit[1]

    try:
        return go(e)
    finally:
        # go refers to itself through its closure: a cycle that only the garbage collector
        # frees, with the memo and every node in it (a compile left ~1 M such objects, whose
        # collection took over a second after ResNet-50's); cut, reference counting frees them
        go = None


def walk(e: Expr, seen: Optional[Set[int]] = None) -> Iterator[Expr]:
    """Every distinct node of e (a node shared by several parents once), parents before children.

    seen: the ids of nodes walked already, shared by several walks run to their end (a node
    walked before is skipped with everything below it): collecting from the expressions of
    many statements, which share subexpressions (an unrolled body's copies), visits each once."""
    stack = [e]
    seen = set() if seen is None else seen
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        yield node
        stack.extend(reversed(children(node)))


def free_vars(e: Expr) -> Dict[Var, None]:
    """The variables e mentions, in first-seen order (a dict used as an ordered set)."""
    return {n: None for n in walk(e) if isinstance(n, Var)}


def uses_var(e: Expr, var: Var) -> bool:
    return var in var_set(e)
