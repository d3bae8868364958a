"""Transposed convolution (aten.convolution with transposed=True: ConvTranspose1d/2d/3d), 1-d to
3-d, with stride, padding, output_padding, dilation, groups and bias, as one sum in gather
form:

    out[n, oc, *o] = sum over rc, *r of  x[n, g * ICg + rc, i] * w[g * ICg + rc, oc % OCg, *r]
                     where o = i * stride - pad + r * dilation   (g = oc // OCg)

i = (o + pad - r * dilation) / stride is read only where that division is exact and i lies
inside the input (a guarded read: never out of bounds). Each output visits every tap and
skips the ones of another stride phase: stride ** dims times the work of the scatter form,
which no kernel here writes yet (a user of ConvTranspose gets the result, not its speed).
"""
from __future__ import annotations

import schedlang as sl

from .accum import acc_dtype, require_float
from .common import compute, static
from .registry import Unsupported


def conv_transpose(ctx, x, weight, bias, stride, padding, dilation, output_padding, groups) -> sl.Tensor:
    """aten.convolution's transposed case (weight [IC, OC / groups, *K])."""
    require_float("transposed convolution", *(t for t in (x, weight, bias) if t is not None))
    if len({str(t.dtype) for t in (x, weight, bias) if t is not None}) != 1:
        raise Unsupported("transposed convolution of mixed dtypes is not lowered")
    if x.ndim not in (3, 4, 5) or weight.ndim != x.ndim:
        raise Unsupported(f"a transposed convolution of a {x.ndim}-d input with a {weight.ndim}-d weight "
                          "(1-d to 3-d ones are lowered)")
    nsp = x.ndim - 2
    for e in tuple(x.shape[1:]) + tuple(weight.shape):
        static(e, "transposed convolution: channel, kernel and spatial extents")
    groups = static(groups, "transposed convolution: groups")
    ic, ocg, *kernel = weight.shape
    if groups < 1 or x.shape[1] != ic or ic % groups:
        raise ValueError(f"transposed convolution: input of {x.shape[1]} channels and weight {list(weight.shape)} "
                         f"do not match groups={groups}")
    oc, icg = ocg * groups, ic // groups
    if bias is not None and (bias.ndim != 1 or bias.shape[0] != oc):
        raise ValueError(f"transposed convolution: bias of shape {list(bias.shape)}, expected [{oc}]")
    from .conv import per_dim_ints      # (conv.py imports this module)
    stride, pad, dil, extra = (per_dim_ints(v, nsp, what, "transposed convolution") for v, what in (
        (stride, "stride"), (padding, "padding"), (dilation, "dilation"), (output_padding, "output_padding")))
    if min(stride + dil) < 1 or min(pad + extra) < 0:
        raise ValueError(f"transposed convolution: stride {stride} and dilation {dil} must be positive, padding "
                         f"{pad} and output_padding {extra} not negative")
    size = [static(e, "transposed convolution: input size") for e in x.shape[2:]]
    out_size = [(i - 1) * s - 2 * p + d * (k - 1) + e + 1
                for i, s, p, d, k, e in zip(size, stride, pad, dil, kernel, extra)]
    if min(out_size) < 0:
        raise ValueError(f"transposed convolution: the output size {out_size} is negative")
    if min(out_size) == 0:      # (torch returns the empty tensor)
        raise Unsupported("a transposed convolution with an empty result (schedlang tensors have positive extents)")
    out_dtype, acc = str(x.dtype), acc_dtype(x.dtype)
    rc = sl.reduce_axis((0, icg), name="rc")
    r = [sl.reduce_axis((0, k), name=nm) for k, nm in zip(kernel, ("rd", "rh", "rw")[3 - nsp:])]
    zero = sl.const(0, out_dtype)

    def body(idx):
        n, o, sp = idx[0], idx[1], idx[2:]
        channel = (o // ocg) * icg + rc if groups > 1 else rc
        conds, pos = [], []
        for d in range(nsp):
            num = sp[d] + pad[d] - r[d] * dil[d]
            conds.append(num >= 0)
            if stride[d] > 1:
                conds.append(sl.floormod(num, stride[d]) == 0)
            pos.append(sl.floordiv(num, stride[d]) if stride[d] > 1 else num)
            conds.append(pos[-1] < size[d])
        value = sl.if_then_else(sl.all(*conds), x[(n, channel, *pos)], zero)
        return sl.sum(sl.cast(acc, value) * sl.cast(acc, weight[(channel, o % ocg if groups > 1 else o, *r)]),
                      axis=[rc, *r])

    shape = tuple(x.shape[:1]) + (oc,) + tuple(out_size)
    named = {1: lambda n, oc_, ow: body([n, oc_, ow]), 2: lambda n, oc_, oh, ow: body([n, oc_, oh, ow]),
             3: lambda n, oc_, od, oh, ow: body([n, oc_, od, oh, ow])}[nsp]
    epilogue = bias is not None or acc != out_dtype
    result = sl.compute(shape, named, name=ctx.name("conv") if epilogue else ctx.name())
    if not epilogue:
        return result

    def add_bias(idx):
        v = result[tuple(idx)]
        return sl.cast(out_dtype, v + sl.cast(acc, bias[idx[1]]) if bias is not None else v)
    return compute(shape, add_bias, ctx.name())
