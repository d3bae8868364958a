"""The GPU sketch rules (the cuda backend's), as Ansor's GPU rules and TVM's GPU tutorials:
every stage's loops bound to blockIdx / threadIdx (and vthread), through the public
primitives, with each random choice a named decision of the Trace (sample.py), so mutation
and crossover work as on CPUs.

- inline: an intermediate elementwise stage is computed inside its consumers (always);
- gpu_tensor_core: a float16 / bfloat16 (batch) matmul on tensor cores (sketch_tensorcore.py),
  one sketch besides gpu_tile's for the same stage;
- gpu_tile: a reduction with data reuse gets multi-level tiling bound to blockIdx / vthread /
  threadIdx, a local cache_write accumulating each thread's register tile, and its operands
  staged in shared memory at the outer reduction loop, fetched cooperatively by the block;
- gpu_cross_thread: a reduction's reduce loop split and its inner part bound to threadIdx.x
  (a cross-thread reduction), rows bound to blockIdx.x (and threadIdx.y);
- gpu_thread_row: one thread per output point (preferred for a row reduction with many rows,
  MANY_ROWS, so it is registered twice: before gpu_cross_thread for many rows, after it for
  few);
- gpu_simple: every other stage: loops fused, split by the block size and bound to
  blockIdx.x / threadIdx.x, an optional vector (float4) inner loop.

The shapes follow the hand-written GPU schedules of tests/target/cuda/schedules.py
(elementwise, shared_gemm / vthread_gemm, row_reduce); the thread counts come from
schedule/legal.py. What only the lowered kernel can tell (more than 1024 threads a block,
shared memory over the limit) is checked on the Kernel IR before anything is built
(search.kernel_hash, through Backend.check_launch), which prunes the candidate.
GPU_SKETCH_RULES lists the rules; a GPU sample needs no annotation after them.
"""
from __future__ import annotations

import math
import random
from typing import List

from ..schedule import Schedule, legal
from ..tensor.axis import DATA_PAR, REDUCE, thread_axis
from ..tensor.op import TensorRead
from ..expr.extent import ceil_div
from ..expr.functor import walk
from .sample import Trace, split_levels, tile_levels
from .sketch import Condition, Inline, SketchRule, SketchRules
from .sketch_tensorcore import GPUTensorCore, declare_intrinsics

GPU_LEVELS = 4            # spatial tiles: block, vthread, thread, inner (a thread's register tile)
MAX_INNER = 4             # a thread's register tile per axis, at most (drawn; mutation may grow it)
MAX_AXIS_THREADS = 32     # threads per tiled axis, at most (drawn)
MAX_REDUCE_TILE = 16      # the shared tile's reduction length, at most (drawn)
ROWS_PER_BLOCK = (1, 2, 4, 8)
GPU_DIVISIBLE_P = 0.9      # how often a GPU tile size divides its loop (threads wasted on tails otherwise)
MANY_ROWS = 4096          # a reduction with this many outputs prefers one thread a row


def _bind(st, ivar, tag: str) -> None:
    st.bind(ivar, thread_axis(tag))


def _fused(st, loops: List) -> object:
    return loops[0] if len(loops) == 1 else st.fuse(*loops)


def _pick_threads(trace: Trace, key: str, counts: List[int], extent: int) -> int:
    """A block size from counts, drawn among those not much longer than the loop."""
    fit = [n for n in counts if n <= max(counts[0], extent)]
    return trace.pick(key, lambda rng: rng.choice(fit), lambda v: v in counts)


def gpu_simple(trace: Trace, s: Schedule, st, target) -> None:
    """Fuse every loop, split by the block size, bind blockIdx.x / threadIdx.x; with vec, an
    inner vector loop of the widest CUDA access (float4) inside each thread."""
    spatial = [a for a in st.leaf_iter_vars if a.kind == DATA_PAR]
    fused = _fused(st, spatial)
    extent = st.static_extents()[fused]
    lanes = legal.gpu_vector_lanes(st, target)
    vec = False
    if lanes > 1 and extent >= lanes:
        vec = trace.pick(f"{st.name}|vec", lambda rng: rng.random() < 0.5, lambda v: isinstance(v, bool))
    if vec:
        fused, lane = st.split(fused, factor=lanes)
        extent = ceil_div(extent, lanes)
    threads = _pick_threads(trace, f"{st.name}|threads", legal.thread_counts(target), extent)
    bo, to = st.split(fused, factor=threads)
    _bind(st, bo, "blockIdx.x")
    _bind(st, to, "threadIdx.x")
    if vec:
        st.vectorize(lane)


def gpu_thread_row(trace: Trace, s: Schedule, st, target) -> None:
    """One thread per output point: the spatial loops fused, split and bound as gpu_simple;
    each thread runs the reduction loops serially."""
    spatial = [a for a in st.leaf_iter_vars if a.kind == DATA_PAR]
    fused = _fused(st, spatial)
    threads = _pick_threads(trace, f"{st.name}|threads", legal.thread_counts(target), st.static_extents()[fused])
    bo, to = st.split(fused, factor=threads)
    _bind(st, bo, "blockIdx.x")
    _bind(st, to, "threadIdx.x")


def gpu_cross_thread(trace: Trace, s: Schedule, st, target) -> None:
    """The reduce loops fused and split, the inner part bound to threadIdx.x (a cross-thread
    reduction, as row_reduce in the CUDA tests); the rows bound to blockIdx.x, or with
    rows > 1 a few rows a block along threadIdx.y."""
    red = [a for a in st.leaf_iter_vars if a.kind == REDUCE]
    r = _fused(st, red)
    r_ext = st.static_extents()[r]
    counts = legal.cross_thread_counts(target, r_ext)
    legal_tr = lambda v: (isinstance(v, int) and v <= target.max_threads_per_block     # noqa: E731
                          and legal.is_cross_thread_extent(v))
    tr = trace.pick(f"{st.name}|rthreads", lambda rng: rng.choice(counts), legal_tr)
    _, ki = st.split(r, factor=tr)
    spatial = [a for a in st.leaf_iter_vars if a.kind == DATA_PAR]
    rows_ext = math.prod(st.static_extents()[a] for a in spatial)
    fit = [n for n in ROWS_PER_BLOCK if n * tr <= target.max_threads_per_block and n <= max(1, rows_ext)
           and legal.is_cross_thread_extent(tr, n * tr)]
    rows = trace.pick(f"{st.name}|rows", lambda rng: rng.choice(fit), lambda v: v in fit) if fit else 1
    if spatial:
        rowloop = _fused(st, spatial)
        if rows > 1:
            bo, bi = st.split(rowloop, factor=rows)
            _bind(st, bo, "blockIdx.x")
            _bind(st, bi, "threadIdx.y")
        else:
            _bind(st, rowloop, "blockIdx.x")
    _bind(st, ki, "threadIdx.x")


def gpu_tile_sizes(rng: random.Random, extent: int) -> List[int]:
    """[0, vthread, thread, inner] tile sizes of one spatial loop (the outermost, the block
    level, is what the others leave): mostly factors of the extent."""
    def pick(rest: int, limit: int) -> int:
        if rng.random() < GPU_DIVISIBLE_P:
            return rng.choice(legal.divisors(rest, limit))
        return rng.randint(1, max(1, min(rest, limit)))
    inner = pick(extent, MAX_INNER)
    rest = ceil_div(extent, inner)
    thread = pick(rest, MAX_AXIS_THREADS)
    rest = ceil_div(rest, thread)
    vthread = pick(rest, 2) if rng.random() < 0.5 else 1
    return [0, vthread, thread, inner]


def _operands(op) -> List:
    """The tensors the reduction's body reads, in order of first read."""
    out, seen = [], set()
    for src in op.body.source:
        for n in walk(src):
            if isinstance(n, TensorRead) and id(n.tensor) not in seen:
                seen.add(id(n.tensor))
                out.append(n.tensor)
    return out


def cooperative_fetch(st, threads: int) -> None:
    """TVM's cooperative fetch: the shared stage's loops fused, split by the block's threads
    and the inner part bound to threadIdx.x, so each thread copies a few elements."""
    fused = _fused(st, list(st.leaf_iter_vars))
    _, x = st.split(fused, factor=threads)
    _bind(st, x, "threadIdx.x")


def gpu_tile(trace: Trace, s: Schedule, st, target) -> None:
    """Multi-level tiling bound to the GPU (Ansor's / TVM's GEMM tutorial): each spatial loop
    split into block, vthread, thread and inner tiles, the levels fused and bound to
    blockIdx.x, vthread and threadIdx.x; a local cache_write stage computes each thread's
    inner tile at its thread loop, with the reduction split in two (outer, inner) and the
    loops inside the outer one unrolled up to a drawn step; with shared, each operand is staged in shared memory at the outer reduction loop and fetched
    cooperatively by the block's threads."""
    operands = _operands(st.op)
    local = s[s.cache_write(st.op.output(0), "local")]
    ext = st.static_extents()
    spatial = [a for a in st.leaf_iter_vars if a.kind == DATA_PAR]
    levels = []
    for a in spatial:
        sizes = trace.pick(f"{st.name}|tile|{a.name}", lambda rng, e=ext[a]: gpu_tile_sizes(rng, e),
                           lambda v, e=ext[a]: (isinstance(v, list) and len(v) == GPU_LEVELS
                                                and all(isinstance(x, int) and 1 <= x <= e for x in v[1:])))
        sizes = list(sizes)
        sizes[0] = max(1, ceil_div(ext[a], math.prod(sizes[1:])))
        trace.made[f"{st.name}|tile|{a.name}"] = sizes
        levels.append(split_levels(st, a, sizes[1:]))
    st.reorder(*[loops[lv] for lv in range(GPU_LEVELS) for loops in levels])
    block = _fused(st, [loops[0] for loops in levels])
    vthread = _fused(st, [loops[1] for loops in levels])
    thread = _fused(st, [loops[2] for loops in levels])
    _bind(st, block, "blockIdx.x")
    st.bind(vthread, thread_axis("vthread", name=f"{st.name}.vt"))
    _bind(st, thread, "threadIdx.x")
    threads = st.static_extents()[thread]
    local.compute_at(st, thread)

    lext = local.static_extents()
    inner = [a for a in local.leaf_iter_vars if a.kind == DATA_PAR]
    reduce = [a for a in local.leaf_iter_vars if a.kind == REDUCE]
    r_loops = [split_levels(local, a, tile_levels(trace, f"{local.name}|tile|{a.name}", lext[a], 2,
                                                  inner_max=MAX_REDUCE_TILE)[1:]) for a in reduce]
    local.reorder(*[loops[0] for loops in r_loops], *[loops[1] for loops in r_loops], *inner)
    if not r_loops:
        return
    # unrolled, the register tile's loops index the local array by constants (registers, not local memory)
    step = trace.pick(f"{local.name}|unroll", lambda rng: rng.choice((0,) + legal.PRAGMA_STEPS),
                      lambda v: v in (0,) + legal.PRAGMA_STEPS)
    if step:
        local.pragma(r_loops[-1][0], "auto_unroll_max_step", step)
    shared = trace.pick(f"{local.name}|shared", lambda rng: rng.random() < 0.8, lambda v: isinstance(v, bool))
    if not shared:
        return
    for t in operands:
        cached = s[s.cache_read(t, "shared", [local.op.output(0)])]
        cached.compute_at(local, r_loops[-1][0])
        cooperative_fetch(cached, threads)


# ---- the rules -----------------------------------------------------------------------------

class GPUTile(SketchRule):
    """A reduction with data reuse: gpu_tile, and nothing else."""

    name = "gpu_tile"

    def condition(self, s, st) -> Condition:
        return Condition.APPLY_AND_SKIP_REST if legal.has_data_reuse(st) else Condition.SKIP

    def apply(self, trace, s, st, target) -> None:
        gpu_tile(trace, s, st, target)


def _rows(st) -> int:
    return math.prod(int(a.dom.extent) for a in st.op.axis)


class GPUCrossThread(SketchRule):
    """A reduction (without data reuse) reduced across the threads of a block."""

    name = "gpu_cross_thread"

    def condition(self, s, st) -> Condition:
        return Condition.APPLY if legal.is_reduction(st) else Condition.SKIP

    def apply(self, trace, s, st, target) -> None:
        gpu_cross_thread(trace, s, st, target)


class GPUThreadRow(SketchRule):
    """A reduction (without data reuse) run by one thread per output point; registered once
    for reductions of at least MANY_ROWS outputs (many_rows, before gpu_cross_thread) and once
    for fewer (after it)."""

    name = "gpu_thread_row"

    def __init__(self, many_rows: bool):
        self.many_rows = many_rows

    def condition(self, s, st) -> Condition:
        ok = legal.is_reduction(st) and (_rows(st) >= MANY_ROWS) == self.many_rows
        return Condition.APPLY if ok else Condition.SKIP

    def apply(self, trace, s, st, target) -> None:
        gpu_thread_row(trace, s, st, target)


class GPUSimple(SketchRule):
    """Every stage that is not a reduction: one thread per point."""

    name = "gpu_simple"

    def condition(self, s, st) -> Condition:
        return Condition.SKIP if legal.is_reduction(st) else Condition.APPLY

    def apply(self, trace, s, st, target) -> None:
        gpu_simple(trace, s, st, target)


GPU_SKETCH_RULES = SketchRules(rules=(Inline(keep_costly=False), GPUTensorCore(), GPUTile(),
                                      GPUThreadRow(many_rows=True), GPUCrossThread(), GPUThreadRow(many_rows=False),
                                      GPUSimple()),
                               declare_intrinsics=declare_intrinsics)
