"""Reflection and replication padding of the last 1-3 dims (F.pad's "reflect" and "replicate"
modes, Conv2d's padding_mode="reflect"/"replicate"), as torch's kernels index them:

    reflect    x[..., s]   s = o - before, mirrored at the edges without repeating them:
                           -s below 0, 2 (n - 1) - s past n - 1 (pads below n: one mirror)
    replicate  x[..., min(max(s, 0), n - 1)]

Every read is inside the input. Without these lowerings torch.export decomposes the pads into
index gathers with clamped 64-bit index chains and range checks. Still a gather a lane along
the last dim (the mirrored index is a select): a 3-pixel reflect pad of 64 x 128 x 128 floats
is 7x torch's 0.06 ms (an if_then_else reading the row's inside contiguously was slower:
both its loads are made for every vector). A pad torch would refuse (a reflect pad of n or
more, a negative pad) runs in torch, which raises its error.
"""
from __future__ import annotations

import schedlang as sl

from .common import compute, static
from .registry import Unsupported, register_lowering


def _padded(ctx, x, pad, dims: int, mode: str, op: str):
    pad = [static(p, f"{op}: padding") for p in pad]
    if len(pad) != 2 * dims or x.ndim not in (dims + 1, dims + 2):
        raise ValueError(f"{op}: padding {pad} for a {x.ndim}-d input (expected {2 * dims} values and a "
                         f"{dims + 1}-d or {dims + 2}-d input)")
    lead = x.ndim - dims
    sizes = [static(e, f"{op}: input size") for e in x.shape[lead:]]
    before = [pad[2 * (dims - 1 - d)] for d in range(dims)]
    after = [pad[2 * (dims - 1 - d) + 1] for d in range(dims)]
    if any(p < 0 for p in before + after):
        raise Unsupported(f"{op} with a negative padding {pad}")
    if mode == "reflect" and any(max(b, a) >= n for b, a, n in zip(before, after, sizes)):
        raise Unsupported(f"{op}: padding {pad} not below the input size {sizes} (torch raises)")

    def source(o, d: int):
        n, s = sizes[d], o - before[d] if before[d] else o
        if mode == "replicate":
            return sl.min(sl.max(s, sl.const(0, "int32")), sl.const(n - 1, "int32"))
        low = sl.select(s < 0, -s, s)
        return sl.select(low > n - 1, sl.const(2 * (n - 1), "int32") - low, low)

    def body(i):
        return x[tuple(list(i[:lead]) + [source(i[lead + d], d) for d in range(dims)])]
    shape = list(x.shape[:lead]) + [n + b + a for n, b, a in zip(sizes, before, after)]
    return compute(shape, body, ctx.name())


def _register(dims: int, mode: str):
    op = f"{'reflection' if mode == 'reflect' else 'replication'}_pad{dims}d"

    @register_lowering(f"aten.{op}.default")
    def lowering(ctx, x, padding):
        return _padded(ctx, x, padding, dims, mode, op)
    return lowering


for _dims in (1, 2, 3):
    for _mode in ("reflect", "replicate"):
        _register(_dims, _mode)
