"""Sketch rules: the structural choices of a schedule, from Tensor IR analysis.

A sketch names, per stage, which rule shapes it; sample.py fills in the numbers (tile
sizes, split factors, which loops are parallel, vectorized, unrolled). The rules, as
Ansor's for CPUs:

- inline: an intermediate elementwise stage is computed inside its consumers; one may also
  stay a stage of its own ("plain") where inlining repeats work: a guarded copy (padding: an
  if_then_else, whose condition would be evaluated at every reduction step of the consumer),
  or one that calls costly math and is read at several places (softmax's exp), computed once
  where all its readers are (sample.py's _locate);
- tile: a reduction with data reuse (an operand not indexed by every spatial axis:
  matmul, batch matmul, conv2d) gets multi-level tiling, spatial loops in four levels
  and reduction loops in two, ordered S S R S R S;
- tile_cache_write: the same with the result accumulated in a local cache_write stage
  computed at the tiles of the output stage;
- tile_pack: tile_cache_write, and the inputs read a panel per tile (B of a matmul) copied
  into a contiguous panel at the outermost loop of the innermost spatial axis, which
  becomes the outermost loop (the packed B of a BLAS GEMM, one panel at a time);
- tile_relayout: tile_cache_write vectorized over another spatial axis than the innermost,
  where no operand reads the innermost one as its plain last index and the other axis is
  read only by inputs that can be re-laid out with it innermost (conv2d NCHW: vectorized
  over the output channels, the weights packed [F/16, C, R, S, 16], as oneDNN's NCHWc
  kernels; Ansor's layout rewrite), with a register tile of vector accumulators;
- rfactor: a reduction without enough parallelism (few outputs, a long reduction) has
  its reduction split and factored into a parallel partial stage;
- plain: the stage keeps its loops (annotation still fuses, parallelises, vectorizes).

For the cuda target (sample_gpu.py fills them in), as Ansor's GPU rules and TVM's GPU
tutorials (tests/target/cuda/schedules.py has the hand-written shapes):

- inline: as on CPUs;
- gpu_tile: a reduction with data reuse gets multi-level tiling bound to blockIdx / vthread /
  threadIdx, a local cache_write accumulating each thread's register tile, and its operands
  staged in shared memory at the outer reduction loop, fetched cooperatively by the block;
- gpu_cross_thread: a reduction's reduce loop split and its inner part bound to threadIdx.x
  (a cross-thread reduction), rows bound to blockIdx.x (and threadIdx.y);
- gpu_thread_row: one thread per output point (a row reduction with many rows);
- gpu_simple: every other stage: loops fused, split by the block size and bound to
  blockIdx.x / threadIdx.x, an optional vector (float4) inner loop.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import List, Tuple

from ..schedule import legal
from .task import SearchTask

MAX_SKETCHES = 16
FEW_OUTPUTS = 256     # a reduction with fewer output points than this may want rfactor
MANY_ROWS = 4096      # on a GPU, a reduction with this many outputs prefers one thread a row


@dataclass(frozen=True)
class Sketch:
    """Per stage (by name, consumers first), the rule that shapes it."""

    rules: Tuple[Tuple[str, str], ...]

    @property
    def name(self) -> str:
        return ",".join(f"{rule}:{stage}" for stage, rule in self.rules if rule != "plain") or "plain"


def gpu_stage_rules(st) -> List[str]:
    """The cuda rules that may shape stage st of a fresh schedule, the first preferred."""
    if legal.can_inline(st):
        return ["inline"]
    if legal.has_data_reuse(st):
        return ["gpu_tile"]
    if legal.is_reduction(st):
        rows = math.prod(int(a.dom.extent) for a in st.op.axis)
        both = ["gpu_cross_thread", "gpu_thread_row"]
        return both[::-1] if rows >= MANY_ROWS else both
    return ["gpu_simple"]


def stage_rules(st, target=None, s=None) -> List[str]:
    """The rules that may shape stage st of schedule s for target (default: a CPU), the first
    preferred."""
    if target is not None and target.kind == "cuda":
        return gpu_stage_rules(st)
    if legal.can_inline(st):
        keep = legal.is_guarded_copy(st) or (s is not None and legal.costly_to_recompute(s, st))
        return ["inline", "plain"] if keep else ["inline"]
    if legal.has_data_reuse(st):
        return (["tile", "tile_cache_write"] + (["tile_pack"] if legal.packable_inputs(st) else [])
                + (["tile_relayout"] if legal.relayout_axis(st) else []))
    if legal.is_reduction(st):
        spatial = math.prod(int(a.dom.extent) for a in st.op.axis)
        reduce = math.prod(int(a.dom.extent) for a in st.op.reduce_axis)
        if spatial < FEW_OUTPUTS or reduce > spatial:
            return ["plain", "rfactor"]
    return ["plain"]


def generate_sketches(task: SearchTask) -> List[Sketch]:
    """Every combination of the stages' rules (at most MAX_SKETCHES), in a fixed order."""
    s = task.schedule()
    stages = [st for st in reversed(s.stages) if legal.is_compute(st)]
    choices = [[(st.name, rule) for rule in stage_rules(st, task.target, s)] for st in stages]
    return [Sketch(tuple(combo)) for combo in itertools.islice(itertools.product(*choices), MAX_SKETCHES)]
