"""verify_stmt / verify_func: the invariants of statements at every level (Loop, Tile and
Kernel IR), checked in one walk. A violation is an InternalError naming the pass that
produced the IR (when given) and the broken invariant.

Invariants:
- every variable an expression uses is bound by an enclosing loop or let, or is given as
  free (a kernel's launch variables); no loop or let binds a variable already in scope;
- every buffer loaded or stored is a parameter or allocated by an enclosing Allocate;
- an access has one index per dimension (Loop/Tile IR) or one flat index (Kernel IR),
  and indices are integers;
- a store's value has the buffer's element dtype, and its lanes agree with the index
  lanes and the predicate's; predicates and if-conditions are bool (conditions scalar);
- a let's value has its variable's dtype; loop extents are positive, and loop kinds are
  those of the level (Loop IR: serial only; Kernel IR kernels: serial, parallel, or unrolled
  where the backend's pass list leaves unrolling to its own compiler).
"""
from __future__ import annotations

from typing import Dict, Iterable, List, Optional, Sequence, Set

from ..errors import InternalError
from ..expr.functor import walk
from ..expr.nodes import Buffer, Expr, Load, Var
from .nodes import SERIAL, Allocate, Barrier, CallPacked, Evaluate, For, Func, IfThen, Let, Seq, StageNest, Stmt, Store

LOOP_KINDS = {"Loop": (SERIAL,), "Tile": None}      # None: any kind


class _Verifier:
    def __init__(self, buffers: Iterable[Buffer], free: Iterable[Var], flat: bool, where: str,
                 kinds: Optional[Sequence[str]]):
        self.buffers: Set[int] = {id(b) for b in buffers}
        self.bound: Set[int] = {id(v) for v in free}
        self.flat = flat
        self.where = where
        self.kinds = kinds

    def fail(self, problem: str, node=None):
        text = f"{self.where}: {problem}"
        if node is not None:
            text += "\n  in: " + str(node).replace("\n", "\n      ")[:600]
        raise InternalError(text)

    # -- expressions --
    def expr(self, e: Expr, stmt: Stmt) -> None:
        for n in walk(e):
            if isinstance(n, Var):
                if id(n) not in self.bound:
                    self.fail(f"variable '{n.name}' is used outside any loop or let that binds it", stmt)
            elif isinstance(n, Load):
                self.access(n.buffer, n.indices, stmt)

    def access(self, buffer: Buffer, indices, stmt: Stmt) -> None:
        if id(buffer) not in self.buffers:
            self.fail(f"buffer '{buffer.name}' is accessed but is neither a parameter nor allocated in scope", stmt)
        want = 1 if self.flat else len(buffer.shape)
        if len(indices) != want:
            self.fail(f"buffer '{buffer.name}' of shape {buffer.shape} is accessed with {len(indices)} "
                      f"indices; expected {want}{' (flat)' if self.flat else ''}", stmt)
        for i in indices:
            if not i.dtype.is_int:
                self.fail(f"buffer '{buffer.name}' has index '{i}' of dtype {i.dtype}", stmt)

    # -- statements --
    def bind(self, var: Var, s: Stmt) -> None:
        if id(var) in self.bound:
            self.fail(f"variable '{var.name}' is bound again inside its own scope", s)
        self.bound.add(id(var))

    def stmt(self, s: Stmt) -> None:
        method = getattr(self, "stmt_" + type(s).__name__, None)
        if method is None:
            self.fail(f"unknown statement kind {type(s).__name__}")
        method(s)

    def stmt_For(self, s: For) -> None:
        if isinstance(s.extent, int) and s.extent <= 0:
            self.fail(f"loop '{s.var.name}' has extent {s.extent}", s)
        if isinstance(s.extent, Expr):
            self.expr(s.extent, s)
        if self.kinds is not None and s.kind not in self.kinds:
            self.fail(f"loop '{s.var.name}' is {s.kind}; loops here are {' or '.join(self.kinds)}", s)
        self.bind(s.var, s)
        self.stmt(s.body)
        self.bound.discard(id(s.var))

    def stmt_Let(self, s: Let) -> None:
        self.expr(s.value, s)
        if s.value.dtype != s.var.dtype:
            self.fail(f"let '{s.var.name}' of dtype {s.var.dtype} is given a value of dtype {s.value.dtype}", s)
        self.bind(s.var, s)
        self.stmt(s.body)
        self.bound.discard(id(s.var))

    def stmt_Store(self, s: Store) -> None:
        self.access(s.buffer, s.indices, s)
        for e in (*s.indices, s.value) + ((s.predicate,) if s.predicate is not None else ()):
            self.expr(e, s)
        value = s.value.dtype
        if value.element() != s.buffer.dtype.element():
            self.fail(f"a value of dtype {value} is stored into buffer '{s.buffer.name}' of dtype "
                      f"{s.buffer.dtype}", s)
        lanes = max((i.dtype.lanes for i in s.indices), default=1)
        if value.lanes != lanes:
            self.fail(f"a value of {value.lanes} lanes is stored at an index of {lanes} lanes", s)
        if s.predicate is not None and (not s.predicate.dtype.is_bool or s.predicate.dtype.lanes not in (1, lanes)):
            self.fail(f"store predicate '{s.predicate}' of dtype {s.predicate.dtype} does not fit {lanes} lanes", s)

    def stmt_IfThen(self, s: IfThen) -> None:
        self.expr(s.cond, s)
        if s.cond.dtype != s.cond.dtype.element() or not s.cond.dtype.is_bool:
            self.fail(f"if-condition '{s.cond}' has dtype {s.cond.dtype}; it must be a scalar bool", s)
        self.stmt(s.then_body)
        if s.else_body is not None:
            self.stmt(s.else_body)

    def stmt_Seq(self, s: Seq) -> None:
        for x in s.stmts:
            self.stmt(x)

    def stmt_Allocate(self, s: Allocate) -> None:
        chain = [s]                  # nested Allocates (a model's buffers): a loop, not recursion
        while isinstance(chain[-1].body, Allocate):
            chain.append(chain[-1].body)
        for a in chain:
            if id(a.buffer) in self.buffers:
                self.fail(f"buffer '{a.buffer.name}' is allocated again inside its own scope", a)
            self.buffers.add(id(a.buffer))
        self.stmt(chain[-1].body)
        for a in chain:
            self.buffers.discard(id(a.buffer))

    def stmt_StageNest(self, s: StageNest) -> None:
        self.stmt(s.body)

    def stmt_Barrier(self, s: Barrier) -> None:
        pass

    def stmt_ThreadAllReduce(self, s) -> None:
        for b in s.buffers:
            if id(b) not in self.buffers:
                self.fail(f"buffer '{b.name}' of a cross-thread reduction is not allocated in scope", s)
        if id(s.var) not in self.bound:
            self.fail(f"cross-thread reduction over '{s.var.name}' outside the loop bound to {s.thread_tag}", s)

    def stmt_Evaluate(self, s: Evaluate) -> None:
        self.expr(s.value, s)

    def stmt_CallPacked(self, s: CallPacked) -> None:
        for b in s.buffers:      # whole buffers: each must be in scope (no indices to check)
            if id(b) not in self.buffers:
                self.fail(f"buffer '{b.name}' is passed to '{s.func}' but is neither a parameter nor "
                          "allocated in scope", s)
        for a in s.args:
            if not isinstance(a, (Buffer, bool, int, float)):
                self.fail(f"argument {a!r} of '{s.func}' is neither a buffer nor a constant scalar", s)


def verify_stmt(body: Stmt, buffers: Iterable[Buffer], free_vars: Iterable[Var] = (), flat: bool = False,
                where: str = "verify", loop_kinds: Optional[Sequence[str]] = None) -> None:
    """Check body's invariants; buffers are those in scope around it (parameters), free_vars
    the variables bound outside it. flat: Kernel IR (one index per access); loop_kinds: the
    loop kinds allowed (None: any)."""
    _Verifier(buffers, free_vars, flat, where, loop_kinds).stmt(body)


def size_vars(buffers: Iterable[Buffer]) -> List[Var]:
    """The size variables of symbolic shapes: the free variables of the buffers' extents (a
    module reads them from its arguments' shapes, so they are bound outside the body)."""
    found: Dict[int, Var] = {}
    for b in buffers:
        for n in tuple(b.shape) + tuple(b.strides or ()):
            if isinstance(n, Expr):
                found.update((id(v), v) for v in walk(n) if isinstance(v, Var))
    return list(found.values())


def verify_func(func: Func, level: str, where: Optional[str] = None) -> None:
    """Check a Loop IR or Tile IR function."""
    if len({id(b) for b in func.params}) != len(func.params):
        raise InternalError(f"{where or level}: function '{func.name}' lists a parameter twice")
    free = size_vars(func.params) + [v for _, v in func.size_args]      # sizes from shapes, and size arguments
    verify_stmt(func.body, func.params, free, flat=False, where=where or f"{level} IR of '{func.name}'",
                loop_kinds=LOOP_KINDS.get(level))
