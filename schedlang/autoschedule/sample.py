"""Random annotation: a concrete schedule from a sketch, with random tile sizes and
annotations. Every call goes through the public primitives, so the schedule's step
list is the candidate and a bad draw is a ScheduleError (the caller prunes it).

Every random choice is a named decision of a Trace ("C|tile|i": the sizes of C's loop i
at each tiling level, "C|par": how many outer loops are fused and parallel, ...). A
sample replayed with given decisions makes the same choices, and draws only those it
is not given (or that do not fit any more): that is how the evolutionary search mutates
(change one decision) and crosses (take each stage's decisions from either parent).
"""
from __future__ import annotations

import math
import os
import random
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..expr.extent import ceil_div
from ..schedule import Schedule, legal
from ..tensor.axis import DATA_PAR, REDUCE
from .sketch import Sketch
from .task import SearchTask

SPATIAL_LEVELS = 4      # S S R S R S on CPU, as Ansor
REDUCE_LEVELS = 2
MAX_INNER_TILE = 16     # the innermost spatial tile is vectorized: keep it short
DIVISIBLE_P = 0.9       # how often tile sizes factor the extent exactly (tails cost; Ansor draws only factors)
MAX_PAR_FUSE = 4        # outer loops fused into the parallel one, at most
PAR_PER_THREAD = 4      # a parallel loop wants this many iterations per thread (load balance), if it can
MAX_UNROLLED_ROWS = 16   # a cache tile's non-vector loops are unrolled up to this many rows
VECTOR_SPLITS = (0, 8, 16, 32, 64)   # the vector width a long innermost loop is split by (0: not split)
MAX_AT_POSITION = 2     # a producer is computed at one of its consumer's first loops, at most this deep


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


def tile_sizes(rng: random.Random, extent: int, levels: int, inner_max: int = MAX_INNER_TILE) -> List[int]:
    """Sizes of the levels-1 inner tiles of a loop of `extent` (outermost first; the outermost
    level takes what is left). Mostly a factorization of extent, else sizes that do not
    divide it (the loops then have tails)."""
    sizes: List[int] = []
    rest = extent
    for level in range(levels - 1):
        limit = inner_max if level == 0 else rest
        if rng.random() < DIVISIBLE_P:
            f = rng.choice(legal.divisors(rest, max(1, limit)))
        else:
            f = rng.randint(1, max(1, min(rest, limit)))
        sizes.append(f)
        rest = max(1, ceil_div(rest, f))
    return sizes[::-1]


def tile_levels(trace: Trace, key: str, extent: int, levels: int, inner_max: int = MAX_INNER_TILE) -> List[int]:
    """The decision `key`: the sizes of a loop of `extent` at each of `levels` tiling levels,
    outermost first; the outermost is what the inner ones leave (ceil), so a product above
    the extent is a tiling with tails."""
    def draw(rng):
        return [0] + tile_sizes(rng, extent, levels, inner_max)

    def check(v):
        return (isinstance(v, list) and len(v) == levels
                and all(isinstance(x, int) and not isinstance(x, bool) and 1 <= x <= extent for x in v[1:]))

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


def multi_level_tile(trace: Trace, st, spatial_levels: int = SPATIAL_LEVELS,
                     reduce_levels: int = REDUCE_LEVELS) -> List[list]:
    """Tile every loop of st: spatial ones into spatial_levels, reduction ones into
    reduce_levels, then order them S.. R S.. R .. S (reductions between the spatial levels).
    Returns the levels' loops, outermost first."""
    ext = st.static_extents()
    spatial = [a for a in st.leaf_iter_vars if a.kind == DATA_PAR]
    reduce = [a for a in st.leaf_iter_vars if a.kind == REDUCE]
    s_loops = [split_levels(st, a, tile_levels(trace, f"{st.name}|tile|{a.name}", ext[a], spatial_levels)[1:])
               for a in spatial]
    r_loops = [split_levels(st, a, tile_levels(trace, f"{st.name}|tile|{a.name}", ext[a], reduce_levels,
                                               inner_max=ext[a])[1:]) for a in reduce]
    levels: List[list] = []
    r_at = {spatial_levels - reduce_levels + j: j for j in range(reduce_levels)}   # R_j before S level 2+j
    for level in range(spatial_levels):
        if level in r_at and r_loops:
            levels.append([loops[r_at[level]] for loops in r_loops])
        levels.append([loops[level] for loops in s_loops])
    st.reorder(*[a for level in levels for a in level])
    return levels


def _tile_cache_write(trace: Trace, s: Schedule, st, pack: bool = False) -> None:
    """Accumulate in a local stage computed at the outer tiles of the output stage; with
    pack, also copy the panels of legal.packable_inputs at the outermost loop of the
    innermost spatial axis, moved outermost so each panel is copied once."""
    packed = legal.packable_inputs(st) if pack else []
    cache = s[s.cache_write(st.op.output(0), "local")]
    ext = st.static_extents()
    spatial = [a for a in st.leaf_iter_vars if a.kind == DATA_PAR]
    sizes = [tile_levels(trace, f"{st.name}|tile|{a.name}", ext[a], 3) for a in spatial]
    levels = [split_levels(st, a, sz[1:]) for a, sz in zip(spatial, sizes)]
    order = [loops[lv] for lv in range(3) for loops in levels]
    if packed:
        order.remove(levels[-1][0])
        order.insert(0, levels[-1][0])
    st.reorder(*order)
    for t in packed:
        s[s.cache_read(t, "global", [cache])].compute_at(st, levels[-1][0])
    at = trace.pick(f"{st.name}|cache_at", lambda rng: 1, lambda v: v in (0, 1))
    cache.compute_at(st, levels[-1][at])
    inner = [a for a in cache.leaf_iter_vars if a.kind == DATA_PAR]
    reduce = [a for a in cache.leaf_iter_vars if a.kind == REDUCE]
    cext = cache.static_extents()
    r_loops = [split_levels(cache, a, tile_levels(trace, f"{cache.name}|tile|{a.name}", cext[a], 2, inner_max=64)[1:])
               for a in reduce]
    cache.reorder(*[loops[0] for loops in r_loops], *[loops[1] for loops in r_loops], *inner)
    # The cache's loops cover the tile inside its attach loop, which static_extents (the full
    # domain) does not know: vectorize its innermost loop here, where the tile size is known.
    # Its other spatial loops, unrolled, make the tile a register block (the micro-kernel of
    # a BLAS GEMM: an auto_unroll pragma at the reduction loop outside does not reach them).
    tile = [math.prod(sz[at + 1:]) for sz in sizes]
    if inner and tile[-1] <= legal.MAX_VECTOR_EXTENT and trace.pick(
            f"{cache.name}|vec_tile", lambda rng: rng.random() < 0.8, lambda v: isinstance(v, bool)):
        cache.vectorize(inner[-1])
    if len(inner) > 1 and math.prod(tile[:-1]) <= MAX_UNROLLED_ROWS and trace.pick(
            f"{cache.name}|unroll_tile", lambda rng: rng.random() < 0.8, lambda v: isinstance(v, bool)):
        for a in inner[:-1]:
            cache.unroll(a)


def _relayout_inputs(s: Schedule, st, packs, lanes: int) -> None:
    """Re-lay out each (tensor, dim) of packs for st: a copy (cache_read) whose dimension
    dim is split by lanes, the inner part moved innermost, made the copy's buffer layout by
    cache_write (which lays the cache out along the loops), the unpacked copy inlined."""
    for tensor, dim in packs:
        copy = s[s.cache_read(tensor, "global", [st])]
        axes = list(copy.op.axis)
        outer, inner = copy.split(axes[dim], factor=lanes)
        copy.reorder(*axes[:dim], outer, *axes[dim + 1:], inner)
        s.cache_write(copy.op.output(0), "global")
        copy.compute_inline()


def _register_size(trace: Trace, key: str, extent: int, budget: int) -> int:
    """The decision `key`: a register-tile size of a loop of `extent`, at most budget, a
    divisor mostly, larger sizes likelier (a small tile reloads its operands more often)."""
    limit = max(1, min(extent, budget))

    def draw(rng):
        cands = list(range(1, limit + 1))
        if rng.random() < DIVISIBLE_P:
            cands = [d for d in cands if extent % d == 0]
        return rng.choices(cands, weights=cands)[0]

    return trace.pick(key, draw, lambda v: isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= limit)


def _tile_relayout(trace: Trace, s: Schedule, st, target) -> None:
    """tile_cache_write vectorized over legal.relayout_axis instead of the innermost axis (conv2d
    NCHW over its output channels, as oneDNN's and TVM's NCHWc kernels): the inputs read by that
    axis re-laid out with its vector part innermost, the local cache laid out the same way
    (split and reordered before cache_write), a register tile of at most
    legal.register_tile_budget vectors with the reduction loops outside it, unrolled but for
    the vector loop; the output tile is written back after the reduction."""
    pos, packs = legal.relayout_axis(st)
    ext = st.static_extents()
    spatial = [a for a in st.leaf_iter_vars if a.kind == DATA_PAR]
    v = spatial[pos]
    lanes = target.native_lanes(st.op.output(0).dtype_obj.bits)
    vf = min(lanes, 1 << (ext[v] - 1).bit_length())
    _relayout_inputs(s, st, packs, vf)
    vo, vi = st.split(v, factor=vf)
    st.reorder(*spatial[:pos], vo, *spatial[pos + 1:], vi)
    cache = s[s.cache_write(st.op.output(0), "local")]
    spatial = [a for a in st.leaf_iter_vars if a.kind == DATA_PAR]     # st is now a copy of the cache
    v = spatial[pos]
    # Register tile: k vectors of v by sizes of the other spatial axes (innermost first).
    budget = legal.register_tile_budget(target)
    k = _register_size(trace, f"{st.name}|vecs", ceil_div(ext[v], vf), min(4, budget))
    sizes = {}
    left = budget // k
    for a in reversed([a for a in spatial if a is not v]):
        sizes[a] = _register_size(trace, f"{st.name}|reg|{a.name}", ext[a], left)
        left = max(1, left // sizes[a])
    outer, inner = [], []
    for a in spatial:
        o, i = st.split(a, factor=k * vf if a is v else sizes[a])
        outer.append(o)
        inner.append(i)
    if trace.pick(f"{st.name}|vec_outer_last", lambda rng: rng.random() < 0.5, lambda x: isinstance(x, bool)):
        outer.append(outer.pop(pos))      # the tiles of v innermost: the input window stays in cache
    wb_v = trace.pick(f"{st.name}|writeback_v", lambda rng: rng.random() < 0.5, lambda x: isinstance(x, bool))
    back = [a for a in inner if a is not inner[pos]] + [inner[pos]] if wb_v else inner
    st.reorder(*outer, *back)
    cache.compute_at(st, outer[-1])
    # The cache's loops span the tile, but unroll() counts their full extents: split each by
    # its tile size (the outer part runs once) and unroll the inner parts.
    cspatial = [a for a in cache.leaf_iter_vars if a.kind == DATA_PAR]
    creduce = [a for a in cache.leaf_iter_vars if a.kind == REDUCE]
    cvi = cspatial.pop()
    once, tile = [], []
    for j in [j for j in range(len(cspatial)) if j != pos] + [pos]:     # the vectors of v innermost
        a, size = cspatial[j], (k if j == pos else sizes[spatial[j]])
        if size == 1:
            once.append(a)
            continue
        o, i = cache.split(a, factor=size)
        once.append(o)
        tile.append(i)
    cache.reorder(*once, *creduce, *tile, cvi)
    for a in tile:
        cache.unroll(a)
    cache.vectorize(cvi)
    for a in back[:-1]:
        st.unroll(a)
    st.vectorize(back[-1])


def _rfactor(trace: Trace, s: Schedule, st) -> None:
    red = [a for a in st.leaf_iter_vars if a.kind == REDUCE]
    if len(red) > 1:
        st.fuse(*red)
        red = [a for a in st.leaf_iter_vars if a.kind == REDUCE]
    extent = st.static_extents()[red[0]]
    sizes = tile_levels(trace, f"{st.name}|rfactor", extent, 2, inner_max=extent)
    _, inner = st.split(red[0], factor=sizes[1])
    s.rfactor(st.op.output(0), inner, 0)


def _locate(trace: Trace, s: Schedule, st) -> None:
    """Where a producer left at the root is computed: at the root (-1) or at one of the loops
    all its consumers run inside (legal.attach_points: the first loops of its consumer, or
    where its consumers are computed), so what it writes is read while still in cache."""
    points = legal.attach_points(s, st, MAX_AT_POSITION)
    if not points:
        return
    n = len(points)
    pos = trace.pick(f"{st.name}|at", lambda rng: rng.choice([-1] + list(range(n))),
                     lambda v: isinstance(v, int) and -1 <= v < n)
    if pos >= 0:
        stage, ivar = points[pos]
        st.compute_at(stage, ivar)


def _parallel_count(st, leaves, n_par: int, limit: int, threads: int) -> int:
    """How many outer loops to fuse into the parallel one: the drawn n_par (at most limit),
    raised until the fused loop has PAR_PER_THREAD iterations per thread where more loops
    are there to fuse, so a draw never parallelises a loop of one or two iterations."""
    n_par = min(n_par, limit)
    ext = st.static_extents()
    need = PAR_PER_THREAD * threads
    while 0 < n_par < limit:
        sizes = [ext.get(a) for a in leaves[:n_par]]
        if not all(isinstance(e, int) for e in sizes) or math.prod(sizes) >= need:   # a symbolic extent: big enough
            break
        n_par += 1
    return n_par


def _vector_split(trace: Trace, s: Schedule, st, par_pos: int) -> None:
    """An innermost data-parallel loop too long to vectorize whole (a plain elementwise stage's
    row) may be split by a drawn vector width, so that its inner part is vectorized (below)
    rather than left to LLVM's loop vectorizer."""
    leaves = list(st.leaf_iter_vars)
    last = leaves[-1]
    ext = st.static_extents().get(last)
    if (par_pos == len(leaves) - 1 or last.kind != DATA_PAR or last in st.annotations
            or not isinstance(ext, int) or ext <= legal.MAX_VECTOR_EXTENT
            or legal.last_attach_position(s, st) == len(leaves) - 1):
        return
    width = trace.pick(f"{st.name}|vsplit", lambda rng: rng.choice(VECTOR_SPLITS),
                       lambda v: v in VECTOR_SPLITS)
    if width:
        st.split(last, factor=width)


def _annotate(trace: Trace, s: Schedule, st, threads: int) -> None:
    """Fuse and parallelise the outer loops, vectorize the innermost, pick an unroll step."""
    leaves = list(st.leaf_iter_vars)
    par_pos = -1
    n_outer = legal.outer_fusable_spatial(st, limit=MAX_PAR_FUSE)
    if st.attach_type == "root" and not legal.inside_parallel(st) and n_outer:
        n_par = trace.pick(f"{st.name}|par", lambda rng: 0 if rng.random() >= 0.85 else rng.randint(1, MAX_PAR_FUSE),
                           lambda v: isinstance(v, int) and 0 <= v <= MAX_PAR_FUSE)
        attach = legal.last_attach_position(s, st)
        limit = n_outer if attach < 0 else max(1, min(n_outer, attach))    # fuse only loops outside attach points
        n_par = _parallel_count(st, leaves, n_par, limit, threads)
        if n_par:
            first = st.fuse(*leaves[:n_par]) if n_par > 1 else leaves[0]
            st.parallel(first)
            leaves = list(st.leaf_iter_vars)
            par_pos = leaves.index(first)
    _vector_split(trace, s, st, par_pos)
    leaves = list(st.leaf_iter_vars)
    cands = legal.vectorize_candidates(s, st, par_pos)
    if cands and cands[-1] == len(leaves) - 1 and leaves[-1] not in st.annotations:
        if trace.pick(f"{st.name}|vec", lambda rng: rng.random() < 0.8, lambda v: isinstance(v, bool)):
            st.vectorize(leaves[-1])
    step = trace.pick(f"{st.name}|unroll", lambda rng: rng.choice((0,) + legal.PRAGMA_STEPS),
                      lambda v: v in (0,) + legal.PRAGMA_STEPS)
    if step:
        st.pragma(leaves[0], "auto_unroll_max_step", step)


def sample(task: SearchTask, sketch: Sketch, rng: random.Random,
           given: Optional[Dict[str, Any]] = None) -> Tuple[Schedule, Dict[str, Any]]:
    """One concrete schedule of the sketch and its decisions (those in `given` reused where
    they still fit); raises ScheduleError when a draw is illegal."""
    trace = Trace(rng, given)
    s = task.schedule()
    for stage_name, rule in sketch.rules:
        st = s[stage_name]
        if rule == "inline":
            st.compute_inline()
        elif rule == "tile":
            multi_level_tile(trace, st)
        elif rule in ("tile_cache_write", "tile_pack"):
            _tile_cache_write(trace, s, st, pack=rule == "tile_pack")
        elif rule == "tile_relayout":
            _tile_relayout(trace, s, st, task.target)
        elif rule == "rfactor":
            _rfactor(trace, s, st)
        elif rule.startswith("gpu_"):
            from .sample_gpu import GPU_RULES
            GPU_RULES[rule](trace, s, st, task.target)
    if task.target.kind == "cuda":      # the gpu rules bound every stage's loops
        return s, trace.made
    for st in reversed(list(s.stages)):      # consumers first: a producer may join them where they are
        if legal.is_live(st):
            _locate(trace, s, st)
    threads = task.target.num_threads or len(os.sched_getaffinity(0))
    for st in sorted([st for st in s.stages if legal.is_live(st)], key=legal.attach_depth):
        _annotate(trace, s, st, threads)
    return s, trace.made
