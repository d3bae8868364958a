"""Antialiased resampling (`F.interpolate(..., antialias=True)`: `_upsample_bilinear2d_aa`,
`_upsample_bicubic2d_aa`), as torch's CPU kernel computes it (UpSampleKernel.cpp, the
separable `_upsample_aa` path): each output o of a dim reads the inputs within `support` of
its centre `scale * (o + 0.5)`, weighted by the filter (triangle, or Keys' cubic with
a = -0.5) at their distance, stretched by the scale when it shrinks, and normalised to sum 1.
The last dim is resampled first, then the one before it (timm resamples ViT position
embeddings this way).

Each pass is a reduction over the taps of one output: K = 2 * ceil(support) + 1 reads, those
past the output's window weighed out by a select (never a 0 * inf), every index clamped into
the input. The weights' normalisation (their sum per output) is a small [out] stage of its own.
"""
from __future__ import annotations

import math

import schedlang as sl

from .accum import acc_dtype
from .common import compute
from .registry import Unsupported, register_lowering
from .resize import _calc, _scale, _sizes

_BICUBIC_A = -0.5          # torch's antialiased bicubic filter (its plain bicubic uses -0.75)


def _filter(kind: str, x, calc: str):
    """The filter's weight at distance x."""
    c = lambda v: sl.const(v, calc)      # noqa: E731
    x = sl.abs(x)
    if kind == "bilinear":
        return sl.select(x < c(1.0), c(1.0) - x, c(0.0))
    a = _BICUBIC_A
    near = ((c(a + 2.0) * x - c(a + 3.0)) * x) * x + c(1.0)
    far = (((x - c(5.0)) * x + c(8.0)) * x - c(4.0)) * c(a)
    return sl.select(x < c(1.0), near, sl.select(x < c(2.0), far, c(0.0)))


class _Taps:
    """The filter along one dim: window(o) is output o's (centre, first input, tap count);
    weight and index read one tap of such a window."""

    def __init__(self, kind: str, size: int, out: int, factor, align_corners: bool, calc: str):
        self.kind, self.size, self.calc = kind, size, calc
        self.scale = _scale(size, out, factor, align_corners)
        half = 1.0 if kind == "bilinear" else 2.0
        self.support = half * self.scale if self.scale >= 1.0 else half
        self.invscale = 1.0 / self.scale if self.scale >= 1.0 else 1.0
        self.count = int(math.ceil(self.support)) * 2 + 1

    def window(self, o):
        c = lambda v: sl.const(v, self.calc)      # noqa: E731
        center = c(self.scale) * (sl.cast(self.calc, o) + c(0.5))
        first = sl.max(sl.cast("int32", center - c(self.support) + c(0.5)), sl.const(0, "int32"))
        end = sl.min(sl.cast("int32", center + c(self.support) + c(0.5)), sl.const(self.size, "int32"))
        return center, first, end - first

    def weight(self, window, j):
        """The filter's (unnormalised) weight of tap j of an output's window; 0 past it."""
        c = lambda v: sl.const(v, self.calc)      # noqa: E731
        center, first, count = window
        w = _filter(self.kind, (sl.cast(self.calc, j + first) - center + c(0.5)) * c(self.invscale), self.calc)
        return sl.select(j < count, w, c(0.0))

    def index(self, window, j):
        """The input tap j of an output's window reads, clamped into the input."""
        return sl.min(window[1] + j, sl.const(self.size - 1, "int32"))


def _along(ctx, x, dim: int, taps: _Taps, out: int, acc: str, name: str) -> sl.Tensor:
    """x resampled along dim (an axis of x), in acc."""
    k = sl.reduce_axis((0, taps.count), name=f"{name}_k")
    total = compute([out], lambda i: sl.sum(taps.weight(taps.window(i[0]), k), axis=k), ctx.name(f"{name}_total"))
    j = sl.reduce_axis((0, taps.count), name=f"{name}_j")

    def body(i):
        o = i[dim]
        window = taps.window(o)               # built once per output: its taps share it
        index = list(i[:dim]) + [taps.index(window, j)] + list(i[dim + 1:])
        w = sl.cast(acc, taps.weight(window, j) / total[o])
        return sl.sum(sl.select(j < window[2], w * sl.cast(acc, x[tuple(index)]), sl.const(0.0, acc)), axis=j)
    shape = list(x.shape[:dim]) + [out] + list(x.shape[dim + 1:])
    return compute(shape, body, ctx.name(name))


def _upsample_aa(ctx, x, kind: str, output_size, align_corners, scales, op: str):
    if not sl.dtype(str(x.dtype)).is_float:
        raise Unsupported(f"{op} of a {x.dtype} tensor is not lowered")
    sizes, outs, scales = _sizes(x, 2, output_size, scales, op)
    if x.ndim != 4:
        raise ValueError(f"{op}: expected a 4-d input, got {x.ndim}-d")
    calc, acc = _calc(x), acc_dtype(x.dtype)
    t = x
    for d in (1, 0):                  # the last dim first, as torch's separable kernel
        if sizes[d] == outs[d]:
            continue                  # torch skips it too (the filter would copy)
        taps = _Taps(kind, sizes[d], outs[d], scales[d], bool(align_corners), calc)
        t = _along(ctx, t, 2 + d, taps, outs[d], acc, "rows" if d == 1 else "cols")
    if t is x:
        return compute(list(x.shape), lambda i: x[tuple(i)], ctx.name())
    return compute(list(t.shape), lambda i: sl.cast(str(x.dtype), t[tuple(i)]), ctx.name())


def _register(kind: str):
    name = f"_upsample_{kind}2d_aa"

    @register_lowering(f"aten.{name}.vec")
    def vec(ctx, x, output_size, align_corners, scale_factors):
        return _upsample_aa(ctx, x, kind, output_size, align_corners, scale_factors, name)

    @register_lowering(f"aten.{name}.default")
    def default(ctx, x, output_size, align_corners, scales_h=None, scales_w=None):
        return _upsample_aa(ctx, x, kind, output_size, align_corners, [scales_h, scales_w], name)
    return vec, default


for _kind in ("bilinear", "bicubic"):
    _register(_kind)
