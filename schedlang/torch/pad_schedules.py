"""Default CPU schedule of a kernel of dense NCHWc convolutions that writes the zero-padded
copy of its result the next convolution reads (fuse.Group.pad, pad_fusion.py):

    parallel (n, channel tile, padded row hp)    (rows before channel tiles as _conv_nchwc_cpu)
      if 0 <= hp - ph < H:                                     (a border row computes nothing)
        y[vecs, W, L] = the NCHWc register tiles of row hp - ph (conv_schedules.py), local
      for each block, padded column wp:                       (a vector of L channels each)
        P[n, cb, hp, wp, 0:L] = inside ? y[.., wp - pw, 0:L] : 0

The row of the kernel's result stays in a local buffer (vecs * W * L values: 3.5 KiB for
ResNet's 56 columns of two blocks of 8), from which the padded row is written: the result
is never written to memory and read back by a kernel of its own. The register tiles and
1x1 reduction chunks are those of conv_schedules._conv_nchwc_cpu (nchwc_choice), one row a
tile, computed at the loop over a row's column tiles; a 3x3's tiles are computed for the whole
row at once, each block of input channels outside its column tiles (channels_outside); on
a small plane of short odd rows (ResNet's 7x7: conv_schedules._short_odd_rows) a task is a
channel tile's whole padded plane, its result computed for all the rows at once (plane), and
so is a 1x1's small plane on those targets (conv_schedules._pointwise_blocked).
"""
from __future__ import annotations

from typing import Optional

from ..target.target import Target
from .conv_schedules import NchwcChoice, _local_sums, nchwc_choice, pair_dots, tile_sums
from .schedules import _fuse, static


def schedule_padded_conv_cpu(s, group, target: Target, choice: Optional[NchwcChoice] = None) -> None:
    """Schedule the kernel group (group.pad set, dense NCHWc convolutions) for a CPU target:
    the register tile and 1x1 reduction chunks of _conv_nchwc_cpu (nchwc_choice), a task
    being a padded row of one channel tile or of a group of them. One row a tile: a tile of
    two padded rows straddles the border (rows -1 and 0 of the result), and the guard of
    each row's sums sits inside the reduction; ResNet-18's 3x3 layers at 7x7 ran 1.01-1.12x
    slower with two-row tiles here (Zen 3, one thread, CPU time, loaded; A/B in one process).
    choice: the tile choices in place of nchwc_choice's (conv_variants.py; its rt is ignored)."""
    pad, y = s[group.pad], s[group.anchor]
    n, cb, hp, wp, lane = pad.op.axis
    yn, ycb, yh, yw, ylane = y.op.axis
    choice = choice or nchwc_choice(target, s, group, static(ycb.dom.extent), static(yw.dom.extent),
                          [static(yh.dom.extent)], static(ylane.dom.extent), row_tiles=False)
    vecs, wt, pointwise = choice.vecs, choice.wt, choice.pointwise
    dots = pair_dots(s, group, target)          # (before the sums are cached: their reads)
    caches = _local_sums(s, group)
    co, ci = pad.split(cb, factor=vecs)
    if pointwise is not None:
        co, cti = pad.split(co, factor=pointwise[0])
        tasks, inner = [n, co, hp], [cti]
    elif choice.plane and choice.channels_outside:
        tasks, inner = [n, co], [hp]            # a channel tile's whole plane a task: its weights read once
    elif choice.rows_outer:
        tasks, inner = [n, hp, co], []          # an input row read once for all the channel tiles
    else:
        tasks, inner = [n, co, hp], []
    pad.reorder(*tasks, *inner, ci, wp, lane)
    task = _fuse(pad, tasks)
    pad.parallel(task)
    pad.vectorize(lane)
    y.compute_at(pad, task)
    bo, bi = y.split(ycb, factor=vecs)       # (declared extents: unroll checks them, not the row's region)
    wo, wi = y.split(yw, factor=wt)
    if pointwise is not None:
        y.reorder(yn, yh, wo, bo, bi, wi, ylane)      # the channel tiles of a group inside wo
    else:
        y.reorder(yn, bo, yh, wo, bi, wi, ylane)
    if choice.channels_outside:               # the row's tiles at once, input channel blocks outside them
        plane = choice.plane and inner == [hp]    # (or the plane's rows: conv_schedules._short_odd_rows)
        tile_sums(caches, y, bo if plane else yh, vecs, wt, 1, channels_outside=True, plane=plane,
                  blocks_outer=choice.blocks_outer, row_chunk=choice.row_chunk, block_dots=dots)
    else:
        tile_sums(caches, y, wo, vecs, wt, 1, None if pointwise is None else pointwise[1], block_dots=dots)
    y.unroll(bi)
    y.unroll(wi)
    y.vectorize(ylane)
