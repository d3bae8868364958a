"""Expression simplification: constant folding, canonical linear index arithmetic, and
range-aware floordiv/floormod/min/max/comparisons (what makes split indices clean)."""
from __future__ import annotations

import math
import operator
from typing import Dict, Optional, Tuple

import numpy as np

from .bounds import VarRanges, const_bounds, has_symbolic_range
from .functor import ExprMutator, map_children
from .equality import key
from .linear import Terms, from_linear, linear_form, wrap_int
from .ranges import LoopRanges
from .nodes import NEG, Binary, Call, Cast, Compare, Const, Expr, Logical, Not, Select, Var, binary

_FOLD = {"add": operator.add, "sub": operator.sub, "mul": operator.mul,
         "min": min, "max": max, "bitand": operator.and_, "bitor": operator.or_,
         "bitxor": operator.xor, "shl": operator.lshift, "shr": operator.rshift}
_CMP = {"lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge,
        "eq": operator.eq, "ne": operator.ne}


def simplify(e: Expr, ranges: Optional[VarRanges] = None, symbolic: Optional[bool] = None) -> Expr:
    """Simplify e; ranges gives inclusive [lo, hi] bounds of loop variables. symbolic: whether
    some range has a symbolic end, when the caller keeps track (else it is found when needed,
    by a scan of ranges: bound inference passes every loop of the program)."""
    return _Simplifier(ranges or {}, symbolic).visit(e)


class Simplifier:
    """simplify(e, ranges) for the many expressions of one statement: ranges is read live (the
    caller adds a loop's range on entering it and removes it after), and each distinct node is
    simplified once across all calls. That is sound because a node's result depends only on
    the ranges of the variables in it, which are the same wherever the node can appear (inside
    their loops), and on whether some range is symbolic (one memo for each answer)."""

    def __init__(self, ranges: VarRanges):
        self._simplifier = _Simplifier(ranges)
        self._memos: Tuple[dict, dict] = ({}, {})

    def __call__(self, e: Expr) -> Expr:
        s = self._simplifier
        s.symbolic = _any_symbolic(s.ranges)
        s._memo = self._memos[s.symbolic]
        return s.visit(e)


def _any_symbolic(ranges: VarRanges) -> bool:
    if isinstance(ranges, LoopRanges):      # kept up to date as ranges come and go
        return ranges.symbolic
    return any(isinstance(lo, Expr) or isinstance(hi, Expr) for lo, hi in ranges.values())


def _fold_float(op: str, a: float, b: float, dt) -> Optional[float]:
    np_type = dt.numpy.type
    x, y = np_type(a), np_type(b)
    with np.errstate(all="ignore"):
        if op == "add": r = x + y
        elif op == "sub": r = x - y
        elif op == "mul": r = x * y
        elif op == "div": r = x / y
        elif op == "floordiv": r = np.floor_divide(x, y)
        elif op == "floormod": r = np.mod(x, y)
        elif op == "min": r = np.minimum(x, y)
        elif op == "max": r = np.maximum(x, y)
        else: return None
    return float(np_type(r))


def fold_binary(op: str, a: Const, b: Const) -> Optional[Const]:
    dt = a.dtype
    if dt.is_float:
        value = _fold_float(op, a.value, b.value, dt)
        return None if value is None else Const(value, dt)
    x, y = int(a.value), int(b.value)
    if op in ("floordiv", "floormod", "div"):
        if y == 0:            # numpy's answer, as the compiled code gives it
            value = 0
        else:
            value = x // y if op != "floormod" else x % y
    elif op in ("truncdiv", "truncmod"):
        if y == 0:            # as the compiled code gives it (division.py)
            value = 0
        else:
            q = abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1)   # C: rounds toward zero
            value = q if op == "truncdiv" else x - q * y
    elif op in _FOLD:
        if op in ("shl", "shr") and not 0 <= y < dt.bits:
            return None
        value = _FOLD[op](x, y)
    else:
        return None
    if dt.is_bool:
        return Const(bool(value), dt)
    return Const(wrap_int(value, dt), dt)


def _merge_div_mod(terms: Terms) -> Terms:
    """k*c*(x // c) + k*(x % c) == k*x: the identity that undoes a fuse or a split."""
    for i, (mod, k) in enumerate(terms):
        if not (isinstance(mod, Binary) and mod.op == "floormod" and isinstance(mod.b, Const)):
            continue
        c = int(mod.b.value)
        for j, (div, kd) in enumerate(terms):
            if (isinstance(div, Binary) and div.op == "floordiv" and isinstance(div.b, Const)
                    and int(div.b.value) == c and kd == k * c and key(div.a) == key(mod.a)):
                rest = [t for n, t in enumerate(terms) if n not in (i, j)]
                return rest + [(mod.a, k)]
    return terms


class _Simplifier(ExprMutator):
    def __init__(self, ranges: VarRanges, symbolic: Optional[bool] = None):
        self.ranges = ranges
        self._symbolic = symbolic
        self.exactness = _Exactness(ranges)     # and the bounds of each distinct node, once

    @property
    def symbolic(self) -> bool:
        """Loops over symbolic extents: bounds may also come from cancelling size variables."""
        if self._symbolic is None:
            self._symbolic = _any_symbolic(self.ranges)
        return self._symbolic

    @symbolic.setter
    def symbolic(self, value: bool) -> None:
        self._symbolic = value

    def bounds(self, e: Expr):
        lo, hi = self.exactness.bounds(e)
        if self.symbolic and has_symbolic_range(e, self.ranges):     # the tighter of the two
            slo, shi = symbolic_bounds(e, self.ranges, (None, None))
            lo = slo if lo is None else lo if slo is None else max(lo, slo)
            hi = shi if hi is None else hi if shi is None else min(hi, shi)
        return lo, hi

    def exact(self, e: Expr) -> bool:
        """Whether e provably evaluates without wrapping around, so that rewrites which hold
        for mathematical integers (x * 4 // 4 == x, x + 1 > x) hold for it. Variables are loop
        indices and sizes, which fit their dtype; data (loads, calls, casts from floats) must
        have known bounds."""
        return self.exactness.exact(e)

    def visit_Var(self, e) -> Expr:
        lo, hi = self.ranges.get(e, (None, None))
        if isinstance(lo, int) and isinstance(hi, int) and lo == hi:
            return Const(lo, e.dtype)        # a one-iteration loop
        return e

    # -- arithmetic --
    def visit_Binary(self, e: Binary) -> Expr:
        a, b = self.visit(e.a), self.visit(e.b)
        if isinstance(a, Const) and isinstance(b, Const):
            folded = fold_binary(e.op, a, b)
            if folded is not None:
                return folded
        if e.dtype.lanes > 1:
            return Binary(e.op, a, b)
        if e.dtype.is_float:
            same = self._float_identities(e.op, a, b)
            return same if same is not None else Binary(e.op, a, b)
        if e.op in ("add", "sub", "mul"):
            if e.op == "mul" and not isinstance(a, Const) and not isinstance(b, Const):
                return Binary("mul", a, b)
            terms, constant = linear_form(Binary(e.op, a, b))
            merged = _merge_div_mod(terms)
            if merged is not terms:
                return self.visit(from_linear(merged, wrap_int(constant, e.dtype), e.dtype))
            return from_linear(terms, wrap_int(constant, e.dtype), e.dtype)
        if e.op in ("floordiv", "floormod") and isinstance(b, Const) and b.value > 0:
            if b.value == 1:
                return a if e.op == "floordiv" else Const(0, e.dtype)
            if self.exact(a):
                return self._div_mod(e.op, a, int(b.value))
        if e.op in ("min", "max") and self.exact(a) and self.exact(b):
            return self._min_max(e.op, a, b)
        return Binary(e.op, a, b)

    @staticmethod
    def _float_identities(op: str, a: Expr, b: Expr) -> Optional[Expr]:
        """The rewrites that are exact in IEEE arithmetic, signed zeros included: x * 1, x / 1,
        x - (+0) and x + (-0) are x; x + (+0) is not (-0 + +0 is +0)."""
        if op == "mul":
            if _is_float_const(b, 1.0):
                return a
            if _is_float_const(a, 1.0):
                return b
        if op == "div" and _is_float_const(b, 1.0):
            return a
        if op == "sub" and _is_float_const(b, 0.0, negative=False):
            return a
        if op == "add":
            if _is_float_const(b, 0.0, negative=True):
                return a
            if _is_float_const(a, 0.0, negative=True):
                return b
        return None

    def _div_mod(self, op: str, a: Expr, c: int) -> Expr:
        dt = a.dtype
        if c == 1:
            return a if op == "floordiv" else Const(0, dt)
        terms, constant = linear_form(a)
        g = math.gcd(c, constant, *(k for _, k in terms))
        if g > 1 and op == "floordiv":       # (4x + 8) // 12 == (x + 2) // 3
            terms, constant, c = [(t, k // g) for t, k in terms], constant // g, c // g
            if c == 1:
                return from_linear(terms, constant, dt)
        quotient = [(t, k // c) for t, k in terms if k % c == 0]
        rest = [(t, k) for t, k in terms if k % c != 0]
        q_const, r_const = divmod(constant, c)
        remainder = from_linear(rest, r_const, dt)
        lo, hi = self.bounds(remainder)
        if lo is not None and hi is not None and lo // c == hi // c:
            if op == "floordiv":
                return from_linear(quotient, q_const + lo // c, dt)
            return self.visit(Binary("sub", remainder, Const((lo // c) * c, dt)))
        split = self._split_lanes(rest, r_const, c)
        if split is not None:           # (16 * cb + l) // 48 == cb // 3 for l in [0, 16)
            outer, lanes, k = split
            if op == "floordiv":
                inner = self.visit(Binary("floordiv", outer, Const(c // k, dt)))
                return self.visit(from_linear(quotient + [(inner, 1)], q_const, dt))
            return self.visit(Binary("add", Binary("mul", Binary("floormod", outer, Const(c // k, dt)), Const(k, dt)),
                                     lanes))
        if op == "floormod":
            return Binary("floormod", remainder, Const(c, dt))
        if isinstance(remainder, Binary) and remainder.op == "floordiv" and isinstance(remainder.b, Const):
            inner = Binary("floordiv", remainder.a, Const(int(remainder.b.value) * c, dt))
        else:
            inner = Binary("floordiv", remainder, Const(c, dt))
        if not quotient and q_const == 0:
            return inner
        return from_linear(quotient + [(inner, 1)], q_const, dt)

    def _split_lanes(self, terms: Terms, constant: int, c: int):
        """(A, B, k) with terms + constant == k * A + B, k a proper divisor of c and B in
        [0, k) (a vector lane under a block index): then (k * A + B) // c == A // (c / k) and
        (k * A + B) % c == k * (A % (c / k)) + B. k is tried among gcd(c, a coefficient),
        largest first; None where none fits."""
        if len(terms) < 2:
            return None
        dt = terms[0][0].dtype
        for k in sorted({math.gcd(c, coef) for _, coef in terms} - {1, c}, reverse=True):
            lanes = from_linear([(t, coef) for t, coef in terms if coef % k], constant % k, dt)
            lo, hi = self.bounds(lanes)
            if lo is not None and hi is not None and 0 <= lo and hi < k:
                outer = from_linear([(t, coef // k) for t, coef in terms if coef % k == 0], constant // k, dt)
                return outer, lanes, k
        return None

    def _min_max(self, op: str, a: Expr, b: Expr) -> Expr:
        terms, constant = linear_form(Binary("sub", a, b))
        diff = from_linear(terms, constant, a.dtype)
        lo, hi = self.bounds(diff)
        if hi is not None and hi <= 0:        # a <= b
            return a if op == "min" else b
        if lo is not None and lo >= 0:        # a >= b
            return b if op == "min" else a
        return Binary(op, a, b)

    # -- predicates --
    def visit_Compare(self, e: Compare) -> Expr:
        a, b = self.visit(e.a), self.visit(e.b)
        if isinstance(a, Const) and isinstance(b, Const):
            return Const(bool(_CMP[e.op](a.value, b.value)), e.dtype)
        if a.dtype.is_int and a.dtype.lanes == 1 and self.exact(a) and self.exact(b):
            terms, constant = linear_form(Binary("sub", a, b))
            lo, hi = self.bounds(from_linear(terms, constant, a.dtype))
            decided = _decide(e.op, lo, hi)
            if decided is not None:
                return Const(decided, e.dtype)
        return Compare(e.op, a, b)

    def visit_Logical(self, e: Logical) -> Expr:
        a, b = self.visit(e.a), self.visit(e.b)
        absorbing = e.op == "or"          # True absorbs `or`, False absorbs `and`
        for x, y in ((a, b), (b, a)):
            if isinstance(x, Const):
                return x if bool(x.value) == absorbing else y
        return Logical(e.op, a, b)

    def visit_Not(self, e: Not) -> Expr:
        a = self.visit(e.a)
        if isinstance(a, Const):
            return Const(not a.value, e.dtype)
        if isinstance(a, Not):
            return a.a
        return Not(a)

    def visit_Select(self, e: Select) -> Expr:
        cond = self.visit(e.cond)
        if isinstance(cond, Const):
            return self.visit(e.true_value if cond.value else e.false_value)
        return Select(cond, self.visit(e.true_value), self.visit(e.false_value), e.guarded)

    def visit_Cast(self, e: Cast) -> Expr:
        value = self.visit(e.value)
        if value.dtype == e.dtype:
            return value
        if isinstance(value, Const) and e.dtype.lanes == 1:
            v = value.value
            if e.dtype.is_float:
                return Const(float(e.dtype.numpy.type(v)), e.dtype)
            if e.dtype.is_bool:
                return Const(bool(v), e.dtype)
            if isinstance(v, float) and not math.isfinite(v):
                return Cast(e.dtype, value)
            if isinstance(v, float):      # float -> int saturates, as the generated code does
                return Const(min(max(int(v), e.dtype.min_int), e.dtype.max_int), e.dtype)
            return Const(wrap_int(int(v), e.dtype), e.dtype)
        return Cast(e.dtype, value)

    def visit_Call(self, e: Call) -> Expr:
        e = map_children(e, self.visit)
        if e.name == NEG and e.dtype.lanes == 1:      # sign flips: exact for every value, NaN included
            x = e.args[0]
            if isinstance(x, Const):
                return Const(-x.value, e.dtype)
            if isinstance(x, Call) and x.name == NEG:
                return x.args[0]
        rounding = ROUNDINGS.get(e.name)
        if rounding is not None and e.dtype.is_float and e.dtype.lanes == 1 and isinstance(e.args[0], Const):
            v = float(e.args[0].value)               # exact: a float's floor is a float of its type
            return Const(float(rounding(v)) if math.isfinite(v) else v, e.dtype)
        return e


# Roundings folded on constants (a size scaled by a float, known at call time: trunc(1.5 * 9)).
ROUNDINGS = {"floor": math.floor, "ceil": math.ceil, "trunc": math.trunc}


def symbolic_bounds(e: Expr, ranges: VarRanges, known) -> Tuple[Optional[int], Optional[int]]:
    """Constant bounds of a linear e found by replacing each loop variable with the (symbolic)
    end of its range that maximises / minimises e, so that size variables cancel:
    i - n <= (n - 1) - n == -1 when i runs over 0..n."""
    terms, constant = linear_form(e)
    out = list(known)
    for side in (0, 1):          # 0: lower bound, 1: upper bound
        if out[side] is not None:
            continue
        pieces: Terms = []
        for atom, k in terms:
            end = ranges[atom][side if k > 0 else 1 - side] if isinstance(atom, Var) and atom in ranges else None
            if isinstance(end, Expr):      # only symbolic ends: constant ones are const_bounds' job
                pieces.append((end, k))
            else:
                pieces.append((atom, k))
        t2, c2 = linear_form(from_linear(pieces, constant, e.dtype))
        t2, c2 = _relax_floordiv(t2, c2, side)
        t2, c2 = linear_form(from_linear(t2, c2, e.dtype))
        out[side] = const_bounds(from_linear(t2, c2, e.dtype), ranges)[side]
    return out[0], out[1]


def span_bound(hi: Expr, lo: Expr, ranges: VarRanges) -> Optional[int]:
    """A constant upper bound of hi - lo, for the extent of a region [lo, hi].

    Beyond constant bounds of the difference, it knows that two floor divisions by c of
    values w apart differ by at most (w + c - 1) // c, which bounds a split or fused axis
    whose segment may cross one row boundary."""
    if (isinstance(hi, Binary) and isinstance(lo, Binary) and hi.op == lo.op == "floordiv"
            and isinstance(hi.b, Const) and isinstance(lo.b, Const) and hi.b.value > 0 and lo.b.value > 0):
        # Bring both to one divisor c (x // d == (x * m) // (d * m)): the simplifier may
        # have cancelled a common factor on one side only.
        ch, cl = int(hi.b.value), int(lo.b.value)
        c = ch * cl // math.gcd(ch, cl)
        width = simplify(binary("sub", binary("mul", hi.a, Const(c // ch, hi.dtype)),
                                binary("mul", lo.a, Const(c // cl, lo.dtype))), ranges)
        if isinstance(width, Const) and width.value >= 0:
            return (int(width.value) + c - 1) // c
    return const_bounds(simplify(binary("sub", hi, lo), ranges), ranges)[1]


def _relax_floordiv(terms: Terms, constant: int, side: int) -> Tuple[Terms, int]:
    """Bound k * (x // c) by x when c divides k: c * (x // c) lies in [x - c + 1, x], so
    64 * ((n + 63) // 64) - n is at least 0."""
    out: Terms = []
    for atom, k in terms:
        if (isinstance(atom, Binary) and atom.op == "floordiv" and isinstance(atom.b, Const)
                and atom.b.value > 0 and k % int(atom.b.value) == 0):
            c, m = int(atom.b.value), k // int(atom.b.value)
            inner, inner_const = linear_form(atom.a)
            out += [(t, m * kk) for t, kk in inner]
            constant += m * inner_const
            if (m > 0) != bool(side):     # the end where c * (x // c) == x - c + 1
                constant -= m * (c - 1)
        else:
            out.append((atom, k))
    return out, constant


def _is_float_const(e: Expr, value: float, negative: Optional[bool] = None) -> bool:
    """e is the float constant value (with the given sign bit, when negative is not None)."""
    if not (isinstance(e, Const) and e.dtype.is_float and e.value == value):
        return False
    return negative is None or (math.copysign(1.0, e.value) < 0) == negative


class _Exactness:
    """Whether expressions evaluate without wrapping around (see _Simplifier.exact), each
    distinct node decided once: on a DAG of shared subexpressions a plain recursion would
    take exponential time."""

    def __init__(self, ranges: VarRanges):
        self.ranges = ranges
        self.bounds_memo: Dict[int, tuple] = {}
        # id -> (node, answer); holding the node keeps its id() from being reused
        self.exact_memo: Dict[int, tuple] = {}
        self.data_memo: Dict[int, tuple] = {}

    def bounds(self, e: Expr):
        return const_bounds(e, self.ranges, self.bounds_memo)

    def exact(self, e: Expr) -> bool:
        hit = self.exact_memo.get(id(e))
        if hit is None:
            hit = self.exact_memo[id(e)] = (e, self._exact(e))
        return hit[1]

    def has_data(self, e: Expr) -> bool:
        """Whether e reads anything but variables and constants (a load, a call, a select...)."""
        hit = self.data_memo.get(id(e))
        if hit is None:
            hit = self.data_memo[id(e)] = (e, self._has_data(e))
        return hit[1]

    def _has_data(self, e: Expr) -> bool:
        if isinstance(e, (Var, Const)):
            return False
        if isinstance(e, Binary):
            return self.has_data(e.a) or self.has_data(e.b)
        return True

    def _exact(self, e: Expr) -> bool:
        if isinstance(e, (Var, Const)):
            return True
        if isinstance(e, Binary) and e.dtype.is_int:
            if not (self.exact(e.a) and self.exact(e.b)):
                return False
            if e.op not in ("add", "sub", "mul", "shl"):
                return True      # floor division, modulo, min, max of exact values do not wrap
            lo, hi = self.bounds(e)
            if lo is None or hi is None:
                return not self.has_data(e)
            return e.dtype.min_int <= lo and hi <= e.dtype.max_int
        if isinstance(e, Cast) and e.dtype.is_int and e.value.dtype.is_int:
            lo, hi = self.bounds(e.value)
            return (self.exact(e.value) and lo is not None and hi is not None
                    and e.dtype.min_int <= lo and hi <= e.dtype.max_int)
        lo, hi = self.bounds(e)
        return lo is not None and hi is not None


def _decide(op: str, lo: Optional[int], hi: Optional[int]) -> Optional[bool]:
    """Decide `d op 0` from bounds lo <= d <= hi, or None when undecided."""
    if op == "lt":
        return True if hi is not None and hi < 0 else False if lo is not None and lo >= 0 else None
    if op == "le":
        return True if hi is not None and hi <= 0 else False if lo is not None and lo > 0 else None
    if op == "gt":
        return True if lo is not None and lo > 0 else False if hi is not None and hi <= 0 else None
    if op == "ge":
        return True if lo is not None and lo >= 0 else False if hi is not None and hi < 0 else None
    if op == "eq":
        if lo is not None and lo == hi:
            return lo == 0
        return False if (lo is not None and lo > 0) or (hi is not None and hi < 0) else None
    if op == "ne":
        decided = _decide("eq", lo, hi)
        return None if decided is None else not decided
    return None
