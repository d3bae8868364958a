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
from .conv_schedules import _input_outweighs_weights, _local_sums, nchwc_tile, tile_sums
from .schedules import _fuse, static


def schedule_padded_conv_cpu(s, group, target: Target) -> None:
    """Schedule the kernel group (group.pad set, dense NCHWc convolutions) for a CPU target."""
    pad, y = s[group.pad], s[group.anchor]
    n, cb, hp, wp, lane = pad.op.axis
    yn, ycb, yh, yw, ylane = y.op.axis
    vecs, wt = nchwc_tile(target, static(ycb.dom.extent), static(yw.dom.extent), static(ylane.dom.extent))
    co, ci = pad.split(cb, factor=vecs)
    if target.native_registers() < 32 and _input_outweighs_weights(s, group):
        tasks = [n, hp, co]          # an input row read once for all the channel tiles
    else:
        tasks = [n, co, hp]
    pad.reorder(*tasks, ci, wp, lane)
    task = _fuse(pad, tasks)
    pad.parallel(task)
    pad.vectorize(lane)
    caches = _local_sums(s, group)
    y.compute_at(pad, task)
    bo, bi = y.split(ycb, factor=vecs)       # (declared extents: unroll checks them, not the row's region)
    wo, wi = y.split(yw, factor=wt)
    y.reorder(yn, bo, yh, wo, bi, wi, ylane)
    tile_sums(caches, y, wo, vecs, wt)
    y.unroll(bi)
    y.unroll(wi)
    y.vectorize(ylane)
