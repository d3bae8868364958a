"""The CPU sketch rules (the llvm backend's, as Ansor's for CPUs) and the random annotation
that completes a CPU sample.

- transform: a Winograd transform stage (topi.winograd's tags D, T, V, Y) takes topi.winograd's
  stage schedule, without decisions, as the tensor-core sketch takes topi.cuda_tensorcore's: the
  input transform V per tile and channel vector with its positions unrolled (D and T computed
  there), the inverse's row pass Y per unrolled m x m tile of the stage reading it. Inlined,
  V would be computed again for every output channel of the bgemm, and the select chains over
  the positions fold to their constant coefficients only where those loops are unrolled; the
  bgemm (M) is a data-reuse reduction and takes the tiling rules below;
- inline: an intermediate elementwise stage is computed inside its consumers; one may also
  stay a stage of its own ("plain") where inlining repeats work: a guarded copy (padding: an
  if_then_else, whose condition would be evaluated at every reduction step of the consumer),
  or one that calls costly math and is read at several places (softmax's exp), computed once
  where all its readers are (locate);
- tile: a reduction with data reuse (an operand not indexed by every spatial axis:
  matmul, batch matmul, conv2d) gets multi-level tiling, spatial loops in four levels
  and reduction loops in two, ordered S S R S R S; the innermost spatial level is a register
  block (the last axis vectorized, the others unrolled) drawn within the target's register
  file (Target.native_registers, native_lanes: spatial_tiles), as is every tiling rule's,
  mostly as a shape with few loads per FMA (register_tile.py);
- tile_cache_write: the same with the result accumulated in a local cache_write stage
  computed at the tiles of the output stage, whose rows are unrolled only where its
  accumulators fit the register file (unrolled_tile_fits; on a tight register file, AVX2,
  always there, and its innermost loop always vectorized);
- tile_pack: tile_cache_write, and the inputs read a panel per tile (B of a matmul) copied
  into a contiguous panel at the outermost loop of the innermost spatial axis, which
  becomes the outermost loop (the packed B of a BLAS GEMM, one panel at a time);
- tile_relayout: tile_cache_write vectorized over another spatial axis than the innermost,
  where no operand reads the innermost one as its plain last index and the other axis is
  read only by inputs that can be re-laid out with it innermost (conv2d NCHW: vectorized
  over the output channels, the weights packed [F/16, C, R, S, 16], as oneDNN's NCHWc
  kernels; Ansor's layout rewrite), with a register tile of vector accumulators (on a tight
  register file, AVX2, one that may fill it: register_tile.fit_rows, the hand kernel's 1 x 14)
  and, there, the channel tiles outermost, inside the rows or innermost;
- plain: the stage keeps its loops (annotation still fuses, parallelises, vectorizes);
- rfactor: a reduction without enough parallelism (few outputs, a long reduction) has
  its reduction split and factored into a parallel partial stage (Ansor's rfactor); one with
  enough outputs and a reduction of at least VECTOR_RFACTOR_MIN (a row softmax's max and sum)
  is split by a few native vectors (vector_splits) and factored into vector accumulators, the
  partial stage's lane loop innermost and vectorized (topi.cpu.schedule_softmax's
  vector_reductions, TVM's rfactor tutorial).

CPU_SKETCH_RULES lists them in that order. After them, annotate() places the producers left
at the root (locate) and draws, per stage, the parallel outer loops, the vectorized inner
one (a long row split by a few native vectors of the target: vector_splits) and an unroll step.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Tuple

from ..expr.extent import ceil_div
from ..schedule import Schedule, legal
from ..schedule.annotate import MAX_UNROLL
from ..target.registry import get_backend
from ..tensor.axis import DATA_PAR, REDUCE
from ..topi import winograd
from .register_tile import draw_block, fit_rows, tight
from .sample import DIVISIBLE_P, MAX_INNER_TILE, Trace, split_levels, tile_levels
from .sketch import Condition, Inline, SketchRule, SketchRules

SPATIAL_LEVELS = 4      # S S R S R S on CPU, as Ansor
REDUCE_LEVELS = 2
FEW_OUTPUTS = 256       # a reduction with fewer output points than this may want rfactor
VECTOR_RFACTOR_MIN = 64  # a reduction at least this long may run on vector accumulators (4 AVX-512 float vectors)
MAX_PAR_FUSE = 4        # outer loops fused into the parallel one, at most
PAR_PER_THREAD = 4      # a parallel loop wants this many iterations per thread (load balance), if it can
MAX_UNROLLED_ROWS = 16   # a cache tile's non-vector loops are unrolled up to this many rows (if they fit registers)
VECTOR_SPLIT_VECTORS = (0.5, 1, 2, 4)   # a long innermost loop is split by these many native vectors (or not)
REDUCTION_SPLITS = (8, 16, 32)   # tile_relayout: input channels per chunk of a row's accumulation (or none)
MAX_AT_POSITION = 2     # a producer is computed at one of its consumer's first loops, at most this deep


# ---- how each rule shapes a stage ---------------------------------------------------------

def register_block(target, dtype_bits: int) -> Tuple[int, int]:
    """(lanes, accumulators) of a register block on target: the lanes of one native vector of
    the output's type, and how many vector accumulators fit the register file beside the
    operands (legal.register_tile_budget: 28 of AVX-512's 32 zmm, 12 of AVX2's 16 ymm)."""
    return target.native_lanes(dtype_bits), legal.register_tile_budget(target)


def register_fits(rows: int, cols: int, lanes: int, budget: int) -> bool:
    """Whether a rows x cols block of accumulators, cols vectorized by lanes, fits budget
    vector registers: rows * ceil(cols / lanes) of them."""
    return rows * ceil_div(cols, lanes) <= budget


def unrolled_tile_fits(rows: int, cols: int, target, dtype_bits: int) -> bool:
    """Whether a cache tile of rows x cols (cols vectorized) may have its rows unrolled: at
    most MAX_UNROLLED_ROWS rows, and its accumulators within the target's register file
    (register_fits): unrolled beyond it, the accumulators spill (AVX2's 16 ymm hold half of
    what AVX-512's 32 zmm do)."""
    lanes, budget = register_block(target, dtype_bits)
    return rows <= MAX_UNROLLED_ROWS and register_fits(rows, cols, lanes, budget)


def vector_splits(target, dtype_bits: int) -> Tuple[int, ...]:
    """The widths a long innermost loop may be split by to vectorize its inner part (0: not
    split): half a native vector of the type to four of them (16 lanes on AVX-512 float32:
    8, 16, 32, 64; on AVX2: 4, 8, 16, 32), at most legal.MAX_VECTOR_EXTENT."""
    lanes = target.native_lanes(dtype_bits)
    widths = sorted({max(1, min(legal.MAX_VECTOR_EXTENT, int(lanes * m))) for m in VECTOR_SPLIT_VECTORS})
    return (0,) + tuple(widths)


def spatial_tiles(trace: Trace, st, spatial, levels: int, target) -> List[List[int]]:
    """The decisions "<st>|tile|<axis>": the tiling levels of each spatial axis (outermost
    first), whose innermost level is the register block: the last axis vectorized (cols), the
    others unrolled around it (rows). The block is kept within the target's register file
    (register_fits): each row axis's innermost size is bounded by the accumulators the axes
    before it leave, the vector axis's by the vectors the rows leave. On AVX-512 a GEMM block
    of MAX_INNER_TILE x MAX_INNER_TILE fits (16 zmm); on AVX2 16 x 16 would be 32 ymm and
    spill, so rows x 2 vectors stay within 6 rows there. Most draws (register_tile.SHAPE_P) take
    the innermost sizes of all axes at once from register_tile.draw_block: a shape that fills
    the register file with FMAs per load (AVX2: 4 x 3 or 6 x 2 vectors rather than 8 x 1)."""
    ext = st.static_extents()
    bits = st.op.output(0).dtype_obj.bits
    lanes, budget = register_block(target, bits)
    block: list = []        # the block drawn for all axes at once (register_tile.draw_block), when one is

    def inner(rng, j):
        if not block:
            drawn = draw_block(rng, target, bits, [ext[a] for a in spatial[:-1]], ext[spatial[-1]])
            block.append(None if drawn is None else drawn[0] + [drawn[1] * lanes])
        return None if block[0] is None else block[0][j]

    sizes, rows = [], 1
    for j, a in enumerate(spatial):
        vecs_left = max(1, budget // rows)
        limit = vecs_left * lanes if j == len(spatial) - 1 else vecs_left
        sz = tile_levels(trace, f"{st.name}|tile|{a.name}", ext[a], levels, inner_max=MAX_INNER_TILE,
                         inner_limit=limit, inner=lambda rng, j=j: inner(rng, j))
        rows *= sz[-1]
        sizes.append(sz)
    return sizes


def multi_level_tile(trace: Trace, st, target, spatial_levels: int = SPATIAL_LEVELS,
                     reduce_levels: int = REDUCE_LEVELS) -> List[list]:
    """Tile every loop of st: spatial ones into spatial_levels (the innermost a register
    block within target's registers, spatial_tiles), reduction ones into reduce_levels,
    then order them S.. R S.. R .. S (reductions between the spatial levels).
    Returns the levels' loops, outermost first."""
    ext = st.static_extents()
    spatial = [a for a in st.leaf_iter_vars if a.kind == DATA_PAR]
    reduce = [a for a in st.leaf_iter_vars if a.kind == REDUCE]
    s_loops = [split_levels(st, a, sz[1:]) for a, sz in zip(spatial, spatial_tiles(trace, st, spatial,
                                                                                   spatial_levels, target))]
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


def _tile_cache_write(trace: Trace, s: Schedule, st, target, pack: bool = False) -> None:
    """Accumulate in a local stage computed at the outer tiles of the output stage (its
    innermost tile a register block within target's registers); with pack, also copy the
    panels of legal.packable_inputs at the outermost loop of the innermost spatial axis,
    moved outermost so each panel is copied once."""
    packed = legal.packable_inputs(st) if pack else []
    cache = s[s.cache_write(st.op.output(0), "local")]
    spatial = [a for a in st.leaf_iter_vars if a.kind == DATA_PAR]
    sizes = spatial_tiles(trace, st, spatial, 3, target)
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
    # On a tight register file (AVX2) the block is only a register block when vectorized and
    # unrolled, so both are given there (a parent's False is kept): the 1 in 5 draws of each
    # that left it rolled or scalar ran 1.5-100x slower (GEMM 512, Zen 1), and as the cover
    # pick of tile_pack they taught the model that packing is slow (results-tune-zen1-avx2.txt).
    bits = st.op.output(0).dtype_obj.bits
    keep = (lambda rng: True) if tight(target, bits) else (lambda rng: rng.random() < 0.8)
    tile = [math.prod(sz[at + 1:]) for sz in sizes]
    if inner and tile[-1] <= legal.MAX_VECTOR_EXTENT and trace.pick(
            f"{cache.name}|vec_tile", keep, lambda v: isinstance(v, bool)):
        cache.vectorize(inner[-1])
    if len(inner) > 1 and unrolled_tile_fits(math.prod(tile[:-1]), tile[-1], target, bits) and trace.pick(
            f"{cache.name}|unroll_tile", keep, lambda v: isinstance(v, bool)):
        _unroll_rows(cache, inner[:-1], tile[:-1])


def _unroll_rows(cache, rows, sizes) -> None:
    """Unroll the cache's row loops (their tile sizes: sizes). unroll() counts a loop's full
    extent, not the tile the attach point leaves it, so where the full extents would make more
    than MAX_UNROLL copies each row loop is split by its tile size (the outer part runs once)
    and the inner parts unrolled, as _tile_relayout does. Why: the Winograd bgemm's cache
    (positions 36 x tiles 198, a 1 x 6 tile) was refused every time, so the tile_cache_write
    sketch, the hand schedule's, never made a candidate of the 56 x 56 layer; nor, on AVX2, did
    a conv2d NCHW's (batch x channels x rows = 3584). A GEMM's rows stay within the limit: its
    loops are unrolled whole, as before."""
    ext = cache.static_extents()
    if math.prod(ext[a] for a in rows) <= MAX_UNROLL:
        for a in rows:
            cache.unroll(a)
        return
    for a, size in zip(rows, sizes):
        if size < ext[a]:
            _, a = cache.split(a, factor=size)
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


def _register_size(trace: Trace, key: str, extent: int, budget: int, prefer=None) -> int:
    """The decision `key`: a register-tile size of a loop of `extent`, at most budget, a
    divisor mostly, larger sizes likelier (a small tile reloads its operands more often).
    prefer(rng): the size of a block drawn for all the tile's loops at once (None: drawn here)."""
    limit = max(1, min(extent, budget))

    def draw(rng):
        first = prefer(rng) if prefer is not None else None
        if first is not None and 1 <= first <= limit:
            return first
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
    the vector loop; the output tile is written back after the reduction. The tiles of v run
    outermost, innermost (vec_outer_last) or, on a tight register file, inside the rows and
    outside a row's column tiles (rows_outer)."""
    pos, packs = legal.relayout_axis(st)
    ext = st.static_extents()
    spatial = [a for a in st.leaf_iter_vars if a.kind == DATA_PAR]
    v = spatial[pos]
    lanes = target.native_lanes(st.op.output(0).dtype_obj.bits)
    vf = legal.relayout_width(st, pos) or min(lanes, 1 << (ext[v] - 1).bit_length())
    _relayout_inputs(s, st, packs, vf)
    vo, vi = st.split(v, factor=vf)
    st.reorder(*spatial[:pos], vo, *spatial[pos + 1:], vi)
    cache = s[s.cache_write(st.op.output(0), "local")]
    spatial = [a for a in st.leaf_iter_vars if a.kind == DATA_PAR]     # st is now a copy of the cache
    v = spatial[pos]
    # Register tile: k vectors of v by sizes of the other spatial axes (innermost first).
    bits = st.op.output(0).dtype_obj.bits
    budget = legal.register_tile_budget(target)
    full = tight(target, bits)      # AVX2: the tile may fill the register file (fit_rows), as the hand's 1 x 14
    others = [a for a in spatial if a is not v]
    block: list = []        # (rows of each other axis, vectors) drawn at once (register_tile.draw_block)

    def prefer(rng, j):
        if not block:
            drawn = draw_block(rng, target, bits, [ext[a] for a in others], ext[v],
                               budget=fit_rows(target, 1)) if full else None
            block.append(None if drawn is None else dict(zip(others + [v], drawn[0] + [drawn[1]])))
        return None if block[0] is None else block[0][j]

    k = _register_size(trace, f"{st.name}|vecs", ceil_div(ext[v], vf), min(4, budget), lambda rng: prefer(rng, v))
    sizes = {}
    left = fit_rows(target, k) if full else budget // k
    for a in reversed(others):
        sizes[a] = _register_size(trace, f"{st.name}|reg|{a.name}", ext[a], left, lambda rng, a=a: prefer(rng, a))
        left = max(1, left // sizes[a])
    outer, inner = [], []
    for a in spatial:
        o, i = st.split(a, factor=k * vf if a is v else sizes[a])
        outer.append(o)
        inner.append(i)
    by_axis = list(outer)       # each spatial axis's tile loop, in spatial order
    if trace.pick(f"{st.name}|vec_outer_last", lambda rng: rng.random() < 0.5, lambda x: isinstance(x, bool)):
        outer.append(outer.pop(pos))      # the tiles of v innermost: the input window stays in cache
    elif full and pos < len(outer) - 2 and trace.pick(f"{st.name}|rows_outer", lambda rng: rng.random() < 0.5,
                                                      lambda x: isinstance(x, bool)):
        # the tiles of v inside the rows, outside a row's column tiles (the hand kernel's order on 16
        # registers, conv_schedules._input_outweighs_weights): a row's input is read once for all
        # the channel tiles, a channel tile's weights once for all of a row's column tiles
        tiles = outer.pop(pos)          # (popped first: insert's index is taken before its argument)
        outer.insert(len(outer) - 1, tiles)
    wb_v = trace.pick(f"{st.name}|writeback_v", lambda rng: rng.random() < 0.5, lambda x: isinstance(x, bool))
    back = [a for a in inner if a is not inner[pos]] + [inner[pos]] if wb_v else inner
    st.reorder(*outer, *back)
    cspatial = [a for a in cache.leaf_iter_vars if a.kind == DATA_PAR]
    creduce = [a for a in cache.leaf_iter_vars if a.kind == REDUCE]
    rsplit = 0
    # the axes of the two innermost tile loops, in their order (by identity: IterVar == builds an expression)
    spans = [next(j for j, b in enumerate(by_axis) if b is o) for o in outer[-2:]]
    if len(outer) >= 3 and pos in spans and creduce:
        # the cache spans a row of tiles (the two innermost tile loops, v's among them) and the
        # first reduction is split, its outer part outside them: a chunk of input channels' weights
        # and input rows stays in L1 while the row's tiles are accumulated (oneDNN's AVX2 kernels
        # loop over blocks of 8 input channels outside an output row)
        rext = cache.static_extents()[creduce[0]]
        splits = (0,) + tuple(c for c in REDUCTION_SPLITS if c < rext)
        rsplit = trace.pick(f"{st.name}|rsplit", lambda rng: rng.choice(splits), lambda x: x in splits)
    cache.compute_at(st, outer[-3] if rsplit else outer[-1])
    # The cache's loops span the tile, but unroll() counts their full extents: split each by
    # its tile size (the outer part runs once) and unroll the inner parts.
    cvi = cspatial.pop()
    once, tile = {}, []
    for j in [j for j in range(len(cspatial)) if j != pos] + [pos]:     # the vectors of v innermost
        a, size = cspatial[j], (k if j == pos else sizes[spatial[j]])
        if size == 1:
            once[j] = a
            continue
        o, i = cache.split(a, factor=size)
        once[j] = o
        tile.append(i)
    if rsplit:
        ro, ri = cache.split(creduce[0], factor=rsplit)
        cache.reorder(*[a for j, a in once.items() if j not in spans], ro, *[once[j] for j in spans],
                      ri, *creduce[1:], *tile, cvi)
    else:
        cache.reorder(*once.values(), *creduce, *tile, cvi)
    for a in tile:
        cache.unroll(a)
    cache.vectorize(cvi)
    for a in back[:-1]:
        st.unroll(a)
    st.vectorize(back[-1])


def _few_outputs(st) -> bool:
    """Whether reduction stage st has too few outputs to parallelise (Ansor's rfactor)."""
    spatial = math.prod(int(a.dom.extent) for a in st.op.axis)
    reduce = math.prod(int(a.dom.extent) for a in st.op.reduce_axis)
    return spatial < FEW_OUTPUTS or reduce > spatial


def _rfactor(trace: Trace, s: Schedule, st, target) -> None:
    """Few outputs: the reduction split in two drawn levels, the inner one factored into a
    partial stage that annotate parallelises. Otherwise the vector form: split by a drawn width
    of vector_splits (at most half the reduction), the inner part factored as the partial
    stage's last axis, moved innermost and vectorized (a row's max or sum on vector
    accumulators, folded by a short reduction after)."""
    red = [a for a in st.leaf_iter_vars if a.kind == REDUCE]
    if len(red) > 1:
        st.fuse(*red)
        red = [a for a in st.leaf_iter_vars if a.kind == REDUCE]
    extent = st.static_extents()[red[0]]
    if _few_outputs(st):
        sizes = tile_levels(trace, f"{st.name}|rfactor", extent, 2, inner_max=extent)
        _, inner = st.split(red[0], factor=sizes[1])
        s.rfactor(st.op.output(0), inner, 0)
        return
    widths = [w for w in vector_splits(target, st.op.output(0).dtype_obj.bits) if w and 2 * w <= extent]
    width = trace.pick(f"{st.name}|rfactor_lanes", lambda rng: rng.choice(widths), lambda v: v in widths)
    _, inner = st.split(red[0], factor=width)
    rf = s.rfactor(st.op.output(0), inner, len(st.op.axis))
    *rest, lane = rf.op.axis
    s[rf].reorder(*rest, *rf.op.reduce_axis, lane)
    s[rf].vectorize(lane)


def _locate(trace: Trace, s: Schedule, st) -> None:
    """Where a producer left at the root is computed: at the root (-1) or at one of the loops
    all its consumers run inside (legal.attach_points: the first loops of its consumer, or
    where its consumers are computed), so what it writes is read while still in cache. An
    input's copy (legal.is_input_copy) stays at the root."""
    points = legal.attach_points(s, st, MAX_AT_POSITION)
    if not points or legal.is_input_copy(st) or getattr(st.op, "tag", "") == winograd.TAG_M:
        # an input's copy (padding, weights re-laid out) at a tile loop is made again per tile:
        # the conv2d samples that drew it ran up to 6x slower (results-tune-zen3-avx2.txt).
        # The Winograd bgemm stays at the root, as topi.winograd's schedule has it: at the
        # inverse's loops (5 of 6 draws) it is a GEMM per channel block and row of tiles, which
        # reads U's positions again for every row: the best of a 5-minute search, all such, ran
        # 2.6x the hand schedule's time side by side (conv2d-winograd, results-tune-zen3-avx2.txt)
        return
    n = len(points)
    pos = trace.pick(f"{st.name}|at", lambda rng: rng.choice([-1] + list(range(n))),
                     lambda v: isinstance(v, int) and -1 <= v < n)
    if pos >= 0:
        stage, ivar = points[pos]
        st.compute_at(stage, ivar)


def _fuse_limit(s: Schedule, st, leaves, n_outer: int, threads: int) -> int:
    """How many of st's n_outer outer loops the parallel fuse may take: those outside the
    outermost loop another stage is computed at; and that loop too where the loops outside it
    have fewer than PAR_PER_THREAD iterations a thread (tile_relayout's rsplit computes the conv
    cache at the row loop, only the batch of one outside it: without the row loop the 2-core
    samples ran on one core). Fused with the loops outside it, the loop a stage is computed at
    still computes it once an iteration; fused with a loop inside it, once an iteration of
    both: tile_pack's B panel, copied at the panel loop, was copied again for every row block
    when the row loops joined the fuse (at -num-cores=1, 64% of the GEMM 512 draws; 2x slower:
    results-tune-zen1-avx2.txt)."""
    positions = legal.attach_positions(s, st)
    if not positions:
        return n_outer
    attach = positions[0]
    ext = st.static_extents()
    outside = [ext.get(a) for a in leaves[:attach]]
    starved = all(isinstance(e, int) for e in outside) and math.prod(outside) < PAR_PER_THREAD * threads
    if starved and attach < n_outer:
        return attach + 1
    return max(1, min(n_outer, attach))


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


def _vector_split(trace: Trace, s: Schedule, st, par_pos: int, target) -> None:
    """An innermost data-parallel loop too long to vectorize whole (a plain elementwise stage's
    row) may be split by a drawn vector width (vector_splits: a few native vectors of target),
    so that its inner part is vectorized (below) rather than left to LLVM's loop vectorizer."""
    leaves = list(st.leaf_iter_vars)
    last = leaves[-1]
    ext = st.static_extents().get(last)
    if (par_pos == len(leaves) - 1 or last.kind != DATA_PAR or last in st.annotations
            or not isinstance(ext, int) or ext <= legal.MAX_VECTOR_EXTENT
            or legal.last_attach_position(s, st) == len(leaves) - 1):
        return
    widths = vector_splits(target, st.op.output(0).dtype_obj.bits)
    width = trace.pick(f"{st.name}|vsplit", lambda rng: rng.choice(widths), lambda v: v in widths)
    if width:
        st.split(last, factor=width)


def _annotate(trace: Trace, s: Schedule, st, threads: int, target) -> None:
    """Fuse and parallelise the outer loops, vectorize the innermost, pick an unroll step."""
    leaves = list(st.leaf_iter_vars)
    par_pos = -1
    # the innermost loop (of several) stays out of the fused parallel loop: fused in, it is
    # neither vectorized nor kept from the fused index's divisions (a conv2d's padding, all four
    # loops fused, cost the kernel ~10% at one thread; results-tune-zen3-avx2.txt)
    n_outer = legal.outer_fusable_spatial(st, limit=min(MAX_PAR_FUSE, max(1, len(leaves) - 1)))
    own_parallel = any(legal.is_parallel(st, a) for a in leaves)       # a rule's (transform) already
    if st.attach_type == "root" and not legal.inside_parallel(st) and not own_parallel and n_outer:
        n_par = trace.pick(f"{st.name}|par", lambda rng: 0 if rng.random() >= 0.85 else rng.randint(1, MAX_PAR_FUSE),
                           lambda v: isinstance(v, int) and 0 <= v <= MAX_PAR_FUSE)
        n_par = _parallel_count(st, leaves, n_par, _fuse_limit(s, st, leaves, n_outer, threads), threads)
        if n_par:
            first = st.fuse(*leaves[:n_par]) if n_par > 1 else leaves[0]
            st.parallel(first)
            leaves = list(st.leaf_iter_vars)
            par_pos = leaves.index(first)
    _vector_split(trace, s, st, par_pos, target)
    leaves = list(st.leaf_iter_vars)
    cands = legal.vectorize_candidates(s, st, par_pos)
    if cands and cands[-1] == len(leaves) - 1 and leaves[-1] not in st.annotations:
        if trace.pick(f"{st.name}|vec", lambda rng: rng.random() < 0.8, lambda v: isinstance(v, bool)):
            st.vectorize(leaves[-1])
    if getattr(st.op, "tag", "") in Transform.TAGS:
        # topi.winograd's loops (the positions unrolled already): no decision, so that every
        # candidate's transform nests are the same and lowered once (fixed_nests.py)
        return
    step = trace.pick(f"{st.name}|unroll", lambda rng: rng.choice((0,) + legal.PRAGMA_STEPS),
                      lambda v: v in (0,) + legal.PRAGMA_STEPS)
    if step:
        st.pragma(leaves[0], "auto_unroll_max_step", step)


def parallelize(s: Schedule, st, threads: int) -> bool:
    """Give st, a root stage with no parallel loop, one as a sample's annotation would when it
    draws one outer loop (_annotate: the outer data-parallel loops, at most MAX_PAR_FUSE, raised
    until PAR_PER_THREAD iterations a thread, and none past a loop another stage is computed
    inside of, fused and parallel), after the fact: for a record replayed on a target with more
    threads than it was drawn for (one drawn for one thread may have no parallel loop, which
    costs nothing there). Loops already marked (vectorized, unrolled) are left out of the fuse;
    the outermost loop's pragmas move to the fused loop. Whether it added one."""
    leaves = list(st.leaf_iter_vars)
    if (st.attach_type != "root" or not legal.is_live(st) or legal.inside_parallel(st)
            or any(legal.is_parallel(st, a) for a in leaves)):
        return False
    n_outer = legal.outer_fusable_spatial(st, limit=min(MAX_PAR_FUSE, max(1, len(leaves) - 1)))
    n_outer = next((k for k, a in enumerate(leaves[:n_outer]) if a in st.annotations
                    or (k and st.pragmas.get(a))), n_outer)
    if not n_outer:
        return False
    n_par = _parallel_count(st, leaves, 1, _fuse_limit(s, st, leaves, n_outer, threads), threads)
    pragmas = st.pragmas.get(leaves[0], []) if n_par > 1 else []
    first = st.fuse(*leaves[:n_par]) if n_par > 1 else leaves[0]
    st.parallel(first)
    for key, value in pragmas:
        st.pragma(first, key, value)
    return True


def annotate(trace: Trace, s: Schedule, target) -> None:
    """Complete a CPU sample: producers left at the root placed (consumers first: a producer
    may join them where they are), then each live stage's loops annotated, outermost first."""
    for st in reversed(list(s.stages)):
        if legal.is_live(st):
            _locate(trace, s, st)
    threads = get_backend(target.kind).worker_threads(target)
    for st in sorted([st for st in s.stages if legal.is_live(st)], key=legal.attach_depth):
        _annotate(trace, s, st, threads, target)


# ---- the rules -----------------------------------------------------------------------------

class Tile(SketchRule):
    """Multi-level tiling of a reduction with data reuse (S S R S R S)."""

    name = "tile"

    def condition(self, s, st) -> Condition:
        return Condition.APPLY if legal.has_data_reuse(st) else Condition.SKIP

    def apply(self, trace, s, st, target) -> None:
        multi_level_tile(trace, st, target)


class TileCacheWrite(SketchRule):
    """Tile, accumulating in a local stage at the output stage's tiles; with pack, the panel
    inputs (legal.packable_inputs) copied contiguous a panel at a time."""

    def __init__(self, pack: bool):
        self.pack = pack
        self.name = "tile_pack" if pack else "tile_cache_write"

    def condition(self, s, st) -> Condition:
        ok = legal.has_data_reuse(st) and (not self.pack or bool(legal.packable_inputs(st)))
        return Condition.APPLY if ok else Condition.SKIP

    def apply(self, trace, s, st, target) -> None:
        _tile_cache_write(trace, s, st, target, pack=self.pack)


class TileRelayout(SketchRule):
    """Tile with a local cache, vectorized over legal.relayout_axis (conv2d NCHW: NCHWc)."""

    name = "tile_relayout"

    def condition(self, s, st) -> Condition:
        return Condition.APPLY if legal.has_data_reuse(st) and legal.relayout_axis(st) else Condition.SKIP

    def apply(self, trace, s, st, target) -> None:
        _tile_relayout(trace, s, st, target)


class Transform(SketchRule):
    """A Winograd transform stage (topi.winograd's tags): its constant-coefficient select
    chains fold only where the position loops are unrolled, and inlined into the bgemm the
    input transform would be computed again for every output channel. So they take
    topi.winograd's own stage schedules, with no decisions (the search tunes the bgemm):
    V per (tile, lanes channels) with the alpha^2 positions unrolled, its input tile D and row
    pass T computed there; the inverse's row pass Y computed per m x m output tile of the stage
    reading it (through inlined stages), which is split by m and unrolled (where that stage has
    Y's 4 or 5 axes: NCHW or NCHWc; else Y stays a stage of its own)."""

    name = "transform"
    fixed = True
    TAGS = (winograd.TAG_D, winograd.TAG_T, winograd.TAG_V, winograd.TAG_Y)

    def condition(self, s, st) -> Condition:
        return Condition.APPLY_AND_SKIP_REST if getattr(st.op, "tag", "") in self.TAGS else Condition.SKIP

    def apply(self, trace, s, st, target) -> None:
        tag = st.op.tag
        if tag == winograd.TAG_V:
            winograd.schedule_input_transform(s, st.op.output(0), target.native_lanes(st.op.output(0).dtype_obj.bits))
        elif tag == winograd.TAG_Y:
            readers = legal.effective_consumers(s, st)       # (through an inlined bias or ReLU)
            if len(readers) == 1 and readers[0].attach_type == "root" and len(readers[0].op.axis) in (4, 5) \
                    and not readers[0].relations:
                winograd.schedule_inverse(s, readers[0].op.output(0), st.op.output(0))
        # D and T: computed at V by V's schedule (consumers are shaped first)


class Plain(SketchRule):
    """The stage keeps its loops (annotate still fuses, parallelises and vectorizes them):
    every stage the tiling rules do not shape."""

    name = "plain"

    def condition(self, s, st) -> Condition:
        return Condition.SKIP if legal.has_data_reuse(st) else Condition.APPLY

    def apply(self, trace, s, st, target) -> None:
        pass


class RFactor(SketchRule):
    """A reduction with few outputs or a long reduction: split and factored into a parallel
    partial stage; one with many outputs and a reduction of at least VECTOR_RFACTOR_MIN, into
    vector accumulators (_rfactor)."""

    name = "rfactor"

    def condition(self, s, st) -> Condition:
        if not legal.is_reduction(st) or legal.has_data_reuse(st):
            return Condition.SKIP
        reduce = math.prod(int(a.dom.extent) for a in st.op.reduce_axis)
        return Condition.APPLY if _few_outputs(st) or reduce >= VECTOR_RFACTOR_MIN else Condition.SKIP

    def apply(self, trace, s, st, target) -> None:
        _rfactor(trace, s, st, target)


# ---- the hand schedule's draw ------------------------------------------------------------

def hand_seeds(task, sketches) -> List[Tuple[object, Dict[str, Any]]]:
    """(sketch, decisions) of the candidates that redo a hand schedule, which the search
    measures first (search.Evolver): the Winograd bgemm under tile_cache_write tiled as
    topi.winograd.schedule_bgemm tiles it (_bgemm_seed; positions x panels in parallel, where
    schedule_bgemm may split the tiles instead: tiles_between_threads), every stage without an
    unroll pragma.
    Why: in 5 minutes (24 candidates, Zen 1) the search never drew the hand's 6 x 16 tile at the
    root, and in whole-model tuning its bgemm searches of 16-24 trials never came near the hand
    default (results-tune-zen1-avx2.txt); started from it, the search refines it."""
    out = []
    for sketch in sketches:
        rules = dict(sketch.rule_names)
        s = task.schedule()
        bgemms = [st for st in s.stages if getattr(st.op, "tag", "") == winograd.TAG_M
                  and rules.get(st.name) == "tile_cache_write"]
        decisions = _bgemm_seed(bgemms[0], task.target) if len(bgemms) == 1 else None
        if decisions is None:
            continue
        for st in s.stages:
            if legal.is_compute(st):
                decisions.setdefault(f"{st.name}|unroll", 0)
        out.append((sketch, decisions))
    return out


def _bgemm_seed(st, target) -> Optional[Dict[str, Any]]:
    """The decisions of tile_cache_write (and annotate) that tile the bgemm st [positions, tiles,
    channels] as topi.winograd.schedule_bgemm does: a register tile of rows tiles x U's panel
    width nr, accumulated in the local cache at the root's tile loop with the whole reduction
    outside its unrolled rows and vectorized columns, positions x panels outermost (parallel).
    rows: the most tiles whose accumulators fit the register file (register_block) that divide
    the tile count (the program pads it to its register tile's rows); None where nothing fits."""
    panels = [t for t in st.op.input_tensors if t.ndim == 4]
    if len(panels) != 1 or len(st.op.axis) != 3 or len(st.op.reduce_axis) != 1:
        return None
    pos, p, o = st.op.axis
    (rc,) = st.op.reduce_axis
    ext = st.static_extents()
    nr = int(panels[0].shape[-1])
    lanes, budget = register_block(target, st.op.output(0).dtype_obj.bits)
    fit = min(budget // ceil_div(nr, lanes), MAX_UNROLLED_ROWS, ext[p])
    rows = max((r for r in range(1, fit + 1) if ext[p] % r == 0), default=0)
    if not rows or ext[o] % nr:
        return None
    name, cache = st.name, f"{st.name}.local"
    return {f"{name}|tile|{pos.name}": [ext[pos], 1, 1], f"{name}|tile|{p.name}": [1, ext[p] // rows, rows],
            f"{name}|tile|{o.name}": [ext[o] // nr, 1, nr], f"{name}|cache_at": 1,
            f"{cache}|tile|{rc.name}": [1, ext[rc]], f"{cache}|vec_tile": True, f"{cache}|unroll_tile": True,
            f"{name}|at": -1, f"{name}|par": 3, f"{name}|vec": True, f"{cache}|unroll": 0}


CPU_SKETCH_RULES = SketchRules(
    rules=(Transform(), Inline(keep_costly=True), Tile(), TileCacheWrite(pack=False), TileCacheWrite(pack=True),
           TileRelayout(), Plain(), RFactor()),
    annotate=annotate, seeds=hand_seeds)
