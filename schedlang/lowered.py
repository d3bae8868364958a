"""LoweredFunc: what sl.lower returns, the text of the lowered program that sl.build accepts.

It is a str (the text print shows, so comparisons, `in` and splitlines work on it as
before) that also carries the IR of every level it was lowered to, so that
sl.build(lowered, target=...) compiles it without lowering the schedule again, as
tvm.build(tvm.lower(s, args)) does.
"""
from __future__ import annotations

from typing import Dict, Sequence, Tuple


class LoweredFunc(str):
    """The text of a lowered schedule at one level; build() takes it in place of (s, args).

    level: the level asked for ("tensor", "loop", "tile", "kernel", "all").
    ir: the IR of every level lowered so far (Tile IR as a Func, Kernel IR as a KernelModule).
    texts: their text.  target: the (resolved) target it was lowered for, which build() uses by default.
    is_output: for each argument, whether the program writes it.
    schedule, args: what was lowered; building for another target lowers the kept Tile IR
    again and checks the schedule (as it is then) against that target.
    """

    level: str
    name: str
    ir: Dict[str, object]
    texts: Dict[str, str]
    target: object
    schedule: object
    args: Tuple[object, ...]
    is_output: Tuple[bool, ...]

    @classmethod
    def make(cls, text: str, level: str, ir: Dict[str, object], texts: Dict[str, str], target, schedule,
             args: Sequence, is_output: Sequence[bool]) -> "LoweredFunc":
        obj = str.__new__(cls, text)
        obj.__dict__.update(level=level, ir=dict(ir), texts=dict(texts), target=target, schedule=schedule,
                            args=tuple(args), is_output=tuple(is_output), name=ir["loop"].name if "loop" in ir else "")
        return obj
