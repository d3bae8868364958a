"""Blocked activations (NCHWc) between convolutions, a rewrite of a lowered program.

A dense convolution on the CPU reads its weight in blocks of L output channels
(prepack.py "conv": a native vector innermost) and is scheduled as NCHWc register tiles
(conv_schedules.py). With NCHW activations, each such kernel transposes its [columns, L]
tile to write NCHW rows, and the next convolution gathers one value per input-channel plane.
`block_activations` keeps the tensors that flow from convolution to convolution as
[N, C / L, H, W, L] instead:

- seeds: the materialized input of a dense blocked convolution, of any block (the ReLU after the
  previous one's batch norm, a residual add, a max pool, a depthwise convolution of packed
  blocks: Xception's separable convolutions), or of a Winograd convolution's input
  tiles (ops/conv_winograd.py: V vectorized over L input channels), when it is a 4-d stage
  with C a multiple of L and not a program output;
- channels-last seeds: a 4-d stage that every reader reads as [N, H * W, C] (through views:
  a flatten and a transpose to the tokens a LayerNorm or a Linear reads; SegFormer's patch
  embeddings and Mix-FFN depthwise convolutions, ViT's) when every read its closure makes of
  other tensors at the channel is channels-last too (a Linear's output viewed NCHW, a bias, a
  packed weight): blocked, both sides are vectors of L contiguous channels, NCHW both are
  gathers of one value a plane (an NCHW input read at the channel, or a reader walking a
  row, keeps the stage NCHW);
- closure: what a blocked stage reads at its own channel coordinate (the inlined epilogue
  before it: bias, ReLU, the residual add's other operand, the convolution's sum itself,
  a depthwise convolution of packed blocks and its padded input, a grouped one of whole
  blocks a group),
  so that the whole kernel of a convolution runs in the blocked index space;
- every blocked stage `Y[n, c, h, w] = f(c)` becomes `Y_b[n, cb, h, w, l] = f(cb * L + l)`;
  a blocked reader of Y at its own channel reads `Y_b[.., cb, .., l]`, a reduction over
  channels (a convolution's rc) is split in two reduce axes (rco, rci) read as
  `Y_b[.., rco, .., rci]` (a grouped one's `g * ICg + rc` as `Y_b[.., g * ICg / L + rco, .., rci]`,
  g = cb // (OCg / L) the same for every lane), and any other reader (a program output, an average pool)
  reads `Y_b[n, c // L, h, w, c % L]`: the layout transform happens only where a consumer
  needs NCHW, inside that consumer.

Program inputs and outputs keep their layout (placeholders and outputs are never blocked);
the result computes the same values. Without a dense blocked convolution the program is
returned as it is (CUDA, where weights are not packed).
"""
from __future__ import annotations

import dataclasses
from typing import Dict, List, Optional, Sequence, Set, Tuple

from ..expr.functor import rewrite_post_order, substitute, uses_var, walk
from ..expr.nodes import Binary, Const, Var
from ..expr.simplify import simplify
from ..tensor.axis import DATA_PAR, REDUCE, IterVar, Range
from ..tensor.classify import ELEMENTWISE, INDEX_MAP, classify
from ..tensor.graph import post_order
from ..tensor.intrin import floordiv, floormod
from ..tensor.op import ComputeOp, Operation, Tensor, TensorRead
from ..tensor.reduce import Reduce
from ..topi.winograd import TAG_D as WINOGRAD_INPUT_TAG
from .fuse import CONV_TAG
from .schedules import blocked_lanes, read_through_views

MAX_VIEW_DEPTH = 4      # index maps followed from a stage to the innermost axis of a reader


def block_activations(outputs: Sequence[Tuple[str, Tensor]]) -> List[Tuple[str, Tensor]]:
    """outputs (value name, tensor) of a lowered program, with the activations between dense
    blocked convolutions kept NCHWc (module docstring); the same list when nothing changes."""
    ops = post_order([t.op for _, t in outputs])
    outs = {t.op for _, t in outputs}
    readers: Dict[Operation, List[Operation]] = {op: [] for op in ops}
    for op in ops:
        for t in op.input_tensors:
            readers[t.op].append(op)
    width = _conv_width(ops)
    if width is None:
        return list(outputs)
    blocked = _blocked_stages(ops, outs, readers, width)
    if not blocked:
        return list(outputs)
    new: Dict[Operation, Operation] = {}
    for op in ops:
        new[op] = _rebuild(op, new, blocked, width) if isinstance(op, ComputeOp) else op
    return [(name, new[t.op].output(t.value_index)) for name, t in outputs]


def packed_width(op) -> Optional[int]:
    """L when op is a dense convolution reading its weight as packed blocks
    w[oc // L, rc, *r, oc % L] (ops/conv.py; or w[.., rc // L, *r, rc % L, .., oc % L]: B blocks side
    by side, prepack.py "conv_tiles"; or w[oc // L, rc // 2, *r, oc % L, rc % 2]: in pairs of input
    channels, "conv_pairs"), or a grouped one reading them and its input at
    g * ICg + rc (ops/conv.block_width: ICg and OCg multiples of L), else None."""
    if not (isinstance(op, ComputeOp) and op.tag == CONV_TAG and isinstance(op.body, Reduce)) or len(op.axis) != 4:
        return None
    oc = op.axis[1].var
    for node in walk(op.body.source[0]):
        if isinstance(node, TensorRead) and len(node.indices) in (5, 7):
            last = node.indices[-1]
            if isinstance(last, Binary) and last.op == "floormod" and last.a is oc and _const(last.b) > 1 \
                    and _channel_read(op) is not None:
                return _const(last.b)
    pair = _pair_weight_width(op, op.body.axis[0].var)
    return pair if pair is not None and _channel_read(op) is not None else None


def _pair_weight_width(op, rc: Var) -> Optional[int]:
    """L when the convolution op reads a weight packed in pairs of its input channels rc,
    w[oc // L, rc // 2, *r, oc % L, rc % 2] (prepack.py "conv_pairs": a 2-d bfloat16 convolution on
    the bfloat16 dot product, ops/conv.reads_pairs), else None."""
    oc = op.axis[1].var
    for node in walk(op.body.source[0]):
        if isinstance(node, TensorRead) and len(node.indices) == 6:
            *_, lane, pair = node.indices
            if all(isinstance(e, Binary) and e.op == "floormod" for e in (lane, pair)) and pair.a is rc \
                    and _const(pair.b) == 2 and lane.a is oc and _const(lane.b) > 1:
                return _const(lane.b)
    return None


def _paired_copy_width(op) -> Optional[int]:
    """L when op is a dense convolution reading its weight in pairs of input channels with rc its
    last reduce axis (_pair_weight_width) and its input from a copy in pairs (ops/conv.pair_copy:
    the program's input, which is never blocked): its output may be blocked all the same (its
    kernel then writes whole vectors of L channels)."""
    if not (isinstance(op, ComputeOp) and op.tag == CONV_TAG and isinstance(op.body, Reduce)) or len(op.axis) != 4:
        return None
    return _pair_weight_width(op, op.body.axis[-1].var)


def _const(e) -> int:
    return getattr(e, "value", 0) if not isinstance(e, int) else e


def _channel_read(conv) -> Optional[TensorRead]:
    """The convolution's input read at its channel reduction: x[n, rc, ...] with rc its first
    reduce axis (groups == 1), or x[n, g * ICg + rc, ...] (grouped: _group_base)."""
    rc = conv.body.axis[0].var
    for node in walk(conv.body.source[0]):
        if isinstance(node, TensorRead) and len(node.indices) == 4 and _group_base(node.indices[1], rc) is not None:
            return node
    return None


def _group_base(index, rc: Var):
    """0 when a channel index is the reduce variable rc itself; the group's first channel g
    * ICg when it is `g * ICg + rc` (ops/conv.py's grouped read, g not using rc); else None."""
    if index is rc:
        return 0
    if isinstance(index, Binary) and index.op == "add" and index.b is rc and not uses_var(index.a, rc):
        return index.a
    return None


def _blocked_base(base, width: int):
    """The first input channel block of a group, base // width, where base = g * ICg is a
    multiple of width (ICg a constant multiple of it); None otherwise. In a blocked reader
    (output channel c = cb * width + l), a group g = c // OCg with OCg a multiple of width
    simplifies to cb // (OCg / width) once c is substituted: the same for every lane, a
    broadcast."""
    if isinstance(base, int):
        return base // width if base % width == 0 else None
    if not (isinstance(base, Binary) and base.op == "mul" and _const(base.b) > 0 and _const(base.b) % width == 0):
        return None
    factor = _const(base.b) // width
    return base.a if factor == 1 else base.a * factor


def _conv_width(ops) -> Optional[int]:
    """The block of the program's packed convolutions: the widest (a native vector; a
    convolution of fewer output channels packs fewer)."""
    return max((w for w in (packed_width(op) for op in ops) if w is not None), default=None)


def _blockable(op, outs, readers, width: int) -> bool:
    return isinstance(op, ComputeOp) and op not in outs and op.num_outputs == 1 and len(op.axis) == 4 \
        and isinstance(op.shape[1], int) and op.shape[1] % width == 0 \
        and all(isinstance(e, int) for e in op.shape) \
        and all(isinstance(r, ComputeOp) for r in readers[op]) \
        and all(a.dom.min == 0 for a in op.axis)


def _has_div_mod(e) -> bool:
    return any(isinstance(n, Binary) and n.op in ("floordiv", "floormod") for n in walk(e))


def _injective(op) -> bool:
    return classify(op) in (ELEMENTWISE, INDEX_MAP)


def _channelwise(op) -> bool:
    """A reduction within each channel (a pooling): every read of a 4-d tensor is at the
    reduction's own channel."""
    if not (isinstance(op, ComputeOp) and isinstance(op.body, Reduce) and len(op.axis) == 4) \
            or op.tag == CONV_TAG:
        return False
    c = op.axis[1].var
    reads = [n for b in op.bodies for n in walk(b) if isinstance(n, TensorRead) and len(n.indices) == 4]
    return bool(reads) and all(r.indices[1] is c for r in reads)


def _depthwise(op, width: int) -> bool:
    """A depthwise convolution over a packed weight of blocks of width channels: it reads its
    input at its own channel and w[oc // L, 0, *r, oc % L] (blocked: a vector of L channels)."""
    if not (isinstance(op, ComputeOp) and op.tag == CONV_TAG and isinstance(op.body, Reduce)) or len(op.axis) != 4:
        return False
    c = op.axis[1].var
    reads = [n for n in walk(op.body.source[0]) if isinstance(n, TensorRead)]
    return all(r.indices[1] is c for r in reads if len(r.indices) == 4) \
        and any(len(r.indices) == 5 and isinstance(r.indices[-1], Binary) and r.indices[-1].op == "floormod"
                and r.indices[-1].a is c and _const(r.indices[-1].b) == width for r in reads)


def _blocked_stages(ops, outs, readers, width: int) -> Set[Operation]:
    """The stages to block: the closures of the seeds and of the channels-last seeds whose
    closure reads channels-last (module docstring). A grouped
    convolution's input is a seed only where the convolution itself is blocked (its output
    read as blocks): a grouped kernel over blocked input and NCHW output would read its input
    rows through gathers (ResNeSt's radix convolutions, whose output is viewed 5-d)."""
    seeds, grouped = [], {}
    for op in ops:
        if packed_width(op) is not None:            # (a narrower one reads the blocks as it reduces over them)
            read = _channel_read(op)
            x = read.tensor.op
            rc = op.body.axis[0]
            dense = _group_base(read.indices[1], rc.var) == 0
            covers = x.shape[1] == rc.dom.extent if dense \
                else isinstance(rc.dom.extent, int) and rc.dom.extent % width == 0     # grouped: whole blocks
            if _blockable(x, outs, readers, width) and covers \
                    and (_channelwise(x) or _injective(x) or _depthwise(x, width)):
                if dense:
                    seeds.append(x)
                else:
                    grouped[op] = x
        elif _channelwise(op) and _blockable(op, outs, readers, width):
            seeds.append(op)                        # a pooling: vectors of L channels
        elif getattr(op, "tag", "") == WINOGRAD_INPUT_TAG:
            x = _winograd_input(op)                 # the input tiles of a Winograd convolution read
            if x is not None and _blockable(x, outs, readers, width) and (_channelwise(x) or _injective(x)):
                seeds.append(x)                     # vectors of L input channels
    blocked: Set[Operation] = set()
    for seed in [op for op in ops if _blockable(op, outs, readers, width) and _read_channels_last(op, readers)]:
        found = _closure(seed, outs, readers, width)
        if found is not None and _channels_last_inputs(found):
            blocked |= found
    while seeds:
        for seed in seeds:
            found = _closure(seed, outs, readers, width)
            if found is not None:
                blocked |= found
        seeds = [x for conv, x in grouped.items() if conv in blocked and x not in blocked]
        for conv in [c for c in grouped if c in blocked]:
            del grouped[conv]
    return blocked


def _read_channels_last(op, readers, dim: int = 1, depth: int = 0) -> bool:
    """Every reader reads op's index dim (the channel) as its own innermost axis, directly or
    through index maps (a flatten, then a transpose): op viewed [N, H * W, C] (SegFormer's
    Mix-FFN depthwise convolution before its GELU and Linear, a patch embedding before its
    LayerNorm). Blocked, that read is a vector of L contiguous channels; NCHW, a gather of one
    value a plane (and a reader that walks a row would gather from blocks instead: such a
    stage stays NCHW)."""
    if not readers[op] or depth > MAX_VIEW_DEPTH:
        return False
    for r in readers[op]:
        axes = [a.var for a in r.axis]
        along = r.body.axis[-1].var if isinstance(r.body, Reduce) and r.body.axis else None
        for node in _reads_of(r, op):
            index = node.indices[dim] if len(node.indices) > dim else None
            if index is not None and (axes and index is axes[-1] or index is along):
                continue        # the innermost axis, or a sum along the channels (a LayerNorm's)
            at = next((k for k, a in enumerate(axes) if a is index), None)
            if at is None or classify(r) != INDEX_MAP or not _read_channels_last(r, readers, at, depth + 1):
                return False
    return True


def _reads_of(reader, op) -> List[TensorRead]:
    return [n for body in reader.bodies for n in walk(body) if isinstance(n, TensorRead) and n.tensor.op is op]


def _channels_last_inputs(found: Set[Operation]) -> bool:
    """Every read by found's stages of a tensor outside found that depends on the reader's
    channel c reads c innermost (through views): x[.., c] (a Linear's [N, H * W, C] output
    viewed NCHW, a bias), or a packed weight's w[c // L, .., c % L]. Blocked, each is a
    vector of L contiguous values; a read of an NCHW tensor at c would be a gather of L
    planes."""
    for x in found:
        c = x.axis[1].var
        for body in x.bodies:
            for read in walk(body):
                if not isinstance(read, TensorRead) or read.tensor.op in found:
                    continue
                node = read_through_views(read, lambda op: True)    # a view's, a transpose's source
                if not any(uses_var(i, c) for i in node.indices):     # (a 0-d tensor: no index)
                    continue
                *lead, last = node.indices
                if not (last is c and not any(uses_var(i, c) for i in lead)) and blocked_lanes(node.indices, c) is None:
                    return False
    return True


def _winograd_input(op) -> Optional[Operation]:
    """The 4-d tensor a Winograd convolution's input tiles read (topi/winograd.py), or None."""
    found = {n.tensor.op for n in walk(op.body) if isinstance(n, TensorRead) and len(n.indices) == 4}
    return found.pop() if len(found) == 1 else None


def _closure(seed, outs, readers, width: int) -> Optional[Set[Operation]]:
    """seed and what it reads at its own channel (or shifted by whole blocks: the parts of a
    concatenation, _channel_shift), transitively (module docstring), through a
    depthwise convolution of packed blocks (a vector of channels, depthwise_schedules.py) or a
    grouped one of whole blocks a group (packed_width); None when that reaches another kind
    of convolution (other grouped ones: their kernel runs NCHW rows, and a blocked epilogue
    could not be fused with it)."""
    found: Set[Operation] = set()
    work = [seed]
    while work:
        x = work.pop()
        if x in found:
            continue
        found.add(x)
        c = x.axis[1].var
        for body in x.bodies:
            for node in walk(body):
                shift = _channel_shift(node.indices[1], c, width) if isinstance(node, TensorRead) \
                    and len(node.indices) > 1 else None
                if shift is None:
                    continue
                y = node.tensor.op
                packed = packed_width(y) == width or _paired_copy_width(y) == width
                if shift == 0 and getattr(y, "tag", "") == CONV_TAG and not packed and not _depthwise(y, width):
                    return None
                if y not in found and _blockable(y, outs, readers, width) \
                        and (_injective(y) or _channelwise(y) or packed or _depthwise(y, width)):
                    work.append(y)
    return found


def _channel_shift(index, c: Var, width: int) -> Optional[int]:
    """0 when a read's channel index is the reader's channel c; the shift when it is c + k or
    c - k with k a multiple of width (a concatenation's part, a slice of channels: its
    blocks shifted by whole blocks, the lanes as they are); None otherwise."""
    if index is c:
        return 0
    if isinstance(index, Binary) and index.op in ("add", "sub") and index.a is c and isinstance(index.b, Const) \
            and isinstance(index.b.value, int) and index.b.value % width == 0:
        return index.b.value if index.op == "add" else -index.b.value
    return None


def _rebuild(op: ComputeOp, new: Dict[Operation, Operation], blocked: Set[Operation], width: int) -> ComputeOp:
    """op over the rebuilt producers: blocked when op is in blocked, its reads of blocked
    producers in the blocked layout."""
    is_blocked = op in blocked
    c = op.axis[1].var if is_blocked else None
    axes = list(op.axis)
    if is_blocked:
        n, ch, h, w = op.axis
        cb = IterVar(Var(ch.var.name + "b"), Range(0, ch.dom.extent // width), DATA_PAR)
        lane = IterVar(Var(ch.var.name + "i"), Range(0, width), DATA_PAR)
        axes = [n, cb, h, w, lane]
    splits: Dict[Var, Tuple[IterVar, IterVar]] = {}
    reduce_axes = op.body.axis if isinstance(op.body, Reduce) else ()
    group_bases: Dict[Var, object] = {}     # a grouped read's reduce var: its group's first input block
    for body in op.bodies:
        for node in walk(body):
            if isinstance(node, TensorRead) and node.tensor.op in blocked and len(node.indices) > 1:
                r = next((a for a in reduce_axes if _group_base(node.indices[1], a.var) is not None), None)
                if r is None or r.var in splits or r.dom.min != 0 or not isinstance(r.dom.extent, int) \
                        or r.dom.extent % width:
                    continue
                base = _group_base(node.indices[1], r.var)
                if not (isinstance(base, int) and base == 0):
                    base = _blocked_base(base, width)
                    if base is None:
                        continue
                    group_bases[r.var] = base
                splits[r.var] = (IterVar(Var(r.var.name + "o"), Range(0, r.dom.extent // width), REDUCE),
                                 IterVar(Var(r.var.name + "i"), Range(0, width), REDUCE))

    def post(node):
        if not isinstance(node, TensorRead):
            return node
        src = node.tensor.op
        if src not in blocked:
            mapped = new.get(src, src)
            return node if mapped is src else TensorRead(mapped.output(node.tensor.value_index), node.indices)
        idx = list(node.indices)
        ch_index = idx[1]
        if is_blocked and ch_index is c:
            outer, inner = axes[1].var, axes[4].var
        elif isinstance(ch_index, Var) and ch_index in splits:
            outer, inner = splits[ch_index][0].var, splits[ch_index][1].var
        elif isinstance(ch_index, Binary) and ch_index.b in group_bases and ch_index.b in splits \
                and _group_base(ch_index, ch_index.b) is not None:
            outer, inner = group_bases[ch_index.b] + splits[ch_index.b][0].var, splits[ch_index.b][1].var
        else:
            outer, inner = floordiv(ch_index, width), floormod(ch_index, width)
        return TensorRead(new[src].output(0), (idx[0], outer, idx[2], idx[3], inner))

    mapping = {v: o.var * width + i.var for v, (o, i) in splits.items()}
    if is_blocked:
        mapping[c] = axes[1].var * width + axes[4].var
    ranges = {a.var: (0, a.dom.extent - 1) for a in axes if isinstance(a.dom.extent, int)}
    for o, i in splits.values():
        ranges[o.var], ranges[i.var] = (0, o.dom.extent - 1), (0, width - 1)

    def tidy(node):
        # (cb * L + l) // L -> cb in a packed weight's index; other indices stay as written
        # (fusion matches a reader's axis variables by identity)
        if isinstance(node, TensorRead) and any(_has_div_mod(i) for i in node.indices):
            return TensorRead(node.tensor, tuple(simplify(i, ranges) if _has_div_mod(i) else i
                                                 for i in node.indices))
        return node

    bodies = []
    for body in op.bodies:
        b = substitute(rewrite_post_order(body, post), mapping) if mapping else rewrite_post_order(body, post)
        if mapping:
            b = rewrite_post_order(b, tidy)
        if isinstance(b, Reduce) and splits:
            red_axes = []
            for a in b.axis:
                red_axes += [splits[a.var][0]] if a.var in splits else [a]
            red_axes += [splits[a.var][1] for a in b.axis if a.var in splits]
            b = dataclasses.replace(b, axis=tuple(red_axes))
        bodies.append(b)
    if not is_blocked and all(a is b for a, b in zip(bodies, op.bodies)):
        return op
    return ComputeOp(op.name, tuple(axes), bodies[0], op.tag, op.attrs, tuple(bodies[1:]))
