"""Register blocks of the CPU sketch: the shapes of rows x vectors of accumulators that fit a
target's register file, weighted by how well they keep its FMA units busy, and the draw of one.

A block of rows x vecs accumulators issues, per reduction step, rows * vecs FMAs for rows
broadcasts and vecs vector loads, and holds rows * vecs + vecs + 1 registers (the accumulators,
the loaded vectors, one broadcast: BLIS's 6 x 16 float32 kernel on AVX2's 16 ymm is 12 + 2 + 1).
The shapes drawn keep at least half the accumulator budget (legal.register_tile_budget: enough
independent FMA chains to hide the FMA latency) and fit the register file, each weighted by the
square of its FMAs per load, rows * vecs / (rows + vecs): on AVX2 (12 accumulators) 4 x 3, 3 x 4 and 6 x 2 are
drawn most and 8 x 1 (nine loads for eight FMAs, ~0.89 of the FMA peak) least; a uniform draw of
sizes per axis, as before, is what the rest of the draws (1 - SHAPE_P) make. The conv2d NCHWc
tile (sketch_cpu's tile_relayout: columns of output x vectors of output channels) may fill the
file (budget registers - 2, rows within fit_rows): on AVX2 the hand 1x1 kernels' 1 x 14 (16 ymm live,
torch/conv_schedules.nchwc_tile) is drawn beside the hand 3x3 kernels' 4 x 2, 2 x 4, 1 x 8 and 1 x 7.

The multi-level tiles (spatial_tiles) draw shapes on every register file. AVX-512's once kept
the per-axis draws, which cannot spill there (a block of MAX_INNER_TILE rows by MAX_INNER_TILE
lanes is 16 zmm of 28) and reached 0.97x the hand schedule in 64 trials on Zen 4; but they
make blocks of a lane or two as readily as of whole vectors (16 x 1), and on a 2-core Intel
Xeon Emerald Rapids three seeds of GEMM 512 gave 0.33x, 1.13x and 0.81x the hand schedule in
64 trials. The conv2d NCHWc tile (tile_relayout) asks for a shape only where the register file
is tight (AVX2: 32 ymm of 12 for the per-axis draw).
"""
from __future__ import annotations

import math
import random
from typing import List, Optional, Sequence, Tuple

from ..expr.extent import ceil_div
from ..schedule import legal
from ..target.target import CACHE_LINE_BYTES
from .sample import MAX_INNER_TILE

SHAPE_P = 0.75          # how often a register block is drawn as one of block_shapes (else size by size)
MAX_BLOCK_VECS = 4      # vectors per block row, at most (the loaded vectors take registers too)


def block_shapes(registers: int, budget: int, max_vecs: int = MAX_BLOCK_VECS) -> List[Tuple[int, int, float]]:
    """(rows, vecs, weight) of the register blocks worth drawing on a register file of `registers`
    vector registers with `budget` of them for accumulators: rows * vecs within the budget and at
    least half of it, rows * vecs + vecs + 1 within the registers; weight: the square of its FMAs
    per load (squared: a shape that waits on loads is drawn rarely, not merely less)."""
    out = []
    for vecs in range(1, max_vecs + 1):
        for rows in range(1, budget // vecs + 1):
            acc = rows * vecs
            if 2 * acc >= budget and acc + vecs + 1 <= registers:
                out.append((rows, vecs, (acc / (rows + vecs)) ** 2))
    return out


def tight(target, dtype_bits: int) -> bool:
    """Whether the per-axis draw of a register block may exceed target's accumulator budget:
    MAX_INNER_TILE rows of MAX_INNER_TILE lanes are more vectors than it holds (AVX2, not
    AVX-512, for float32)."""
    lanes = target.native_lanes(dtype_bits)
    return MAX_INNER_TILE * ceil_div(MAX_INNER_TILE, lanes) > legal.register_tile_budget(target)


def fit_rows(target, vecs: int) -> int:
    """The most rows of a block of `vecs` vectors whose accumulators fit target's register file
    beside the vecs loaded vectors and one broadcast: (registers - vecs - 1) // vecs (AVX2's 16
    ymm: 14 rows of one vector, the hand 1x1 conv tile 1 x 14 of torch/conv_schedules.nchwc_tile;
    6 of two)."""
    return max(1, (target.native_registers() - vecs - 1) // vecs)


def _spread(rows: int, extents: Sequence[int], exact: bool) -> Optional[List[int]]:
    """Sizes of the row axes (extents, innermost last) whose product is rows: the innermost axis
    takes the largest share it can (a divisor of its extent when exact), the next the rest...;
    None when exact and they cannot make rows."""
    sizes = [1] * len(extents)
    left = rows
    for j in range(len(extents) - 1, -1, -1):
        if left == 1:
            break
        size = max(legal.divisors(extents[j], left)) if exact else min(left, extents[j])
        sizes[j] = size
        left //= size
    if exact and math.prod(sizes) != rows:
        return None
    return sizes


def draw_block(rng: random.Random, target, dtype_bits: int, row_extents: Sequence[int],
               vec_extent: int, budget: Optional[int] = None) -> Optional[Tuple[List[int], int]]:
    """A register block for row axes of row_extents (innermost last) by a vector axis of
    vec_extent elements: (the rows of each row axis, the vectors of the vector axis), or None
    (1 - SHAPE_P of the draws, or no shape fits: the caller draws sizes one by one). Only shapes
    whose sizes divide their loops where there are any (a block with tails costs far more than
    a less efficient shape: GEMM 512, 1 AVX2 thread, 4 x 24 ran at 0.07x and 6 x 16 at 0.62x
    the time-per-flop of 4 x 16), else shapes with tails. Each weight is divided by the cache
    lines a reduction step's vectors span (AVX2: 2 x 32 reads two lines a step and ran at 0.85x
    where 4 x 16, one line, ran at 0.93x the hand schedule). budget: the
    accumulators a block may hold (default legal.register_tile_budget; the conv2d NCHWc tile
    fills the register file: registers - 2)."""
    if rng.random() >= SHAPE_P:
        return None
    budget = budget or legal.register_tile_budget(target)
    lanes = target.native_lanes(dtype_bits)
    line_elems = max(1, CACHE_LINE_BYTES * 8 // dtype_bits)
    for exact in (True, False):
        cands = []
        for rows, vecs, weight in block_shapes(target.native_registers(), budget):
            if vecs > ceil_div(vec_extent, lanes) or (exact and vec_extent % (vecs * lanes)):
                continue
            sizes = _spread(rows, row_extents, exact)
            if sizes is not None and math.prod(sizes) * vecs * 2 >= budget:
                cands.append(((sizes, vecs), weight / ceil_div(vecs * lanes, line_elems)))
        if cands:
            return rng.choices([c for c, _ in cands], weights=[w for _, w in cands])[0]
    return None
