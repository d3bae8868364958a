"""Default schedules of convolution kernels (fuse.Group.convs: a convolution's sum, with the
elementwise epilogue fusion put after it: bias, batch norm, ReLU/ReLU6, a residual add,
which may sum a second convolution: a ResNet block's downsampling shortcut).

On the CPU, three kernels:
- NCHWc (a kernel whose result is blocked [N, C / L, H, W, L]: an activation another dense
  convolution reads, layout.py): `_conv_nchwc_cpu`, register tiles of vecs blocks of L
  output channels by wt columns (nchwc_tile: as many accumulators as the register file
  holds), the reduction outermost with the L input channels of a block innermost (the
  input read as broadcasts of consecutive values), the tile written back as whole vectors;
  (batch, channel tile, output rows) run in parallel.
- blocked NCHW (dense convolutions whose weights are read in packed blocks [OC / L, ICg, *K, L],
  prepack.py): the NCHWc kernel of benchmarks/sl_kernels.py's conv2d_nchwc_schedule. Each
  sum accumulates in a local tile laid out [.., wt, L] (L output channels, a native vector
  of the target, innermost): per step of the reduction, wt broadcasts of input values,
  `vecs` vector loads of weights and wt * vecs FMAs into registers; the tile is then written
  back to NCHW through the epilogue, a row of wt columns per store. (batch, channel
  block, output rows) run in parallel.
- rows (a weight that is not a constant; depthwise and grouped ones are depthwise_schedules.py's,
  rows over a padded plane): each output row split in
  vectors along the width, the whole reduction inside, on a vector accumulator (the input
  read along the width, the weight broadcast).
On CUDA: one output per thread (its sums in registers, the epilogue after them), 256
threads a block.
"""
from __future__ import annotations

from typing import Optional, Tuple

from ..expr.functor import uses_var, walk
from ..expr.nodes import Binary
from ..target.target import Target
from ..tensor.op import TensorRead

MAX_TILE_VECTORS = 2      # vectors of output channels in a register tile (narrow vectors: AVX2)
TILE_WIDTH = 8            # output columns of a register tile with one vector of channels
TILE_WIDTH_2 = 6          # ... with two (12 accumulators of the 16 AVX2 registers)
MAX_UNROLL_TAPS = 7       # a kernel extent the row schedule unrolls


def schedule_conv_cpu(s, group, target: Target) -> None:
    """Schedule the convolution kernel group (group.convs not empty) for a CPU target."""
    if not all(_dense(s[c]) for c in group.convs):     # depthwise/grouped: over a padded local plane
        from .depthwise_schedules import schedule_grouped_conv_cpu
        return schedule_grouped_conv_cpu(s, group, target)
    if all(len(s[c].op.axis) == 5 for c in group.convs) and len(s[group.anchor].op.axis) == 5:
        return _conv_nchwc_cpu(s, group)          # blocked activations (layout.py)
    widths = {block_width(s[c]) if _dense(s[c]) else None for c in group.convs}
    width = widths.pop() if len(widths) == 1 else None
    if width is not None and width > 1:
        return _conv_blocked_cpu(s, group, width)
    return _conv_rows_cpu(s, group, target)


def block_width(conv) -> Optional[int]:
    """L when the convolution reads its weight as packed blocks w[oc // L, .., oc % L], else None."""
    from .schedules import static
    oc = conv.op.axis[1].var
    for node in walk(conv.op.body.source[0]):
        if isinstance(node, TensorRead):
            last = node.indices[-1]
            if isinstance(last, Binary) and last.op == "floormod" and last.a is oc:
                return static(last.b)
    return None


def _dense(conv) -> bool:
    """No read of the input depends on the output channel (groups == 1)."""
    oc, spatial = conv.op.axis[1].var, [a.var for a in conv.op.axis[2:4]]     # not NCHWc's lane
    for node in walk(conv.op.body.source[0]):
        if isinstance(node, TensorRead) and any(uses_var(i, v) for i in node.indices for v in spatial) \
                and any(uses_var(i, oc) for i in node.indices):
            return False
    return True


def _accumulators(s, group):
    """(the kernel's result stage, the sums): a convolution that is the kernel's result
    (nothing after it) accumulates in a local cache and becomes a copy of it."""
    if group.anchor is not group.convs[0]:
        return s[group.anchor], [s[c] for c in group.convs]
    conv = s[group.anchor]
    return conv, [s[s.cache_write(conv.op.output(0), "local")]]


def _conv_blocked_cpu(s, group, width: int) -> None:
    from .schedules import _fuse, static
    root = group.anchor is group.convs[0]
    caches = []
    for conv in [s[c] for c in group.convs]:
        n, oc, *spatial = conv.op.axis
        fo, fi = conv.split(oc, factor=width)
        conv.reorder(n, fo, *spatial, fi)           # the cache follows these loops: [n, OC / L, *sp, L]
        caches.append(s[s.cache_write(conv.op.output(0), "local")])
        if not root:
            conv.compute_inline()                   # the epilogue reads the cache
    out = s[group.anchor]
    n, oc, *spatial = out.op.axis
    channels, cols = static(oc.dom.extent), static(spatial[-1].dom.extent)
    vecs = MAX_TILE_VECTORS if width <= 8 and channels % (MAX_TILE_VECTORS * width) == 0 else 1
    wt = max(1, min(TILE_WIDTH if vecs == 1 else TILE_WIDTH_2, cols))
    co, ci = out.split(oc, factor=vecs * width)
    wo, wi = out.split(spatial[-1], factor=wt)
    out.reorder(n, co, *spatial[:-1], wo, ci, wi)   # written back a row of columns at a time
    for cache in caches:
        cache.compute_at(out, wo)
        cn, cfo, *csp, cfi = cache.op.axis
        cache.reorder(cn, *csp[:-1], *cache.op.reduce_axis, csp[-1], cfo, cfi)
        cache.unroll(csp[-1])
        cache.unroll(cfo)
        cache.vectorize(cfi)
    out.parallel(_fuse(out, [n, co] + spatial[:-1]))
    out.unroll(ci)
    out.vectorize(wi)


def nchwc_tile(blocks: int, cols: int, width: int) -> Tuple[int, int]:
    """(channel blocks, output columns) of a register tile of the blocked kernel: vecs * wt
    accumulators, vecs weight vectors and a broadcast within the register file (32 vector
    registers with 16-lane vectors: AVX-512; 16 otherwise), vecs dividing the blocks and wt
    the row's columns (a tail costs a second, guarded copy of the tile); the most FMAs per
    vector loaded (vecs * wt / (vecs + wt)), then the larger tile."""
    registers = 32 if width >= 16 else 16
    best = (0.0, 0, 1, 1)
    for vecs in (1, 2, 4):
        if blocks % vecs:
            continue
        most = (registers - 1 - vecs) // vecs
        for wt in range(1, min(most, cols) + 1):
            if cols % wt == 0:
                best = max(best, (vecs * wt / (vecs + wt), vecs * wt, vecs, wt))
    return best[2], best[3]


def _conv_nchwc_cpu(s, group) -> None:
    """The NCHWc kernel over blocked activations: out[n, cb, h, w, l] (layout.py), each sum
    in a local [vecs, wt, L] tile of registers computed at the loop over a row's columns
    (reduction outermost, then the tile's columns and channel blocks, unrolled, and the L
    channels of a vector innermost), written back as whole vectors of L channels."""
    from .schedules import _fuse, static
    root = group.anchor is group.convs[0]
    caches = []
    for conv in [s[c] for c in group.convs]:
        caches.append(s[s.cache_write(conv.op.output(0), "local")])
        if not root:
            conv.compute_inline()                   # the epilogue reads the cache
    out = s[group.anchor]
    n, cb, *spatial, lane = out.op.axis
    vecs, wt = nchwc_tile(static(cb.dom.extent), static(spatial[-1].dom.extent), static(lane.dom.extent))
    co, ci = out.split(cb, factor=vecs)
    wo, wi = out.split(spatial[-1], factor=wt)
    out.reorder(n, co, *spatial[:-1], wo, ci, wi, lane)
    for cache in caches:
        cache.compute_at(out, wo)
        cn, ccb, *csp, cl = cache.op.axis
        cache.reorder(cn, *csp[:-1], *cache.op.reduce_axis, csp[-1], ccb, cl)
        cache.unroll(csp[-1])
        cache.unroll(ccb)
        cache.vectorize(cl)
    out.parallel(_fuse(out, [n, co] + spatial[:-1]))
    out.unroll(ci)
    out.unroll(wi)
    out.vectorize(lane)


def _row_vector(cols: Optional[int], lanes_: int) -> Optional[int]:
    """Columns of one vectorized step along a row: the whole row when it fits one vectorized
    loop, else the widest divisor of it that is at least a native vector (no guarded tail),
    else two native vectors (schedules.vector_factor)."""
    from .schedules import MAX_VECTOR, vector_factor
    if cols is not None and 1 < cols <= MAX_VECTOR:
        return cols
    if cols is not None:
        for d in range(MAX_VECTOR, lanes_ - 1, -1):
            if cols % d == 0:
                return d
    return vector_factor(cols, lanes_)


def _conv_rows_cpu(s, group, target: Target) -> None:
    from .schedules import _fuse, _product, lanes, static, threads
    out, accs = _accumulators(s, group)
    n, oc, *spatial = out.op.axis
    last = spatial[-1]
    v = _row_vector(static(last.dom.extent), lanes(target, accs[0]))
    if v is not None and static(last.dom.extent) != v:
        wo, wi = out.split(last, factor=v)
    else:
        wo, wi = None, last
    planes = _product([n.dom.extent, oc.dom.extent])
    if spatial[:-1] and planes is not None and planes >= 4 * threads(target):
        # whole (batch, channel) planes a task: a task per row would cost more to hand out than it computes
        out.parallel(_fuse(out, [n, oc]))
        row = spatial[-2]
    else:
        row = _fuse(out, [n, oc] + spatial[:-1])
        out.parallel(row)
    for acc in accs:
        acc.compute_at(out, wo if wo is not None else row)
        *outer, col = acc.op.axis
        rc, *taps = acc.op.reduce_axis
        acc.reorder(*outer, rc, *taps, col)
        for tap in taps:                 # the kernel's taps: each a fixed shift, its padding guard known
            if (static(tap.dom.extent) or MAX_UNROLL_TAPS + 1) <= MAX_UNROLL_TAPS:
                acc.unroll(tap)
        if v is not None:
            acc.vectorize(col)
    if v is not None:
        out.vectorize(wi)


def schedule_conv_cuda(s, group, target: Target) -> None:
    """Schedule the convolution kernel group for CUDA: one output per thread."""
    from .schedules import CUDA_THREADS, _bind, _fuse, _product
    out, accs = _accumulators(s, group)
    axes = list(out.op.axis)
    total = _product(a.dom.extent for a in axes)
    block = CUDA_THREADS if total is None else max(1, min(CUDA_THREADS, total))
    bo, tx = out.split(_fuse(out, axes), factor=block)
    _bind(out, bo, "blockIdx.x")
    _bind(out, tx, "threadIdx.x")
    for acc in accs:
        acc.compute_at(out, tx)
