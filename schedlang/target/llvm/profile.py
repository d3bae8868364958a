"""Per-kernel times of a module built with the target's profile option ("llvm -profile").

The entry function reads the monotonic clock before and after each kernel it calls and adds
the difference to that call's slot of a global array of 64-bit nanoseconds, whose last slot
counts the entry's calls. The kernels are timed where they run, inside the model, after the
kernel before them: what a kernel costs there (caches its neighbours filled, which core
holds which rows) is what timing it alone does not show. Parallel kernels return after
their threads join, so a kernel's time includes its threads' imbalance.

The array is a plain global: calls of one module from several threads at once add to the
same slots (the times are then not any one call's).
"""
from __future__ import annotations

import ctypes
from typing import List, NamedTuple

from .builder import FunctionText

SYMBOL = "schedlang_kernel_ns"
CLOCK_MONOTONIC = 1       # Linux's number for it (the only OS the CPU target builds for)


class KernelTime(NamedTuple):
    """One kernel call site of a module: its kernel's name, how many calls of the module it
    was timed in, and the seconds it took in all of them."""
    name: str
    calls: int
    seconds: float

    @property
    def per_call(self) -> float:
        return self.seconds / self.calls if self.calls else 0.0


class KernelClock:
    """Emits the timing of the kernel calls of one entry function."""

    def __init__(self, fn: FunctionText, declarations: set, kernels: int):
        self.fn = fn
        self.slots = kernels + 1
        self.spec = fn.alloca("alloca { i64, i64 }, align 8", "timespec")
        declarations.update({"declare i32 @clock_gettime(i32, ptr)",
                             f"@{SYMBOL} = global [{self.slots} x i64] zeroinitializer, align 8"})

    def now(self) -> str:
        """The monotonic clock in nanoseconds."""
        fn = self.fn
        fn.do(f"call i32 @clock_gettime(i32 {CLOCK_MONOTONIC}, ptr {self.spec})")
        sec = fn.emit(f"load i64, ptr {self.spec}, align 8", "sec")
        nsec_at = fn.emit(f"getelementptr inbounds {{ i64, i64 }}, ptr {self.spec}, i64 0, i32 1", "nsec.at")
        nsec = fn.emit(f"load i64, ptr {nsec_at}, align 8", "nsec")
        ns = fn.emit(f"mul i64 {sec}, 1000000000", "ns")
        return fn.emit(f"add i64 {ns}, {nsec}", "now")

    def add(self, slot: int, value: str) -> None:
        """Add value to the slot's total (slot kernels: the count of calls)."""
        fn = self.fn
        at = fn.emit(f"getelementptr inbounds [{self.slots} x i64], ptr @{SYMBOL}, i64 0, i64 {slot}", "slot")
        old = fn.emit(f"load i64, ptr {at}, align 8", "total")
        fn.do(f"store i64 {fn.emit(f'add i64 {old}, {value}', 'total')}, ptr {at}, align 8")

    def time_call(self, slot: int, call: str) -> None:
        """Emit the call, timed into slot."""
        start = self.now()
        self.fn.do(call)
        self.add(slot, self.fn.emit(f"sub i64 {self.now()}, {start}", "took"))

    def count_call(self) -> None:
        self.add(self.slots - 1, "1")


def read_times(address: int, names: List[str], reset: bool) -> List[KernelTime]:
    """The times at a module's array (its global's address), one per kernel call site."""
    slots = (ctypes.c_int64 * (len(names) + 1)).from_address(address)
    calls = slots[len(names)]
    out = [KernelTime(name, calls, slots[j] * 1e-9) for j, name in enumerate(names)]
    if reset:
        ctypes.memset(address, 0, ctypes.sizeof(slots))
    return out
