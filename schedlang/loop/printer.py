"""The printer of Loop IR and Tile IR: Python-like, one statement a line."""
from __future__ import annotations

from typing import List

from ..expr.nodes import Buffer
from .nodes import SERIAL, Allocate, Barrier, For, Func, IfThen, Let, Seq, StageNest, Stmt, Store

INDENT = "  "


def buffer_decl(b: Buffer) -> str:
    shape = ", ".join(map(str, b.shape))
    text = f"{b.dtype.short}[{shape}]"
    if b.strides is not None:
        text += f" strides({', '.join(map(str, b.strides))})"
    return text


def stmt_lines(s: Stmt, depth: int = 0) -> List[str]:
    pad = INDENT * depth
    if isinstance(s, For):
        keyword = "for" if s.kind == SERIAL else s.kind
        if s.thread_tag:
            keyword = f"bound[{s.thread_tag}]"
        pragmas = "".join(f"  # pragma {k}={v}" for k, v in s.pragmas)
        return [f"{pad}{keyword} {s.var.name} in 0..{s.extent}:{pragmas}"] + stmt_lines(s.body, depth + 1)
    if isinstance(s, Store):
        idx = ", ".join(str(i) for i in s.indices)
        guard = f"  if {s.predicate}" if s.predicate is not None else ""
        return [f"{pad}{s.buffer.name}[{idx}] = {s.value}{guard}"]
    if isinstance(s, IfThen):
        lines = [f"{pad}if {s.cond}:"] + stmt_lines(s.then_body, depth + 1)
        if s.else_body is not None:
            lines += [f"{pad}else:"] + stmt_lines(s.else_body, depth + 1)
        return lines
    if isinstance(s, Seq):
        return [line for x in s.stmts for line in stmt_lines(x, depth)]
    if isinstance(s, Allocate):
        b = s.buffer
        return [f"{pad}alloc {b.name}: {buffer_decl(b)} {b.scope}"] + stmt_lines(s.body, depth)
    if isinstance(s, Let):
        return [f"{pad}{s.var.name} = {s.value}"] + stmt_lines(s.body, depth)
    if isinstance(s, Barrier):
        return [f"{pad}barrier({s.scope})"]
    if isinstance(s, StageNest):
        return stmt_lines(s.body, depth)
    raise TypeError(f"cannot print statement {type(s).__name__}")


def print_func(f: Func) -> str:
    params = ", ".join(f"{b.name}: {buffer_decl(b)}" for b in f.params)
    return "\n".join([f"func {f.name}({params}):"] + stmt_lines(f.body, 1))
