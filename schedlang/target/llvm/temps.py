"""A module's temporaries of fixed size, kept from one call of its entry function to the next.

The entry function allocates the temporaries its kernels share (kernel/memory_plan.py's
arena, or a buffer each) and frees them when the kernels are done. Taken with aligned_alloc
and given back with free on every call, a large block came from mmap, or from the top of
the heap that free then trimmed, and each call touched fresh pages: the Llama of
benchmarks/models.py faulted in 5.8 MB (1,472 pages) on most forwards, at 1.4-5.8 us a page
on a 2-core Xeon VM, and the first decoder layer's small kernels ran 20-30x slower than the
same kernels of the next layers (`llvm -profile`).

So each fixed-size temporary has a slot, a global of the module. A call takes the block from
its slot (an atomic exchange with null: a concurrent call finds the slot empty and allocates
its own) and puts it back when the kernels are done (an exchange, freeing what the slot held
then, so nothing leaks when two calls overlap). The module's release function frees what the
slots hold; the Python module calls it when it is collected (module.py). TVM's graph
executor keeps its storage pool for the executor's life the same way. Temporaries of a
symbolic size are allocated per call, as before.
"""
from __future__ import annotations

from typing import Dict, List

TAKE = "sl.temps.take"
KEEP = "sl.temps.keep"
RELEASE_SUFFIX = ".release"


def release_symbol(entry: str) -> str:
    """The symbol of the function that frees what entry's slots hold (defined only where the
    entry keeps temporaries)."""
    return entry + RELEASE_SUFFIX


def definitions(entry: str, slots: List[str], align: int) -> str:
    """The slots, the take/keep helpers the entry calls, and entry's release function (LLVM IR
    text; the module declares aligned_alloc and free)."""
    lines = [f"{slot} = internal global ptr null, align 8" for slot in slots]
    lines += [
        f"define private ptr @{TAKE}(ptr %slot, i64 %size) #0 {{",
        "  %held = atomicrmw xchg ptr %slot, ptr null acq_rel, align 8",
        "  %none = icmp eq ptr %held, null",
        "  br i1 %none, label %fresh, label %kept",
        "fresh:",
        f"  %new = call ptr @aligned_alloc(i64 {align}, i64 %size)",
        "  ret ptr %new",
        "kept:",
        "  ret ptr %held",
        "}",
        f"define private void @{KEEP}(ptr %slot, ptr %block) #0 {{",
        "  %held = atomicrmw xchg ptr %slot, ptr %block acq_rel, align 8",
        "  call void @free(ptr %held)",
        "  ret void",
        "}",
        f"define void @{release_symbol(entry)}() #0 {{",
    ]
    for i, slot in enumerate(slots):
        lines.append(f"  %held.{i} = atomicrmw xchg ptr {slot}, ptr null acq_rel, align 8")
        lines.append(f"  call void @free(ptr %held.{i})")
    lines += ["  ret void", "}"]
    return "\n".join(lines)


def take(fn, slot: str, size, hint: str) -> str:
    """Emit the entry's taking of a temporary of size bytes from slot; returns its pointer
    (null where it could not be allocated)."""
    return fn.emit(f"call ptr @{TAKE}(ptr {slot}, i64 {size})", hint)


def keep(fn, slot: str, pointer: str) -> None:
    fn.do(f"call void @{KEEP}(ptr {slot}, ptr {pointer})")


def kept_slots(entry: str, buffers) -> Dict[object, str]:
    """A slot (the name of a global of the module) for each buffer, in order."""
    return {b: f"@{entry}.temps.{i}" for i, b in enumerate(buffers)}
