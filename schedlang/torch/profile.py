"""Where a compiled model's forward spends its time, kernel by kernel, timed inside the model:
TVM's debug executor for a model compiled for a target with the profile option
(`schedlang.torch.compile(model, inputs, target="llvm -profile")`, then
`compiled.profile(*inputs)`).

Each kernel is timed where it runs (target/llvm/profile.py), after the kernel before it and
on the threads the model uses: a kernel timed alone sees warm caches and no neighbours.
"""
from __future__ import annotations

import time
from typing import List, NamedTuple, Sequence

from ..kernel.kernels import root_stage
from ..texts import name_table


class KernelRow(NamedTuple):
    """A kernel call of a forward: its part, its kernel's name (the name of the root stage of its
    loop nest: root_stage), and milliseconds per forward."""
    part: int
    name: str
    ms: float


class ModelProfile:
    """rows: every kernel call of one forward, in call order; forward_ms: the mean wall time of a
    forward (with what runs between the kernels: binding, torch steps, Python); runs: forwards
    timed. Means, both: the kernels' sum is then a part of the forward's time."""

    def __init__(self, rows: List[KernelRow], forward_ms: float, runs: int):
        self.rows = rows
        self.forward_ms = forward_ms
        self.runs = runs

    @property
    def kernels_ms(self) -> float:
        return sum(r.ms for r in self.rows)

    def table(self, top: int = 0) -> str:
        """The kernels by time, slowest first (top: only that many; 0: all), with their share of
        the forward and what the forward spent outside the kernels."""
        ranked = sorted(self.rows, key=lambda r: -r.ms)
        shown, rest = ranked[:top or None], ranked[top or len(ranked):]
        total = self.forward_ms or 1.0
        lines = [("part", "kernel", "ms", "%")]
        lines += [(str(r.part), r.name, f"{r.ms:.4f}", f"{100 * r.ms / total:.1f}") for r in shown]
        if rest:
            ms = sum(r.ms for r in rest)
            lines.append(("", f"({len(rest)} more kernels)", f"{ms:.4f}", f"{100 * ms / total:.1f}"))
        outside = self.forward_ms - self.kernels_ms
        lines.append(("", "(outside the kernels)", f"{outside:.4f}", f"{100 * outside / total:.1f}"))
        text = name_table(lines)
        text.append(f"forward: {self.forward_ms:.4f} ms (mean of {self.runs}), "
                    f"{len(self.rows)} kernel calls: {self.kernels_ms:.4f} ms")
        return "\n".join(text)

    def __str__(self) -> str:
        return self.table()


def profile(compiled, args: Sequence, number: int) -> ModelProfile:
    """Call compiled on args once (warm-up), then `number` times; each kernel's mean time per
    forward, and the mean forward."""
    if isinstance(number, bool) or not isinstance(number, int) or number < 1:
        raise ValueError(f"profile: number must be a positive integer, got {number!r}")
    if not getattr(compiled.target.options, "profile", False):     # a kind without the option too
        raise ValueError("profile() needs the kernels built to time themselves: compile for a target with the "
                         "profile option (schedlang.torch.compile(model, inputs, target='llvm -profile'))")
    compiled(*args)
    modules = dict(compiled.modules)
    for mod in modules.values():
        mod.kernel_times(reset=True)
    start = time.perf_counter()
    for _ in range(number):
        compiled(*args)
    wall = (time.perf_counter() - start) / number
    times = {}               # parts with equal programs may share one built module: read it once
    for mod in modules.values():
        if id(mod) not in times:
            times[id(mod)] = mod.kernel_times(reset=True)
    rows = []
    for part, mod in sorted(modules.items()):
        for k in times[id(mod)]:        # a module run by several parts: each call's mean time
            rows.append(KernelRow(part, root_stage(k.name, mod.name), k.per_call * 1e3))
    return ModelProfile(rows, wall * 1e3, number)
