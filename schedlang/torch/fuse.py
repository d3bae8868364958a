"""Fusion decisions for the PyTorch frontend's programs (usable on any DSL program).

Two rules, as TVM's default fusion:

- injective producers (IndexMap, Elementwise) are inlined into their consumers, so a chain
  of pointwise ops is one loop nest with no intermediate buffers. The exception is an
  Elementwise stage read by a matmul-like reduction (one with data reuse): inlined, it
  would be recomputed for every output column, so it stays a buffer of its own;
- a reduction whose readers all belong to one kernel, and read it at their own leading
  coordinates (a row max read as `mx[i]` by `out[i, j]`, a matmul read as `C[i, j]` by its
  bias/activation epilogue), is computed inside that kernel, at the loop over those
  coordinates, instead of being written out and read back.

`fuse(s)` applies the inlining to a fresh schedule and returns the kernels (`Group`s); the
default schedules (schedules.py) then place each group's reductions in its loops.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional

from ..expr.equality import equal, key as expr_key
from ..expr.functor import children, walk
from ..expr.nodes import Binary, Call, Cast, Const, Select
from ..schedule import legal
from ..tensor.classify import ELEMENTWISE, INDEX_MAP, classify
from ..tensor.op import ComputeOp, TensorRead
from ..tensor.reduce import Reduce
from ..topi.winograd import TAG_Y as WINOGRAD_ROWS, TAGS as WINOGRAD_TAGS
from .attention_schedule import claim_attention, is_attention
from .pad_fusion import CONV_PAD_TAG, CONV_PAIRS_TAG, CONV_TAG, pad_source, reads_conv

# A product's B operand copied from [..., N, K] to [..., K, N] (ops/matmul.padded_contract)
TRANSPOSED_TAG = "matmul_b_transposed"
# The group of each row of a grouped product (ops/grouped_mm.py), which indexes its B: computed
# inside the product's kernel, it would make that a kernel of rows, not a register-tiled matmul
ROW_GROUP_TAG = "grouped_mm_rows"
# Stages that are kernels of their own: never inlined into a reader, never computed inside
# another kernel (a padded input copy, pad_fusion.py, or its channel pairs; Winograd's stages,
# winograd_schedules.py).
OWN_KERNEL_TAGS = frozenset((CONV_PAD_TAG, CONV_PAIRS_TAG, TRANSPOSED_TAG, ROW_GROUP_TAG) + WINOGRAD_TAGS)


def own_kernel(st) -> bool:
    """Whether stage st is a kernel of its own (its op's tag is one of OWN_KERNEL_TAGS)."""
    return getattr(st.op, "tag", "") in OWN_KERNEL_TAGS


@dataclass
class Group:
    """One kernel: the anchor stage whose loops it runs, and the reductions computed inside
    those loops (producers first), each with its prefix: how many leading axes of the anchor
    index one of its results (the loop it is computed at covers those axes); pad: the padded
    copy of the anchor that the kernel writes instead of the anchor (pad_fusion.py), or None."""

    anchor: object
    attached: List[object] = field(default_factory=list)
    prefix: Dict[object, int] = field(default_factory=dict)
    pad: Optional[object] = None

    @property
    def convs(self) -> List[object]:
        """The convolutions this kernel computes: the anchor itself, or the reductions attached
        to its epilogue (of the convolutions' shape) when each is a convolution (two when a
        residual add sums two of them); empty otherwise."""
        if is_conv(self.anchor) and not self.attached:
            return [self.anchor]
        if self.attached and not isinstance(self.anchor.op.body, Reduce) \
                and all(is_conv(st) and _same_shape(st, self.anchor) for st in self.attached):
            return list(self.attached)
        return []

    @property
    def matmuls(self) -> List[object]:
        """The attached matmul-like reductions read element for element by the anchor."""
        return [st for st in self.attached if is_matmul(st) and self.prefix[st] == len(self.anchor.op.axis)]

    def __repr__(self) -> str:
        inner = ", ".join(f"{st.name}@{self.prefix[st]}" for st in self.attached)
        pad = f" -> {self.pad.name}" if self.pad is not None else ""
        return f"Group({self.anchor.name}{'; ' + inner if inner else ''}{pad})"


def is_matmul(st) -> bool:
    """A sum of a product of two reads over one reduce axis, with data reuse (mm, bmm, linear)."""
    op = st.op
    if not legal.has_data_reuse(st) or len(op.reduce_axis) != 1 or op.num_outputs != 1:
        return False
    red = op.body
    if red.combiner.name != "sum" or red.condition is not None:
        return False
    return matmul_operands(red.source[0]) is not None


def _same_shape(a, b) -> bool:
    ea, eb = [x.dom.extent for x in a.op.axis], [x.dom.extent for x in b.op.axis]
    return len(ea) == len(eb) and all(x == y if isinstance(x, int) and isinstance(y, int)
                                      else not isinstance(x, int) and not isinstance(y, int) and equal(x, y)
                                      for x, y in zip(ea, eb))


def is_conv(st) -> bool:
    """A convolution as the PyTorch frontend lowers it (ops/conv.py): a sum tagged CONV_TAG."""
    op = st.op
    return getattr(op, "tag", "") == CONV_TAG and isinstance(op.body, Reduce) and op.num_outputs == 1 \
        and op.body.combiner.name == "sum"


def matmul_operands(e):
    """(a, b): the two reads of a product a * b (through casts, and through an
    if_then_else(cond, read, 0): a padded product's masked columns, ops/matmul.py), or None."""
    while isinstance(e, Cast):
        e = e.value
    if not (isinstance(e, Binary) and e.op == "mul"):
        return None
    parts = []
    for x in (e.a, e.b):
        while isinstance(x, Cast):
            x = x.value
        if isinstance(x, Select) and x.guarded and isinstance(x.false_value, Const) and x.false_value.value == 0:
            x = x.true_value
        if not isinstance(x, TensorRead):
            return None
        parts.append(x)
    return tuple(parts)


def fuse(s) -> List[Group]:
    """Inline the injective intermediates of schedule s and return its kernels, consumers
    first. s must be fresh (no steps yet)."""
    stages = [st for st in s.stages if isinstance(st.op, ComputeOp)]
    readers: Dict[object, List[object]] = {st: [] for st in s.stages}
    for st in stages:                  # once: Schedule._consumers rescans every stage per call
        for inp in s.inputs_of(st):
            readers[inp].append(st)
    feeds_matmul: Dict[object, bool] = {}
    feeds_own: Dict[object, bool] = {}
    reads_rows = _reads_winograd_rows(s, stages)
    inline: Dict[object, None] = {}
    for st in reversed(stages):        # consumers first: whether a reader is inlined is known
        feeds_matmul[st] = any(feeds_matmul[c] if c in inline else is_matmul(c) or is_conv(c)
                               for c in readers[st])
        feeds_own[st] = any(feeds_own[c] if c in inline else own_kernel(c) for c in readers[st])
        if _should_inline(st, feeds_matmul[st]) and not (feeds_matmul[st] and _value_dependent(st)) \
                and not (feeds_own[st] and reads_rows[st]) \
                and not _padded_epilogue(st, readers) and not _costly_broadcast(st, readers):
            inline[st] = None
    _bound_inlining(stages, inline, readers)
    for st in stages:
        if st in inline:
            st.compute_inline()
    live = [st for st in stages if st.attach_type != "inline"]
    anchor_of: Dict[object, object] = {st: st for st in live}
    prefix: Dict[object, int] = {}
    for st in reversed(live):          # consumers first, so their own attachment is known
        if st.is_output or not isinstance(st.op.body, Reduce) or own_kernel(st):
            continue
        found = _anchor_for(readers, st, anchor_of, prefix)
        if found is not None:
            anchor_of[st], prefix[st] = found
    claim_attention(s, live, anchor_of, prefix)   # each fused attention is one kernel of its own
    groups: Dict[object, Group] = {}
    for st in live:                    # producers first, so attached stages come in dataflow order
        root = anchor_of[st]
        group = groups.setdefault(root, Group(root))
        if root is not st:
            group.attached.append(st)
            group.prefix[st] = prefix[st]
    _detach_from_convs(groups, s)
    _merge_pads(groups, readers)
    return [groups[st] for st in reversed(live) if st in groups]


def _detach_from_convs(groups: Dict[object, Group], s) -> None:
    """A kernel computing convolutions in its epilogue computes no other reduction: one there
    (legacy Xception's max pool beside the strided 1x1 shortcut it is added to) made it a
    kernel of rows (Group.convs empty) computing the convolution element by element, 2-4x
    slower than the pool's own kernel and the convolution's. The other reductions become
    kernels of their own where no attached stage feeds them."""
    for root, group in list(groups.items()):
        convs = [st for st in group.attached if is_conv(st)]
        others = [st for st in group.attached if not is_conv(st)]
        if not convs or not others or not all(_same_shape(c, root) for c in convs):
            continue
        attached = {st.op for st in group.attached}
        for st in others:
            if _reads_any(s, st, attached):
                continue
            group.attached.remove(st)
            del group.prefix[st]
            groups[st] = Group(st)


def _reads_any(s, st, ops) -> bool:
    """Whether st reads a result of one of ops, directly or through inlined stages."""
    work, seen = list(s.inputs_of(st)), set()
    while work:
        inp = work.pop()
        if inp.op in ops:
            return True
        if inp.attach_type == "inline" and inp not in seen:
            seen.add(inp)
            work.extend(s.inputs_of(inp))
    return False


def _tag(st) -> str:
    return getattr(st.op, "tag", "")


def _reads_winograd_rows(s, stages) -> Dict[object, bool]:
    """Per stage: whether it reads a Winograd inverse's row pass Y (topi/winograd.py) directly
    or through injective stages: a Winograd convolution's epilogue. One read by a kernel of
    its own (the next Winograd convolution's input tiles, a padded copy) stays a kernel of its
    own (the inverse transform per output tile, winograd_schedules.py): inlined into input
    tiles, each would recompute the (m + 2)^2 / m^2 times overlapping outputs through an
    unfolded select over x % m; into a padded copy, whose pixels are shifted from the output
    tiles', each copy tile would compute 2 x 2 tiles of Y."""
    out: Dict[object, bool] = {}
    for st in stages:                  # producers first
        out[st] = any(_tag(i) == WINOGRAD_ROWS or (out.get(i, False) and not own_kernel(i)
                                                    and not isinstance(i.op.body, Reduce))
                      for i in s.inputs_of(st))
    return out


def _padded_epilogue(st, readers) -> bool:
    """st is the epilogue of a convolution whose only reader is a blocked pad of it: it stays
    the anchor of the convolution's kernel, which then writes the pad (_merge_pads)."""
    return len(readers[st]) == 1 and _pad_of(readers[st][0], st) and reads_conv(st.op)


def _pad_of(pad, st) -> bool:
    found = pad_source(pad.op)
    return found is not None and found[0] is st.op and not st.is_output


def _merge_pads(groups: Dict[object, Group], readers) -> None:
    """A blocked pad whose source is the anchor of a kernel of dense convolutions, read by that
    pad alone, becomes that kernel's result (Group.pad): the pad's own kernel goes."""
    from .conv_schedules import _dense
    for anchor, group in list(groups.items()):
        if not (group.convs and len(anchor.op.axis) == 5 and len(readers[anchor]) == 1
                and all(_dense(c) for c in group.convs)):
            continue
        pad = readers[anchor][0]
        if pad in groups and not groups[pad].attached and _pad_of(pad, anchor):
            group.pad = pad
            del groups[pad]


# Bounds on what inlining may build, as TVM's FuseOps stops fusing at a depth of 256 ops and
# Inductor realizes a pointwise node that grows too large: an injective stage whose body,
# with the stages inlined into it, would nest deeper than MAX_INLINE_DEPTH or hold more than
# MAX_INLINE_SIZE nodes stays a buffer. A stage read twice at the same indices counts once
# (lowering shares one copy of it: loop/plan.py inline_stages); read at other indices, twice
# (its readers recompute it). Without the bounds a chain of hundreds of elementwise ops nests
# past what lowering can walk (limits.py), and a residual chain whose adds are read by the
# next layer's reductions (x = softmax(x) + x) recomputes every layer before it.
MAX_INLINE_DEPTH = 96
MAX_INLINE_SIZE = 2048
# A stage with more than one reader whose body, inlined, loads more than MAX_SHARED_LOADS
# distinct buffer elements stays a buffer too (as Inductor realizes a pointwise node of many
# users past its reads threshold): each reader would load them all again. HF ConvNeXt's
# residual stream, x + layer_scale * fc2(...) permuted back to NCHW, is read by the next
# block's depthwise 7x7 (through its padding) and by the next residual add: inlined, each
# block's convolution recomputed every earlier block's adds of its stage from transposed
# reads of their products, its time growing block by block (0.23 to 1.2 ms in stage 3).
MAX_SHARED_LOADS = 8


def _bound_inlining(stages, inline: Dict[object, None], readers) -> None:
    """Remove from inline (producers first) the stages past the bounds above."""
    by_op = {st.op: st for st in stages}
    cost: Dict[object, tuple] = {}          # inlined stage -> (depth, size, loads) of its body, inlined

    def measure(e, memo, reads) -> tuple:
        if id(e) not in memo:
            kids = [measure(c, memo, reads) for c in children(e)]
            depth, size = 1 + max((k[0] for k in kids), default=0), 1 + sum(k[1] for k in kids)
            loads = sum(k[2] for k in kids)
            if isinstance(e, TensorRead):
                read = (id(e.tensor.op), e.tensor.value_index, expr_key(e.indices))
                if by_op.get(e.tensor.op) in cost:
                    d, n, m = cost[by_op[e.tensor.op]]
                    depth = max(depth, d + 1)
                    size, loads = (size, loads) if read in reads else (size + n, loads + m)
                elif read not in reads:
                    loads += 1
                reads.add(read)
            memo[id(e)] = (depth, size, loads)
        return memo[id(e)]

    for st in stages:
        if st not in inline:
            continue
        memo: Dict[int, tuple] = {}
        reads: set = set()
        parts = [measure(body, memo, reads) for body in st.op.bodies]
        depth, size, loads = max(p[0] for p in parts), sum(p[1] for p in parts), sum(p[2] for p in parts)
        if depth > MAX_INLINE_DEPTH or size > MAX_INLINE_SIZE or (loads > MAX_SHARED_LOADS and len(readers[st]) > 1):
            del inline[st]
        else:
            cost[st] = (depth, size, loads)


def _should_inline(st, feeds_matmul: bool) -> bool:
    if is_attention(st) or not legal.can_inline(st) or st.op.num_outputs != 1 or own_kernel(st):
        return False
    kind = classify(st.op)
    if kind == INDEX_MAP:
        return True
    return kind == ELEMENTWISE and not feeds_matmul


# Math calls the CPU target computes with one libm call per lane (no vector code of its own,
# target/llvm/mathlib.py has none for them).
SCALAR_CALLS = frozenset({"sin", "cos", "tan", "pow", "exp10", "log10", "atan", "atan2", "cosh", "sinh",
                          "acos", "asin", "acosh", "asinh", "atanh", "fmod", "hypot"})


def _costly_broadcast(st, readers) -> bool:
    """st calls a SCALAR_CALLS function and a reader has more elements than st (reads it
    broadcast): inlined, each call would run once per reader element. Llama's rotary
    embedding: cos and sin of [S, D] angles read by the [B, H, S, D] query and key products,
    16 heads x 2 scalar libm calls per element, 3.97 ms of one layer's 10 ms rotary + attention
    kernels (one Zen 1 core); kept, they are [S, D] tables computed once per call."""
    from .schedules import _product      # schedules imports this module
    if not any(isinstance(n, Call) and n.name in SCALAR_CALLS for body in st.op.bodies for n in walk(body)):
        return False
    size = lambda stage: _product(a.dom.extent for a in stage.op.axis)     # noqa: E731
    own = size(st)
    return own is not None and any((size(r) or 0) > own for r in readers[st])


def _value_dependent(st) -> bool:
    """An index map that chooses by the values it reads (a ReLU: x < 0 ? 0 : x), not by
    coordinates (padding): inlined into a convolution or a matmul, it would run once per tap
    and output channel block, or per row and k step of every register tile; kept, it is the
    producer's epilogue (OPT's fc1 -> ReLU -> fc2: its fc2 took 3.4 ms against BERT's 2.4
    with the ReLU in its k loop)."""
    return any(isinstance(n, Select) and any(isinstance(r, TensorRead) for r in walk(n.cond))
               for n in walk(st.op.body))


def _leading(reader_op, read: TensorRead) -> int:
    """How many leading coordinates of reader_op a read passes on unchanged: its index d is
    the reader's axis d for d < p (the indices after that may be anything: a reduce axis,
    0 on a keepdim axis)."""
    axes = [a.var for a in reader_op.axis]
    p = 0
    while p < min(len(axes), len(read.indices)) and read.indices[p] is axes[p]:
        p += 1
    return p


def _read_prefix(reader_op, producer_op) -> Optional[int]:
    """The smallest _leading over reader_op's reads of producer_op (None: it reads none)."""
    best = None
    for body in reader_op.bodies:
        for node in walk(body):
            if isinstance(node, TensorRead) and node.tensor.op is producer_op:
                p = _leading(reader_op, node)
                best = p if best is None else min(best, p)
    return best


def _significant_rank(st) -> int:
    """The rank of st's result without trailing size-1 axes (a keepdim reduction's), at least 1
    (a scalar's is 0)."""
    shape = list(st.op.shape)
    while len(shape) > 1 and isinstance(shape[-1], int) and shape[-1] == 1:
        shape.pop()
    return len(shape)


def _anchor_for(readers, red, anchor_of, prefix):
    """(anchor, prefix) where reduction stage red can be computed, or None."""
    need = _significant_rank(red)
    anchors = set()
    memo: Dict[int, Optional[int]] = {}

    def reach(st, producer_op) -> Optional[int]:
        """The prefix through which st's kernel sees producer_op's coordinates (None: not leading)."""
        p = _read_prefix(st.op, producer_op)
        if p is None:
            return None
        if st.attach_type == "inline":
            key = id(st)
            if key not in memo:
                memo[key] = None
                outs = [reach(c, st.op) for c in readers[st]]
                memo[key] = None if not outs or any(o is None for o in outs) else min(outs)
            return None if memo[key] is None else min(p, memo[key])
        if st not in anchor_of:
            return None
        anchors.add(anchor_of[st])
        if anchor_of[st] is not st:            # st is itself computed at a loop of the anchor
            return min(p, prefix[st])
        return p

    if not readers[red]:
        return None
    seen = [reach(c, red.op) for c in readers[red]]
    if any(p is None for p in seen) or len(anchors) != 1:
        return None
    anchor = anchors.pop()
    if anchor is red or isinstance(anchor.op.body, Reduce) and is_matmul(anchor):
        return None
    if is_conv(red) and not _same_shape(red, anchor):
        return None       # a concatenation's first part: computed per element there, not as a conv kernel
    p = min(seen)
    if p < need or need == 0:
        return None
    return anchor, need
