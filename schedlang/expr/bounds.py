"""Integer interval analysis: constant bounds, and symbolic bounds with some variables relaxed."""
from __future__ import annotations

import math
from typing import Dict, Mapping, Optional, Tuple

from .nodes import Binary, Cast, Const, Expr, Select, Var, binary
from .functor import free_vars
from .linear import from_linear, linear_form

Interval = Tuple[Optional[int], Optional[int]]   # None = unbounded on that side
VarRanges = Mapping[Var, Tuple[object, object]]  # inclusive [lo, hi]: ints, or expressions of size variables


def const_bounds(e: Expr, ranges: VarRanges, _memo: Optional[Dict[int, tuple]] = None) -> Interval:
    """Inclusive constant bounds of an integer expression, given inclusive ranges of variables
    (once per distinct node: a shared subexpression is bounded once, _memo)."""
    if isinstance(e, (Const, Var)):
        return _const_bounds(e, ranges, _memo)
    _memo = {} if _memo is None else _memo
    hit = _memo.get(id(e))
    if hit is None:
        hit = _memo[id(e)] = (e, _const_bounds(e, ranges, _memo))
    return hit[1]


def _const_bounds(e: Expr, ranges: VarRanges, memo) -> Interval:
    if isinstance(e, Const):
        return (int(e.value), int(e.value)) if not isinstance(e.value, float) else (None, None)
    if isinstance(e, Var):
        if e not in ranges:
            return (0 if e.nonnegative else None), None
        lo, hi = ranges[e]
        if isinstance(lo, Expr):      # a loop over a symbolic extent: bounds are expressions
            lo = const_bounds(lo, ranges)[0]
        if isinstance(hi, Expr):
            hi = const_bounds(hi, ranges)[1]
        return lo, hi
    if isinstance(e, Cast) and e.dtype.is_int and e.value.dtype.is_int:
        return const_bounds(e.value, ranges, memo)
    if isinstance(e, Select):
        t, f = const_bounds(e.true_value, ranges, memo), const_bounds(e.false_value, ranges, memo)
        return _min_opt(t[0], f[0]), _max_opt(t[1], f[1])
    if isinstance(e, Binary) and e.dtype.is_int:
        a = const_bounds(e.a, ranges, memo)
        b = const_bounds(e.b, ranges, memo)
        lo, hi = _binary_bounds(e.op, a, b)
        if e.op == "floormod" and isinstance(e.b, Const) and e.b.value > 0 and lo is not None:
            lo, hi = _mod_residues(e, lo, hi)
        return lo, hi
    return (None, None)


def _mod_residues(e: Binary, lo: int, hi: int) -> Interval:
    """Narrow the bounds of x % c to the residues x can have: when every coefficient of x
    is a multiple of g (g dividing c), x % c is r, r + g, ..., with r = x's constant mod g."""
    c = int(e.b.value)
    terms, constant = linear_form(e.a)
    g = c
    for _, k in terms:
        g = math.gcd(g, k)
    if g == 1:
        return lo, hi
    r = constant % g
    first = lo + (r - lo) % g          # the smallest value >= lo that is r mod g
    last = hi - (hi - r) % g           # the largest value <= hi that is r mod g
    return (first, last) if first <= last else (lo, hi)


def _min_opt(x, y):
    return None if x is None or y is None else min(x, y)


def _max_opt(x, y):
    return None if x is None or y is None else max(x, y)


def _binary_bounds(op: str, a: Interval, b: Interval) -> Interval:
    (alo, ahi), (blo, bhi) = a, b
    if op == "add":
        return (None if alo is None or blo is None else alo + blo,
                None if ahi is None or bhi is None else ahi + bhi)
    if op == "sub":
        return (None if alo is None or bhi is None else alo - bhi,
                None if ahi is None or blo is None else ahi - blo)
    if op == "mul":
        if None in (alo, ahi, blo, bhi):
            if blo is not None and blo == bhi:
                return _scale(a, blo)
            if alo is not None and alo == ahi:
                return _scale(b, alo)
            return (None, None)
        products = [alo * blo, alo * bhi, ahi * blo, ahi * bhi]
        return min(products), max(products)
    if op == "floordiv":
        if blo is not None and blo == bhi and blo > 0:
            return (None if alo is None else alo // blo, None if ahi is None else ahi // blo)
        return (None, None)
    if op == "floormod":
        if blo is not None and blo == bhi and blo > 0:
            if alo is not None and ahi is not None and alo // blo == ahi // blo:
                return alo % blo, ahi % blo
            return 0, blo - 1
        return (None, None)
    if op == "min":   # min(a, b) <= each side, so one known upper bound suffices
        his = [x for x in (ahi, bhi) if x is not None]
        return _min_opt(alo, blo), (min(his) if his else None)
    if op == "max":
        los = [x for x in (alo, blo) if x is not None]
        return (max(los) if los else None), _max_opt(ahi, bhi)
    return (None, None)


def _scale(a: Interval, c: int) -> Interval:
    lo, hi = a
    lo = None if lo is None else lo * c
    hi = None if hi is None else hi * c
    return (lo, hi) if c >= 0 else (hi, lo)


def _aligned_div_mod(e: Binary, relax: VarRanges) -> Optional[Tuple[Expr, Expr]]:
    """Tight bounds of x // c or x % c when x, as the relaxed variables move, provably stays
    inside one block [q*c, q*c + c) (TVM's bound for a fused axis that does not span rows).

    x = F + M with F the terms free of relaxed variables and M in [mlo, mhi]. If every
    coefficient of F is a multiple of g, g divides c and (F's constant + mlo) mod g plus the
    width mhi - mlo stays below g, then x never crosses a multiple of g, hence of c: x // c is
    the single point base // c and x % c runs over base % c + [0, width], base = F + mlo."""
    c = int(e.b.value)
    terms, constant = linear_form(e.a)
    fixed = [(t, k) for t, k in terms if not any(v in relax for v in free_vars(t))]
    moving = [(t, k) for t, k in terms if any(v in relax for v in free_vars(t))]
    mlo, mhi = const_bounds(from_linear(moving, 0, e.dtype), relax)
    if mlo is None or mhi is None:
        return None
    g = c
    for _, k in fixed:
        g = math.gcd(g, k)
    width = mhi - mlo
    if (constant + mlo) % g + width >= g:
        return None
    base = from_linear(fixed, constant + mlo, e.dtype)
    div = binary("floordiv", base, e.b)
    if e.op == "floordiv":
        return div, div
    mod = binary("floormod", base, e.b)
    return mod, binary("add", mod, Const(width, e.dtype))


def relaxed_interval(e: Expr, relax: VarRanges) -> Tuple[Expr, Expr]:
    """Symbolic inclusive bounds (lo, hi) of e when the variables in relax take any value in
    their ranges and every other variable is held fixed.

    Linear parts keep the fixed variables exact; non-linear parts that touch a relaxed
    variable fall back to constant bounds. Raises ValueError when no bound exists.
    """
    if not any(v in relax for v in free_vars(e)):
        return e, e
    if isinstance(e, Var):
        lo, hi = relax[e]
        return bound_expr(lo, e.dtype), bound_expr(hi, e.dtype)
    if isinstance(e, Binary):
        if e.op in ("add", "sub"):
            alo, ahi = relaxed_interval(e.a, relax)
            blo, bhi = relaxed_interval(e.b, relax)
            if e.op == "add":
                return binary("add", alo, blo), binary("add", ahi, bhi)
            return binary("sub", alo, bhi), binary("sub", ahi, blo)
        if e.op == "mul" and (isinstance(e.b, Const) or isinstance(e.a, Const)):
            c, x = (e.b, e.a) if isinstance(e.b, Const) else (e.a, e.b)
            lo, hi = relaxed_interval(x, relax)
            if c.value >= 0:
                return binary("mul", lo, c), binary("mul", hi, c)
            return binary("mul", hi, c), binary("mul", lo, c)
        if e.op in ("floordiv", "floormod") and isinstance(e.b, Const) and e.b.value > 0:
            aligned = _aligned_div_mod(e, relax)
            if aligned is not None:
                return aligned
        if e.op == "floordiv" and isinstance(e.b, Const) and e.b.value > 0:
            lo, hi = relaxed_interval(e.a, relax)
            return binary("floordiv", lo, e.b), binary("floordiv", hi, e.b)
        if e.op in ("min", "max"):
            alo, ahi = relaxed_interval(e.a, relax)
            blo, bhi = relaxed_interval(e.b, relax)
            return binary(e.op, alo, blo), binary(e.op, ahi, bhi)
    if isinstance(e, Cast) and e.dtype.is_int and e.value.dtype.is_int:
        lo, hi = relaxed_interval(e.value, relax)
        return Cast(e.dtype, lo), Cast(e.dtype, hi)
    # Non-linear in a relaxed variable: bound it with constants only if every variable has a range.
    lo, hi = const_bounds(e, relax)
    if lo is None or hi is None:
        raise ValueError(f"cannot bound '{e}' over {', '.join(v.name for v in relax)}")
    return Const(lo, e.dtype), Const(hi, e.dtype)


def bound_expr(bound, dt) -> Expr:
    """A range bound (an int or an expression of size variables) as an expression."""
    return bound if isinstance(bound, Expr) else Const(bound, dt)


def has_symbolic_range(e: Expr, ranges: VarRanges) -> bool:
    """Whether e mentions a size variable or a loop whose range is symbolic."""
    for v in free_vars(e):
        if v.nonnegative:
            return True
        r = ranges.get(v)
        if r is not None and (isinstance(r[0], Expr) or isinstance(r[1], Expr)):
            return True
    return False
def fits_without_wrap(e: Expr, ranges, memo: Optional[Tuple[Dict, Dict]] = None) -> bool:
    """Whether e, an integer expression, and every add/sub/mul under it provably stay within
    the range of their dtype, given inclusive ranges of the variables. memo (answers and
    bounds, each id -> (node, value)) decides each distinct node once, so shared
    subexpressions cost linear time."""
    if not isinstance(e, Binary):
        return True
    answers, bounds = ({}, {}) if memo is None else memo
    hit = answers.get(id(e))
    if hit is None:
        fits = True
        if e.op in ("add", "sub", "mul"):
            lo, hi = const_bounds(e, ranges, bounds)
            fits = lo is not None and hi is not None and e.dtype.min_int <= lo <= hi <= e.dtype.max_int
        fits = fits and fits_without_wrap(e.a, ranges, (answers, bounds)) and \
            fits_without_wrap(e.b, ranges, (answers, bounds))
        hit = answers[id(e)] = (e, fits)
    return hit[1]
