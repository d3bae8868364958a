"""The Kernel IR printer: the module header, then each kernel with its launch geometry."""
from __future__ import annotations

from typing import List

from ..expr.nodes import Buffer
from ..loop.nodes import SERIAL, Allocate, Barrier, For, IfThen, Let, Seq, Stmt, Store
from ..loop.printer import INDENT, buffer_decl
from .nodes import Kernel, KernelModule


def _stmt(s: Stmt, depth: int) -> List[str]:
    pad = INDENT * depth
    if isinstance(s, For):
        keyword = "for" if s.kind == SERIAL else s.kind
        notes = "".join(f"  # {k}: {v}" for k, v in s.pragmas)
        return [f"{pad}{keyword} {s.var.name} in 0..{s.extent}:{notes}"] + _stmt(s.body, depth + 1)
    if isinstance(s, Store):
        lanes = s.value.dtype.lanes
        note = f"   # {s.value.dtype.short}" if lanes > 1 else ""
        guard = f" if {s.predicate}" if s.predicate is not None else ""
        return [f"{pad}{s.buffer.name}[{s.indices[0]}] = {s.value}{guard}{note}"]
    if isinstance(s, IfThen):
        lines = [f"{pad}if {s.cond}:"] + _stmt(s.then_body, depth + 1)
        if s.else_body is not None:
            lines += [f"{pad}else:"] + _stmt(s.else_body, depth + 1)
        return lines
    if isinstance(s, Seq):
        return [line for x in s.stmts for line in _stmt(x, depth)]
    if isinstance(s, Allocate):
        b = s.buffer
        return [f"{pad}{b.scope} {b.name}: {b.dtype.short}[{b.size}]"] + _stmt(s.body, depth)
    if isinstance(s, Let):
        return [f"{pad}{s.value.dtype.short} {s.var.name} = {s.value}"] + _stmt(s.body, depth)
    if isinstance(s, Barrier):
        return [f"{pad}barrier({s.scope})"]
    raise TypeError(f"cannot print statement {type(s).__name__}")


def _param(b: Buffer) -> str:
    return f"{b.name}: {b.dtype.short}* {b.scope}"


def print_kernel(k: Kernel) -> str:
    launch = ", ".join(f"{a.tag}({a.var.name}: {a.extent})" if a.tag != "worker" else f"{a.var.name}: {a.extent}"
                       for a in k.launch)
    workers = f" workers({launch})" if k.workers else (f" launch({launch})" if k.launch else "")
    head = f"kernel {k.name}({', '.join(_param(b) for b in k.params)}){workers}:"
    return "\n".join([head] + _stmt(k.body, 1))


def print_module(m: KernelModule) -> str:
    params = ", ".join(f"{b.name}: {buffer_decl(b)}" for b in m.params)
    lines = [f"module {m.name}({params}):"]
    lines += [f"{INDENT}temp {b.name}: {buffer_decl(b)} {b.scope}" for b in m.temps]
    lines += [f"{INDENT}launch {k.name}" for k in m.kernels]
    for k in m.kernels:
        lines += ["", print_kernel(k)]
    return "\n".join(lines)
