"""inject_virtual_threads: loops bound to thread_axis("vthread") run inside each GPU thread,
as TVM's InjectVirtualThread runs them (never as a launch axis).

A virtual thread is a thread of the block that one real thread plays several times. For the
loop `vthread v in 0..n: body`:
  - a statement is *touched* by v when it mentions v, or reads or writes a buffer that
    touched code writes (to a fixed point: registers filled from v-dependent data are
    touched, and so is everything that reads them), or sits under a condition, loop extent
    or let that is touched;
  - statements that are not touched run once, where they are: the cooperative fetch of a
    shared tile (every virtual thread needs the same tile) and the barriers that later go
    around it run once per block step, not once per virtual thread;
  - every local (register) allocation that touched code writes gets n times its size, and
    virtual thread v uses slice v of it;
  - v is pushed down through sequences, loops, allocations, lets and conditions that are
    not touched, onto the outermost touched statements; each of those becomes n copies with
    v = 0..n-1 side by side (independent work for one thread: the strided register tiles of
    TVM's GEMM schedule), or a serial loop over v when it holds loops or allocations or
    n >= 16 (TVM's rule).
Nested virtual threads (vy, vx) are injected innermost first.

Running an untouched statement once instead of n times gives the serial form's result
when it only writes memory allocated inside the vthread loop: such memory holds the same
values in every virtual thread. Forms we do not handle raise LoweringError rather than
computing something else: shared memory written by touched code (each virtual thread
would need its own tile and barriers inside the per-vthread code), a register buffer
written by touched code but allocated outside the loop, untouched stores to memory that
outlives the loop, a cross-thread reduction or packed call that depends on the virtual
thread, a symbolic vthread extent. Only the tag "vthread" exists (thread_axis refuses
TVM's "vthread.x"/"cthread").
"""
from __future__ import annotations

from typing import Dict, Set

from ..errors import LoweringError
from ..expr.functor import ExprMutator, map_children, walk
from ..expr.nodes import Buffer, Const, Expr, Load, Var, binary
from ..loop.functor import StmtMutator, substitute_stmt, walk_stmts
from ..loop.nodes import (BOUND, SERIAL, VECTORIZED, Allocate, CallPacked, For, IfThen, Let, Seq, Stmt, Store,
                          ThreadAllReduce, seq)

STAGE = "virtual threads"
MAX_UNROLL = 16      # TVM unrolls the copies of a loop-free statement for fewer virtual threads than this


class _Touched:
    """Which variables and buffers depend on the virtual thread v, in one vthread loop's body."""

    def __init__(self, v: Var, body: Stmt):
        self.vars: Set[Var] = {v}
        self.buffers: Set[Buffer] = set()
        self._uses: Dict[int, tuple] = {}
        self.untouched_stores: Set[Buffer] = set()
        while True:
            before = (len(self.vars), len(self.buffers))
            self._scan(body, False)
            if (len(self.vars), len(self.buffers)) == before:
                break
        self._scan(body, False, final=True)

    def expr(self, e) -> bool:
        """Whether e mentions a touched variable or loads a touched buffer."""
        if not isinstance(e, Expr):
            return False
        hit = self._uses.get(id(e))
        if hit is None:
            names = [n for n in walk(e) if isinstance(n, Var)] + [n.buffer for n in walk(e) if isinstance(n, Load)]
            hit = self._uses[id(e)] = (e, names)     # e kept alive, so its id is not reused
        return any(x in self.vars or x in self.buffers for x in hit[1])

    def _scan(self, s: Stmt, ctx: bool, final: bool = False) -> None:
        if isinstance(s, Store):
            if ctx or any(self.expr(e) for e in (*s.indices, s.value, s.predicate)):
                self.buffers.add(s.buffer)
            elif final and s.buffer not in self.buffers:
                self.untouched_stores.add(s.buffer)
        elif isinstance(s, Let):
            inner = ctx or self.expr(s.value)
            if inner:
                self.vars.add(s.var)
            self._scan(s.body, inner, final)
        elif isinstance(s, For):
            self._scan(s.body, ctx or self.expr(s.extent), final)
        elif isinstance(s, IfThen):
            inner = ctx or self.expr(s.cond)
            for b in (s.then_body, s.else_body):
                if b is not None:
                    self._scan(b, inner, final)
        elif isinstance(s, Seq):
            for x in s.stmts:
                self._scan(x, ctx, final)
        elif isinstance(s, Allocate):
            self._scan(s.body, ctx, final)
        elif isinstance(s, ThreadAllReduce) and (ctx or any(b in self.buffers for b in s.buffers)):
            self.buffers.update(s.buffers)
            if final:
                raise LoweringError(STAGE, f"a cross-thread reduction into '{s.buffer.name}' depends on the "
                                    "virtual thread; bind the reduction inside a stage computed outside the "
                                    "vthread loops")
        elif isinstance(s, CallPacked) and final and (ctx or any(b in self.buffers for b in s.buffers)):
            raise LoweringError(STAGE, f"the packed call '{s.func}' depends on the virtual thread")


class _Expand(StmtMutator):
    """Each virtual thread's own slice of the register buffers it writes: index v * size + i."""

    def __init__(self, v: Var, remap: Dict[Buffer, Buffer]):
        self.v, self.remap = v, remap
        self.exprs = _ExpandLoads(self)

    def index(self, b: Buffer, i: Expr) -> Expr:
        return binary("add", binary("mul", self.v, Const(b.size, self.v.dtype)), i)

    def visit_expr(self, e: Expr) -> Expr:
        return self.exprs.visit(e)

    def visit_Store(self, s: Store) -> Stmt:
        s = super().visit_Store(s)
        new = self.remap.get(s.buffer)
        return s if new is None else Store(new, (self.index(s.buffer, s.indices[0]),), s.value, s.predicate)

    def visit_Allocate(self, s: Allocate) -> Stmt:
        body = self.visit(s.body)
        return Allocate(self.remap.get(s.buffer, s.buffer), body)


class _ExpandLoads(ExprMutator):
    def __init__(self, owner: _Expand):
        self.owner = owner

    def visit_Load(self, e: Load) -> Expr:
        new = self.owner.remap.get(e.buffer)
        if new is None:
            return map_children(e, self.visit)
        pred = None if e.predicate is None else self.visit(e.predicate)
        return Load(new, (self.owner.index(e.buffer, self.visit(e.indices[0])),), pred)


def _check(v: Var, n: int, body: Stmt, touched: _Touched) -> Dict[Buffer, Buffer]:
    """The register buffers to expand (old -> new); LoweringError for what we do not handle."""
    allocated = {s.buffer for s in walk_stmts(body) if isinstance(s, Allocate)}
    remap = {}
    for b in touched.buffers:
        if b.scope == "shared":
            raise LoweringError(STAGE, f"shared buffer '{b.name}' is written by code that depends on the virtual "
                                f"thread of loop '{v.name}'; every virtual thread would need its own tile, with "
                                "barriers inside per-virtual-thread code: compute the shared stage at a loop outside "
                                "the vthread loops (as TVM's GEMM tutorial does), or keep it in local memory")
        if b.scope == "local":
            if b not in allocated:
                raise LoweringError(STAGE, f"local buffer '{b.name}' is written by code that depends on the "
                                    f"virtual thread of loop '{v.name}' but is allocated outside its loop; compute "
                                    "its stage inside the vthread loops")
            if b.is_symbolic:
                raise LoweringError(STAGE, f"local buffer '{b.name}' has a symbolic size; each virtual thread "
                                    "needs its own copy, so its size must be a constant")
            remap[b] = Buffer(b.name, (b.size * n,), b.dtype, b.scope)
    for b in sorted(touched.untouched_stores - allocated - touched.buffers, key=lambda b: b.name):
        raise LoweringError(STAGE, f"'{b.name}' is stored by code inside the vthread loop of '{v.name}' that does "
                            "not depend on the virtual thread, and it lives beyond that loop; running it once "
                            "would differ from running it per virtual thread: compute that stage outside the "
                            "vthread loops")
    return remap


class _Place:
    """Pushes the virtual thread v (extent n) down onto the outermost touched statements."""

    def __init__(self, v: Var, n: int, touched: _Touched):
        self.v, self.n, self.touched = v, n, touched
        self._memo: Dict[int, tuple] = {}

    def is_touched(self, s: Stmt) -> bool:
        hit = self._memo.get(id(s))
        if hit is None:
            t, exprs = self.touched, _own_exprs(s)
            yes = (any(t.expr(e) for e in exprs)
                   or (isinstance(s, Store) and s.buffer in t.buffers)
                   or any(self.is_touched(c) for c in _children(s)))
            hit = self._memo[id(s)] = (s, yes)
        return hit[1]

    def place(self, s: Stmt) -> Stmt:
        if not self.is_touched(s):
            return s                                    # runs once, for every virtual thread
        if isinstance(s, Seq):
            return seq(*(self.place(x) for x in s.stmts))
        if isinstance(s, Allocate):
            return Allocate(s.buffer, self.place(s.body))
        if isinstance(s, For) and s.kind != VECTORIZED and not self.touched.expr(s.extent):
            return s.with_body(self.place(s.body))
        if isinstance(s, Let) and not self.touched.expr(s.value):
            return Let(s.var, s.value, self.place(s.body))
        if isinstance(s, IfThen) and not self.touched.expr(s.cond):
            other = None if s.else_body is None else self.place(s.else_body)
            return IfThen(s.cond, self.place(s.then_body), other)
        return self.copies(s)

    def copies(self, s: Stmt) -> Stmt:
        """One copy of s per virtual thread, side by side; a serial loop over them where s holds
        loops or allocations (or n is large)."""
        if self.n < MAX_UNROLL and not any(isinstance(x, (For, Allocate)) for x in walk_stmts(s)):
            return seq(*(substitute_stmt(s, {self.v: Const(i, self.v.dtype)}) for i in range(self.n)))
        return For(self.v, self.n, s, SERIAL)


def _own_exprs(s: Stmt):
    if isinstance(s, Store):
        return (*s.indices, s.value, s.predicate)
    if isinstance(s, IfThen):
        return (s.cond,)
    if isinstance(s, Let):
        return (s.value,)
    if isinstance(s, For):
        return (s.extent,)
    return ()


def _children(s: Stmt):
    if isinstance(s, (For, Allocate, Let)):
        return (s.body,)
    if isinstance(s, IfThen):
        return (s.then_body,) if s.else_body is None else (s.then_body, s.else_body)
    if isinstance(s, Seq):
        return s.stmts
    return ()


def inject_one(v: Var, n, body: Stmt) -> Stmt:
    """The body of `vthread v in 0..n` with v pushed down onto the statements that depend on it."""
    if not isinstance(n, int):
        raise LoweringError(STAGE, f"the vthread loop '{v.name}' has the symbolic extent {n}; a thread plays its "
                            "virtual threads one by one, so their number must be a constant")
    if n == 1:                  # one virtual thread: the loop is its body (v is 0 throughout)
        return substitute_stmt(body, {v: Const(0, v.dtype)})
    touched = _Touched(v, body)
    remap = _check(v, n, body, touched)
    if remap:
        body = _Expand(v, remap).visit(body)
        touched.buffers = {remap.get(b, b) for b in touched.buffers}
    return _Place(v, n, touched).place(body)


class _InjectVirtualThreads(StmtMutator):
    def visit_For(self, s: For) -> Stmt:
        body = self.visit(s.body)          # inner vthread loops first
        if s.kind == BOUND and s.thread_tag == "vthread":
            return inject_one(s.var, s.extent, body)
        return s.with_body(body)


def inject_virtual_threads(body: Stmt) -> Stmt:
    """The body with every vthread loop injected (see the module docstring)."""
    return _InjectVirtualThreads().visit(body)
