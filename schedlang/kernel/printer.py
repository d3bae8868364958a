"""The Kernel IR printer: the module header, then each kernel with its launch geometry."""
from __future__ import annotations


from ..expr.nodes import Buffer
from ..loop.nodes import SERIAL, For, Let, Store
from ..loop.printer import INDENT, StmtPrinter, buffer_decl, pragma_value
from .nodes import Kernel, KernelModule, LaunchKind


class KernelPrinter(StmtPrinter):
    """Kernel IR reads like Tile IR, with flat indices, vector types and sized allocations."""

    def loop(self, s: For) -> str:
        keyword = "for" if s.kind == SERIAL else s.kind
        return f"{keyword} {s.var.name} in 0..{s.extent}:" + "".join(f"  # {k}: {pragma_value(k, v)}" for k, v in s.pragmas)

    def store(self, s: Store) -> str:
        note = f"   # {s.value.dtype.short}" if s.value.dtype.lanes > 1 else ""
        guard = f" if {s.predicate}" if s.predicate is not None else ""
        return f"{s.buffer.name}[{s.indices[0]}] = {s.value}{guard}{note}"

    def allocate(self, b: Buffer) -> str:
        return f"{b.scope} {b.name}: {b.dtype.short}[{b.size}]"

    def let(self, s: Let) -> str:
        return f"{s.value.dtype.short} {s.var.name} = {s.value}"


def _param(b: Buffer) -> str:
    return f"{b.name}: {b.dtype.short}* {b.scope}"


def print_kernel(k: Kernel) -> str:
    launch = ", ".join(f"{a.var.name}: {a.extent}" if a.kind is LaunchKind.CPU_WORKER
                       else f"{a.tag}({a.var.name}: {a.extent})" for a in k.launch)
    workers = f" workers({launch})" if k.workers else (f" launch({launch})" if k.launch else "")
    params = [_param(b) for b in k.params] + [f"{v.name}: {v.dtype.short}" for v in k.sizes]
    head = f"kernel {k.name}({', '.join(params)}){workers}:"
    return "\n".join([head] + KernelPrinter().lines(k.body, 1))


def print_module(m: KernelModule) -> str:
    params = [f"{b.name}: {buffer_decl(b)}" for b in m.params]
    for pos, v in m.size_args:          # size variables passed as arguments, where the caller listed them
        params.insert(pos, f"{v.name}: {v.dtype.short}")
    lines = [f"module {m.name}({', '.join(params)}):"]
    lines += [f"{INDENT}temp {b.name}: {buffer_decl(b)} {b.scope}" for b in m.temps]
    lines += [f"{INDENT}launch {k.name}" for k in m.kernels]
    for k in m.kernels:
        lines += ["", print_kernel(k)]
    return "\n".join(lines)
