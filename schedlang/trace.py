"""The IR after every pass, as Halide's debug(2) and LLVM's -print-after-all.

sl.build(..., trace=True), or the environment variable SCHEDLANG_TRACE=1 for every build,
records the text of the IR after each step of the pipeline, named as in the pass lists:
the Tensor and Loop IR levels, each Tile IR pass (tile/lower.py: tile_passes), each Kernel
IR pass (the backend's kernel_passes) and each build stage (the backend's stages). Each
entry is printed to stderr as it is made and kept on the module as mod.trace, a list of
(pass name, text). A traced build always compiles (the build cache is skipped).

Every entry is also timed: trace.times lists (pass name, seconds since the previous entry,
or since the trace began). A Trace(text=False) records the times only: it renders no IR
text and prints nothing, so that a build is timed pass by pass at its normal cost
(sl.build(s, args, trace=sl.trace.Trace(text=False)); benchmarks/compile.py).
"""
from __future__ import annotations

import os
import sys
import time
from typing import Callable, List, Optional, Tuple, Union

ENV = "SCHEDLANG_TRACE"


def wanted(trace: Union[bool, "Trace", None]) -> bool:
    """Whether to trace a build: trace= when given, else SCHEDLANG_TRACE."""
    if trace is not None:
        return isinstance(trace, Trace) or bool(trace)
    return os.environ.get(ENV, "") not in ("", "0")


def for_build(trace: Union[bool, "Trace", None]) -> Optional["Trace"]:
    """The Trace a build records into: the one given, a new one when tracing is wanted, or None."""
    if isinstance(trace, Trace):
        return trace
    return Trace() if wanted(trace) else None


class Trace:
    """The (pass name, IR text) entries of one build, in pipeline order, and their times.
    text=False: times only (no IR is rendered; entries hold None; nothing is printed)."""

    def __init__(self, text: bool = True):
        self.text = text
        self.passes: List[Tuple[str, Optional[str]]] = []
        self.times: List[Tuple[str, float]] = []
        self._last = time.perf_counter()

    def record(self, name: str, text: Union[str, Callable[[], str], None]) -> None:
        """Add the entry of pass `name`; text is the IR or a function giving it (called only
        when this trace keeps text, after the pass's time is taken)."""
        now = time.perf_counter()
        self.times.append((name, now - self._last))
        if self.text:
            text = text() if callable(text) else text
            print(f"// ---- IR after {name} ----\n{text}", file=sys.stderr)
        else:
            text = None
        self.passes.append((name, text))
        self._last = time.perf_counter()      # rendering and printing the text is not the next pass's time
