"""aten.convolution, 1-d and 2-d (stride, padding, dilation, groups incl. depthwise, bias),
as one sum reduction tagged CONV_TAG (transposed ones: conv_transpose.py; 3-d: conv3d.py):

    conv[n, oc, *o] = sum over rc, *r of  x[n, g * ICg + rc, o * stride + r * dilation - pad]
                                          * w[oc, rc, *r]          (g = oc // OCg)

A padded dense convolution with packed weights (the CPU's register-tiled kernels), and any
with a kernel of PAD_COPY_KERNEL taps or more, reads a zero-padded copy `<name>_pad` of its input (tagged CONV_PAD_TAG:
written by the kernel producing that input where it is a blocked dense convolution,
pad_fusion.py, else a kernel of its own) without guards: a guarded read per tap and output in the register-tiled inner
loop cost more than the convolution (ResNet-18's 3x3 layers ran 2x slower, the 7x7 stem
too). So do grouped ones (depthwise) with output rows of GROUPED_PAD_MIN_WIDTH or more: their
copy is a plane per task made inside the convolution's kernel (depthwise_schedules.py).
Others guard their input reads instead (zero outside the input: never a read out of
bounds). The sum accumulates in float32 for float16/bfloat16; a bias
and the cast back are an elementwise stage `<name>` after the sum `<name>_conv`, which
fusion keeps in the convolution's kernel (its epilogue, with what follows: batch norm,
ReLU, a residual add).

A constant weight (a parameter) is read as blocks [OC / width, ICg, *K, width] made once by
the compiled module (prepack.py "conv": a vector of output channels innermost, as the
NCHWc kernels of conv_schedules.py read it), or where it has taps and whole blocks of
input channels, as [OC / (B * width), ICg / width, *K, width, B, width] ("conv_tiles": in
the order the kernel's reduction reads it, B blocks of the register tile side by side:
conv_schedules.weight_blocks); `fold_batch_norm` builds the convolution again with a
following eval-mode batch norm folded into those blocks and its bias.

bfloat16: the blocks are float32 (prepack.dtype_of); an input that stays unblocked (1-d, or
channels not whole blocks) is read from a float32 copy (_as_float32, or _padded's), converted
once. On a CPU with avx512bf16 a dense one with pairs of input channels runs the bfloat16 dot
product instead (reads_pairs): its weight in pairs of input channels ("conv_pairs"); a 2-d one
of whole blocks of input channels reads its input blocked (layout.py: a pair of a block's
channels side by side), a 1-d one (or a 2-d one of the program's input, unpadded: pair_copy)
from a padded copy `<name>_pairs` with each pair side by side."""
from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Optional, Tuple

import schedlang as sl
from schedlang.dtypes import dtype
from schedlang.tensor.classify import INDEX_MAP, classify
from schedlang.tensor.op import ComputeOp
from schedlang.topi.x86_intrin import PAIR, bf16_dot_lanes, bf16_dot_widths

from ..fuse import CONV_PAD_TAG, CONV_PAIRS_TAG, CONV_TAG
from . import conv_tensorcore
from .conv3d import conv3d
from .conv_transpose import conv_transpose
from .conv_winograd import winograd_conv, winograd_tile
from .accum import acc_dtype, require_float
from .common import compute, cpu_layouts, static
from .registry import Unsupported, register_lowering

@dataclass(frozen=True)
class ConvCall:
    """The arguments of one lowered convolution (static channels, kernel and spatial extents)."""

    x: sl.Tensor
    weight: sl.Tensor
    bias: Optional[sl.Tensor]
    stride: Tuple[int, ...]
    padding: Tuple[int, ...]
    dilation: Tuple[int, ...]
    groups: int

    @property
    def out_shape(self) -> tuple:
        n, _, *size = self.x.shape
        kernel = self.weight.shape[2:]
        return (n, self.weight.shape[0]) + tuple(
            (i + 2 * p - d * (k - 1) - 1) // s + 1
            for i, k, s, p, d in zip(size, kernel, self.stride, self.padding, self.dilation))


PAD_COPY_KERNEL = 5
# Output rows of a grouped convolution at least this long read a padded plane; shorter ones
# (MobileNetV2's 7x7) guard their reads: there the copy costs more than the guards it saves.
GROUPED_PAD_MIN_WIDTH = 8

# The convolution each lowered result computes, for the batch norm that may follow it.
_CALLS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def conv_call_of(t: sl.Tensor) -> Optional[ConvCall]:
    """The convolution whose lowering returned t, or None."""
    return _CALLS.get(t.op)


def per_dim_ints(value, n: int, what: str, op: str = "convolution") -> Tuple[int, ...]:
    """A per-spatial-dim argument (stride, padding ...) as n static ints; one value repeats."""
    values = [static(v, f"{op}: {what}") for v in (value if isinstance(value, (list, tuple)) else [value])]
    if len(values) == 1:
        values = values * n
    if len(values) != n:
        raise ValueError(f"{op}: {what} has {len(values)} values for {n} spatial dims")
    return tuple(values)


def check_call(x, weight, bias, stride, padding, dilation, groups) -> ConvCall:
    """The ConvCall of aten.convolution's arguments (Unsupported outside 1-d/2-d static convs)."""
    require_float("convolution", *(t for t in (x, weight, bias) if t is not None))
    if len({str(t.dtype) for t in (x, weight, bias) if t is not None}) != 1:
        raise Unsupported("convolution of mixed dtypes is not lowered")
    if x.ndim not in (3, 4, 5) or weight.ndim != x.ndim:
        raise Unsupported(f"a {x.ndim}-d input with a {weight.ndim}-d weight (1-d to 3-d convolutions are lowered)")
    nsp = x.ndim - 2
    for e in tuple(x.shape[1:]) + tuple(weight.shape):
        static(e, "convolution: channel, kernel and spatial extents")
    groups = static(groups, "convolution: groups")
    oc, icg = weight.shape[:2]
    if groups < 1 or x.shape[1] != icg * groups or oc % groups:
        raise ValueError(f"convolution: input of {x.shape[1]} channels and weight {list(weight.shape)} do not "
                         f"match groups={groups}")
    if bias is not None and (bias.ndim != 1 or bias.shape[0] != oc):
        raise ValueError(f"convolution: bias of shape {list(bias.shape)}, expected [{oc}]")
    call = ConvCall(x, weight, bias, per_dim_ints(stride, nsp, "stride"), per_dim_ints(padding, nsp, "padding"),
                    per_dim_ints(dilation, nsp, "dilation"), groups)
    if min(call.stride + call.dilation) < 1 or min(call.padding) < 0:
        raise ValueError(f"convolution: stride {call.stride} and dilation {call.dilation} must be positive, "
                         f"padding {call.padding} not negative")
    if min(call.out_shape[2:]) < 1:
        raise ValueError(f"convolution: the output {call.out_shape} is empty (input {list(x.shape)}, kernel "
                         f"{list(weight.shape[2:])})")
    return call


def block_width(ctx, call: ConvCall) -> int:
    """Output channels of a packed weight block: a native vector of the accumulator dtype
    (or the program's narrower ctx.conv_lanes, conv_lanes.py; at most OC) for a dense
    convolution on the CPU, which conv_schedules vectorizes over output channels; for a
    depthwise one (one input channel per output channel) the same blocks, which it reads
    as a vector of channels over blocked activations (layout.py);
    for a grouped one whose input and output channels per group are multiples of that
    vector (RegNet's groups of 16 to 56, ResNeXt's wider stages) the same blocks too, each
    within one group (the NCHWc kernel of dense ones reads a group's input blocks); 1
    otherwise (other grouped convolutions run along the width)."""
    target, oc = ctx.target, call.weight.shape[0]
    depthwise = call.groups == oc == call.x.shape[1]
    if not cpu_layouts(target):
        return 1
    lanes = target.native_lanes(dtype(acc_dtype(call.x.dtype)).bits)
    if ctx.conv_lanes:           # half a vector for this program (conv_lanes.py)
        lanes = min(lanes, ctx.conv_lanes)
    if call.groups != 1 and not depthwise:
        icg, ocg = call.weight.shape[1], oc // call.groups
        return lanes if lanes > 1 and icg % lanes == 0 and ocg % lanes == 0 else 1
    width = max(1, min(oc, lanes))
    while oc % width and width > lanes // 4:    # a block dividing OC (24: 8): no guarded channel tail in the sum
        width //= 2
    return width


def reads_pairs(ctx, call: ConvCall, width: int) -> bool:
    """Whether call runs on the bfloat16 dot product (vdpbf16ps, topi/x86_intrin.py): a dense
    bfloat16 convolution, 1-d of an even number of input channels or 2-d of whole blocks of
    them, its blocks of output channels one of the instruction's vectors (zmm, or ymm for the
    8-channel blocks of conv_lanes.py: SelecSLS, Xception), on a target that has it.
    Its weight is packed in pairs (prepack.py "conv_pairs"); a 2-d one reads its blocked input
    (layout.py) and a 1-d one a copy with each pair of channels side by side (pair_copy); the
    register tile (conv_schedules.tile_sums) then does a pair of input channels per
    instruction, as oneDNN's bfloat16 convolutions do: wav2vec2's feature encoder (512 -> 512,
    3 and 2 taps, stride 2) ran the float32 tile on converted values at half the rate of
    eager's; bfloat16 ResNet-50, its 1x1 and strided convolutions on the float32 tile, 34-35 ms
    against 22-25 ms with pairs (2-core Zen 4, 2 threads; Inductor 23-24)."""
    icg = call.weight.shape[1]
    if not (call.groups == 1 and icg % PAIR == 0 and str(call.x.dtype) == "bfloat16"
            and width in bf16_dot_widths(bf16_dot_lanes(ctx.target))):
        return False
    # 2-d: whole blocks of input channels, read from blocked activations (layout.py), where
    # each pair of a block's channels is side by side already; not an unpadded one of an index
    # map (a concatenation, a channel shuffle), which fusion inlines into it: a read through
    # it is no pair of one tensor's channels (its padded copy is a tensor of its own)
    return call.x.ndim == 3 or (call.x.ndim == 4 and icg % width == 0
                                and (max(call.padding) > 0 or not _index_map(call.x)))


def _index_map(x: sl.Tensor) -> bool:
    """Whether x is computed by an index map (fuse.py inlines those into their readers)."""
    return isinstance(x.op, ComputeOp) and classify(x.op) == INDEX_MAP


def pair_copy(call: ConvCall) -> bool:
    """Whether a convolution on the bfloat16 dot product (reads_pairs) reads its input from a
    copy with each pair of channels side by side (_padded with pairs): a 1-d one, and a 2-d one
    that reads a program input (a placeholder: never blocked) with no padding. Any other 2-d one
    reads its input, or its padded copy, blocked [N, C / L, H, W, L] (layout.py), a pair of a
    block's channels side by side (conv_schedules._pair_dot)."""
    return call.x.ndim == 3 or (max(call.padding) == 0 and not isinstance(call.x.op, ComputeOp))


def packed_weight(ctx, call: ConvCall, width: int, bn: tuple = (), params: tuple = ()):
    """(the placeholder of call's weight packed in blocks of width output channels, with the
    batch norm tensors bn folded in: prepack.py "conv_pairs" where reads_pairs holds,
    "conv_tiles" of conv_schedules.weight_blocks blocks side by side, or "conv" where that is
    0; those blocks), (None, 0) when the weight is not a constant of the module."""
    from ..conv_schedules import weight_blocks
    if reads_pairs(ctx, call, width):
        packed = ctx.prepacked("conv_pairs", (call.weight,) + bn, width, params)
        return (packed, 0) if packed is not None else (None, 0)
    blocks = weight_blocks(ctx.target, tuple(call.weight.shape), call.out_shape[-1], width) \
        if call.groups == 1 and width > 1 else 0
    if blocks:
        packed = ctx.prepacked("conv_tiles", (call.weight,) + bn, width, (blocks,) + params)
    else:
        packed = ctx.prepacked("conv", (call.weight,) + bn, width, params)
    return (packed, blocks) if packed is not None else (None, 0)


def conv_of(ctx, call: ConvCall, packed=None, bias=None, width: int = 1, blocks: int = 0) -> sl.Tensor:
    """The convolution of call: the weight read from packed blocks of width output channels
    when given ("conv_tiles" of blocks of them side by side, "conv" where blocks is 0:
    packed_weight), plus bias (call's bias when
    None), cast to x's dtype."""
    x, w = call.x, call.weight
    out, acc = str(x.dtype), acc_dtype(x.dtype)
    bias = call.bias if bias is None else bias
    if width == 1:      # tensor cores where they apply (cuda, float16/bfloat16: conv_tensorcore.py)
        gemm = conv_tensorcore.maybe(ctx, call, lambda *i: w[i] if packed is None else packed[(*i, 0)], bias)
        if gemm is not None:
            _CALLS[gemm.op] = call
            return gemm
    nsp = x.ndim - 2
    oc, icg, *kernel = w.shape
    ocg = oc // call.groups
    size = x.shape[2:]
    rc = sl.reduce_axis((0, icg), name="rc")
    r = [sl.reduce_axis((0, k), name=nm) for k, nm in zip(kernel, ("rh", "rw") if nsp == 2 else ("rw",))]
    out_shape = call.out_shape

    grouped_pad = call.groups > 1 and out_shape[-1] >= GROUPED_PAD_MIN_WIDTH   # depthwise_schedules.py
    dense_packed = width > 1 and (call.groups == 1 or icg > 1)    # (or grouped, a block within a group)
    pairs = packed is not None and reads_pairs(ctx, call, width)
    paired = pairs and pair_copy(call)          # the input read from a copy in pairs
    pad_copy = max(call.padding) > 0 and (dense_packed or max(kernel) >= PAD_COPY_KERNEL or grouped_pad) \
        and not paired
    # a bfloat16 input of a register-tiled convolution that stays unblocked read as float32,
    # converted once (_as_float32)
    convert = dense_packed and str(x.dtype) == "bfloat16" and acc == "float32" and (nsp == 1 or icg % width)
    if paired:
        x = _padded(ctx, call, pairs=True)
    elif pad_copy:
        x = _padded(ctx, call, acc if convert else None)
    elif convert:
        x = _as_float32(ctx, x)

    def read_x(n, o, ic):
        if paired:
            return x[(n, ic // PAIR, *[o[d] * call.stride[d] + r[d] * call.dilation[d] for d in range(nsp)], ic % PAIR)]
        if pad_copy:
            return x[(n, ic, *[o[d] * call.stride[d] + r[d] * call.dilation[d] for d in range(nsp)])]
        pos = [o[d] * call.stride[d] + r[d] * call.dilation[d] - call.padding[d] for d in range(nsp)]
        conds = []
        for d in range(nsp):
            if call.padding[d]:
                conds.append(pos[d] >= 0)
            last = (out_shape[2 + d] - 1) * call.stride[d] + (kernel[d] - 1) * call.dilation[d] - call.padding[d]
            if last >= size[d]:
                conds.append(pos[d] < size[d])
        v = x[(n, ic, *pos)]
        if not conds:
            return v
        return sl.if_then_else(conds[0] if len(conds) == 1 else sl.all(*conds), v, sl.const(0, str(x.dtype)))

    def read_w(o):
        if packed is None:
            return w[(o, rc, *r)]
        if pairs:
            return packed[(o // width, rc // PAIR, *r, o % width, rc % PAIR)]
        if blocks:
            block = o // width
            return packed[(block // blocks, rc // width, *r, rc % width, block % blocks, o % width)]
        return packed[(o // width, rc, *r, o % width)] if width > 1 else packed[(o, rc, *r, 0)]

    def body(idx):
        n, o, sp = idx[0], idx[1], idx[2:]
        g = o if ocg == 1 else o // ocg
        ic = rc if call.groups == 1 else g * icg + rc if icg > 1 else g
        # paired: rc the last reduce axis, which a tensor intrinsic's reduction is matched with
        # (blocked, layout.py splits rc in (rco, .., rci), rci last)
        return sl.sum(sl.cast(acc, read_x(n, sp, ic)) * sl.cast(acc, read_w(o)), axis=[*r, rc] if paired else [rc, *r])

    epilogue = bias is not None or acc != out
    result = sl.compute(out_shape, _named(body, nsp), name=ctx.name("conv") if epilogue else ctx.name(),
                        tag=CONV_TAG)
    if epilogue:
        def add_bias(idx):
            v = result[tuple(idx)]
            return sl.cast(out, v + sl.cast(acc, bias[idx[1]]) if bias is not None else v)
        result = compute(out_shape, add_bias, ctx.name())
    _CALLS[result.op] = call
    return result


def _padded(ctx, call: ConvCall, dtype: Optional[str] = None, pairs: bool = False) -> sl.Tensor:
    """call's input with its zero padding on both sides of each spatial dim (as far as the
    convolution reads: no row past its last window), converted to dtype when given; with
    pairs, laid out [N, C / 2, *S, 2] (C even): each pair of channels side by side at every
    position, so the dot product loads a pair as one 32-bit value (reads_pairs)."""
    x = call.x
    dtype = dtype or str(x.dtype)
    nsp = x.ndim - 2
    kernel = call.weight.shape[2:]
    ext = [(o - 1) * s + (k - 1) * d + 1 for o, s, k, d in zip(call.out_shape[2:], call.stride, kernel, call.dilation)]

    def body(idx):
        n, c, sp = idx[0], idx[1], idx[2:2 + nsp]
        if pairs:
            c = c * PAIR + idx[-1]
        pos = [sp[d] - call.padding[d] for d in range(nsp)]
        conds = [cond for d in range(nsp) for cond in (pos[d] >= 0, pos[d] < x.shape[2 + d])]
        return sl.if_then_else(sl.all(*conds), sl.cast(dtype, x[(n, c, *pos)]), sl.const(0, dtype))
    if pairs:
        shape = (x.shape[0], x.shape[1] // PAIR, *ext, PAIR)
        fn = (lambda n, c, w, e: body([n, c, w, e])) if nsp == 1 else (lambda n, c, h, w, e: body([n, c, h, w, e]))
    else:
        shape = tuple(x.shape[:2]) + tuple(ext)
        fn = (lambda n, c, h, w: body([n, c, h, w])) if nsp == 2 else (lambda n, c, w: body([n, c, w]))
    # a kernel of its own (fuse.OWN_KERNEL_TAGS), never inlined into the convolution
    tag = CONV_PAIRS_TAG if pairs else CONV_PAD_TAG
    return sl.compute(shape, fn, name=ctx.name("pairs" if pairs else "pad"), tag=tag)


def _as_float32(ctx, x: sl.Tensor) -> sl.Tensor:
    """x converted to float32, a stage of its own (_padded converts a padded copy alike), for a
    dense convolution whose input stays unblocked (1-d, or channels not whole blocks: layout.py
    blocks 2-d activations of whole blocks only). Its register tile (blocked NCHW, a vector of
    output channels by a few columns) broadcasts each input value once per weight vector, and
    a bfloat16 one took a load, a shift and a broadcast each time, on the vector ports the
    multiply-adds need: wav2vec2's 512 -> 512 3-tap 1-d convolution ran at half the float32
    tile's speed, 22-24 ms against 12.1-13.0 (2-core Zen 4, 2 threads); converted once,
    12.9-13.1. Blocked NCHWc kernels are left as they are: their tiles reuse a broadcast over
    up to 4 weight vectors, and a float32 copy was one more kernel wherever the activation had
    a second reader (ResNet-50 in bfloat16: 75 -> 99 kernels, 37.9 -> 45.1 ms)."""
    return sl.compute(tuple(x.shape), lambda *i: sl.cast("float32", x[i]), name=ctx.name("f32"))


def _named(body, nsp: int):
    """body (of the index list) as a function of axes named n, oc, (oh,) ow."""
    if nsp == 2:
        return lambda n, oc, oh, ow: body([n, oc, oh, ow])
    return lambda n, oc, ow: body([n, oc, ow])


@register_lowering("aten.convolution.default")
def convolution(ctx, x, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    if transposed:
        return conv_transpose(ctx, x, weight, bias, stride, padding, dilation, output_padding, groups)
    call = check_call(x, weight, bias, stride, padding, dilation, groups)
    if x.ndim == 5:
        return conv3d(ctx, call)
    m = winograd_tile(ctx, call)
    result = winograd_conv(ctx, call, m) if m is not None else None
    if result is not None:
        _CALLS[result.op] = call
        return result
    width = block_width(ctx, call)
    packed, blocks = packed_weight(ctx, call, width) if width > 1 else (None, 0)
    return conv_of(ctx, call, packed, width=width, blocks=blocks)


def fold_batch_norm(ctx, call: ConvCall, gamma, beta, mean, var, eps: float) -> Optional[sl.Tensor]:
    """The convolution call followed by an eval-mode batch norm, folded: weights scaled per
    output channel and a new bias, both constants made by the compiled module (prepack.py);
    None when the weight or a batch norm tensor is not a constant of the module."""
    m = winograd_tile(ctx, call)
    if m is not None:
        shift = ctx.prepacked("bn_shift", (var, mean, gamma, beta, call.bias), 1, (float(eps),))
        result = winograd_conv(ctx, call, m, (gamma, mean, var), (float(eps),), shift) if shift is not None else None
        return _folded(result)
    width = block_width(ctx, call)
    packed, blocks = packed_weight(ctx, call, width, (gamma, mean, var), (float(eps),))
    shift = ctx.prepacked("bn_shift", (var, mean, gamma, beta, call.bias), 1, (float(eps),))
    if packed is None or shift is None:
        return None
    return _folded(conv_of(ctx, call, packed, shift, width, blocks))


def _folded(result: Optional[sl.Tensor]) -> Optional[sl.Tensor]:
    """result, no longer the plain convolution of its call: a second batch norm after it
    (RepGhost's bn(bn(conv(x)))) is applied to it, not folded into the call's weights again,
    which would drop the first one."""
    if result is not None:
        _CALLS.pop(result.op, None)
    return result
