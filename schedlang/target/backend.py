"""What a backend provides for one target kind.

A backend owns everything after Tile IR that depends on the target: how a target is
resolved against the machine, the checks a schedule must pass for it, the ordered list
of Kernel IR passes, and the ordered, named stages from Kernel IR to a callable module
(for the CPU: "llvm" -> "llvm.opt" -> "jit"). Every stage's text is kept on the module.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Sequence, Tuple

from .target import Target

# A Kernel IR pass, by name: a function from the body (a Stmt) of a lowered function to a new body.
KernelPass = Tuple[str, Callable]


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

    def stage_names(self, target: Target) -> Sequence[str]:
        """The names of the stages after Kernel IR, in order; the text of each textual stage
        is kept in mod.ir under its name."""
        return ()

    def build(self, kernel_module, target: Target, is_output: Sequence[bool], texts: Dict[str, str]):
        """Compile Kernel IR into a callable module; texts holds the text of every earlier level."""
        raise NotImplementedError(f"the {self.kind} target cannot build modules yet")

    def load_module(self, path: str):
        """A module that this backend's export_library wrote."""
        raise NotImplementedError(f"the {self.kind} target cannot load modules")
