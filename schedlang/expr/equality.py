"""Structural equality and hashable keys of expressions: variables and buffers are
themselves, every other node is equal to any node of the same type and equal fields."""
from __future__ import annotations

from typing import Any, Dict, Optional, Set, Tuple

from .functor import field_names
from .nodes import Buffer, Const, Expr, Var


def equal(a: Any, b: Any, _same: Optional[Set[Tuple[int, int]]] = None) -> bool:
    """Structural equality: identical variables, buffers and tensors; equal everything else.
    Pairs of shared subexpressions already found equal are not compared again (_same)."""
    if a is b:
        return True
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(equal(x, y, _same) for x, y in zip(a, b))
    if type(a) is not type(b):
        return False
    if isinstance(a, Expr) and not isinstance(a, Var):
        if isinstance(a, Const):
            return a.dtype == b.dtype and a.value == b.value and type(a.value) is type(b.value)
        _same = set() if _same is None else _same
        if (id(a), id(b)) in _same:
            return True
        if all(equal(getattr(a, n), getattr(b, n), _same) for n in field_names(a)):
            _same.add((id(a), id(b)))    # a and b stay alive during the call: ids are not reused
            return True
        return False
    if isinstance(a, (Expr, Buffer)):
        return False
    try:
        return bool(a == b)
    except TypeError:
        return False


# Marks a key kept on a node as made here: a pickled or deep-copied node carries a copy of
# this object (not it), so its kept key, which names variables by id, is made again.
_THIS_PROCESS = object()


class _Key(tuple):
    """The key of a compound node; its hash is computed once, so that hashing the key of an
    expression with shared subexpressions (whose keys are shared too) takes linear time."""

    def __hash__(self) -> int:
        h = self.__dict__.get("hash")
        if h is None:
            h = self.__dict__["hash"] = tuple.__hash__(self)
        return h

    def __eq__(self, other) -> bool:
        return self is other or (isinstance(other, tuple) and hash(self) == hash(other) and tuple.__eq__(self, other))

    def __ne__(self, other) -> bool:
        return not self == other


def key(e: Any, _memo: Optional[Dict[int, Any]] = None) -> Any:
    """A hashable structural key: two expressions are equal iff their keys are equal.
    A compound node's key is kept on the node after the first call (nodes are immutable, and
    the variables and buffers its key names by id live as long as it does; _THIS_PROCESS):
    the simplifier asks for the key of every atom of every linear form, again at each pass
    (ResNet-50's build spent ~13 % of its time here). A subexpression shared by several
    parents so gets one key object. (_memo: unused, kept for callers.)"""
    if isinstance(e, (tuple, list)):
        return tuple(key(x) for x in e)
    if isinstance(e, Const):
        return ("Const", e.value, type(e.value).__name__, e.dtype)
    if isinstance(e, Expr) and not isinstance(e, Var):
        hit = e.__dict__.get("_key")
        if hit is None or hit[0] is not _THIS_PROCESS:
            hit = (_THIS_PROCESS, _Key((type(e).__name__,) + tuple(key(getattr(e, n)) for n in field_names(e))))
            object.__setattr__(e, "_key", hit)
        return hit[1]
    if isinstance(e, (Var, Buffer)) or hasattr(e, "__dataclass_fields__") or not hashable(e):
        return ("id", id(e))
    return e


def hashable(value: Any) -> bool:
    """Whether hash(value) works (a key may hold the value itself)."""
    try:
        hash(value)
        return True
    except TypeError:
        return False
