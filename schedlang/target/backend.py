"""What a backend provides for one target kind.

A backend owns everything after Tile IR that depends on the target: how a target is
resolved against the machine, the checks a schedule must pass for it, the ordered list
of Kernel IR passes, and the ordered, named stages from Kernel IR to a callable module
(for the CPU: "llvm" -> "llvm.opt" -> "jit"). Every stage's text is kept on the module.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence, Tuple

from .target import Target

# A Kernel IR pass, by name: a function from the body (a Stmt) of a lowered function to a new
# body, or a kernel.lower.WholeFunction (split_kernels, add_size_params).
KernelPass = Tuple[str, Callable]
# A build stage, by name: a function of the BuildState that returns the stage's text (None
# for a stage with no text, such as machine code in memory) and keeps what it made on it.
Stage = Tuple[str, Callable[["BuildState"], Optional[str]]]


class BuildState:
    """What the stages of one build share: the Kernel IR module, the target, and the text of
    every level and stage so far (texts); each stage adds what later stages need."""

    def __init__(self, kernel, target: Target, texts: Dict[str, str]):
        self.kernel = kernel
        self.target = target
        self.texts = dict(texts)


def run_stages(stages: Sequence[Stage], state: BuildState, trace=None) -> BuildState:
    """Run the stages in order, keeping each one's text in state.texts under its name."""
    for name, stage in stages:
        text = stage(state)
        if text is not None:
            state.texts[name] = text
        if trace is not None:
            trace.record(name, text if text is not None else f"<{name}: no text>")
    return state


class Backend:
    """Base of backends; a backend for a new kind overrides what it supports."""

    kind: str = ""

    def resolve_target(self, target: Target) -> Target:
        """The target with everything the machine decides filled in and checked."""
        return target

    def check_schedule(self, schedule, target: Target) -> None:
        """Raise ScheduleError for a schedule this target cannot run."""

    def kernel_passes(self, target: Target) -> List[KernelPass]:
        """The Kernel IR passes, in order."""
        raise NotImplementedError(f"the {self.kind} backend defines no Kernel IR passes")

    def stages(self, target: Target) -> List[Stage]:
        """The build stages after Kernel IR, in order (build runs them: run_stages)."""
        return []

    def stage_names(self, target: Target) -> Sequence[str]:
        """The names of the stages after Kernel IR, in order; the text of each textual stage
        is kept in mod.ir under its name."""
        return tuple(name for name, _ in self.stages(target))

    def build(self, kernel_module, target: Target, is_output: Sequence[bool], texts: Dict[str, str],
              trace=None):
        """Compile Kernel IR into a callable module by running the stages; texts holds the text of
        every earlier level; a trace (schedlang.trace.Trace) records each stage's text."""
        raise NotImplementedError(f"the {self.kind} target cannot build modules yet")

    def load_module(self, path: str):
        """A module that this backend's export_library wrote."""
        raise NotImplementedError(f"the {self.kind} target cannot load modules")
