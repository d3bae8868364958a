"""Default CPU schedule of window reductions: pooling (max, average, adaptive), a reduction
over a small static window per output, read along the output's last axis.

Such a kernel is pointwise with a short reduction inside. Its outer axes are fused and
parallel; its last axis is split by one or two native vectors, and the window loops run
outside the vector lanes, so that each tap is one vector operation on a row of outputs (a
strided read when the stride is not 1, under the tap's guard where windows cross the
edge):

    parallel n.c.oh:
      for ow.outer:
        out[n, c, oh, ow.outer*V : +V] = identity
        for r0, r1:
          vectorized ow.inner: out[..] = max(out[..], if_then_else(inside, x[..], -inf))

A window reduction read by a pointwise consumer at its own coordinates (the average's
divide, a cast, a ReLU after the pool) is computed per row of the consumer, vectorized
the same way, and the consumer's row is vectorized after it. On CUDA the rows schedule
(one thread per output, the window loops in the thread) already suits these kernels.
"""
from __future__ import annotations

from ..expr.functor import uses_var, walk
from ..tensor.op import TensorRead
from ..tensor.reduce import Reduce
from .fuse import Group, is_matmul
from .schedules import _extent, _fuse, _product, lanes, schedule_rows_cpu, static, vector_factor

WINDOW = 64          # at most this many taps per output (a 7x7 pool has 49; a global pool is a row reduction)
UNROLL_TAPS = 9      # windows of at most this many taps (a 3x3 pool, a linear upsample's pair) are unrolled


def is_window(st) -> bool:
    """A one-output reduction over a few static taps per output, of rank >= 2, not a matmul,
    whose every read is a window along the output's last axis (a short row or column sum
    keeps the reduction schedules)."""
    op = st.op
    if not isinstance(op.body, Reduce) or op.num_outputs != 1 or not op.reduce_axis or len(op.axis) < 2:
        return False
    taps = _product(_extent(r) for r in op.reduce_axis)
    if taps is None or taps > WINDOW or is_matmul(st):
        return False
    last, axes, raxes = op.axis[-1].var, [a.var for a in op.axis], [r.var for r in op.reduce_axis]

    def window_read(read) -> bool:
        """Its last index walks the output's last axis, and some index is output and tap
        together (o * stride + r: a window), unlike a column sum's x[i, r, j]."""
        return bool(read.indices) and uses_var(read.indices[-1], last) and any(
            any(uses_var(i, a) for a in axes) and any(uses_var(i, r) for r in raxes) for i in read.indices)
    reads = [n for e in op.body.source for n in walk(e) if isinstance(n, TensorRead)]
    return bool(reads) and all(window_read(n) for n in reads)


def is_window_group(group: Group) -> bool:
    """A window reduction alone, or a pointwise anchor computing window reductions read at
    its full coordinates (the prefix is its rank); the rows must be at least a few lanes long."""
    anchor = group.anchor
    last = static(_extent(anchor.op.axis[-1])) if anchor.op.axis else None
    if last is None or last < 4:
        return False
    if not group.attached:
        return is_window(anchor)
    return not isinstance(anchor.op.body, Reduce) and all(
        is_window(st) and group.prefix[st] == len(anchor.op.axis) for st in group.attached)


def _vectorize_row(stage, target) -> None:
    """The last axis split by the vector factor, the window loops outside the lanes."""
    *_, last = stage.op.axis
    v = vector_factor(_extent(last), lanes(target, stage))
    if v is None:
        return
    if static(_extent(last)) == v:
        outer, inner = None, last
    else:
        outer, inner = stage.split(last, factor=v)
    if stage.op.reduce_axis:
        stage.reorder(*([outer] if outer is not None else []), *stage.op.reduce_axis, inner)
        if (_product(_extent(r) for r in stage.op.reduce_axis) or UNROLL_TAPS + 1) <= UNROLL_TAPS:
            for r in stage.op.reduce_axis:      # straight-line taps: the row stays in registers between them
                stage.unroll(r)
    stage.vectorize(inner)


def schedule_window_cpu(s, group: Group, target) -> None:
    """Parallel rows, the window reductions computed per row, every row vectorized."""
    anchor = s[group.anchor]
    axes = list(anchor.op.axis)
    row = _fuse(anchor, axes[:-1])
    for st in group.attached:
        s[st].compute_at(anchor, row)
        _vectorize_row(s[st], target)
    _vectorize_row(anchor, target)
    anchor.parallel(row)


def schedule_rows_or_window_cpu(s, group: Group, target) -> None:
    """The CPU rule of a kernel with reductions at its rows (Backend.default_schedules'
    "rows"): pooling's window reductions as above, other reductions by schedule_rows_cpu."""
    if is_window_group(group):
        schedule_window_cpu(s, group, target)
    else:
        schedule_rows_cpu(s, group, target)
