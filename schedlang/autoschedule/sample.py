"""Random annotation: a concrete schedule from a sketch, with random tile sizes and
annotations. Every call goes through the public primitives, so the schedule's step
list is the candidate and a bad draw is a ScheduleError (the caller prunes it)."""
from __future__ import annotations

import math
import random
from typing import List

from ..schedule import Schedule, legal
from ..tensor.axis import DATA_PAR, REDUCE
from .sketch import Sketch
from .task import SearchTask

SPATIAL_LEVELS = 4      # S S R S R S on CPU, as Ansor
REDUCE_LEVELS = 2
MAX_INNER_TILE = 16     # the innermost spatial tile is vectorized: keep it short
DIVISIBLE_P = 0.7       # how often tile sizes factor the extent exactly


def _divisors(n: int) -> List[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def tile_sizes(rng: random.Random, extent: int, levels: int, inner_max: int = MAX_INNER_TILE) -> List[int]:
    """Sizes of the levels-1 inner tiles of a loop of `extent` (outermost first; the outermost
    level takes what is left). Mostly a factorization of extent, else sizes that do not
    divide it (the loops then have tails)."""
    sizes: List[int] = []
    rest = extent
    for level in range(levels - 1):
        limit = inner_max if level == 0 else rest
        if rng.random() < DIVISIBLE_P:
            f = rng.choice([d for d in _divisors(rest) if d <= max(1, limit)])
        else:
            f = rng.randint(1, max(1, min(rest, limit)))
        sizes.append(f)
        rest = max(1, -(-rest // f))
    return sizes[::-1]


def split_levels(st, ivar, sizes: List[int]) -> list:
    """Split ivar into len(sizes)+1 loops, the inner ones of the given sizes, outermost first."""
    loops = []
    rest = ivar
    for f in reversed(sizes):
        rest, inner = st.split(rest, factor=f)
        loops.append(inner)
    return [rest] + loops[::-1]


def multi_level_tile(rng: random.Random, st, spatial_levels: int = SPATIAL_LEVELS,
                     reduce_levels: int = REDUCE_LEVELS, spatial_sizes=None) -> List[list]:
    """Tile every loop of st: spatial ones into spatial_levels, reduction ones into
    reduce_levels, then order them S.. R S.. R .. S (reductions between the spatial levels).
    Returns the levels' loops, outermost first."""
    ext = st.static_extents()
    spatial = [a for a in st.leaf_iter_vars if a.kind == DATA_PAR]
    reduce = [a for a in st.leaf_iter_vars if a.kind == REDUCE]
    s_loops = [split_levels(st, a, spatial_sizes[i] if spatial_sizes else
                            tile_sizes(rng, ext[a], spatial_levels)) for i, a in enumerate(spatial)]
    r_loops = [split_levels(st, a, tile_sizes(rng, ext[a], reduce_levels, inner_max=ext[a])) for a in reduce]
    levels: List[list] = []
    r_at = {spatial_levels - reduce_levels + j: j for j in range(reduce_levels)}   # R_j before S level 2+j
    for level in range(spatial_levels):
        if level in r_at and r_loops:
            levels.append([loops[r_at[level]] for loops in r_loops])
        levels.append([loops[level] for loops in s_loops])
    st.reorder(*[a for level in levels for a in level])
    return levels


def _tile_cache_write(rng: random.Random, s: Schedule, st) -> None:
    """Accumulate in a local stage computed at the outer tiles of the output stage."""
    cache = s[s.cache_write(st.op.output(0), "local")]
    ext = st.static_extents()
    spatial = [a for a in st.leaf_iter_vars if a.kind == DATA_PAR]
    sizes = [tile_sizes(rng, ext[a], 3) for a in spatial]
    levels = [split_levels(st, a, sz) for a, sz in zip(spatial, sizes)]
    st.reorder(*[loops[lv] for lv in range(3) for loops in levels])
    cache.compute_at(st, levels[-1][1])
    inner = [a for a in cache.leaf_iter_vars if a.kind == DATA_PAR]
    reduce = [a for a in cache.leaf_iter_vars if a.kind == REDUCE]
    r_loops = [split_levels(cache, a, tile_sizes(rng, cache.static_extents()[a], 2, inner_max=64)) for a in reduce]
    cache.reorder(*[loops[0] for loops in r_loops], *[loops[1] for loops in r_loops], *inner)


def _rfactor(rng: random.Random, s: Schedule, st) -> None:
    red = [a for a in st.leaf_iter_vars if a.kind == REDUCE]
    if len(red) > 1:
        st.fuse(*red)
        red = [a for a in st.leaf_iter_vars if a.kind == REDUCE]
    extent = st.static_extents()[red[0]]
    _, inner = st.split(red[0], factor=tile_sizes(rng, extent, 2, inner_max=extent)[0])
    s.rfactor(st.op.output(0), inner, 0)


def _annotate(rng: random.Random, s: Schedule, st) -> None:
    """Fuse and parallelise the outer loops, vectorize the innermost, pick an unroll step."""
    leaves = list(st.leaf_iter_vars)
    par_pos = -1
    n_outer = legal.outer_fusable_spatial(st, limit=rng.choice([1, 2, 3, 4]))
    if st.attach_type == "root" and not legal.inside_parallel(st) and n_outer and rng.random() < 0.85:
        first = leaves[0]
        attach = legal.last_attach_position(s, st)
        if n_outer > 1 and (attach < 0 or n_outer <= attach):     # fuse only loops outside attach points
            first = st.fuse(*leaves[:n_outer])
        st.parallel(first)
        leaves = list(st.leaf_iter_vars)
        par_pos = leaves.index(first)
    cands = legal.vectorize_candidates(s, st, par_pos)
    if cands and cands[-1] == len(leaves) - 1 and rng.random() < 0.8:
        st.vectorize(leaves[-1])
    step = rng.choice((0,) + legal.PRAGMA_STEPS)
    if step:
        st.pragma(leaves[0], "auto_unroll_max_step", step)


def sample(task: SearchTask, sketch: Sketch, rng: random.Random) -> Schedule:
    """One concrete schedule of the sketch; raises ScheduleError when a draw is illegal."""
    s = task.schedule()
    for stage_name, rule in sketch.rules:
        st = s[stage_name]
        if rule == "inline":
            st.compute_inline()
        elif rule == "tile":
            multi_level_tile(rng, st)
        elif rule == "tile_cache_write":
            _tile_cache_write(rng, s, st)
        elif rule == "rfactor":
            _rfactor(rng, s, st)
    for st in sorted([st for st in s.stages if legal.is_live(st)], key=legal.attach_depth):
        _annotate(rng, s, st)
    return s


def work_per_thread(s: Schedule) -> float:
    """A cheap analytic score (lower is better): the sequential work left per parallel
    iteration, summed over stages; a stand-in until a learned cost model ranks candidates."""
    total = 0.0
    for st in s.stages:
        if not legal.is_live(st):
            continue
        ext = st.static_extents()
        work = math.prod(ext[a] for a in st.leaf_iter_vars)
        par = math.prod(ext[a] for a in st.leaf_iter_vars if legal.is_parallel(st, a)) or 1
        total += work / min(par, 64)
    return total
