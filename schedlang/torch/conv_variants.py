"""Variants of the default schedule of an NCHWc convolution kernel (conv_schedules.py,
pad_schedules.py): the same kernel with other tile choices (NchwcChoice: register tile
channel blocks x rows x columns, output rows or channel tiles outermost, input channel
blocks outside a row of tiles, 1x1 reduction chunks, a channel tile's whole plane a task,
the tile's channel blocks outside its rows and columns). The default's rules pick one choice
for every layer; the best one differs by layer shape and CPU, so tuning measures a few of
these beside the searched candidates (AutoTVM's template knobs inside Ansor's scheduler:
torch/tune.py). A variant is a schedule like any other: its steps are the tuning record,
and replaying them rebuilds the kernel.
"""
from __future__ import annotations

from typing import List, Optional

from ..schedule import create_schedule
from ..target.registry import get_backend
from ..target.target import Target
from .conv_schedules import (MAX_PLANE_PIXELS, NchwcChoice, _dense, _pointwise_blocks, blocked_grouped,
                             nchwc_choice, schedule_conv_cpu, tile_blocks)
from .fuse import fuse
from .schedules import _product, schedule_group, static

TOP_TILES = 4       # register tiles by FMAs per value loaded tried beside the default's


def nchwc_group(s, group) -> bool:
    """The kernel is one the NCHWc schedules (conv_schedules._conv_nchwc_cpu or
    pad_schedules) build: dense convolutions over blocked activations, or grouped ones of whole
    blocks a group."""
    if not group.convs or not all(_dense(s[c]) or blocked_grouped(s[c]) for c in group.convs):
        return False
    return group.pad is not None or (all(len(s[c].op.axis) == 5 for c in group.convs)
                                     and len(s[group.anchor].op.axis) == 5)


def choice_variants(target: Target, s, group, limit: int = 16) -> List[NchwcChoice]:
    """At most limit choices for the NCHWc kernel group (nchwc_group), the default's
    (nchwc_choice) first: the default with one loop-order choice changed (channels outside,
    rows outer, 1x1 chunks, a whole-plane task, the tile's channel blocks outer), then the
    TOP_TILES register tiles that fit the register file with the most FMAs per value loaded,
    each with the default's order, without 1x1 chunks (where the default has them) and with
    the input channels outside a row of tiles flipped. A choice that builds the kernel of one
    before it (a field that does not apply to it changed: _applied) is left out.
    On ResNet-50's six costliest kernels the best of these beat the default by 1.00-1.30x
    (larger tiles on 1x1 layers without chunks, 4 x 2 x 1 or 2 x 2 x 2 on 3x3 at 14x14 and
    28x28; Zen 1, one thread, CPU time, loaded: benchmarks/results-conv-variants-zen1-avx2.txt)."""
    anchor = s[group.anchor]
    _, cb, *spatial, lane = anchor.op.axis
    blocks, cols = static(cb.dom.extent), static(spatial[-1].dom.extent)
    rows = [static(a.dom.extent) for a in spatial[:-1]]
    padded = group.pad is not None
    d = default = nchwc_choice(target, s, group, blocks, cols, rows, static(lane.dom.extent), row_tiles=not padded)
    outside_ok = default.channels_outside or _blocked_reductions(s, group)
    pixels = _product(rows)
    plane_ok = pixels is not None and cols is not None and pixels * cols <= MAX_PLANE_PIXELS
    out, kernels = [default], [_applied(default)]     # (a list: pointwise holds a list)

    def add(vecs, wt, rt, rows_outer, outside, pointwise="auto", plane=d.plane, blocks_outer=d.blocks_outer,
            row_chunk=d.row_chunk):
        if (outside and not outside_ok) or (plane and not plane_ok):     # (a whole-plane task: small planes)
            return
        if pointwise == "auto":
            pointwise = None if outside else _pointwise_blocks(target, s, group, blocks // vecs)
        choice = NchwcChoice(vecs, wt, rt, pointwise, rows_outer, outside, plane and outside, blocks_outer and outside,
                             row_chunk if outside else 1)
        if _applied(choice) not in kernels:
            kernels.append(_applied(choice))
            out.append(choice)

    add(d.vecs, d.wt, d.rt, d.rows_outer, not d.channels_outside)
    add(d.vecs, d.wt, d.rt, not d.rows_outer, d.channels_outside, d.pointwise)
    if d.pointwise is not None:
        add(d.vecs, d.wt, d.rt, d.rows_outer, d.channels_outside, None)
    if d.channels_outside:
        add(d.vecs, d.wt, d.rt, d.rows_outer, True, d.pointwise, plane=not d.plane)
        add(d.vecs, d.wt, d.rt, d.rows_outer, True, d.pointwise, blocks_outer=not d.blocks_outer)
    tileable = tile_blocks(s, group, blocks)        # (grouped: a tile's blocks within one group)
    for vecs, wt, rt in _tiles(target.native_registers(), tileable, cols, 1 if padded or not rows else rows[-1]):
        add(vecs, wt, rt, d.rows_outer, d.channels_outside)
        if d.pointwise is not None:           # chunks suit 1 x 14 tiles; larger tiles gained without them
            add(vecs, wt, rt, d.rows_outer, False, None)
        add(vecs, wt, rt, d.rows_outer, not d.channels_outside)
    return out[:limit]


def _applied(choice: NchwcChoice) -> NchwcChoice:
    """choice with the fields that do not shape its kernel set to False (two choices of one
    kernel, one measurement): plane and blocks_outer apply only with channels_outside (plane
    not with 1x1 chunks either), rows_outer neither with chunks nor with a whole-plane task,
    row_chunk only with channels_outside and no whole-plane task (conv_schedules._conv_nchwc_cpu,
    pad_schedules.schedule_padded_conv_cpu)."""
    plane = choice.plane and choice.channels_outside and choice.pointwise is None
    rows_outer = choice.rows_outer and choice.pointwise is None and not plane
    return choice._replace(rows_outer=rows_outer, plane=plane,
                           blocks_outer=choice.blocks_outer and choice.channels_outside,
                           row_chunk=choice.row_chunk if choice.channels_outside and not plane else 1)


def _tiles(registers: int, blocks: int, cols: int, rows: int) -> list:
    """The TOP_TILES (vecs, wt, rt) register tiles by FMAs per value loaded (vecs weight vectors,
    wt * rt broadcasts), then the larger: vecs in 1, 2, 4 dividing blocks, wt dividing cols,
    rt dividing rows, vecs * wt * rt accumulators beside the vecs weights and a broadcast."""
    found = []
    for vecs in (1, 2, 4):
        for wt in range(1, cols + 1):
            for rt in range(1, rows + 1):
                acc = vecs * wt * rt
                if blocks % vecs or cols % wt or rows % rt or acc + vecs + 1 > registers:
                    continue
                found.append((acc / (vecs + wt * rt), acc, vecs, wt, rt))
    found.sort(reverse=True)
    return [f[2:] for f in found[:TOP_TILES]]


def _blocked_reductions(s, group) -> bool:
    """Every convolution reduces over (rco, rh, rw, rci) of static extents (a blocked input)."""
    return all(len(s[c].op.reduce_axis) == 4 and all(static(r.dom.extent) is not None
                                                     for r in s[c].op.reduce_axis) for c in group.convs)


def variant_schedule(outputs: List, target: Target, choice: Optional[NchwcChoice]):
    """The default schedule of the program computing outputs (default_schedule's, one kernel
    of NCHWc convolutions) with choice in place of the default's for that kernel."""
    s = create_schedule([t.op for t in outputs])
    for group in fuse(s):
        if choice is not None and nchwc_group(s, group):
            schedule_conv_cpu(s, group, target, choice)
        else:
            schedule_group(s, group, target)
    return s


def program_variants(outputs: List, target: Target, limit: int = 16) -> List[NchwcChoice]:
    """choice_variants of the one NCHWc convolution kernel of the program computing outputs
    (a conv task's), or [] where the program has none."""
    s = create_schedule([t.op for t in outputs])
    groups = [g for g in fuse(s) if nchwc_group(s, g)]
    if len(groups) != 1 or get_backend(target.kind).torch_device != "cpu":
        return []       # (the variants are of the CPU's NCHWc schedules)
    return choice_variants(target, s, groups[0], limit)
