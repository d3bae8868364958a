"""Random annotation: a concrete schedule from a sketch, with random tile sizes and
annotations. Here are sample() and what the rules share (the Trace of decisions, the
tiling helpers); each rule's own drawing is in sketch_cpu.py and sketch_gpu.py. Every call
goes through the public primitives, so the schedule's step list is the candidate and a bad
draw is a ScheduleError (the caller prunes it).

Every random choice is a named decision of a Trace ("C|tile|i": the sizes of C's loop i
at each tiling level, "C|par": how many outer loops are fused and parallel, ...). A
sample replayed with given decisions makes the same choices, and draws only those it
is not given (or that do not fit any more): that is how the evolutionary search mutates
(change one decision) and crosses (take each stage's decisions from either parent).
"""
from __future__ import annotations

import math
import random
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..expr.extent import ceil_div
from ..schedule import Schedule, legal
from .sketch import Sketch, sketch_rules
from .task import SearchTask

MAX_INNER_TILE = 16     # the innermost spatial tile is vectorized: keep it short
DIVISIBLE_P = 0.9       # how often tile sizes factor the extent exactly (tails cost; Ansor draws only factors)


class Trace:
    """The decisions of one sample, by name. given: decisions to reuse (from a parent);
    a given value that check() rejects is drawn again."""

    def __init__(self, rng: random.Random, given: Optional[Dict[str, Any]] = None):
        self.rng = rng
        self.given = dict(given or {})
        self.made: Dict[str, Any] = {}

    def pick(self, key: str, draw: Callable[[random.Random], Any],
             check: Callable[[Any], bool] = lambda v: True) -> Any:
        value = self.given.get(key)
        if value is None or not check(value):
            value = draw(self.rng)
        self.made[key] = value
        return value


def decision_stage(key: str) -> str:
    """The stage a decision belongs to (crossover takes each stage's decisions from one parent)."""
    return key.split("|", 1)[0]


def tile_sizes(rng: random.Random, extent: int, levels: int, inner_max: int = MAX_INNER_TILE,
               inner: Optional[int] = None) -> List[int]:
    """Sizes of the levels-1 inner tiles of a loop of `extent` (outermost first; the outermost
    level takes what is left). Mostly a factorization of extent, else sizes that do not
    divide it (the loops then have tails). inner: the innermost size, drawn by the caller."""
    sizes: List[int] = []
    rest = extent
    for level in range(levels - 1):
        limit = inner_max if level == 0 else rest
        if level == 0 and inner is not None:
            f = inner
        elif rng.random() < DIVISIBLE_P:
            f = rng.choice(legal.divisors(rest, max(1, limit)))
        else:
            f = rng.randint(1, max(1, min(rest, limit)))
        sizes.append(f)
        rest = max(1, ceil_div(rest, f))
    return sizes[::-1]


def tile_levels(trace: Trace, key: str, extent: int, levels: int, inner_max: int = MAX_INNER_TILE,
                inner_limit: Optional[int] = None,
                inner: Optional[Callable[[random.Random], Optional[int]]] = None) -> List[int]:
    """The decision `key`: the sizes of a loop of `extent` at each of `levels` tiling levels,
    outermost first; the outermost is what the inner ones leave (ceil), so a product above
    the extent is a tiling with tails. inner_limit: a bound the innermost size must keep
    (a register block's share of the register file), also in decisions given by a parent
    (a mutation that breaks it is drawn again); draws take at most min(inner_max, inner_limit).
    inner: where the draw's innermost size comes from (a register block drawn for all axes at
    once: register_tile.draw_block), None from it or a size beyond inner_limit: drawn here."""
    if inner_limit is not None:
        inner_max = max(1, min(inner_max, inner_limit))

    def draw(rng):
        first = inner(rng) if inner is not None and levels >= 2 else None
        if first is not None and not 1 <= first <= min(extent, inner_limit or extent):
            first = None
        return [0] + tile_sizes(rng, extent, levels, inner_max, first)

    def check(v):
        return (isinstance(v, list) and len(v) == levels
                and all(isinstance(x, int) and not isinstance(x, bool) and 1 <= x <= extent for x in v[1:])
                and (inner_limit is None or levels < 2 or v[-1] <= max(1, inner_limit)))

    sizes = list(trace.pick(key, draw, check))
    sizes[0] = max(1, ceil_div(extent, math.prod(sizes[1:])))
    trace.made[key] = sizes
    return sizes


def split_levels(st, ivar, sizes: List[int]) -> list:
    """Split ivar into len(sizes)+1 loops, the inner ones of the given sizes, outermost first."""
    loops = []
    rest = ivar
    for f in reversed(sizes):
        rest, inner = st.split(rest, factor=f)
        loops.append(inner)
    return [rest] + loops[::-1]


def sample(task: SearchTask, sketch: Sketch, rng: random.Random,
           given: Optional[Dict[str, Any]] = None) -> Tuple[Schedule, Dict[str, Any]]:
    """One concrete schedule of the sketch and its decisions (those in `given` reused where
    they still fit); raises ScheduleError when a draw is illegal. Each stage is shaped by
    its rule, then the target's annotation completes the schedule (sketch.SketchRules)."""
    trace = Trace(rng, given)
    s = task.schedule()
    for stage_name, rule in sketch.rules:
        rule.apply(trace, s, s[stage_name], task.target)
    sketch_rules(task).annotate(trace, s, task.target)
    return s, trace.made
