"""A convolution's zero-padded input written by the kernel that produces it, a rewrite of a
lowered program and the facts fusion needs about it.

ops/conv.py gives a padded dense convolution of packed weights an input `P = pad(Y)` (tagged
CONV_PAD_TAG) that it reads without guards. Made by a kernel of its own, P is a copy of Y:
Y written by its kernel, read back, written again with its border (13 of ResNet-18's 31
kernels). Instead, Y's kernel computes P (fuse.py merges the two, pad_schedules.py runs each
row of Y in a local buffer and writes it into P's interior, the border rows and columns as
zeros beside it), as oneDNN's convolutions write into a padded destination.

For that, P must be the only reader of Y: `share_padded` rewrites every other reader of Y
(ResNet's residual add, a strided 1x1 downsampling convolution) to read P's interior,
`P[.., h + ph, w + pw, ..]`, the same values. Only blocked (NCHWc, 5-d) activations are
rewritten: they exist only where the CPU's packed convolutions run (layout.py), the kernels
pad_schedules.py schedules.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

from ..expr.functor import rewrite_post_order, walk
from ..expr.nodes import Binary, Const, Var, binary
from ..tensor.classify import ELEMENTWISE, INDEX_MAP, classify
from ..tensor.graph import post_order
from ..tensor.op import ComputeOp, Operation, Tensor, TensorRead

CONV_TAG = "conv"           # the tag of a convolution's sum (ops/conv.py)
CONV_PAD_TAG = "conv_pad"   # a zero-padded input copy a convolution reads (ops/conv.py)
CONV_PAIRS_TAG = "conv_pair_copy"   # the same with each pair of channels side by side (ops/conv._padded)
BLOCKED_RANK = 5            # [N, C / L, H, W, L] (layout.py)


def is_pad(op) -> bool:
    """A zero-padded input copy of ops/conv.py (tagged CONV_PAD_TAG)."""
    return isinstance(op, ComputeOp) and op.tag == CONV_PAD_TAG and op.num_outputs == 1


def pad_source(op) -> Optional[Tuple[Operation, Tuple[int, ...]]]:
    """(Y, offsets) when op is a blocked pad stage reading one tensor Y at its own coordinates
    less constant offsets (the padding before each axis: 0 on n, c and the lane): P[i] = Y[i - off];
    None otherwise."""
    if not is_pad(op) or len(op.axis) != BLOCKED_RANK:
        return None
    reads = list(_reads(op))
    if not reads or any(r.tensor != reads[0].tensor for r in reads) or len(reads[0].indices) != len(op.axis):
        return None
    offsets = []
    for index, axis in zip(reads[0].indices, op.axis):
        off = _offset(index, axis.var)
        if off is None or off < 0:
            return None
        offsets.append(off)
    y = reads[0].tensor.op
    if not isinstance(y, ComputeOp) or y.num_outputs != 1 or len(y.axis) != BLOCKED_RANK:
        return None
    for a, b, off in zip(y.shape, op.shape, offsets):     # P covers Y: every element of Y is in P
        if not (isinstance(a, int) and isinstance(b, int)) or a + off > b:
            return None
    return y, tuple(offsets)


def reads_conv(op) -> bool:
    """op is a convolution (CONV_TAG) or reads one through injective stages (its epilogue)."""
    work, seen = [op], set()
    while work:
        op = work.pop()
        if getattr(op, "tag", "") == CONV_TAG:
            return True
        for t in op.input_tensors:
            src = t.op
            if isinstance(src, ComputeOp) and src not in seen \
                    and (src.tag == CONV_TAG or classify(src) in (ELEMENTWISE, INDEX_MAP)):
                seen.add(src)
                work.append(src)
    return False


def producer_writes(s, pad) -> bool:
    """The pad stage is written by the kernel of its source (fuse.Group.pad) or is a kernel of
    its own: its source is a convolution or the materialized epilogue of one (fuse.py keeps
    such an epilogue, read by its pad alone, for that). A convolution reading it must not
    compute it inside its own kernel (depthwise_schedules.py)."""
    found = pad_source(pad.op)
    return found is not None and s[found[0]].attach_type != "inline" and reads_conv(found[0])


def share_padded(outputs: Sequence[Tuple[str, Tensor]]) -> List[Tuple[str, Tensor]]:
    """outputs (value name, tensor) of a lowered program with every reader of a padded
    stage's source Y other than the pad reading the pad's interior instead (module
    docstring); the same list when nothing changes. Y stays when it is a program output."""
    ops = post_order([t.op for _, t in outputs])
    outs = {t.op for _, t in outputs}
    pads: Dict[Operation, Tuple[Operation, Tuple[int, ...]]] = {}
    for op in ops:
        found = pad_source(op)
        if found is not None and found[0] not in outs and found[0] not in {p for p, _ in pads.values()}:
            pads[found[0]] = (op, found[1])     # one pad per Y: a later one replaces it, an earlier reads its interior
    if not pads:
        return list(outputs)
    new: Dict[Operation, Operation] = {}
    for op in ops:          # producers first; a pad is built when a reader of its source needs it
        if op not in new:
            new[op] = _redirect(op, new, pads) if isinstance(op, ComputeOp) else op
    return [(name, new[t.op].output(t.value_index)) for name, t in outputs]


def _redirect(op: ComputeOp, new, pads) -> ComputeOp:
    """op over the rebuilt producers, its reads of a padded source Y (op not Y's pad) reading the pad."""
    mine = any(pad is op for pad, _ in pads.values())

    def post(node):
        if not isinstance(node, TensorRead):
            return node
        src = node.tensor.op
        if src in pads and not mine:
            pad, offsets = pads[src]
            if pad not in new:
                new[pad] = _redirect(pad, new, pads)
            idx = tuple(i if not off else binary("add", i, Const(off, i.dtype)) for i, off in zip(node.indices, offsets))
            return TensorRead(new[pad].output(0), idx)
        mapped = new.get(src, src)
        return node if mapped is src else TensorRead(mapped.output(node.tensor.value_index), node.indices)
    bodies = [rewrite_post_order(b, post) for b in op.bodies]
    if all(a is b for a, b in zip(bodies, op.bodies)):
        return op
    return ComputeOp(op.name, op.axis, bodies[0], op.tag, op.attrs, tuple(bodies[1:]))


def _reads(op):
    for body in op.bodies:
        for node in walk(body):
            if isinstance(node, TensorRead):
                yield node


def _offset(index, var: Var) -> Optional[int]:
    """off when index is var - off (or var + -off, or var itself: 0), else None."""
    if index is var:
        return 0
    if isinstance(index, Binary) and index.a is var and isinstance(index.b, Const) and isinstance(index.b.value, int):
        if index.op == "sub":
            return index.b.value
        if index.op == "add":
            return -index.b.value
    return None
