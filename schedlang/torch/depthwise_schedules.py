"""Default CPU schedule of depthwise and grouped convolutions (a fuse.Group whose
convolutions read input channels that depend on the output channel), activations NCHW
(grouped ones of whole vectors a group run conv_schedules.py's NCHWc kernel instead):

    parallel n.oc (whole planes a task; rows of planes when there are few planes):
      xpad[h', w'] = x[n, c, h' - pad, w' - pad] or 0          (the plane, zero-padded, local)
      for oh:
        for ow.outer:                                             (a row, or a divisor of it)
          acc[0:V] = 0
          for rc, rh, rw (taps unrolled):
            acc[0:V] += xpad[oh * s + rh * d, (ow * s + rw * d)[0:V]] * w[oc, rc, rh, rw]
          out[n, oc, oh, ow[0:V]] = epilogue(acc)                   (bias, batch norm, ReLU6, ...)

A depthwise convolution does 9 multiply-adds per output and no reuse across channels, so
its cost is in the reads: each tap is one vector load along the row (a contiguous one at
stride 1; at stride 2 a wide load and a shuffle, target/llvm/strided.py) with the weight
broadcast. The padding is paid once per input element in the local padded plane
(ops/conv.py lowers grouped convolutions with padding as a read of a `<name>_pad` stage),
not per tap in the inner loop: guarded reads there (a mask per tap and row) cost more
than the multiply-adds.

Between dense 1x1 convolutions (MobileNetV2's inverted residuals) the activations are
NCHWc-blocked (layout.py: a vector of L channels innermost) and a depthwise convolution
reads its weight in packed blocks [C / L, 1, *K, L] (ops/conv.py): `_depthwise_nchwc_cpu`
makes a tap one aligned vector load of L channels at any stride and one weight vector for
a register tile of columns, with no layout transform before or after it. On NCHW input
(channels not blocked, other grouped convolutions), vectorizing along the row is what
needs no transposition.

On CUDA the conv rule of conv_schedules.py applies (one output per thread) and the padded
input is a kernel of its own.
"""
from __future__ import annotations

from typing import Optional

from ..target.target import Target
from .conv_schedules import MAX_UNROLL_TAPS, _accumulators, _row_vector, place_row_sum, row_split
from .fuse import CONV_PAD_TAG
from .pad_fusion import producer_writes
from .schedules import _extent, _fuse, _product, lanes, static, threads

TASKS_PER_THREAD = 4      # planes per worker thread below which the tasks are rows of planes
# Taps of the NCHWc register tile unrolled together at most (a 3 x 3): unrolled whole, a 5 x 5
# and FastViT's 7 x 7 (25 and 49 taps x a tile of 16 columns: 400 and 784 FMAs in one block)
# ran about 5x slower than with one row of taps unrolled (Zen 4, 48 channels at 64 x 64).
MAX_TILE_TAPS = 9


def padded_input(s, conv) -> Optional[object]:
    """The stage of the zero-padded input copy that conv reads (ops/conv.py) and its kernel
    makes, or None (also when the kernel producing the input writes it: pad_fusion.py)."""
    for st in s.inputs_of(conv):
        if getattr(st.op, "tag", "") == CONV_PAD_TAG and not producer_writes(s, st):
            return st
    return None


def schedule_grouped_conv_cpu(s, group, target: Target) -> None:
    """Schedule a kernel of depthwise/grouped convolutions (group.convs) for a CPU target."""
    if len(s[group.anchor].op.axis) == 5:           # blocked activations (layout.py)
        return _depthwise_nchwc_cpu(s, group, target)
    out, accs, (n, oc), spatial, wo, wi, v = row_split(s, group, target)
    planes = _product([n.dom.extent, oc.dom.extent])
    if spatial[:-1] and planes is not None and planes >= TASKS_PER_THREAD * threads(target):
        task = _fuse(out, [n, oc])          # a plane: its padded copy made once
        row = spatial[-2]
    else:
        task = row = _fuse(out, [n, oc] + spatial[:-1])   # a row: the padded rows it reads, made per row
    out.parallel(task)
    for acc in accs:                     # the stage computing the sum (a cache of a kernel-result conv)
        pad = padded_input(s, acc)
        if pad is not None:
            pad.compute_at(out, task)
            _vectorize_row(pad, target)
        place_row_sum(acc, out, wo if wo is not None else row, v)
    if v is not None:
        out.vectorize(wi)


def _depthwise_nchwc_cpu(s, group, target: Target) -> None:
    """The depthwise kernel over blocked activations out[n, cb, oh, ow, l]: (batch, channel
    block) planes a task (their padded plane made once; rows of planes when the planes do not
    share out evenly), each sum in a local [wt, L] tile of registers computed at the loop over
    a row's columns, the taps outermost and unrolled, each one weight vector w[cb, 0, rh, rw, :]
    and wt input vectors x[.., oh * s + rh, ow * s + rw, :] (one aligned load a column at any
    stride), written back as whole vectors of L channels."""
    out, accs = _accumulators(s, group)
    n, cb, *spatial, lane = out.op.axis
    wt = row_tile(target, static(spatial[-1].dom.extent))
    wo, wi = out.split(spatial[-1], factor=wt)
    out.reorder(n, cb, *spatial[:-1], wo, wi, lane)
    planes, workers = _product([n.dom.extent, cb.dom.extent]), threads(target)
    if not spatial[:-1] or planes is not None and planes >= workers \
            and (planes % workers == 0 or planes >= TASKS_PER_THREAD * workers):
        task = _fuse(out, [n, cb])
    else:
        task = _fuse(out, [n, cb] + spatial[:-1])
    out.parallel(task)
    for acc in accs:
        pad = padded_input(s, acc)
        if pad is not None:
            pad.compute_at(out, task)
            _vectorize_row(pad, target)
        acc.compute_at(out, wo)
        *outer, col, vec = acc.op.axis
        # its wt columns at out's loop, split so: unrolled, the whole row's extent would count
        # against MAX_UNROLL (rows of 150, Xception's: 9 taps x 150 > 1024, plain loops)
        whole, col = acc.split(col, factor=wt)
        taps = [a for a in acc.op.reduce_axis if (static(a.dom.extent) or MAX_UNROLL_TAPS + 1) <= MAX_UNROLL_TAPS]
        acc.reorder(*outer, whole, *acc.op.reduce_axis, col, vec)
        if (_product([a.dom.extent for a in taps]) or MAX_TILE_TAPS + 1) > MAX_TILE_TAPS:
            taps = taps[-1:]             # a large kernel (7 x 7): one row of taps unrolled, not all
        for tap in taps:
            acc.unroll(tap)
        acc.unroll(col)
        acc.vectorize(vec)
    out.unroll(wi)
    out.vectorize(lane)


def row_tile(target: Target, cols: Optional[int]) -> int:
    """Columns of the depthwise register tile: the largest divisor of the row that leaves one
    register for the weight vector (and one more with 32 registers); an input vector is an
    FMA's memory operand, so it needs none."""
    registers = target.native_registers()
    most = registers - 1 - (1 if registers >= 32 else 0)
    if cols is None:
        return 1
    return max(wt for wt in range(1, min(most, cols) + 1) if cols % wt == 0)


def _vectorize_row(stage, target) -> None:
    """The stage's last axis vectorized by a row vector (the whole row when it fits)."""
    last = stage.op.axis[-1]
    v = _row_vector(static(_extent(last)), lanes(target, stage))
    if v is None:
        return
    if static(_extent(last)) != v:
        _, last = stage.split(last, factor=v)
    stage.vectorize(last)
