"""vectorize_loops: turn each vectorized loop into vector instructions.

The loop variable becomes ramp(0, 1, lanes); affine indices stay ramps (contiguous
vector loads and stores), lane-invariant values stay scalar (broadcast where they
meet vectors), other indices become gathers/scatters. Loops inside the body keep
running, each iteration over all lanes at once.

Tails: a guard that depends on the lane (a split that does not divide, a region edge)
and is affine in the loop variable is checked once for the first and last lane: if
both pass, the vector body runs unguarded; otherwise a scalar copy of the loop runs.
Lane-dependent guards that cannot be hoisted become masked loads and stores. When a
body cannot be vectorized safely, the loop stays scalar and says why in Kernel IR.

What differs per target is a LanePolicy passed in: how many lanes a group runs, which vector
bodies the target can render, whether aligned ramps fold (cpu_lanes here; CUDA's in
target/cuda/vectorize.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

from ..expr.functor import children, substitute, uses_var, walk
from ..expr.nodes import (Binary, Broadcast, Call, Cast, Compare, Const, Expr, Load, Logical, Not, Ramp,
                          Select, Var, binary)
from ..expr.linear import is_multiple, linear_form
from ..expr.ranges import LoopRanges
from ..expr.simplify import simplify
from ..loop.functor import StmtMutator, stmt_exprs, substitute_stmt, walk_stmts
from ..loop.nodes import (PARALLEL, SERIAL, VECTORIZED, Allocate, For, IfThen, Let, Seq, Stmt, Store, seq)
from ..expr.extent import ceil_div
from ..target.target import Target

MAX_LANES_PER_REGISTER_GROUP = 4   # a vector loop longer than 4 native registers is strip-mined


class Scalarize(Exception):
    """This loop body cannot be vectorized safely; the message says why."""


def _bcast(e: Expr, lanes: int) -> Expr:
    if e.dtype.lanes == lanes:
        return e
    if e.dtype.lanes != 1:
        raise Scalarize(f"mixed vector widths ({e.dtype.lanes} and {lanes} lanes)")
    return Broadcast(e, lanes)


def _and(a: Optional[Expr], b: Optional[Expr]) -> Optional[Expr]:
    if a is None:
        return b
    if b is None:
        return a
    lanes = max(a.dtype.lanes, b.dtype.lanes)
    return Logical("and", _bcast(a, lanes), _bcast(b, lanes))


class LaneRewriter:
    """Rewrites the body of one vectorized loop over `lanes` lanes (aligned_blocks: LanePolicy's)."""

    def __init__(self, var: Var, lanes: int, ranges: Dict[Var, Tuple[int, int]], aligned_blocks: bool = False):
        self.var = var
        self.lanes = lanes
        self.aligned_blocks = aligned_blocks
        self.ranges = LoopRanges(ranges)
        self.memo: Dict[Tuple[int, int], Tuple[Expr, Expr]] = {}   # (id(e), id(pred)) -> (e, result)
        self.varying: Dict[int, bool] = {}                         # id(e) -> e uses var

    def uses_var(self, e: Expr) -> bool:
        """Whether e depends on the vectorized variable, once per distinct node."""
        hit = self.varying.get(id(e))
        if hit is None:
            hit = self.varying[id(e)] = e is self.var or any(self.uses_var(c) for c in children(e))
        return hit

    # -- expressions --
    def expr(self, e: Expr, pred: Optional[Expr] = None) -> Expr:
        """e over the lanes, under the lane mask pred; a node shared by several parents is
        rewritten once for each mask (the result depends only on the node and the mask)."""
        k = (id(e), id(pred))
        hit = self.memo.get(k)
        if hit is None:
            hit = self.memo[k] = (e, self.lanes_expr(e, pred), pred)
        return hit[1]

    def lanes_expr(self, e: Expr, pred: Optional[Expr]) -> Expr:
        if isinstance(e, Var):
            return Ramp(Const(0, e.dtype), Const(1, e.dtype), self.lanes) if e is self.var else e
        if isinstance(e, Const):
            return e
        if e.dtype.lanes > 1 or isinstance(e, (Ramp, Broadcast)):
            raise Scalarize("it contains another vectorized loop")
        if not self.uses_var(e) and pred is None:
            return e
        if isinstance(e, Binary):
            return self.binary(e.op, self.expr(e.a, pred), self.expr(e.b, pred))
        if isinstance(e, Compare):
            a, b = self.expr(e.a, pred), self.expr(e.b, pred)
            lanes = max(a.dtype.lanes, b.dtype.lanes)
            return Compare(e.op, _bcast(a, lanes), _bcast(b, lanes))
        if isinstance(e, Logical):
            a, b = self.expr(e.a, pred), self.expr(e.b, pred)
            lanes = max(a.dtype.lanes, b.dtype.lanes)
            return Logical(e.op, _bcast(a, lanes), _bcast(b, lanes))
        if isinstance(e, Not):
            return Not(self.expr(e.a, pred))
        if isinstance(e, Cast):
            value = self.expr(e.value, pred)
            return Cast(e.dtype.with_lanes(value.dtype.lanes), value)
        if isinstance(e, Call):
            args = [self.expr(a, pred) for a in e.args]
            lanes = max(a.dtype.lanes for a in args)
            return Call(e.name, tuple(_bcast(a, lanes) for a in args), e.dtype.with_lanes(lanes))
        if isinstance(e, Select):
            cond = self.expr(e.cond, pred)
            vector_cond = cond.dtype.lanes > 1
            tpred = _and(pred, cond) if e.guarded and vector_cond else pred
            fpred = _and(pred, Not(cond)) if e.guarded and vector_cond else pred
            t, f = self.expr(e.true_value, tpred), self.expr(e.false_value, fpred)
            lanes = max(cond.dtype.lanes, t.dtype.lanes, f.dtype.lanes)
            # A lane-invariant condition stays scalar: one branch runs for all lanes, so an
            # if_then_else still never evaluates the branch it does not take.
            return Select(cond if not vector_cond else _bcast(cond, lanes), _bcast(t, lanes), _bcast(f, lanes),
                          e.guarded)
        if isinstance(e, Load):
            # under the mask too: a load inside the index (a gather's t[sort_index[...]]) reads
            # nothing for the lanes the mask leaves out (the untaken side of an if_then_else)
            index = self.expr(e.indices[0], pred)
            mask = pred if pred is not None and pred.dtype.lanes > 1 else None
            if mask is None and index.dtype.lanes == 1:
                return Load(e.buffer, (index,), e.predicate)
            lanes = self.lanes
            return Load(e.buffer, (_bcast(index, lanes),), _and(mask, e.predicate))
        raise Scalarize(f"'{type(e).__name__}' has no vector form")

    def binary(self, op: str, a: Expr, b: Expr) -> Expr:
        if self.aligned_blocks:
            a, b, folded = self.aligned_block(op, a, b)
            if folded is not None:
                return folded
        if a.dtype.lanes == 1 and b.dtype.lanes == 1:
            return Binary(op, a, b)
        ra, rb = isinstance(a, Ramp), isinstance(b, Ramp)
        if op in ("add", "sub") and (ra or rb):
            if ra and rb:
                return self.ramp(binary(op, a.base, b.base), binary(op, a.stride, b.stride))
            if ra and b.dtype.lanes == 1:
                return self.ramp(binary(op, a.base, b), a.stride)
            if rb and a.dtype.lanes == 1:
                stride = b.stride if op == "add" else binary("sub", Const(0, b.stride.dtype), b.stride)
                return self.ramp(binary(op, a, b.base), stride)
        if op == "mul" and ra != rb:
            ramp, scalar = (a, b) if ra else (b, a)
            if scalar.dtype.lanes == 1:
                return self.ramp(binary("mul", ramp.base, scalar), binary("mul", ramp.stride, scalar))
        if op in ("floordiv", "floormod") and ra and isinstance(b, Const) and b.value > 0:
            stride = simplify(a.stride, self.ranges)
            if isinstance(stride, Const) and stride.value >= 0:
                m = stride.value * self.lanes
                if m > 0 and b.value % m == 0 and is_multiple(a.base, m):
                    # lanes from a multiple of m, m dividing b, lie in one block of b (a k-vector of
                    # a split axis read through a reshape: attention's output [B, H, S, D] as
                    # [B, S, H * D]); the quotient a scalar, so that the index folds to one ramp
                    if op == "floordiv":
                        return binary("floordiv", a.base, b)
                    return self.ramp(binary("floormod", a.base, b), stride)
                last = binary("add", a.base, Const(stride.value * (self.lanes - 1), a.base.dtype))
                same = simplify(binary("sub", binary("floordiv", last, b), binary("floordiv", a.base, b)), self.ranges)
                if isinstance(same, Const) and same.value == 0:   # every lane in one block of b
                    if op == "floordiv":
                        return Broadcast(simplify(binary("floordiv", a.base, b), self.ranges), self.lanes)
                    return self.ramp(binary("floormod", a.base, b), stride)
        lanes = max(a.dtype.lanes, b.dtype.lanes)
        return Binary(op, _bcast(a, lanes), _bcast(b, lanes))

    def aligned_block(self, op: str, a: Expr, b: Expr):
        """(a, b, folded): lane-invariant operands as scalars (so that ramps fold), and one fact about
        aligned ramps: lanes starting at a multiple of m = lanes * stride, with m dividing b, lie in
        one block of b, so ramp // b is one value and ramp % b a ramp (the index arithmetic of a
        fused or split axis under a vectorized loop); folded is None where the fact does not apply."""
        a = a.value if isinstance(a, Broadcast) else a
        b = b.value if isinstance(b, Broadcast) else b
        if op in ("floordiv", "floormod") and isinstance(a, Ramp) and isinstance(b, Const) and b.value > 0 \
                and isinstance(a.stride, Const) and a.stride.value > 0:
            m = a.stride.value * self.lanes
            if b.value % m == 0 and is_multiple(a.base, m):
                if op == "floordiv":
                    return a, b, binary("floordiv", a.base, b)      # one value for every lane
                return a, b, self.ramp(binary("floormod", a.base, b), a.stride)
        return a, b, None

    def ramp(self, base: Expr, stride: Expr) -> Expr:
        return Ramp(simplify(base, self.ranges), simplify(stride, self.ranges), self.lanes)

    # -- statements --
    def stmt(self, s: Stmt, pred: Optional[Expr] = None) -> Stmt:
        if isinstance(s, Store):
            index = self.expr(s.indices[0], pred)
            if index.dtype.lanes == 1:
                raise Scalarize(f"every lane would store to the same element {s.buffer.name}[{s.indices[0]}]")
            value = _bcast(self.expr(s.value, pred), self.lanes)
            contiguous = isinstance(index, Ramp) and isinstance(index.stride, Const) and index.stride.value == 1
            if not contiguous and any(isinstance(n, Load) and n.buffer is s.buffer for n in walk(s.value)):
                raise Scalarize(f"a scattered read-modify-write of {s.buffer.name} could race between lanes")
            own = None if s.predicate is None else self.expr(s.predicate, pred)
            return Store(s.buffer, (index,), value, _and(pred, own))
        if isinstance(s, Seq):
            return seq(*(self.stmt(x, pred) for x in s.stmts))
        if isinstance(s, IfThen):
            cond = self.expr(s.cond, pred)
            if cond.dtype.lanes == 1 and pred is None:
                return IfThen(cond, self.stmt(s.then_body), None if s.else_body is None else self.stmt(s.else_body))
            then = self.stmt(s.then_body, _and(pred, cond))
            other = None if s.else_body is None else self.stmt(s.else_body, _and(pred, Not(cond)))
            return seq(then, other)
        if isinstance(s, For):
            if pred is not None:
                raise Scalarize(f"loop {s.var.name} runs under a condition that differs between lanes")
            if s.kind == PARALLEL:
                raise Scalarize(f"parallel loop {s.var.name} is inside it")
            self.memo.clear()       # results simplified with the loop's range hold only inside it
            with self.ranges.loop(s.var, s.extent):
                body = self.stmt(s.body)
            self.memo.clear()
            return s.with_body(body)
        if isinstance(s, Let):   # a tuple reduction's new values: bound per lane as one vector
            value = self.expr(s.value, pred)
            if value.dtype.lanes == 1:
                return Let(s.var, value, self.stmt(s.body, pred))
            lanes_var = Var(s.var.name, s.var.dtype.with_lanes(value.dtype.lanes))
            return Let(lanes_var, value, self.stmt(substitute_stmt(s.body, {s.var: lanes_var}), pred))
        if isinstance(s, Allocate):
            raise Scalarize(f"buffer {s.buffer.name} is allocated inside it (each lane would need its own)")
        raise Scalarize(f"'{type(s).__name__}' has no vector form")


def _affine_in(cond: Expr, var: Var) -> bool:
    """A conjunction of comparisons, each linear in var (so monotone in it)."""
    if isinstance(cond, Logical) and cond.op == "and":
        return _affine_in(cond.a, var) and _affine_in(cond.b, var)
    if isinstance(cond, Compare) and cond.op in ("lt", "le", "gt", "ge") and cond.a.dtype.is_int:
        terms, _ = linear_form(Binary("sub", cond.a, cond.b))
        return all(atom is var or not uses_var(atom, var) for atom, _ in terms)
    return False


def _hoist_guards(s: Stmt, var: Var, conds: List[Expr]) -> Stmt:
    """Remove lane-dependent affine guards at the top of the body, collecting their conditions."""
    if isinstance(s, Seq):
        return seq(*(_hoist_guards(x, var, conds) for x in s.stmts))
    if isinstance(s, IfThen) and s.else_body is None:
        if uses_var(s.cond, var) and _affine_in(s.cond, var):
            conds.append(s.cond)
            return _hoist_guards(s.then_body, var, conds)
        if not uses_var(s.cond, var):
            return IfThen(s.cond, _hoist_guards(s.then_body, var, conds))
    return s


@dataclass(frozen=True)
class LanePolicy:
    """What a target decides when vectorize_loops rewrites a vectorized loop.

    lanes(loop): the lanes of one vector group: the loop's extent (one group), or a width that
    splits it into a serial loop over groups (with a scalar-tail guard where the width does not
    divide it); raises Scalarize where the loop has no vector form on the target.
    check(vector): raises Scalarize where the target cannot render the rewritten body.
    aligned_blocks: fold ramp // b and ramp % b by alignment (LaneRewriter.aligned_block)."""

    lanes: Callable[[For], int]
    check: Callable[[Stmt], None] = lambda vector: None
    aligned_blocks: bool = False


def cpu_lanes(target: Target) -> LanePolicy:
    """The CPU's policy: a vector loop longer than MAX_LANES_PER_REGISTER_GROUP native registers,
    or of symbolic extent, is strip-mined to groups of half that."""
    def lanes(loop: For) -> int:
        bits = max([n.dtype.bits for n in _loads_and_stores(loop)] or [32])
        limit = target.native_lanes(bits) * MAX_LANES_PER_REGISTER_GROUP
        return loop.extent if isinstance(loop.extent, int) and loop.extent <= limit else limit // 2
    return LanePolicy(lanes)


class Vectorizer(StmtMutator):
    """Each vectorized loop split into groups of the policy's lanes, its lane-invariant guards
    hoisted, its body rewritten lane by lane (LaneRewriter) and checked by the policy."""

    def __init__(self, policy: LanePolicy):
        self.policy = policy
        self.ranges = LoopRanges()

    def visit_For(self, s: For) -> Stmt:
        with self.ranges.loop(s.var, s.extent):
            body = self.visit(s.body)
        loop = s.with_body(body)
        return self.vectorize(loop) if s.kind == VECTORIZED else loop

    def vectorize(self, loop: For) -> Stmt:
        try:
            width = self.policy.lanes(loop)
        except Scalarize as why:
            return _scalar(loop, str(why))
        if not (isinstance(loop.extent, int) and width == loop.extent):
            # a serial loop over vector groups; a trip count that the width does not divide (or a
            # symbolic one) gets a scalar tail through the guard on the last group
            outer, inner = Var(loop.var.name + ".o"), Var(loop.var.name + ".v")
            body = substitute_stmt(loop.body, {loop.var: binary("add", binary("mul", outer, Const(width)), inner)})
            if not isinstance(loop.extent, int) or loop.extent % width:
                body = IfThen(binary("add", binary("mul", outer, Const(width)), inner) < loop.extent, body)
            groups = ceil_div(loop.extent, width)
            with self.ranges.loop(outer, groups):
                strip = self.vectorize(For(inner, width, body, VECTORIZED))
            return For(outer, groups, strip, SERIAL)
        try:
            conds: List[Expr] = []
            fast_body = _hoist_guards(loop.body, loop.var, conds)
            vector = LaneRewriter(loop.var, loop.extent, self.ranges, self.policy.aligned_blocks).stmt(fast_body)
            check = None
            for c in conds:
                for lane in (0, loop.extent - 1):
                    edge = substitute(c, {loop.var: Const(lane, loop.var.dtype)})
                    check = edge if check is None else Logical("and", check, edge)
            check = None if check is None else simplify(check, self.ranges)
            if isinstance(check, Const) and not check.value:
                return For(loop.var, loop.extent, loop.body, SERIAL)
            self.policy.check(vector)
            if check is None or isinstance(check, Const):
                return vector
            return IfThen(check, vector, For(loop.var, loop.extent, loop.body, SERIAL))
        except Scalarize as why:
            return _scalar(loop, str(why))


def _scalar(loop: For, why: str) -> For:
    return For(loop.var, loop.extent, loop.body, SERIAL, pragmas=(("kept scalar", why),))


def _loads_and_stores(s: Stmt):
    for x in walk_stmts(s):
        if isinstance(x, Store):
            yield x.value
        for e in stmt_exprs(x):
            yield from (n for n in walk(e) if isinstance(n, Load))


def vectorize_loops(body: Stmt, target: Target, policy: Optional[LanePolicy] = None) -> Stmt:
    """Every vectorized loop of body rewritten to vectors, by the policy (by default the CPU's)."""
    return Vectorizer(policy or cpu_lanes(target)).visit(body)
