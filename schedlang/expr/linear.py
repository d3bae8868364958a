"""Linear forms of integer expressions: e == sum(coeff * atom) + constant, the shape in which
the simplifier, bound analysis and the vectorizer read index arithmetic."""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from .equality import key
from .nodes import Binary, Const, Expr

Terms = List[Tuple[Expr, int]]


def linear_form(e: Expr) -> Tuple[Terms, int]:
    """Write an integer expression as sum(coeff * atom) + constant (atoms in first-seen order)."""
    order: Dict[object, int] = {}
    terms: Terms = []
    constant = 0
    # depth first, left operand first, with a stack: a recursive closure would refer to itself,
    # a cycle that only the garbage collector frees (~50 K of them in a ResNet-50 compile)
    stack = [(e, 1)]
    while stack:
        node, scale = stack.pop()
        if isinstance(node, Const):
            constant += scale * int(node.value)
        elif isinstance(node, Binary) and node.op in ("add", "sub"):
            stack.append((node.b, scale if node.op == "add" else -scale))
            stack.append((node.a, scale))
        elif isinstance(node, Binary) and node.op == "mul" and isinstance(node.b, Const):
            stack.append((node.a, scale * int(node.b.value)))
        elif isinstance(node, Binary) and node.op == "mul" and isinstance(node.a, Const):
            stack.append((node.b, scale * int(node.a.value)))
        else:
            k = key(node)
            if k in order:
                atom, coeff = terms[order[k]]
                terms[order[k]] = (atom, coeff + scale)
            else:
                order[k] = len(terms)
                terms.append((node, scale))
    return [(a, c) for a, c in terms if c != 0], constant


def is_multiple(index: Expr, m: int) -> bool:
    """Whether an integer expression is provably a multiple of m: the constant of its linear
    form is, and each term's coefficient or atom (x % c with c and x multiples of m, the inner
    part of a split by a multiple of m)."""
    terms, constant = linear_form(index)
    return constant % m == 0 and all(coeff % m == 0 or _multiple_atom(atom, m) for atom, coeff in terms)


def _multiple_atom(atom: Expr, m: int) -> bool:
    return (isinstance(atom, Binary) and atom.op == "floormod" and isinstance(atom.b, Const)
            and atom.b.value % m == 0 and is_multiple(atom.a, m))


def from_linear(terms: Terms, constant: int, dt) -> Expr:
    """Rebuild an expression from a linear form: `a*4 + b - c*2 + 7`. Coefficients that do not
    fit the dtype are wrapped around, which keeps the value (the arithmetic wraps too)."""
    result: Optional[Expr] = None
    for atom, coeff in terms:
        if dt.is_int and not -dt.max_int <= coeff <= dt.max_int:
            coeff = wrap_int(coeff, dt)
        if coeff == 0:
            continue
        if abs(coeff) > dt.max_int:       # INT_MIN: no positive twin, so add atom * INT_MIN
            piece, coeff = Binary("mul", atom, Const(coeff, dt)), 1
        else:
            piece = atom if abs(coeff) == 1 else Binary("mul", atom, Const(abs(coeff), dt))
        if result is None:
            result = piece if coeff > 0 else Binary("sub", Const(0, dt), piece)
        else:
            result = Binary("add" if coeff > 0 else "sub", result, piece)
    if result is None:
        return Const(constant, dt)
    if constant > 0:
        return Binary("add", result, Const(constant, dt))
    if constant < 0 and -constant <= dt.max_int:
        return Binary("sub", result, Const(-constant, dt))
    if constant < 0:                  # INT_MIN has no positive twin
        return Binary("add", result, Const(constant, dt))
    return result


def wrap_int(value: int, dt) -> int:
    """value wrapped around into dt's range (two's complement; uint modulo 2**bits)."""
    bits = dt.bits
    if dt.kind == "uint":
        return value % (1 << bits)
    value %= 1 << bits
    return value - (1 << bits) if value >= 1 << (bits - 1) else value
