"""add_size_params: with symbolic shapes, the size variables become scalar parameters of
the module (read from the argument arrays when it is called) and of every kernel that
uses them, after its buffers."""
from __future__ import annotations

from dataclasses import replace
from typing import Dict, Iterable, Iterator, Tuple

from ..expr.functor import free_vars
from ..expr.nodes import Buffer, Expr, Var
from ..loop.functor import stmt_exprs, walk_stmts
from ..loop.nodes import Allocate, For, Let, Stmt
from .nodes import Kernel, KernelModule


def buffer_exprs(b: Buffer) -> Iterator[Expr]:
    """The symbolic extents and strides of a buffer."""
    for n in tuple(b.shape) + tuple(b.strides or ()):
        if isinstance(n, Expr):
            yield n


def _stmt_vars(body: Stmt) -> Tuple[Dict[Var, None], set]:
    """(variables used, variables bound by loops and lets) in a statement."""
    used: Dict[Var, None] = {}
    bound = set()
    for s in walk_stmts(body):
        exprs = list(stmt_exprs(s))
        if isinstance(s, For):
            bound.add(s.var)
            if isinstance(s.extent, Expr):
                exprs.append(s.extent)
        elif isinstance(s, Let):
            bound.add(s.var)
        elif isinstance(s, Allocate):
            exprs += list(buffer_exprs(s.buffer))
        for e in exprs:
            used.update(free_vars(e))
    return used, bound


def _vars(exprs: Iterable[Expr]) -> Dict[Var, None]:
    out: Dict[Var, None] = {}
    for e in exprs:
        out.update(free_vars(e))
    return out


def add_size_params(m: KernelModule, size_args=(), size_checks=()) -> KernelModule:
    """The module with its size variables, and each kernel with the ones it uses.
    size_args: (call position, variable) of sizes passed as integer arguments, which the
    module takes even where no kernel uses them; size_checks: (expression, what) of sizes
    that must be at least 1."""
    sizes = _vars(e for b in m.params + m.temps for e in buffer_exprs(b))
    sizes.update(dict.fromkeys(v for _, v in size_args))
    kernels = []
    for k in m.kernels:
        used, bound = _stmt_vars(k.body)
        used.update(_vars(e for b in k.params for e in buffer_exprs(b)))
        used.update(_vars(a.extent for a in k.launch if isinstance(a.extent, Expr)))
        bound |= {a.var for a in k.launch}
        free = [v for v in used if v not in bound]
        sizes.update(dict.fromkeys(free))
        kernels.append(replace(k, sizes=tuple(free)) if free else k)
    if not sizes:
        return m
    return replace(m, kernels=tuple(kernels), sizes=tuple(sizes), size_args=tuple(size_args),
                   size_checks=tuple(size_checks))


def symbolic_buffers(m: KernelModule) -> Tuple[Buffer, ...]:
    """Temporaries and allocations whose size depends on the size variables."""
    out = [b for b in m.temps if b.is_symbolic]
    for k in m.kernels:
        out += [s.buffer for s in walk_stmts(k.body) if isinstance(s, Allocate) and s.buffer.is_symbolic]
    return tuple(out)


def symbolic_extents(m: KernelModule) -> Tuple[Expr, ...]:
    """The symbolic loop and launch extents of the module (each once)."""
    out: Dict[int, Expr] = {}
    for k in m.kernels:
        for a in k.launch:
            if isinstance(a.extent, Expr):
                out.setdefault(id(a.extent), a.extent)
        for s in walk_stmts(k.body):
            if isinstance(s, For) and isinstance(s.extent, Expr):
                out.setdefault(id(s.extent), s.extent)
    return tuple(out.values())
