"""The IR after every pass, as Halide's debug(2) and LLVM's -print-after-all.

sl.build(..., trace=True), or the environment variable SCHEDLANG_TRACE=1 for every build,
records the text of the IR after each step of the pipeline, named as in the pass lists:
the Tensor and Loop IR levels, each Tile IR pass (tile/lower.py: tile_passes), each Kernel
IR pass (the backend's kernel_passes) and each build stage (the backend's stages). Each
entry is printed to stderr as it is made and kept on the module as mod.trace, a list of
(pass name, text). A traced build always compiles (the build cache is skipped).
"""
from __future__ import annotations

import os
import sys
from typing import List, Optional, Tuple

ENV = "SCHEDLANG_TRACE"


def wanted(trace: Optional[bool]) -> bool:
    """Whether to trace a build: trace= when given, else SCHEDLANG_TRACE."""
    if trace is not None:
        return bool(trace)
    return os.environ.get(ENV, "") not in ("", "0")


class Trace:
    """The (pass name, IR text) entries of one build, in pipeline order."""

    def __init__(self):
        self.passes: List[Tuple[str, str]] = []

    def record(self, name: str, text: str) -> None:
        self.passes.append((name, text))
        print(f"// ---- IR after {name} ----\n{text}", file=sys.stderr)
