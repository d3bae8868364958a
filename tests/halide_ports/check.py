"""Helpers for the Halide ports: the loop nest of a lowered schedule as an outline (what
Halide's print_loop_nest shows), and building/running against numpy."""
from __future__ import annotations

import re

import numpy as np

import schedlang as sl
from tests.tvm_ports.check import build_and_run  # noqa: F401  (bounds-checked and normal builds)

_LOOP = re.compile(r"^(\s*)(for|parallel|vectorized|unrolled) (\S+) in 0\.\.(.+):$")
_ALLOC = re.compile(r"^(\s*)alloc (\S+): \w+\[(.*)\] \w+$")


def loop_nest(s, args) -> str:
    """The loops and allocations of sl.lower(s, args), one a line, indented by how many
    loops enclose them ("parallel y.outer.x.outer.fused in 0..4", "alloc producer [2, 5]");
    statements and tail guards left out."""
    lines, open_loops = [], []      # indentation of each enclosing loop
    for line in str(sl.lower(s, args)).splitlines()[1:]:
        m = _LOOP.match(line) or _ALLOC.match(line)
        if not m:
            continue
        indent = len(m.group(1))
        while open_loops and open_loops[-1] >= indent:
            open_loops.pop()
        pad = "  " * len(open_loops)
        if m.re is _LOOP:
            lines.append(f"{pad}{m.group(2)} {m.group(3)} in 0..{m.group(4)}")
            open_loops.append(indent)
        else:
            lines.append(f"{pad}alloc {m.group(2)} [{m.group(3)}]")
    return "\n".join(lines)


def outline(text: str) -> str:
    """An expected outline written in a test, with its common indentation removed."""
    import textwrap
    return textwrap.dedent(text).strip("\n")


def gradient_numpy(height: int, width: int) -> np.ndarray:
    y, x = np.mgrid[0:height, 0:width]
    return (x + y).astype("int32")
