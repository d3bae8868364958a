"""Software prefetch: the lowering of Stage.prefetch(tensor, axis, offset) on the CPU.

At the top of each iteration of the loop of `axis`, the addresses that iteration's body reads
from the tensor's buffer `offset` iterations later are prefetched into L1 (llvm.prefetch, a
read with high locality: x86's prefetcht0), one prefetch per cache line of each contiguous
read. Only the reads whose indices depend on the loop's variable and on nothing bound inside
the body are prefetched (a read in a nested loop has no single address at the top of the
body); other reads are left to the hardware prefetchers.

A prefetch is a hint: it never faults and changes no value, so the addresses of the last
`offset` iterations, which lie past what the loop reads (possibly past the buffer), are
prefetched as they are (the address arithmetic has no inbounds or nsw flags, so it is never
poison), as TVM's prefetch does.
"""
from __future__ import annotations

from typing import List, Tuple

from ...expr.equality import key
from ...expr.functor import free_vars, substitute, walk
from ...expr.nodes import Buffer, Const, Expr, Load, Ramp, Var
from ...loop.functor import stmt_exprs, walk_stmts
from ..target import CACHE_LINE_BYTES
from .types import compute_type, scalar_memory

DECLARE = "declare void @llvm.prefetch.p0(ptr, i32, i32, i32)"


def reads_ahead(body, var: Var, buffer_name: str, offset: int, bound) -> List[Tuple[Buffer, Expr]]:
    """(buffer, index) of the first element of every cache line that body's reads of
    buffer_name touch, offset iterations of var ahead, each index once; bound(v): whether a
    variable has a value at the top of the body."""
    ahead, seen, walked = [], set(), set()
    shift = {var: var + Const(offset, var.dtype)}
    for s in walk_stmts(body):
        for e in stmt_exprs(s):
            for n in walk(e, walked):
                if not isinstance(n, Load) or n.buffer.name != buffer_name:
                    continue
                index = n.indices[0]
                used = free_vars(index)
                if var not in used or not all(bound(v) for v in used):
                    continue
                if isinstance(index, Ramp):
                    if not (isinstance(index.stride, Const) and index.stride.value == 1) or index.base.dtype.lanes != 1:
                        continue          # a gather: no contiguous lines
                    base, elems = index.base, index.lanes
                elif index.dtype.lanes != 1:
                    continue              # a gather (a vector of indices)
                else:
                    base, elems = index, 1
                per_line = max(1, CACHE_LINE_BYTES // n.buffer.dtype.bytes)
                moved = substitute(base, shift)
                for first in range(0, elems, per_line):
                    line = moved if first == 0 else moved + Const(first, moved.dtype)
                    k = key(line)
                    if k not in seen:
                        seen.add(k)
                        ahead.append((n.buffer, line))
    return ahead


def emit_prefetches(em, body, var: Var, buffer, offset: int) -> None:
    """Emit, at the emitter's current point (the top of var's loop body), the prefetches of
    reads_ahead; buffer: the prefetched tensor's buffer (before flattening: matched by name)
    or its name."""
    name = getattr(buffer, "name", buffer)
    for buffer, index in reads_ahead(body, var, name, offset, lambda v: v in em.env):
        if buffer not in em.ptrs:
            continue
        i = em.expr(index)         # not as an index: no nsw, the shifted range is not the loop's
        if index.dtype.bits != 64:
            i = em.fn.emit(f"sext {compute_type(index.dtype)} {i} to i64", "pf.idx")
        addr = em.fn.emit(f"getelementptr {scalar_memory(buffer.dtype)}, ptr {em.ptrs[buffer]}, i64 {i}", "pf.addr")
        em.declare(DECLARE)
        em.fn.do(f"call void @llvm.prefetch.p0(ptr {addr}, i32 0, i32 3, i32 1)")
