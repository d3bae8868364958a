"""pipeline: an N-stage software pipeline, double_buffer generalized (TVM TensorIR's
software_pipeline_stage idea in the classic language).

s[AS].pipeline(3) gives a stage computed at a serial loop N buffers: the N - 1 first
iterations' fetches run before the loop, and iteration i fetches for iteration i + N - 1 into
buffer (i + N - 1) % N while it computes from buffer i % N. With plain copies it hides nothing
more than double_buffer; with cp.async fetches (target/cuda/intrin/copy.py) each iteration
waits until its own group has landed (only the N - 2 most recent in flight), passes one
barrier, issues the fetch of iteration i + N - 1 and commits it as a group, so N - 1 fetches
overlap the compute. The cuda target's inject_double_buffer pass builds it
(kernel/double_buffer.py); pipeline(2) is double_buffer().
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..errors import ScheduleError
from .steps import Step

MAX_STAGES = 8      # cp.async.wait_group's counts the intrinsic library has (copy.MAX_WAIT)


class PipelinePrimitive:
    """Mixin of Stage: pipeline."""

    def pipeline(self, stages: int) -> None:
        """Fill `stages` buffers in turn at the iterations of the loop this stage is computed at
        (module docstring); the checks of double_buffer apply when the schedule is built."""
        if not isinstance(stages, int) or isinstance(stages, bool) or not 2 <= stages <= MAX_STAGES:
            raise ScheduleError("pipeline", self.name, f"takes 2 to {MAX_STAGES} stages, got {stages!r}",
                                hint="pipeline(2) is double_buffer(); 3 or 4 stages hide a global-memory latency")
        self._require_loop_stage("pipeline", "several buffers", "pipeline")
        self.double_buffered = True
        self.pipeline_stages = stages
        self._record(Pipeline(self.name, stages))


@dataclass(frozen=True)
class Pipeline(Step):
    primitive: ClassVar[str] = "pipeline"
    stage: str
    stages: int

    def apply(self, s):
        s[self.stage].pipeline(self.stages)

    def to_python(self, names):
        return f"s[{self.stage!r}].pipeline({self.stages})"
