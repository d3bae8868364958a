"""What a backend provides for one target kind.

A backend owns everything that differs per target; no code outside schedlang/target/ tests
a target's kind. For the pipeline: how a target is resolved against the machine, the checks
a schedule must pass for it, the ordered list of Kernel IR passes, and the ordered, named
stages from Kernel IR to a callable module (for the CPU: "llvm" -> "llvm.opt" -> "jit");
every stage's text is kept on the module. For the packages above the pipeline (section
"what the users of the pipeline ask" below): the auto-scheduler's sketch rules, measurement,
features and launch checks; the torch frontend's device, emulation and default schedules;
what the CLI prints. Hooks that belong to those packages import them when called, so that
building a module loads neither the auto-scheduler nor torch.
"""
from __future__ import annotations

import os
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from ..errors import ScheduleError
from ..schedule.annotate import BIND
from ..texts import LevelTexts
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
        self.texts = LevelTexts(texts)       # the levels' texts printed only when read


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
    # Whether the body passes of kernel_passes may run on each root stage nest alone, so
    # that a repeated nest is lowered once (kernel/lower.py: per_nest).
    kernel_passes_per_nest: bool = False
    # Whether the target's option `profile` makes its modules time each kernel they run
    # (mod.kernel_times(); the torch frontend's profile() and in-model check of tuned tasks).
    profiles_kernels: bool = False

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

    # ---- what the users of the pipeline ask (defaults: a module that runs on the host CPU;
    # HostCPUBackend below adds the CPU's sketch rules, measurement and default schedules) ----

    builds_static_shapes: bool = False
    """Every build needs static shapes: the auto-scheduler refuses a task with symbolic ones,
    and the torch frontend builds a graph with size variables again per set of sizes."""

    torch_device: str = "cpu"
    """The torch device whose tensors a module compiled by schedlang.torch takes."""

    prepacks_weights: bool = False
    """The torch frontend lays a Linear's constant weight out in panels (torch/prepack.py) that
    this target's default matmul schedule reads."""

    moves_register_blocks: bool = False
    """The auto-scheduler's search may move a factor between two loops' register block tiles
    (autoschedule/mutate.py) where the target's register file is tight for the float type."""

    sketches_tensorize: bool = False
    """The auto-scheduler's sketches draw tensor intrinsics (CUDA's tensor cores): a kernel whose
    default schedule tensorizes is worth a search. Where not (the CPU), whole-model tuning keeps
    such a kernel at its default (torch/tune.py), as no candidate could reach it."""

    emulation_engines: Tuple[str, ...] = ()
    """The engines module.emulate(..., engine=) offers to run the kernels on the CPU instead of
    the device (empty: the module runs on the CPU anyway, and has no emulate)."""

    emulation_note: str = ""
    """What the CLI says when it emulates a module for want of its device."""

    source_title: str = ""
    """What the CLI calls the target code (the text of the first build stage)."""

    def sketch_rules(self):
        """The auto-scheduler's sketch rules for this target, in order
        (autoschedule.sketch.SketchRules)."""
        raise NotImplementedError(f"the {self.kind} target has no sketch rules: the auto-scheduler cannot tune for it")

    def measure_candidate(self, task, schedule, arrays: List, number: int, repeat: int) -> dict:
        """What a measurement worker returns for schedule of the auto-scheduler's task, run on
        arrays (inputs, then zeroed outputs): {"times": [...], "build_s", "load"} and what the
        target adds to its record (autoschedule/measure.py: EXTRA_FIELDS)."""
        raise NotImplementedError(f"the {self.kind} target cannot measure auto-scheduler candidates")

    def search_features(self):
        """The features this target adds to a candidate's vector for the cost model
        (autoschedule.features.TargetFeatures; the default adds none)."""
        from ..autoschedule.features import CPU_FEATURES    # the auto-scheduler loads when it asks
        return CPU_FEATURES

    def check_launch(self, kernel, target: Target) -> None:
        """Raise ScheduleError or LoweringError for lowered Kernel IR that the target cannot
        launch (the auto-scheduler prunes such a candidate before building it)."""

    def run_on_host(self, module, arrays: Sequence) -> None:
        """Run a module this backend built on numpy arrays in this process (the auto-scheduler's
        check against the reference evaluator)."""
        module(*arrays)

    def module_notes(self, compiled) -> List[str]:
        """Lines the CLI prints after the IR of a module compiled by schedlang.torch (cuda:
        ptxas's registers and spills per kernel)."""
        return []

    def default_schedules(self) -> Dict[str, Callable]:
        """The torch frontend's default schedule of each kernel kind that
        torch/schedules.py: schedule_group names ("matmul", "rows", "pointwise", ...):
        kind -> its function in torch/schedules.py."""
        raise NotImplementedError(f"the {self.kind} target has no default schedules for the torch frontend")


class HostCPUBackend(Backend):
    """Base of backends whose modules run on the host CPU, called with numpy arrays (llvm):
    the auto-scheduler tunes them with the CPU sketch rules (autoschedule/sketch_cpu.py) and
    times candidates on the CPU (measure.time_on_cpu); the torch frontend schedules their
    kernels with the CPU default schedules of torch/schedules.py."""

    def check_schedule(self, schedule, target: Target) -> None:
        """A CPU runs no GPU thread axes: a bound axis is an error naming this target."""
        for st in schedule.stages:
            for ivar, ann in st.annotations.items():
                if ann.kind == BIND:
                    raise ScheduleError("bind", st.name, f"the axis is bound to {ann.thread_tag}, a GPU thread axis, "
                                        f"which the {self.kind} (CPU) target cannot run", axis=ivar.name,
                                        hint="use parallel()/vectorize() for the CPU, or build with target='cuda'")

    def worker_threads(self, target: Target) -> int:
        """The threads a parallel loop runs on: the target's num_threads, else the cores this
        process may run on."""
        n = getattr(target.options, "num_threads", 0)
        if n > 0:
            return n
        try:
            return len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            return os.cpu_count() or 1

    def sketch_rules(self):
        from ..autoschedule.sketch_cpu import CPU_SKETCH_RULES     # the auto-scheduler loads when it asks
        return CPU_SKETCH_RULES

    def measure_candidate(self, task, schedule, arrays: List, number: int, repeat: int) -> dict:
        from ..autoschedule.measure import time_on_cpu    # (as sketch_rules)
        return time_on_cpu(task, schedule, arrays, number, repeat)

    def default_schedules(self) -> Dict[str, Callable]:
        from ..torch import schedules as ts          # the frontend (and torch) load only when it asks
        from ..torch import attention_schedule as at, conv_schedules as cs, window_schedules as ws    # (as above)
        return {"matmul": ts.schedule_matmul_cpu, "rows": ws.schedule_rows_or_window_cpu,
                "pointwise": ts.schedule_pointwise_cpu,
                "conv": cs.schedule_conv_cpu, "attention": at.schedule_attention_cpu}
