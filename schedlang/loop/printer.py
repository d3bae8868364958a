"""The printer of Loop IR and Tile IR: Python-like, one statement a line."""
from __future__ import annotations

from typing import List

from ..expr.nodes import Buffer
from .nodes import (PREFETCH, SERIAL, Allocate, Barrier, CallPacked, Evaluate, For, Func, IfThen, Let, Seq, StageNest, Stmt, Store,
                    ThreadAllReduce)

INDENT = "  "


def pragma_value(key: str, value) -> str:
    """A loop pragma's value as printed: Stage.prefetch's (buffer, offset) as "buffer +offset"."""
    if key == PREFETCH:
        buffer, offset = value
        return f"{getattr(buffer, 'name', buffer)} +{offset}"
    return str(value)


def buffer_decl(b: Buffer) -> str:
    shape = ", ".join(map(str, b.shape))
    text = f"{b.dtype.short}[{shape}]"
    if b.strides is not None:
        text += f" strides({', '.join(map(str, b.strides))})"
    return text


class StmtPrinter:
    """Prints statements one a line, nested bodies indented. Subclasses (Kernel IR) change
    how single statements read; the structure is shared."""

    def lines(self, s: Stmt, depth: int = 0) -> List[str]:
        pad = INDENT * depth
        if isinstance(s, For):
            return [pad + self.loop(s)] + self.lines(s.body, depth + 1)
        if isinstance(s, Store):
            return [pad + self.store(s)]
        if isinstance(s, IfThen):
            lines = [f"{pad}if {s.cond}:"] + self.lines(s.then_body, depth + 1)
            if s.else_body is not None:
                lines += [f"{pad}else:"] + self.lines(s.else_body, depth + 1)
            return lines
        if isinstance(s, Seq):
            return [line for x in s.stmts for line in self.lines(x, depth)]
        if isinstance(s, Allocate):
            return [pad + self.allocate(s.buffer)] + self.lines(s.body, depth)
        if isinstance(s, Let):
            return [pad + self.let(s)] + self.lines(s.body, depth)
        if isinstance(s, Barrier):
            return [f"{pad}barrier({s.scope})"]
        if isinstance(s, StageNest):
            return self.lines(s.body, depth)
        if isinstance(s, ThreadAllReduce):
            values = ", ".join(f"{b.name}[0]" for b in s.buffers)
            values = values if len(s.buffers) == 1 else f"({values})"
            return [f"{pad}{values} = thread_allreduce({s.combiner.name}, {values}, over {s.var.name}: {s.thread_tag})"]
        if isinstance(s, CallPacked):
            args = ", ".join([repr(s.func)] + [a.name if isinstance(a, Buffer) else repr(a) for a in s.args])
            return [f"{pad}call_packed({args})"]
        if isinstance(s, Evaluate):
            return [f"{pad}{s.value}"]
        raise TypeError(f"cannot print statement {type(s).__name__}")

    def loop(self, s: For) -> str:
        keyword = f"bound[{s.thread_tag}]" if s.thread_tag else "for" if s.kind == SERIAL else s.kind
        return f"{keyword} {s.var.name} in 0..{s.extent}:" + "".join(f"  # pragma {k}={pragma_value(k, v)}" for k, v in s.pragmas)

    def store(self, s: Store) -> str:
        guard = f"  if {s.predicate}" if s.predicate is not None else ""
        return f"{s.buffer.name}[{', '.join(str(i) for i in s.indices)}] = {s.value}{guard}"

    def allocate(self, b: Buffer) -> str:
        return f"alloc {b.name}: {buffer_decl(b)} {b.scope}"

    def let(self, s: Let) -> str:
        return f"{s.var.name} = {s.value}"


def stmt_lines(s: Stmt, depth: int = 0) -> List[str]:
    return StmtPrinter().lines(s, depth)


def print_func(f: Func) -> str:
    params = [f"{b.name}: {buffer_decl(b)}" for b in f.params]
    for pos, v in f.size_args:          # size variables passed as arguments, where the caller listed them
        params.insert(pos, f"{v.name}: {v.dtype.short}")
    params = ", ".join(params)
    return "\n".join([f"func {f.name}({params}):"] + stmt_lines(f.body, 1))
