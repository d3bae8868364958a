"""Python-like text for expressions, with the fewest parentheses that keep the meaning."""
from __future__ import annotations

import math
from typing import Dict, List, Set

from .functor import children
from .nodes import (NEG, Binary, Broadcast, Call, Cast, Compare, Const, Load, Logical, Not, Ramp,
                    Select, Var)

_INFIX = {"add": ("+", 9), "sub": ("-", 9), "mul": ("*", 10), "div": ("/", 10),
          "floordiv": ("//", 10), "floormod": ("%", 10), "bitand": ("&", 7), "bitxor": ("^", 6),
          "bitor": ("|", 5), "shl": ("<<", 8), "shr": (">>", 8)}
_COMPARE = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
_LOGIC = {"and": ("and", 2), "or": ("or", 1)}
_ATOM = 100


def const_str(e: Const) -> str:
    value = e.value
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, float):
        if value != value:
            return "-nan" if math.copysign(1.0, value) < 0 else "nan"      # numpy's negative(nan)
        if value in (float("inf"), float("-inf")):
            return "inf" if value > 0 else "-inf"
        text = repr(value)
        return text
    return str(value)


# A subexpression used more than once and at least this big (counted as a tree) prints once,
# named with a walrus, `(_1 := ...)`, and by its name afterwards: a DAG of shared
# subexpressions (`e = e + e` thirty times) would otherwise print as 2**30 terms. Smaller
# shared pieces (a load read twice after inlining) print in full, as before.
SHARED_NAME_MIN_SIZE = 16


def expr_str(e) -> str:
    return _Printer(e).text(e)


def _shared_nodes(root) -> Set[int]:
    """ids of the nodes to print once by name (see SHARED_NAME_MIN_SIZE)."""
    post = _post_order(root)
    if sum(1 for n in post for _ in children(n)) == len(post) - 1:
        return set()                     # a tree: nothing is shared
    size: Dict[int, int] = {}
    for node in post:                    # tree sizes, children first
        size[id(node)] = 1 + sum(size[id(c)] for c in children(node))
    uses: Dict[int, int] = {id(root): 1}
    for node in reversed(post):          # how often each node would print, parents first
        for c in children(node):
            uses[id(c)] = uses.get(id(c), 0) + uses[id(node)]
    return {i for i, n in uses.items() if n > 1 and size[i] >= SHARED_NAME_MIN_SIZE}


def _post_order(root) -> List:
    """Distinct nodes, each after all of its children."""
    post, seen, stack = [], set(), [(root, False)]
    while stack:
        node, done = stack.pop()
        if done:
            post.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        stack.extend((c, False) for c in children(node))
    return post


class _Printer:
    """Text of one expression; shared nodes are named at their first appearance."""

    def __init__(self, root):
        self.shared = _shared_nodes(root)
        self.names: Dict[int, str] = {}

    def text(self, e) -> str:
        return self.fmt(e)[0]

    def wrap(self, e, level: int, right: bool = False) -> str:
        text, prec = self.fmt(e)
        if prec < level or (right and prec == level):
            return f"({text})"
        return text

    def fmt(self, e):
        """Return (text, precedence) of e."""
        if id(e) not in self.shared:
            return self.node(e)
        if id(e) in self.names:
            return self.names[id(e)], _ATOM
        name = self.names[id(e)] = f"_{len(self.names) + 1}"
        return f"({name} := {self.node(e)[0]})", _ATOM

    def node(self, e):
        expr_str, _wrap = self.text, self.wrap
        if isinstance(e, Var):
            return e.name, _ATOM
        if isinstance(e, Const):
            text = const_str(e)
            return text, (_ATOM if not text.startswith("-") else 11)
        if isinstance(e, Binary):
            if e.op in ("min", "max", "truncdiv", "truncmod"):
                return f"{e.op}({expr_str(e.a)}, {expr_str(e.b)})", _ATOM
            if e.op == "sub" and isinstance(e.a, Const) and e.a.value == 0 and not e.dtype.is_float:
                return f"-{_wrap(e.b, 11)}", 11     # a float 0.0 - x is not -x (signed zeros)
            sym, prec = _INFIX[e.op]
            return f"{_wrap(e.a, prec)} {sym} {_wrap(e.b, prec, right=True)}", prec
        if isinstance(e, Compare):
            return f"{_wrap(e.a, 5)} {_COMPARE[e.op]} {_wrap(e.b, 5)}", 4
        if isinstance(e, Logical):
            sym, prec = _LOGIC[e.op]
            return f"{_wrap(e.a, prec)} {sym} {_wrap(e.b, prec, right=True)}", prec
        if isinstance(e, Not):
            return f"not {_wrap(e.a, 3)}", 3
        if isinstance(e, Select):
            name = "if_then_else" if e.guarded else "select"
            return f"{name}({expr_str(e.cond)}, {expr_str(e.true_value)}, {expr_str(e.false_value)})", _ATOM
        if isinstance(e, Cast):
            return f"{e.dtype}({expr_str(e.value)})", _ATOM
        if isinstance(e, Call) and e.name == NEG:
            return f"-{_wrap(e.args[0], 11)}", 11
        if isinstance(e, Call) and e.name.startswith("extern:"):
            args = "".join(", " + expr_str(a) for a in e.args)
            return f'call_pure_extern("{e.dtype}", "{e.name[len("extern:"):]}"{args})', _ATOM
        if isinstance(e, Call):
            return f"{e.name}({', '.join(expr_str(a) for a in e.args)})", _ATOM
        if isinstance(e, Ramp):
            return f"ramp({expr_str(e.base)}, {expr_str(e.stride)}, {e.lanes})", _ATOM
        if isinstance(e, Broadcast):
            return f"x{e.lanes}({expr_str(e.value)})", _ATOM
        if isinstance(e, Load):
            idx = ", ".join(expr_str(i) for i in e.indices)
            if e.predicate is not None:
                idx += f", if={expr_str(e.predicate)}"
            return f"{e.buffer.name}[{idx}]", _ATOM
        custom = getattr(e, "format", None)
        if custom is not None:
            return custom(expr_str), _ATOM
        raise TypeError(f"cannot print {type(e).__name__}")
