"""Default schedules of convolution kernels (fuse.Group.convs: a convolution's sum, with the
elementwise epilogue fusion put after it: bias, batch norm, ReLU/ReLU6, a residual add,
which may sum a second convolution: a ResNet block's downsampling shortcut).

On the CPU, three kernels:
- NCHWc (a kernel whose result is blocked [N, C / L, H, W, L]: an activation another dense
  convolution reads, layout.py): `_conv_nchwc_cpu`, register tiles of vecs blocks of L
  output channels by wt columns (nchwc_tile: as many accumulators as the register file
  holds), the reduction outermost with the L input channels of a block innermost (the
  input read as broadcasts of consecutive values), the tile written back as whole vectors;
  (batch, channel tile, output rows) run in parallel, rows before channel tiles where the
  input outweighs the weights (_input_outweighs_weights). A bfloat16 one of weights in pairs
  of input channels (ops/conv.reads_pairs) splits a block's input channels in pairs, each
  vector of L output channels by a pair one vdpbf16ps (_pair_dot, tensorized; the same
  tiles). Grouped
  convolutions of whole blocks a group (blocked_grouped: RegNet's) too, a tile's channel
  blocks within one group (tile_blocks): RegNetY-800MF (groups of 16) ran 44.8 -> 17.7 ms
  (Inductor 21.0; Zen 4, one thread), its grouped 3x3 layers before on NCHW rows (stride-2
  columns read through gathers) half the model's time.
- blocked NCHW (dense convolutions whose weights are read in packed blocks [OC / L, ICg, *K, L],
  prepack.py): the NCHWc kernel of benchmarks/sl_kernels.py's conv2d_nchwc_schedule. Each
  sum accumulates in a local tile laid out [.., wt, L] (L output channels, a native vector
  of the target, innermost): per step of the reduction, wt broadcasts of input values,
  `vecs` vector loads of weights and wt * vecs FMAs into registers; the tile is then written
  back to NCHW through the epilogue, a row of wt columns per store. (batch, channel
  block, output rows) run in parallel. A bfloat16 one whose weight is packed in pairs of
  input channels (ops/conv.reads_pairs) does a pair per step, each vector of L channels by
  both of them one vdpbf16ps (_pair_dot, tensorized).
- rows (a weight that is not a constant; depthwise and other grouped ones are depthwise_schedules.py's,
  rows over a padded plane): each output row split in
  vectors along the width, the whole reduction inside, on a vector accumulator (the input
  read along the width, the weight broadcast).
On CUDA: one output per thread (its sums in registers, the epilogue after them), 256
threads a block.
"""
from __future__ import annotations

import math
from typing import NamedTuple, Optional, Tuple

from ..expr.functor import uses_var, walk
from ..expr.nodes import Binary, Cast
from ..target.llvm.cpus import TWO_ZMM_FMA_CPUS, l2_bytes
from ..target.target import CACHE_LINE_BYTES, Target
from ..topi.x86_intrin import PAIR, bf16_dot_lanes, bf16_dot_widths, dot_bf16_intrin
from ..tensor.op import TensorRead

MAX_TILE_VECTORS = 2      # vectors of output channels in a register tile (narrow vectors: AVX2)
TILE_WIDTH = 8            # output columns of a register tile with one vector of channels
TILE_WIDTH_2 = 6          # ... with two (12 accumulators of the 16 AVX2 registers)
MAX_UNROLL_TAPS = 7       # a kernel extent the row schedule unrolls
# The register tile of a bfloat16 pair dot product (vdpbf16ps, _pair_dot): vectors of output
# channels by columns. Measured (1-d convolutions alone, 2-core Zen 4, 2 threads; ms for
# 1 x 8 / 2 x 8 / 2 x 6 / 2 x 4, eager's oneDNN beside): wav2vec2's 512 -> 512 3 taps stride 2
# over 3199: 9.9 / 7.1 / - / - (eager 6.5); 2 taps over 401: 1.18 / 0.74 / 0.95 / 1.25 (0.75);
# Whisper's 80 -> 384 over 3000: 3.48 / 2.75 / 3.42 / 5.45 (1.9); 384 -> 384 stride 2:
# 5.44 / 4.55 / 4.31 / 4.57 (3.6-4.3); 4 x 6 and 2 x 12 on the first: 11.8, 8.7-13.3.
PAIR_TILE = (2, 8)


def schedule_conv_cpu(s, group, target: Target, choice: Optional["NchwcChoice"] = None) -> None:
    """Schedule the convolution kernel group (group.convs not empty) for a CPU target; choice:
    the tile choices of an NCHWc kernel in place of nchwc_choice's (conv_variants.py), else
    ignored."""
    if group.pad is not None:                          # it writes the next convolution's padded input
        from .pad_schedules import schedule_padded_conv_cpu
        return schedule_padded_conv_cpu(s, group, target, choice)
    if not all(_dense(s[c]) or blocked_grouped(s[c]) or _packed_grouped(s[c]) for c in group.convs):
        from .depthwise_schedules import schedule_grouped_conv_cpu     # depthwise/other grouped: rows
        return schedule_grouped_conv_cpu(s, group, target)
    if all(len(s[c].op.axis) == 5 for c in group.convs) and len(s[group.anchor].op.axis) == 5:
        return _conv_nchwc_cpu(s, group, target, choice)  # blocked activations (layout.py)
    widths = {block_width(s[c]) if _dense(s[c]) or _packed_grouped(s[c]) else None for c in group.convs}
    width = widths.pop() if len(widths) == 1 else None
    if width is not None and width > 1:
        return _conv_blocked_cpu(s, group, width, target)
    return _conv_rows_cpu(s, group, target)


def block_width(conv) -> Optional[int]:
    """L when the convolution reads its weight as packed blocks w[oc // L, .., oc % L] (or
    w[0, .., oc] where OC is one block: simplify drops the division; or in pairs of input
    channels, w[oc // L, rc // 2, .., oc % L, rc % 2]: _pair_read), else None."""
    from .schedules import static
    oc = conv.op.axis[1]
    pair = _pair_read(conv)
    if pair is not None:
        return _pair_lanes(conv, pair)
    for node in walk(conv.op.body.source[0]):
        if isinstance(node, TensorRead):
            last = node.indices[-1]
            if isinstance(last, Binary) and last.op == "floormod" and last.a is oc.var:
                return static(last.b)
            if last is oc.var and len(node.indices) in (5, 7) and len(conv.op.axis) == 4 \
                    and static(node.tensor.shape[-1]) == static(oc.dom.extent):
                return static(oc.dom.extent)
    return None


def _pair_read(conv) -> Optional[TensorRead]:
    """The convolution's read of a weight packed in pairs of input channels (prepack.py
    "conv_pairs", ops/conv.reads_pairs): w[oc // L, rc // 2, *r, oc % L, rc % 2], rc its last
    reduce axis; over blocked activations (layout.py: out[n, cb, h, w, l], the reduction
    (rco, *r, rci)) w[cb, rco * L / 2 + rci // 2, *r, l, rci % 2]; or None."""
    from .schedules import static
    op = conv.op
    if not op.reduce_axis or len(op.axis) not in (3, 4, 5):
        return None
    oc, rc = op.axis[1].var, op.reduce_axis[-1].var
    lane = op.axis[-1].var if len(op.axis) == 5 else None
    for node in walk(op.body.source[0]):
        if isinstance(node, TensorRead) and len(node.indices) >= 4:
            *_, index, pair = node.indices
            if isinstance(pair, Binary) and pair.op == "floormod" and pair.a is rc and static(pair.b) == PAIR \
                    and (index is lane is not None
                         or isinstance(index, Binary) and index.op == "floormod" and index.a is oc):
                return node
    return None


def _pair_lanes(conv, read: TensorRead) -> Optional[int]:
    """The output channels of a block of the pair read (_pair_read): L of oc % L, or the
    extent of a blocked output's lane axis."""
    from .schedules import static
    index = read.indices[-2]
    return static(index.b) if isinstance(index, Binary) else static(conv.op.axis[-1].dom.extent)


def _pair_dot(s, conv, target: Target):
    """The bfloat16 pair dot product (topi/x86_intrin.dot_bf16_intrin) conv's register tile
    runs, or None: conv reads its weight in pairs (_pair_read) of the instruction's lanes and
    its input's bfloat16 pairs side by side (schedules.pairs_contiguous: ops/conv._padded's
    x[.., rc // 2, .., rc % 2], or a blocked input's x[.., rco, .., rci]), on a target that has
    it. Otherwise its plain loops compute the same sums."""
    from .schedules import pairs_contiguous, static
    read = _pair_read(conv)
    lanes_ = _pair_lanes(conv, read) if read is not None else None
    if lanes_ not in bf16_dot_widths(bf16_dot_lanes(target)) or static(conv.op.reduce_axis[-1].dom.extent) is None:
        return None
    rc = conv.op.reduce_axis[-1].var
    x = _product_reads(conv.op.body.source[0])
    if x is None or read not in x:
        return None
    (x,) = [r for r in x if r is not read]
    if str(x.tensor.dtype) != "bfloat16" or not pairs_contiguous(x.indices, rc):
        return None
    return dot_bf16_intrin(lanes_)


def _product_reads(e) -> Optional[Tuple[TensorRead, TensorRead]]:
    """(a, b) when e is a * b of two reads, each cast or not (the intrinsic's product, which
    tensorize matches), else None: an input read through a selection (a concatenation
    inlined into the convolution) is not that product."""
    if not (isinstance(e, Binary) and e.op == "mul"):
        return None
    reads = tuple(v.value if isinstance(v, Cast) else v for v in (e.a, e.b))
    return reads if all(isinstance(r, TensorRead) for r in reads) else None


def pair_dots(s, group, target: Target) -> Optional[list]:
    """Per convolution of the kernel group, the pair dot product its register tile runs
    (_pair_dot) or None; None when none does."""
    dots = [_pair_dot(s, s[c], target) for c in group.convs]
    return dots if any(d is not None for d in dots) else None


def _dense(conv) -> bool:
    """No read of the input depends on the output channel (groups == 1)."""
    oc, spatial = conv.op.axis[1].var, [a.var for a in conv.op.axis[2:4]]     # not NCHWc's lane
    for node in walk(conv.op.body.source[0]):
        if isinstance(node, TensorRead) and any(uses_var(i, v) for i in node.indices for v in spatial) \
                and any(uses_var(i, oc) for i in node.indices):
            return False
    return True


def blocked_grouped(conv) -> bool:
    """A grouped convolution over blocked activations whose input channels per group are
    whole blocks (layout.py): out[n, cb, h, w, l], its reduction (rco, rh, rw, rci) read as
    x[n, group's first block + rco, .., rci] (or, where its input stays NCHW, (rc, rh, rw) read
    as x[n, g * ICg + rc, ..]): the NCHWc kernel of dense ones computes it, each output block
    reading its own group's input channels. Not a depthwise one (one input channel a group)."""
    from .schedules import static
    op = conv.op
    if len(op.axis) != 5 or _dense(conv):
        return False
    red = op.reduce_axis
    return len(red) == 4 or (len(red) == 3 and (static(red[0].dom.extent) or 1) > 1)


def _packed_grouped(conv) -> bool:
    """A grouped convolution of packed weight blocks (ops/conv.block_width: whole vectors a
    group) with NCHW output (its output is not blocked: ResNeSt's radix convolutions, whose
    output is viewed 5-d; any 1-d one: wav2vec2's positional convolution, 16 groups of 48
    channels and 128 taps, ran the rows path at 6 GFLOP/s, copying its group's padded input
    for each output channel): the blocked NCHW kernel of dense ones computes it, each block
    of output channels reading its group's input channels as broadcasts. Not a depthwise one."""
    from .schedules import static
    op = conv.op
    return len(op.axis) in (3, 4) and not _dense(conv) and (block_width(conv) or 1) > 1 \
        and (static(op.reduce_axis[0].dom.extent) or 1) > 1


def group_blocks(conv, blocks: int) -> int:
    """The output channel blocks (of blocks) that read one group's input: a register tile of
    a grouped convolution takes a divisor of them, so its blocks share their broadcast input
    values (1 where the group is one block: each block reads inputs of its own); blocks for
    a dense convolution."""
    from .schedules import static
    if not blocked_grouped(conv):
        return blocks
    cb, rco = conv.op.axis[1].var, conv.op.reduce_axis[0].var
    for node in walk(conv.op.body.source[0]):
        if isinstance(node, TensorRead) and len(node.indices) == 5 and uses_var(node.indices[1], rco):
            index = node.indices[1]
            divs = [e for e in walk(index) if isinstance(e, Binary) and e.op == "floordiv" and e.a is cb]
            if divs:
                return math.gcd(blocks, static(divs[0].b) or 1)
            return 1 if uses_var(index, cb) else blocks
    return 1


def tile_blocks(s, group, blocks: int) -> int:
    """The channel blocks a register tile of the kernel may divide: blocks, or for grouped
    convolutions the blocks of one group (group_blocks)."""
    for c in group.convs:
        blocks = math.gcd(blocks, group_blocks(s[c], blocks))
    return blocks


def _accumulators(s, group):
    """(the kernel's result stage, the sums): a convolution that is the kernel's result
    (nothing after it) accumulates in a local cache and becomes a copy of it."""
    if group.anchor is not group.convs[0]:
        return s[group.anchor], [s[c] for c in group.convs]
    conv = s[group.anchor]
    return conv, [s[s.cache_write(conv.op.output(0), "local")]]


def _conv_blocked_cpu(s, group, width: int, target: Target) -> None:
    from .schedules import static
    dots = pair_dots(s, group, target)

    def split_channels(conv):
        n, oc, *spatial = conv.op.axis
        fo, fi = conv.split(oc, factor=width)
        conv.reorder(n, fo, *spatial, fi)           # the cache follows these loops: [n, OC / L, *sp, L]
    caches = _local_sums(s, group, split_channels)
    out = s[group.anchor]
    n, oc, *spatial = out.op.axis
    channels, cols = static(oc.dom.extent), static(spatial[-1].dom.extent)
    vecs = MAX_TILE_VECTORS if width <= 8 and channels % (MAX_TILE_VECTORS * width) == 0 else 1
    wt = max(1, min(TILE_WIDTH if vecs == 1 else TILE_WIDTH_2, cols))
    if dots is not None and channels % (PAIR_TILE[0] * width) == 0:
        vecs, wt = PAIR_TILE[0], max(1, min(PAIR_TILE[1], cols))
    co, ci = out.split(oc, factor=vecs * width)
    wo, wi = out.split(spatial[-1], factor=wt)
    out.reorder(n, co, *spatial[:-1], wo, ci, wi)   # written back a row of columns at a time
    _register_tile(out, caches, [n, co] + spatial[:-1], wo, ci, vecs, wt, dots=dots)
    out.vectorize(wi)


def nchwc_tile(target: Target, blocks: int, cols: int, width: int, taps: bool = False,
               max_vecs: int = 4, sums_first: bool = False) -> Tuple[int, int]:
    """(channel blocks, output columns) of a register tile of the blocked kernels: vecs * wt
    accumulators beside vecs weight vectors and one register for the broadcast input value
    within the target's register file (Target.native_registers); vecs dividing the blocks
    and wt the row's columns (a tail would cost a second, guarded copy of the tile).

    32 registers (AVX-512): the most FMAs per vector loaded (_loads_score): 4 x 7 with no
    register to spare lost 0.66-0.93x to 4 x 4 and 2 x 7 (Zen 5, one thread, CPU time);
    with sums_first the most accumulators (_sums_score: a 3x3 on two 512-bit FMA pipes).
    16 registers (AVX2, no broadcast operand of an FMA, so the broadcast needs a register of
    its own): for a kernel of convolutions with taps (taps: 3x3, its input channels outside
    a row of tiles, _input_channels_outside) the most FMAs per load too, 4 x 2 on ResNet's
    rows of 56, 28 and 14 (1 x 7 on rows of 7): 8 FMAs per 4 weight vectors and 2
    broadcasts where 1 x 14 loaded 15 values for 14; with the input channels outside, ResNet's
    3x3 layers at 56x56 to 14x14 gained 1.18-1.31x, at 7x7 0.99-1.02x (Zen 3, one thread,
    CPU time, loaded; benchmarks/results-conv-zen3-avx2.txt). Other kernels (1x1) on 16
    registers: _pointwise_tile. At most max_vecs channel blocks (_l2_blocks)."""
    registers = target.native_registers()
    if registers < 32 and not taps:
        return _pointwise_tile(registers, blocks, cols)
    score = _sums_score if sums_first else _loads_score
    vecs, wt = _best_tile(registers, blocks, cols, score, max_vecs)
    if vecs * wt < MIN_TILE_SUMS and wt < cols:
        return _guarded_tile(registers, blocks, cols, max_vecs)
    return vecs, wt


MIN_TILE_SUMS = 8     # fewer accumulators than this: a tile with a guarded last column tile instead


def _guarded_tile(registers: int, blocks: int, cols: int, max_vecs: int) -> Tuple[int, int]:
    """A 32-register tile for rows whose divisors give no tile of MIN_TILE_SUMS sums (91
    channel blocks by rows of 37, legacy Xception's: 1 x 1, one FMA per two loads): the most
    channel blocks dividing blocks, by the fewest columns that cover the row in as few tiles
    as the widest tile that fits would (37: 19 + 18), the last tile guarded (_tail_tile's
    rule, on 16 registers). The 1x1 728->728 at 37x37 ran 5.8x faster (Zen 4, one thread)."""
    vecs = max(v for v in (1, 2, 4) if blocks % v == 0 and v <= max(1, max_vecs))
    most = (registers - 1 - vecs) // vecs
    tiles = -(-cols // most)
    return vecs, -(-cols // tiles)


POINTWISE_TILE = (4, 2)   # AVX2 1x1 register tile: 4 channel blocks x 2 columns (_pointwise_tile)
WIDE_POINTWISE_TILE = (2, 4)    # ... on rows of a multiple of 4 columns: 2 channel blocks x 4 columns
WIDE_TILE_MIN_BLOCKS = 16       # the fewest channel blocks that take it


def _pointwise_tile(registers: int, blocks: int, cols: int) -> Tuple[int, int]:
    """nchwc_tile of a kernel without taps outside (1x1 convolutions over blocked inputs; a
    stem over the NCHW input too: _input_channels_outside) on a 16-register target:
    WIDE_POINTWISE_TILE where the row is a multiple of 4 columns and the channel blocks an
    even number of WIDE_TILE_MIN_BLOCKS or more, else POINTWISE_TILE (8 FMAs per 4 weight
    vectors and 2 broadcasts) where the blocks are a multiple of 4 and the row has 2 columns,
    an odd row (7) ending in a one-column tile; else (not measured since) the former tile,
    _narrow_score's. That former 1 x 14 (1 x 7 on two rows at 7x7) ran 1.19-1.35x prepacked
    oneDNN on every 1x1 layer of ResNet-50, 4 x 2 0.98-1.2x; 2 x 6 (15 registers) and 2 x 4
    were no faster than 4 x 2, and 4 x 2 on rows of 7 beat 1 x 7 on two rows by 1.2x;
    ResNet-50's 7x7 stem 0.82x (Zen 1, one thread, CPU time, loaded; benchmarks/conv_layer_ab.py,
    benchmarks/results-conv-zen1-avx2.txt). On Zen 3 (two 256-bit FMA pipes: the 8 sums of
    either tile just cover 2 pipes x 4 cycles of latency, so what a step loads decides) 2 x 4
    (2 weight vectors and 4 broadcasts from one 128-byte stretch of the input row a step:
    half the weight bytes a channel tile streams) ran 0.75-0.96x 4 x 2's time on ResNet-50's
    1x1 layers at 56x56 and 28x28 (the 64->256 pair with its shortcut 0.96-1.02x); with 8
    channel blocks (256->64 at 56x56: 4 channel tiles where 4 x 2 has 2, each a pass over the
    3.2 MB input) 1.02-1.24x, hence WIDE_TILE_MIN_BLOCKS (Zen 3, one thread, CPU time, loaded,
    2-3 runs; benchmarks/results-conv-zen3-avx2.txt). Zen 1 found the two tiles equal (above)."""
    if blocks % 2 == 0 and blocks >= WIDE_TILE_MIN_BLOCKS and cols % WIDE_POINTWISE_TILE[1] == 0:
        return WIDE_POINTWISE_TILE
    vecs, wt = POINTWISE_TILE
    if blocks % vecs == 0 and cols >= wt:
        return vecs, wt
    return _best_tile(registers, blocks, cols, _narrow_score)


def _loads_score(vecs: int, wt: int) -> Tuple[float, int]:
    """nchwc_tile's order by FMAs per value loaded (vecs weight vectors and wt broadcasts for
    vecs * wt FMAs), then the larger tile; ties to the more channel blocks (_best_tile)."""
    return vecs * wt / (vecs + wt), vecs * wt


def _sums_score(vecs: int, wt: int) -> Tuple[int, Tuple[bool, int]]:
    """nchwc_tile's order on TWO_ZMM_FMA_CPUS (whose 2 x 4 cycles of FMA latency want more sums
    in flight than a tile scored by its loads keeps) for a kernel of one convolution with taps
    (_one_conv_with_taps): the most accumulators, then two channel blocks (one broadcast feeds
    two FMAs), then the more blocks. Measured (benchmarks/conv_variants.py, a 2-core Intel Xeon
    Emerald Rapids, one thread, CPU time): ResNet-50's 3x3 64->64 at 56x56 and 128->128 at
    28x28 ran 1.26-1.27x faster as 2 x 14 (28 sums) than as _loads_score's 4 x 4, its 3x3
    512->512 at 7x7 1.39x as 2 x 7 than 1 x 7; but its 1x1 layers 0.7-1.0x, and two 1x1 in one
    kernel (a fused shortcut) 0.43x."""
    return vecs * wt, (vecs == 2, vecs)


def _narrow_score(vecs: int, wt: int) -> Tuple[int, int]:
    """_pointwise_tile's order where 4 x 2 does not apply: the tile of the most accumulators,
    then the fewest weight vectors. The former 2 x 7 (17 registers live) spilled an
    accumulator and shuffled the others each step (Zen 3, one thread, CPU time)."""
    return vecs * wt, -vecs


def _best_tile(registers: int, blocks: int, cols: int, score, max_vecs: int = 4) -> Tuple[int, int]:
    """(vecs, wt) of the tiles that fit registers (vecs * wt accumulators, vecs weight
    vectors and the broadcast), vecs in 1, 2, 4 (at most max_vecs) dividing blocks and wt
    dividing cols, with the highest score(vecs, wt), ties to the larger (vecs, wt); (1, 1)
    where none fits."""
    best = (0, 0, 1, 1)
    for vecs in (1, 2, 4):
        if blocks % vecs or vecs > max(1, max_vecs):
            continue
        most = (registers - 1 - vecs) // vecs
        for wt in range(1, min(most, cols) + 1):
            if cols % wt == 0:
                best = max(best, (*score(vecs, wt), vecs, wt))
    return best[2], best[3]


def _conv_nchwc_cpu(s, group, target: Target, choice: Optional["NchwcChoice"] = None) -> None:
    """The NCHWc kernel over blocked activations: out[n, cb, h, w, l] (layout.py), each sum
    in a local [vecs, rt, wt, L] tile of registers computed at the loop over a row's columns
    (reduction outermost, then the tile's rows, columns and channel blocks, unrolled, and the
    L channels of a vector innermost), written back as whole vectors of L channels. On
    16-register targets a 1x1 convolution's tile is computed for a group of channel tiles
    at once, its reduction split in chunks outside them (_pointwise_blocks); a kernel of
    convolutions with taps (3x3) computes its tiles for a row of them at once, its input
    channel blocks outside the row's column tiles (_input_channels_outside), and so does a
    kernel of 1x1s with long reductions, in chunks of input channel blocks (_row_chunk); a
    kernel of 1x1s over a small plane computes a channel tile's whole plane at once, each
    input channel block outside its rows (_pointwise_blocked)."""
    from .schedules import static
    out = s[group.anchor]
    n, cb, *spatial, lane = out.op.axis
    choice = choice or nchwc_choice(
        target, s, group, static(cb.dom.extent), static(spatial[-1].dom.extent),
        [static(a.dom.extent) for a in spatial[:-1]], static(lane.dom.extent))
    vecs, wt, rt, pointwise, outweighs, channels_outside = choice[:6]
    dots = pair_dots(s, group, target)
    caches = _local_sums(s, group)
    co, ci = out.split(cb, factor=vecs)
    wo, wi = out.split(spatial[-1], factor=wt)
    outer_rows, hi = spatial[:-1], []
    if rt > 1:
        ho, h = out.split(spatial[-2], factor=rt)
        outer_rows, hi = spatial[:-2] + [ho], [h]
    if pointwise is not None:
        cg, co = out.split(co, factor=pointwise[0])
        tasks, tile = [n, cg, *outer_rows], [co]
    elif choice.plane:
        tasks, tile = [n, co], list(outer_rows)     # the rows inside a task: its weights read once
    elif outweighs:
        tasks, tile = [n, *outer_rows, co], []      # a row of the input read once for all the channel tiles
    else:
        tasks, tile = [n, co, *outer_rows], []
    if choice.plane:
        out.reorder(*tasks, *tile, wo, *hi, ci, wi, lane)
    else:
        out.reorder(*tasks, wo, *tile, *hi, ci, wi, lane)
    _register_tile(out, caches, tasks, wo, ci, vecs, wt, rt, None if pointwise is None else pointwise[1],
                   channels_outside, choice.plane, choice.blocks_outer, choice.row_chunk, block_dots=dots)
    out.unroll(wi)
    for h in hi:
        out.unroll(h)
    out.vectorize(lane)


class NchwcChoice(NamedTuple):
    """The tile choices of a kernel of NCHWc convolutions (nchwc_choice)."""

    vecs: int                 # channel blocks of the register tile (nchwc_tile)
    wt: int                   # its columns
    rt: int                   # its rows (row_tile)
    pointwise: Optional[Tuple[int, list]]   # 1x1 reduction chunks (_pointwise_blocks), or None
    rows_outer: bool          # output rows outside the channel tiles (_input_outweighs_weights)
    channels_outside: bool    # input channel blocks outside a row of tiles (_input_channels_outside)
    plane: bool = False       # with channels_outside: a task a channel tile's whole plane, the input
                              # channel blocks outside its rows too (_short_odd_rows)
    blocks_outer: bool = False  # the tile's channel blocks outside its rows and columns (_short_odd_rows)
    row_chunk: int = 1        # with channels_outside: input channel blocks a step outside the row's tiles
                              # (_row_chunk: 1x1 convolutions of long reductions)


def nchwc_choice(target: Target, s, group, blocks: int, cols: int, rows: list, width: int,
                 row_tiles: bool = True) -> NchwcChoice:
    """The tile of the kernel group's NCHWc result of blocks channel blocks of width lanes,
    rows (the extents of the spatial axes before the last) by cols: the choices of
    _conv_nchwc_cpu and of the kernels writing a padded result (pad_schedules.py; with
    row_tiles False, one row a tile). Called before _local_sums: it reads group.convs,
    which caching inlines."""
    outside = _input_channels_outside(target, s, group)
    outweighs = _input_outweighs_weights(s, group)
    tileable = tile_blocks(s, group, blocks)       # (grouped: a tile's blocks within one group)
    if outside and _short_odd_rows(tileable, cols):
        vecs, wt = SHORT_ROW_TILE
        plane = _plane_task(target, blocks // vecs, rows, cols)
        return NchwcChoice(vecs, wt, 1, None, outweighs, outside, plane=plane, blocks_outer=True)
    sums_first = target.options.cpu in TWO_ZMM_FMA_CPUS and _one_conv_with_taps(s, group)
    vecs, wt = nchwc_tile(target, tileable, cols, width, taps=outside, max_vecs=_l2_blocks(target, s, group, width),
                          sums_first=sums_first)
    rt = row_tile(target, rows[-1] if rows else 1, vecs, wt) if row_tiles else 1
    pointwise = _pointwise_blocks(target, s, group, blocks // vecs) if rt == 1 else None
    blocked_1x1 = not outside and _pointwise_blocked(target, s, group)
    tail = _tail_tile(target.native_registers(), tileable, cols) if blocked_1x1 and len(group.convs) == 1 else None
    if tail is not None and (_plane_task(target, blocks // tail[0], rows, cols)
                             or (pointwise is None and _row_chunk(target, s, group) == 1)):
        vecs, wt = tail                   # (a whole plane, or a reduction in one pass: _tail_tile)
        rt = row_tile(target, rows[-1] if rows else 1, vecs, wt) if row_tiles else 1
    if blocked_1x1 and _plane_task(target, blocks // vecs, rows, cols):
        return NchwcChoice(vecs, wt, rt, None, outweighs, True, plane=True)    # (_pointwise_blocked says why)
    chunk = _row_chunk(target, s, group) if not outside else 1
    if chunk > 1:
        return NchwcChoice(vecs, wt, rt, None, outweighs, True, row_chunk=chunk)
    return NchwcChoice(vecs, wt, rt, pointwise, outweighs, outside)


TILE_WEIGHTS_L2_SHARE = 2     # a register tile's channel blocks keep their weights in 1/2 of the L2 (_l2_blocks)


def _l2_blocks(target: Target, s, group, width: int) -> int:
    """The most channel blocks of a register tile on a 32-register target: as many as keep
    the weights they read (of all the kernel's convolutions) within 1 / TILE_WEIGHTS_L2_SHARE
    of the CPU's L2 (cpus.l2_bytes). A tile of one output row reads its channel blocks' whole
    weights once per row, and the next row's tile reads them again: from L2 while they fit.
    On a Zen 4 (1 MB L2: 512 KB), ResNet-50's 3x3 512->512 at 7x7 (a 2 x 7 tile: 590 KB of
    weights) ran 1.07-1.24x faster as 1 x 7 (295 KB; two runs), ResNet-18's layers of that
    shape 0.92-1.06x (mixed: their epilogues differ); the 14x14 3x3 layers' 2 x 14 (295 KB) are
    the best of their variants (one thread, CPU time; benchmarks/conv_variants.py,
    results-conv-zen4-avx512.txt). On an Emerald Rapids Xeon (2 MB L2: 1 MB) the same 7x7
    layers ran 0.78-0.80x the time as 2 x 7 (one thread, conv_layer_ab.py), whole ResNet-50
    0.965x and ResNet-18 0.924x (two threads, paired). 16-register targets: 4 (their tiles are
    _pointwise_tile's and the taps kernels' measured ones)."""
    from .schedules import static
    if target.native_registers() < 32:
        return 4
    block_bytes = 0                     # one channel block's weights, over every convolution
    for conv in group.convs:
        op = s[conv].op
        size = width * op.output_dtype(0).bits // 8
        for r in op.reduce_axis:
            extent = static(r.dom.extent)
            if extent is None:
                return 4
            size *= extent
        block_bytes += size
    return max(1, l2_bytes(target.options.cpu) // TILE_WEIGHTS_L2_SHARE // max(1, block_bytes))


def _tail_tile(registers: int, blocks: int, cols: int) -> Optional[Tuple[int, int]]:
    """The register tile (16 registers) of a kernel of one 1x1 convolution over a blocked
    input whose reduction runs in one pass per column tile (no _row_chunk chunks; or a
    whole-plane task) over rows that WIDE_POINTWISE_TILE does not divide (cols not a
    multiple of 4, more than 4; ResNet-50's 14 and 7): 2 channel blocks by the fewest
    columns that cover the row in as few tiles as the widest 2-block tile that fits the
    registers would (16: 2 x 6 beside 2 weight vectors and a broadcast; rows of 14: 5 + 5 +
    4, of 7: 4 + 3), the last tile guarded; None for other shapes (blocks odd or under
    WIDE_TILE_MIN_BLOCKS: _pointwise_tile's). POINTWISE_TILE's 8 accumulators just cover Zen
    3's 2 FMA pipes x 4 cycles of latency, loading 4 weight vectors a step; 2 x 5 has 10
    and loads 2. ResNet-50's 1x1 256->1024 at 14x14 with its residual ran 1.07-1.23x faster
    with 2 x 5 (2 x 4 1.11x, 2 x 6 1.12x), the whole-plane 7x7 512->2048 with its residual
    1.10-1.11x, 2048->512 1.0-1.02x with 2 x 4 (Zen 3, one thread, CPU time, loaded;
    benchmarks/results-conv-zen3-avx2.txt). Kept out: reductions chunked outside the row's
    tiles (the guarded tail inside the chunk keeps LLVM from holding the tile in registers:
    0.4-0.9x) and the 7x7 kernel summing a strided 1x1 shortcut (1.03-1.17x slower)."""
    vecs, width = WIDE_POINTWISE_TILE
    if blocks % vecs or blocks < WIDE_TILE_MIN_BLOCKS or cols % width == 0 or cols <= width:
        return None
    tiles = -(-cols // ((registers - 1 - vecs) // vecs))
    return vecs, -(-cols // tiles)


def _plane_task(target: Target, tiles: int, rows: list, cols: int) -> bool:
    """A task of a kernel whose input channel blocks go outside its register tiles may be a
    channel tile's whole plane: the plane is small (MAX_PLANE_PIXELS) and there are two channel
    tiles (tiles) a worker thread at least."""
    from .schedules import _product, threads
    pixels = _product(rows)
    return pixels is not None and pixels * cols <= MAX_PLANE_PIXELS and tiles >= 2 * threads(target)


ROW_CHUNK = 8             # input channel blocks of a 1x1 reduction step outside a row's tiles (_row_chunk)
ROW_CHUNK_MIN = 32        # the fewest input channel blocks (all the kernel's reductions) chunked so
ROW_CHUNK_MIN_WEIGHTS = 96   # ... where the kernel's weights outweigh its inputs


def _row_chunk(target: Target, s, group) -> int:
    """Input channel blocks of a reduction step outside a row's column tiles (channels_outside
    with this chunk) for a kernel of 1x1 convolutions over blocked inputs on a 16-register
    target whose reductions span ROW_CHUNK_MIN blocks or more together (ROW_CHUNK_MIN_WEIGHTS
    where the weights outweigh the inputs); 1 for other kernels. Without it each column tile
    runs the whole reduction: its channel tile's weights (1024 input channels x 4 blocks of
    8: 128 KB) stream from L2 once per tile of 2 columns, 128 bytes per 8 FMAs (with
    _pointwise_blocks' chunks, a group of channel tiles' weights per chunk). With ROW_CHUNK
    blocks (128 channels: 16 KB of weights) a step, the chunk's weights stay in L1 while every
    tile of the row reads them, the row's sums kept in a local row between chunks. ResNet-50's
    1x1 1024->256 at 14x14 ran 0.76-0.81x main's time, 1024->512 14x14 with a padded result
    0.92-0.95x, 512->128 at 28x28 0.80x, 512->256 28x28 padded 0.86x, 256->128 56x56 padded
    0.88x, the strided shortcut kernels 0.86x (14x14), 0.90x (7x7), 0.96x (28x28); single 1x1s
    of 32 and 64 blocks whose weights are the larger (256->1024 at 14x14, 512->2048 at 7x7: a
    tile's whole reduction of weights, 32-64 KB, nearly fits L1) 1.04x slower, hence
    ROW_CHUNK_MIN_WEIGHTS (Zen 1, one thread, CPU time, loaded; results-conv1x1-zen1-avx2.txt).
    ROW_CHUNK was 16 blocks there; on a Zen 3 chunks of 8 (a step's weights and input strip,
    12 KB at 14x14 with 4 x 2 tiles where 16 blocks took 23 KB of the 32 KB L1) ran 1.01-1.11x
    faster on every chunked ResNet-50 kernel (1024->256 14x14 1.09x, 256->64 56x56 1.11x,
    the 14x14 and 28x28 shortcut pairs 1.05-1.08x), 4 blocks about as 8 (one thread, CPU time,
    loaded; benchmarks/results-conv-zen3-avx2.txt). The chunk: the largest divisor of the
    reductions' blocks up to ROW_CHUNK, or up to 2 * ROW_CHUNK where that is under half of
    ROW_CHUNK (99 blocks: 11, not 3)."""
    from .schedules import static
    if target.native_registers() >= 32:
        return 1
    extents = []
    for conv in group.convs:
        red = s[conv].op.reduce_axis
        extent = static(red[0].dom.extent) if len(red) == 4 else None
        if extent is None or any(static(t.dom.extent) != 1 for t in red[1:3]):
            return 1           # not 1x1, or its input not blocked (rco, rh, rw, rci)
        extents.append(extent)
    if sum(extents) < (ROW_CHUNK_MIN if _input_outweighs_weights(s, group) else ROW_CHUNK_MIN_WEIGHTS):
        return 1
    blocks = math.gcd(*extents)
    chunk = _divisor(blocks, ROW_CHUNK)
    return chunk if 2 * chunk >= ROW_CHUNK else _divisor(blocks, 2 * ROW_CHUNK)


def _pointwise_blocked(target: Target, s, group) -> bool:
    """On a 16-register target, a kernel of 1x1 convolutions over blocked inputs (reductions
    rco, rh, rw, rci, the taps of extent 1). Where its plane is small (_plane_task: ResNet-50's
    7x7 maps) nchwc_choice makes its task a channel tile's whole plane, each block of input
    channels outside the plane's rows and column tiles (plane, channels_outside: the sums,
    4 blocks x 49 pixels x 8 floats, stay in L1): each weight is read once per call, not once
    per row (or once per column tile: a 512->2048's 4 MB of weights). ResNet-50's 2048->512
    at 7x7 (chunked before: _row_chunk) ran 0.74-0.91x main's time, the 512->2048 with the
    strided shortcut summed 0.86-0.91x, a 512->2048 alone 0.73-0.99x, now 0.83-1.02x prepacked
    oneDNN (1.0-1.3x before; Zen 3, one thread, CPU time, loaded, three runs;
    benchmarks/results-conv-zen3-avx2.txt). Not measured on Zen 1, where the 3x3's whole-plane
    task gained (_short_odd_rows): the weights it saves reading are the same bytes there."""
    from .schedules import static
    if target.native_registers() >= 32:
        return False
    for conv in group.convs:
        red = s[conv].op.reduce_axis
        if len(red) != 4 or any(static(r.dom.extent) is None for r in red) \
                or any(static(t.dom.extent) != 1 for t in red[1:3]):
            return False       # not 1x1, or its input not blocked (rco, rh, rw, rci)
    return True


SHORT_ROW_TILE = (4, 3)   # AVX2 tile of a 3x3 over short odd rows: 4 channel blocks x 3 columns (_short_odd_rows)
MAX_SHORT_ROW = 7         # the longest such row
MAX_PLANE_PIXELS = 64     # a whole-plane task's pixels (its sums: 4 blocks x 64 x 8 floats, 8 KiB of L1)


def _short_odd_rows(blocks: int, cols: int) -> bool:
    """A kernel of convolutions with taps whose input channels go outside a row of tiles
    (_input_channels_outside: 16-register targets only) over rows of an odd 3..MAX_SHORT_ROW
    columns, its channel blocks a multiple of 4: SHORT_ROW_TILE, 12 accumulators beside 3
    broadcasts and one weight vector at a time (the tile's channel blocks outside its
    columns, blocks_outer: as oneDNN's AVX2 direct convolution; with the blocks inside, LLVM
    kept 4 weight vectors live and spilled), the row ending in a one-column tail; where the
    plane is small (MAX_PLANE_PIXELS) a task is a channel tile's whole plane, each block of
    input channels outside its rows (plane, padded kernels too: each weight read once per
    call, not once per row: ResNet's 3x3 512->512 at 7x7 reads 9.4 MB of weights, more than
    Zen 1's L3 slice). ResNet-50's 3x3 512->512 at 7x7 (and /2) ran 0.84-0.88x main's 1 x 7
    x 2-row tile's time, ResNet-18's padded ones 0.81-0.87x (the plane 0.95x of one row a
    task); 4 x 3 on rows of 14 lost 1.3x to 4 x 2 (Zen 1, one thread, CPU time, loaded;
    benchmarks/results-conv-zen1-avx2.txt)."""
    return blocks % SHORT_ROW_TILE[0] == 0 and cols % 2 == 1 and 3 <= cols <= MAX_SHORT_ROW


WEIGHT_TILE_BLOCKS = 4    # the tile blocks weight_blocks packs side by side (the ones measured)


def weight_blocks(target: Target, weight_shape: tuple, cols: int, width: int) -> int:
    """Channel blocks of width the lowering packs side by side in a dense convolution's
    weight [OC, IC, *K] for an output row of cols columns, with its input channels in
    blocks of width (prepack.py "conv_tiles": [OC / (B * width), IC / width, *K, width, B,
    width]); 0 where the weight stays "conv" ([OC / width, IC, *K, width]: a 1x1 one, whose
    input channels are contiguous there already, or IC or OC not multiples of width).

    The kernel's reduction runs input channel blocks, then taps, then a block's channels
    (_input_channels_outside), so "conv" made it read a block's weight vectors IC * taps
    apart, 16 streams 576 bytes apart for a 3x3 on AVX-512; "conv_tiles" reads them in that
    order, one contiguous stream. It mattered where the weight comes from memory: ResNet-18's
    7x7 layers (9.4 MB of weight, 2 ms of work) ran 1.46-1.50x their warm-cache time with a
    cold cache, 1.13-1.15x with one stream; the whole model 34.6 -> 33.3 ms (Zen 4, one
    thread). B is the register tile's channel blocks on a 16-register target where the tile
    nchwc_choice will take for a kernel with taps is WEIGHT_TILE_BLOCKS (4 x 2,
    SHORT_ROW_TILE: a tile's vectors for one input channel 128 contiguous bytes; ResNet-50's
    3x3 layers ran 0.90-0.95x (7x7), 0.98x (14x14), 0.95-0.98x (56x56) the single blocks'
    time, 28x28 0.91-1.1x: Zen 1, one thread, CPU time, loaded; benchmarks/conv_layer_ab.py
    --blocks-ab), else 1. It assumes what the schedule will find: an input blocked by width
    (layout.py) and taps outside a block's channels."""
    oc, ic, *kernel = weight_shape
    if ic % width or oc % width or max(kernel, default=1) == 1:
        return 0
    if target.native_registers() >= 32:
        return 1
    blocks = oc // width
    vecs = SHORT_ROW_TILE[0] if _short_odd_rows(blocks, cols) else nchwc_tile(target, blocks, cols, width, taps=True)[0]
    return vecs if vecs == WEIGHT_TILE_BLOCKS else 1


def row_tile(target: Target, rows: int, vecs: int, wt: int) -> int:
    """Output rows of the NCHWc register tile: on a 16-register target (AVX2), as many rows
    of the vecs x wt tile as the register file holds beside the weight vectors and the
    broadcast, at most the map's rows (2 on ResNet's 7x7 maps: 14 accumulators where a row
    of 7 had 7; 1x1 512->2048 and 3x3 512->512 at 7x7 gained 1.1-1.25x, Zen 3, one thread,
    CPU time); 1 on 32-register targets (their tiles are unchanged)."""
    registers = target.native_registers()
    if registers >= 32:
        return 1
    return max(1, min(rows, (registers - 1 - vecs) // (vecs * wt)))


POINTWISE_GROUP = 8       # channel tiles of a 1x1 convolution's reduction chunk (_pointwise_blocks)
POINTWISE_CHUNK = 16      # input channel blocks of one chunk


def _pointwise_blocks(target: Target, s, group, tiles: int) -> Optional[Tuple[int, list]]:
    """(channel tiles, [input channel blocks per convolution]) of the reduction chunks of a
    kernel of 1x1 convolutions over blocked inputs on a 16-register target, None for other
    kernels. A 1x1 convolution reads each input value once per channel tile: with one tile
    at a time, the input strip of a whole reduction (1024 channels x 14 columns: 57 KB) left
    L1 before the next tile read it. In chunks of POINTWISE_CHUNK blocks of input channels,
    each chunk's strip stays in L1 while the register tiles of POINTWISE_GROUP channel tiles
    read it (their sums kept in a small local tile between chunks); 1.1-1.3x on ResNet-50's
    1x1 layers with 1 x 14 tiles (Zen 3, one thread, CPU time). With the 4 x 2 tiles of
    _pointwise_tile, chunks only where the kernel sums two convolutions (a strided shortcut at
    7x7: 1.1-1.2x); a single 1x1 whose weights are the larger (14x14, 7x7) ran 1.05-1.13x
    slower in chunks (Zen 1, one thread, CPU time, loaded), and one whose input outweighs
    them (gained 1.07-1.15x at ResNet-50's 56x56 and 28x28 before _row_chunk took its
    reductions of 256 channels and more) is left only MobileNetV2's projections of 144 and 192
    channels to 24-32, a group of 1-3 channel tiles sharing a chunk's input strip: they ran
    1.42-1.44x faster in one pass (Zen 3, one thread, CPU time, loaded;
    benchmarks/results-mobilenet-cpu-zen3-avx2.txt). nchwc_choice gives the kernels of long
    reductions _row_chunk's chunks outside a row of tiles instead."""
    from .schedules import static
    if target.native_registers() >= 32 or len(group.convs) == 1:
        return None
    chunks, extents = [], []
    for conv in group.convs:
        red = s[conv].op.reduce_axis
        extent = static(red[0].dom.extent)
        if len(red) != 4 or extent is None or any(static(t.dom.extent) != 1 for t in red[1:3]):
            return None        # not 1x1, or its input not blocked (rco, rh, rw, rci)
        extents.append(extent)
        chunks.append(_divisor(extent, POINTWISE_CHUNK))
    if all(c == e for c, e in zip(chunks, extents)):
        return None            # one chunk: no input strip to keep between channel tiles
    return _divisor(tiles, POINTWISE_GROUP), chunks


def _input_channels_outside(target: Target, s, group) -> bool:
    """On a 16-register target, a kernel of convolutions over blocked inputs (reductions rco,
    rh, rw, rci) of which one has taps (3x3): its register tiles computed for a row of them
    at once, each block of L input channels outside the row's column tiles (as oneDNN's AVX2
    direct convolution): the block's weights (3x3: 9 * L vectors per channel tile) and
    input rows stay in L1 while every tile of the row reads them, the sums kept in a local
    row between blocks (LLVM keeps a tile's sums in registers through a block). With
    nchwc_tile's 4 x 2 tiles, 1.01-1.12x over the tiles alone on ResNet's 3x3 layers at
    56x56 to 14x14, neutral at 7x7; with 1 x 14 tiles it gained nothing (Zen 3, one thread,
    CPU time, loaded)."""
    from .schedules import static
    if target.native_registers() >= 32:
        return False
    taps = False
    for conv in group.convs:
        red = s[conv].op.reduce_axis
        if len(red) != 4 or any(static(r.dom.extent) is None for r in red):
            return False       # not a blocked input (rco, rh, rw, rci)
        taps = taps or _taps(red)
    return taps


def _one_conv_with_taps(s, group) -> bool:
    """The kernel computes one convolution, over a blocked input (reductions rco, rh, rw, rci),
    with taps (3x3)."""
    return len(group.convs) == 1 and _taps(s[group.convs[0]].op.reduce_axis)


def _divisor(n: int, most: int) -> int:
    """The largest divisor of n that is at most most."""
    return max(d for d in range(1, min(n, most) + 1) if n % d == 0)


def _input_outweighs_weights(s, group) -> bool:
    """The kernel's convolutions read more input elements than weights. Then the rows of
    output go outermost and the channel tiles inside them: a tile of channels reads the
    input rows its row needs, the next tile finds them in cache (ResNet-50's 1x1 256->64 at
    56x56 read its 3.2 MB input once per channel tile from L3 at 12-14 GFLOP/s, Zen 3, one
    thread); where the weights are the larger (ResNet's 7x7 layers: 9.4 MB of a 3x3 512->512),
    the channel tiles stay outermost and each one's weights are reused over all the rows.
    With two threads, rows outermost also split the rows between the threads, each reading
    its half of the input, which the kernel before wrote half in each core's cache; channel
    tiles outermost had each thread read all of it. On AVX-512 too (once AVX2 only): a 2-core
    Intel Xeon Emerald Rapids, whole models, both schedules in one process, paired rounds:
    ResNet-50 0.917-0.944x the time on two threads (0.975x on one), MobileNetV2 0.974x,
    ResNet-18 0.996x; rows outermost for every kernel, weights heavier or not, 1.065x."""
    from .schedules import _product
    inputs = weights = 0
    for conv in group.convs:
        for t in conv.op.input_tensors:
            size = _product(t.shape)
            if size is None:
                return False
            if _is_weight(conv.op, t):
                weights += size
            else:
                inputs += size
    return inputs > weights


def _is_weight(op, t) -> bool:
    """Whether the convolution op reads tensor t without its batch index (a weight or a bias)."""
    batch = op.axis[0].var
    reads = [r for r in walk(op.body.source[0]) if isinstance(r, TensorRead) and r.tensor == t]
    return not any(r.indices[0] is batch for r in reads)


def _local_sums(s, group, prepare=None) -> list:
    """A local cache of each of the kernel's sums (prepare(conv) first orders its loops as the
    cache's [n, channel blocks, *spatial, L]); a convolution that is not the kernel's result
    is inlined into the epilogue, which then reads the cache."""
    root = group.anchor is group.convs[0]
    caches = []
    for conv in [s[c] for c in group.convs]:
        if prepare is not None:
            prepare(conv)
        caches.append(s[s.cache_write(conv.op.output(0), "local")])
        if not root:
            conv.compute_inline()
    return caches


def _register_tile(out, caches, tasks, wo, ci, vecs: int, wt: int, rt: int = 1, chunks: Optional[list] = None,
                   channels_outside: bool = False, plane: bool = False, blocks_outer: bool = False,
                   row_chunk: int = 1, dots: Optional[list] = None, block_dots: Optional[list] = None) -> None:
    """The register tile of the blocked kernels: each [n, blocks, *spatial, L] cache computed
    at the loop over a row's column tiles (wo), its reduction outermost, then the tile's rt
    rows, wt columns and vecs channel blocks (unrolled) and a vector of L channels; the tasks
    axes of out fused and run in parallel, its ci channel blocks unrolled. With chunks (input
    channel blocks per cache), the cache holds all the channel tiles out computes at
    wo: the reduction's first axis split in chunks (one per cache) outside the loop over those tiles
    (_pointwise_blocks; LLVM keeps a tile's sums in registers through a chunk). The cache's
    blocks and columns are split to the tile before unrolling: unroll checks a loop's extent
    as declared (the whole row by all blocks: 2048 channels of 8 by 7 columns, AVX2's
    ResNet-50, exceeds MAX_UNROLL), not the tile that compute_at leaves of it. With
    channels_outside, each cache is computed at the task (a row of tiles), its input channel
    blocks outside the column tiles (_input_channels_outside); with plane too, the task is a
    channel tile's whole plane and the input channel blocks go outside its rows; blocks_outer:
    the tile's channel blocks outside its rows and columns (_short_odd_rows)."""
    from .schedules import _fuse
    if channels_outside:
        task = _fuse(out, tasks)
        tile_sums(caches, out, task, vecs, wt, rt, chunks, channels_outside=True, plane=plane,
                  blocks_outer=blocks_outer, row_chunk=row_chunk, block_dots=block_dots)
    else:
        tile_sums(caches, out, wo, vecs, wt, rt, chunks, dots=dots, block_dots=block_dots)
        task = _fuse(out, tasks)
    out.parallel(task)
    out.unroll(ci)


def tile_sums(caches, at, wo, vecs: int, wt: int, rt: int = 1, chunks: Optional[list] = None,
              channels_outside: bool = False, plane: bool = False, blocks_outer: bool = False,
              row_chunk: int = 1, dots: Optional[list] = None, block_dots: Optional[list] = None) -> None:
    """Each local sum of caches (_local_sums) computed at loop wo of stage at as register tiles
    of rt rows, wt columns and vecs channel blocks (_register_tile says how); with
    channels_outside, wo is a loop over rows (a row of tiles a step) and the reduction's input
    channel blocks go outside the loop over the row's tiles (_input_channels_outside); with
    plane too, wo is the task of a whole plane and they go outside its rows; blocks_outer
    puts the tile's channel blocks outside its rows and columns (one weight vector live,
    the tile's broadcasts reused across the blocks: _short_odd_rows). dots: per cache, the pair
    dot product its tile runs (_pair_dot) or None (the plain NCHW tile only: a pair of input
    channels a step, a vector of output channels by both of them tensorized); block_dots: the
    same for tiles over blocked activations (the reduction's last axis, a block's input
    channels, split in pairs: a vector of output channels by each pair tensorized)."""
    for i, cache in enumerate(caches):
        cache.compute_at(at, wo)
        cn, cblock, *csp, clane = cache.op.axis
        bo, bi = cache.split(cblock, factor=vecs)
        wco, wci = cache.split(csp[-1], factor=wt)
        rows, hci = csp[:-1], []
        if rt > 1:
            hco, h = cache.split(csp[-2], factor=rt)
            rows, hci = csp[:-2] + [hco], [h]
        reduce_axes = list(cache.op.reduce_axis)
        dot = dots[i] if dots else None
        if dot is not None and chunks is None and not channels_outside:
            *taps, rc = reduce_axes            # ops/conv.py: the pair axis last
            rcp, kp = cache.split(rc, factor=PAIR)
            cache.reorder(cn, bo, *rows, wco, rcp, *taps, *hci, wci, bi, clane, kp)
            _prefetch_weights(cache, taps[-1] if taps else rcp, clane)
            for ax in (*hci, wci, bi):
                cache.unroll(ax)
            cache.tensorize(clane, dot)
            continue
        lane = [clane]
        dot = block_dots[i] if block_dots else None
        if dot is not None:                  # a block's input channels rci in pairs: (rci // 2, k)
            rcp, kp = cache.split(reduce_axes[-1], factor=PAIR)
            reduce_axes[-1], lane = rcp, [clane, kp]
        tile = [bi, *hci, wci] if blocks_outer else [*hci, wci, bi]
        if channels_outside and plane:
            cache.reorder(cn, bo, reduce_axes[0], *rows, wco, *reduce_axes[1:], *tile, *lane)
        elif channels_outside and row_chunk > 1:
            rko, rki = cache.split(reduce_axes[0], factor=row_chunk)
            cache.reorder(cn, bo, *rows, rko, wco, rki, *reduce_axes[1:], *tile, *lane)
        elif channels_outside:
            cache.reorder(cn, bo, *rows, reduce_axes[0], wco, *reduce_axes[1:], *tile, *lane)
        elif chunks is None:
            cache.reorder(cn, bo, *rows, wco, *reduce_axes, *hci, wci, bi, *lane)
        else:
            rko, rki = cache.split(reduce_axes[0], factor=chunks[i])
            cache.reorder(cn, *rows, wco, rko, bo, rki, *reduce_axes[1:], *hci, wci, bi, *lane)
        if len(caches) == 1 and _taps(reduce_axes):
            _unroll_reduction(cache, reduce_axes[-1])
        _prefetch_weights(cache, reduce_axes[-1], clane)
        for h in hci:
            cache.unroll(h)
        cache.unroll(wci)
        cache.unroll(bi)
        if dot is not None:
            cache.tensorize(clane, dot)
        else:
            cache.vectorize(clane)


TILE_K_UNROLL = 4    # copies of a register tile's innermost reduction step (_unroll_reduction)


def _taps(reduce_axes) -> bool:
    """The reductions of a convolution over a blocked input (rco, rh, rw, rci) with taps (3x3)."""
    from .schedules import static
    return len(reduce_axes) == 4 and any((static(r.dom.extent) or 1) > 1 for r in reduce_axes[1:3])


def _unroll_reduction(cache, axis) -> None:
    """The reduction loop right outside a register tile (a 3x3's input channels of a block:
    tile_sums) unrolled TILE_K_UNROLL times by LLVM (the "unroll_count" pragma) where that
    divides its extent, as the matmul tile's k loop is (schedules._unroll_k). Measured
    (benchmarks/conv_layer_ab.py, a 2-core Intel Xeon Emerald Rapids, one thread, CPU time):
    every conv kernel's unrolled by a split in schedlang's own IR, ResNet-50's convs 81.6 ->
    74.7 ms and ResNet-18's 35.1 -> 31.2, but their cold builds doubled (2.5 -> 5.8 s, 4.2 ->
    7.9 s: the copies rendered and optimised as IR); by LLVM's unroller, ResNet-18's 34.2 ->
    31.0 ms, ResNet-50's 69.4 -> 68.3, for 1.16-1.23x the build's CPU time, hence 3x3 kernels
    of one convolution only (ResNet-50's are mostly 1x1)."""
    from .schedules import unroll_by_llvm
    unroll_by_llvm(cache, axis, TILE_K_UNROLL)


TILE_PREFETCH_AHEAD = 16   # steps of a tile's innermost reduction that its weights are prefetched ahead


def _prefetch_weights(cache, axis, lane) -> None:
    """Prefetch the weights a register tile reads TILE_PREFETCH_AHEAD steps of its innermost
    reduction ahead (as the matmul tile's packed B panel: schedules._prefetch_panel), where a
    block's weight vector (lane: its channels) is a cache line or more. Measured
    (benchmarks/conv_layer_ab.py beside 4a84646, a 2-core Intel Xeon Emerald Rapids, one
    thread, CPU time): ResNet-50's convs 73.0 -> 66.6 ms (its 3x3 512->512 7x7 0.72-0.78x, the
    weight-heavy 1x1s at 7x7 0.87-0.96x; now 1.00x oneDNN's prepacked), the whole model 66.4 ->
    63.7; ResNet-18's convs 28.5 -> 27.5 and 29.2 -> 28.0; MobileNetV2's 11.7 -> 11.6. With
    AVX2's 8-lane blocks (half a line a step: each line prefetched twice, in tiles whose loads
    already bound them) ResNet-50's convs went 80.6 -> 81.8 ms on the same machine (its 7x7
    1x1 kernels 1.27x slower), so those are left to the hardware prefetchers."""
    from .schedules import static
    n = static(lane.dom.extent)
    if n is None or n * cache.op.output_dtype(0).bits // 8 < CACHE_LINE_BYTES:
        return
    for t in cache.op.input_tensors:
        if _is_weight(cache.op, t):
            cache.prefetch(t, axis, TILE_PREFETCH_AHEAD)


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


class RowSplit(NamedTuple):
    """A row kernel's output stage split along its rows (row_split)."""

    out: object              # the kernel's result stage
    accs: list               # the stages computing the sums (a local cache of a kernel-result conv)
    batch_channel: list      # out's [n, oc] axes
    spatial: list            # out's spatial axes, the last one whole
    wo: object               # the loop over a row's vector steps (None: the row is one step)
    wi: object               # the columns of one step (the row's axis when it is one step)
    vector: Optional[int]    # columns of a step, or None: the row is not vectorized


def row_split(s, group, target: Target) -> RowSplit:
    """The kernel's result split along its last axis by _row_vector (no split when the row
    is one step): the common start of the row schedules (here and depthwise_schedules.py)."""
    from .schedules import lanes, static
    out, accs = _accumulators(s, group)
    n, oc, *spatial = out.op.axis
    last = spatial[-1]
    v = _row_vector(static(last.dom.extent), lanes(target, accs[0]))
    if v is not None and static(last.dom.extent) != v:
        wo, wi = out.split(last, factor=v)
    else:
        wo, wi = None, last
    return RowSplit(out, accs, [n, oc], spatial, wo, wi, v)


def _conv_rows_cpu(s, group, target: Target) -> None:
    from .schedules import _fuse, _product, threads
    out, accs, (n, oc), spatial, wo, wi, v = row_split(s, group, target)
    planes = _product([n.dom.extent, oc.dom.extent])
    if spatial[:-1] and planes is not None and planes >= 4 * threads(target):
        # whole (batch, channel) planes a task: a task per row would cost more to hand out than it computes
        out.parallel(_fuse(out, [n, oc]))
        row = spatial[-2]
    else:
        row = _fuse(out, [n, oc] + spatial[:-1])
        out.parallel(row)
    for acc in accs:
        place_row_sum(acc, out, wo if wo is not None else row, v)
    if v is not None:
        out.vectorize(wi)


def place_row_sum(acc, out, at, v: Optional[int]) -> None:
    """Compute a row kernel's sum stage acc at loop `at` of out: input channels, then the
    taps (unrolled where few), the output row innermost, vectorized by v lanes unless None."""
    from .schedules import static
    acc.compute_at(out, at)
    *outer, col = acc.op.axis
    rc, *taps = acc.op.reduce_axis
    acc.reorder(*outer, rc, *taps, col)
    for tap in taps:                 # each tap a fixed shift along the row, its padding guard known
        if (static(tap.dom.extent) or MAX_UNROLL_TAPS + 1) <= MAX_UNROLL_TAPS:
            acc.unroll(tap)
    if v is not None:
        acc.vectorize(col)


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
