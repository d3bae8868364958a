"""Default CPU schedule of a kernel of dense NCHWc convolutions that writes the zero-padded
copy of its result the next convolution reads (fuse.Group.pad, pad_fusion.py):

    parallel (n, channel tile, padded row hp)    (rows before channel tiles as _conv_nchwc_cpu)
      if 0 <= hp - ph < H:                                     (a border row computes nothing)
        y[vecs, W, L] = the NCHWc register tiles of row hp - ph (conv_schedules.py), local
      for each block, padded column wp:                       (a vector of L channels each)
        P[n, cb, hp, wp, 0:L] = inside ? y[.., wp - pw, 0:L] : 0

The row of the kernel's result stays in a local buffer (vecs * W * L values: 3.5 KiB for
ResNet's 56 columns of two blocks of 8), from which the padded row is written: the result
is never written to memory and read back by a kernel of its own. The register tiles are
those of conv_schedules._conv_nchwc_cpu (nchwc_tile), computed at the loop over a row's
column tiles.
"""
from __future__ import annotations

from ..target.target import Target
from .conv_schedules import _local_sums, nchwc_choice, tile_sums
from .schedules import _fuse, static


def schedule_padded_conv_cpu(s, group, target: Target) -> None:
    """Schedule the kernel group (group.pad set, dense NCHWc convolutions) for a CPU target:
    the register tile, row tile and 1x1 reduction chunks of _conv_nchwc_cpu (nchwc_choice),
    a task being rt padded rows (a row tile) of one channel tile or of a group of them."""
    pad, y = s[group.pad], s[group.anchor]
    n, cb, hp, wp, lane = pad.op.axis
    yn, ycb, yh, yw, ylane = y.op.axis
    choice = nchwc_choice(target, s, group, static(ycb.dom.extent), static(yw.dom.extent),
                          [static(yh.dom.extent)], static(ylane.dom.extent))
    vecs, wt, rt, pointwise = choice.vecs, choice.wt, choice.rt, choice.pointwise
    caches = _local_sums(s, group)
    co, ci = pad.split(cb, factor=vecs)
    rows = hp
    if rt > 1:
        rows, hi = pad.split(hp, factor=rt)
    if pointwise is not None:
        co, cti = pad.split(co, factor=pointwise[0])
        tasks, inner = [n, co, rows], [cti]
    elif choice.rows_outer:
        tasks, inner = [n, rows, co], []          # an input row read once for all the channel tiles
    else:
        tasks, inner = [n, co, rows], []
    pad.reorder(*tasks, *inner, *([hi] if rt > 1 else []), ci, wp, lane)
    task = _fuse(pad, tasks)
    pad.parallel(task)
    pad.vectorize(lane)
    y.compute_at(pad, task)
    bo, bi = y.split(ycb, factor=vecs)       # (declared extents: unroll checks them, not the row's region)
    wo, wi = y.split(yw, factor=wt)
    rows, h = [yh], []
    if rt > 1:
        yho, yhi = y.split(yh, factor=rt)
        rows, h = [yho], [yhi]
    if pointwise is not None:
        y.reorder(yn, *rows, wo, bo, *h, bi, wi, ylane)      # the channel tiles of a group inside wo
    else:
        y.reorder(yn, bo, *rows, wo, *h, bi, wi, ylane)
    tile_sums(caches, y, wo, vecs, wt, rt, None if pointwise is None else pointwise[1])
    for a in h:
        y.unroll(a)
    y.unroll(bi)
    y.unroll(wi)
    y.vectorize(ylane)
