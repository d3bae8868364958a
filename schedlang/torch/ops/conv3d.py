"""3-d convolution (aten.convolution of a 5-d input: nn.Conv3d) with stride, padding,
dilation, groups and bias, as one plain sum reduction:

    out[n, oc, od, oh, ow] = sum over rc, rd, rh, rw of  x[n, g * ICg + rc, pos] * w[oc, rc, rd, rh, rw]
                             pos = o * stride + r * dilation - padding   (zero outside x: a guarded read)

It is not a kernel of the convolution kind (conv_schedules.py's register tiles and blocked
layouts are 1-d/2-d): the default schedule of a reduction builds it, correct and compiled,
not fast. A module's static 3-d convolutions without depth dilation reach the lowering as
2-d ones instead (torch/conv3d_slices.py); this form is for the rest.
"""
from __future__ import annotations

import schedlang as sl

from .accum import acc_dtype
from .common import compute


def conv3d(ctx, call) -> sl.Tensor:
    """The convolution of call (conv.ConvCall of a 5-d input)."""
    x, w = call.x, call.weight
    out, acc = str(x.dtype), acc_dtype(x.dtype)
    oc, icg, *kernel = w.shape
    ocg = oc // call.groups
    rc = sl.reduce_axis((0, icg), name="rc")
    r = [sl.reduce_axis((0, k), name=nm) for k, nm in zip(kernel, ("rd", "rh", "rw"))]
    zero = sl.const(0, out)

    def body(n, o, od, oh, ow):
        sp = (od, oh, ow)
        pos = [sp[d] * call.stride[d] + r[d] * call.dilation[d] - call.padding[d] for d in range(3)]
        conds = [c for d in range(3) if call.padding[d] for c in (pos[d] >= 0, pos[d] < x.shape[2 + d])]
        ic = (o // ocg) * icg + rc if call.groups > 1 else rc
        v = x[(n, ic, *pos)]
        v = sl.if_then_else(sl.all(*conds), v, zero) if conds else v
        return sl.sum(sl.cast(acc, v) * sl.cast(acc, w[(o, rc, *r)]), axis=[rc, *r])
    epilogue = call.bias is not None or acc != out
    result = sl.compute(call.out_shape, body, name=ctx.name("conv") if epilogue else ctx.name())
    if not epilogue:
        return result

    def add_bias(idx):
        v = result[tuple(idx)]
        return sl.cast(out, v + sl.cast(acc, call.bias[idx[1]]) if call.bias is not None else v)
    return compute(call.out_shape, add_bias, ctx.name())
