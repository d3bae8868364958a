"""Structural equality and hashable keys of expressions: variables and buffers are
themselves, every other node is equal to any node of the same type and equal fields."""
from __future__ import annotations

from dataclasses import fields
from typing import Any

from .nodes import Buffer, Const, Expr, Var


def equal(a: Any, b: Any) -> bool:
    """Structural equality: identical variables, buffers and tensors; equal everything else."""
    if a is b:
        return True
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(equal(x, y) for x, y in zip(a, b))
    if type(a) is not type(b):
        return False
    if isinstance(a, Expr) and not isinstance(a, Var):
        if isinstance(a, Const):
            return a.dtype == b.dtype and a.value == b.value and type(a.value) is type(b.value)
        return all(equal(getattr(a, f.name), getattr(b, f.name)) for f in fields(a))
    if isinstance(a, (Expr, Buffer)):
        return False
    try:
        return bool(a == b)
    except TypeError:
        return False


def key(e: Any) -> Any:
    """A hashable structural key: two expressions are equal iff their keys are equal."""
    if isinstance(e, (tuple, list)):
        return tuple(key(x) for x in e)
    if isinstance(e, Const):
        return ("Const", e.value, type(e.value).__name__, e.dtype)
    if isinstance(e, Expr) and not isinstance(e, Var):
        return (type(e).__name__,) + tuple(key(getattr(e, f.name)) for f in fields(e))
    if isinstance(e, (Var, Buffer)) or hasattr(e, "__dataclass_fields__") or not _hashable(e):
        return ("id", id(e))
    return e


def _hashable(value: Any) -> bool:
    try:
        hash(value)
        return True
    except TypeError:
        return False
