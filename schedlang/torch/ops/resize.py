"""Upsampling over the last 1-3 dims: nearest, nearest-exact, (bi/tri)linear and bicubic, with
torch's CPU source coordinates and weights (UpSample.h, UpSampleKernel.cpp), so that every
output reads the input elements torch reads and weighs them alike.

Coordinates are computed in float32 (float64 for a float64 input) as torch's kernels do:
a scale is 1 / scale_factor when the call gave one, else in / out; with align_corners the
corners map onto each other ((in - 1) / (out - 1)). Every source index is clamped into the
input, so no read is out of bounds. Bicubic runs along the width first (a kernel of its own,
as bilinear's), then sums four rows of that; without this lowering torch.export decomposes
it into sixteen clamped gathers, each a buffer of its own (3.6x torch's time). The
antialiased forms are in resize_aa.py.
"""
from __future__ import annotations

from typing import List, Optional, Sequence

import schedlang as sl
from schedlang.expr.nodes import Expr

from .accum import acc_dtype
from .common import compute, static
from .registry import NeedsStaticShape, Unsupported, register_lowering


def _sizes(x, n: int, output_size, scale_factors, op: str):
    """(input extents, output extents, scales) of the last n dims; a scale is None unless the
    call gave a scale factor for that dim (torch then uses 1 / factor, not in / out)."""
    if x.ndim not in (n + 1, n + 2):
        raise ValueError(f"{op}: expected a {n + 1}-d or {n + 2}-d input, got {x.ndim}-d")
    sizes = [static(e, f"{op}: input size") for e in x.shape[x.ndim - n:]]
    scales = _floats(scale_factors, n, op)
    if output_size is not None and len(output_size):
        if len(output_size) != n:
            raise ValueError(f"{op}: output_size {list(output_size)} must have {n} entries")
        outs = [static(o, f"{op}: output_size") for o in output_size]
    elif scales is not None and all(s is not None for s in scales):
        outs = [int(size * f) for size, f in zip(sizes, scales)]     # torch floors the product
    else:
        raise ValueError(f"{op}: give output_size or scale_factors")
    if any(o <= 0 for o in outs):
        raise ValueError(f"{op}: the output size {outs} must be positive")
    return sizes, outs, scales or [None] * n


def _floats(values, n: int, op: str) -> Optional[List[Optional[float]]]:
    if values is None:
        return None
    vals = list(values)
    if len(vals) != n:
        raise ValueError(f"{op}: scale_factors {vals} must have {n} entries")
    if not all(v is None or isinstance(v, (int, float, sl.expr.nodes.Expr)) for v in vals):
        raise Unsupported(f"{op}: scale factors {vals} are not numbers")
    if not all(v is None or isinstance(v, (int, float)) for v in vals):      # made from sizes: known per shape
        raise NeedsStaticShape(f"{op}: scale factors {vals} are not static numbers")
    return [None if v is None else float(v) for v in vals]


def _scale(size: int, out: int, factor: Optional[float], align_corners: bool = False) -> float:
    """torch's area_pixel_compute_scale / compute_scales_value."""
    if align_corners:
        return (size - 1) / (out - 1) if out > 1 else 0.0
    return 1.0 / factor if factor is not None and factor > 0 else size / out


def _calc(x) -> str:
    return "float64" if str(x.dtype) == "float64" else "float32"


def nearest_index(o: Expr, size: int, out: int, factor: Optional[float], exact: bool, calc: str) -> Expr:
    """The source index of output o: min(floor(o * scale), size - 1), or with exact
    min(floor((o + 0.5) * scale), size - 1); torch's shortcuts for the same and double size."""
    if not exact and out == size:
        return o
    if not exact and out == 2 * size:
        return sl.floordiv(o, 2)
    pos = sl.cast(calc, o)
    if exact:
        pos = pos + sl.const(0.5, calc)
    src = sl.cast("int32", sl.floor(pos * sl.const(_scale(size, out, factor), calc)))
    return sl.min(src, sl.const(size - 1, "int32"))


def _upsample_nearest(ctx, x, n: int, output_size, scales, exact: bool, op: str):
    if sl.dtype(str(x.dtype)).is_bool:
        raise Unsupported(f"{op} of a bool tensor is not lowered")
    sizes, outs, scales = _sizes(x, n, output_size, scales, op)
    lead, calc = x.ndim - n, _calc(x)

    def body(i):
        src = [nearest_index(i[lead + d], sizes[d], outs[d], scales[d], exact, calc) for d in range(n)]
        return x[tuple(list(i[:lead]) + src)]
    return compute(list(x.shape[:lead]) + outs, body, ctx.name())


def linear_taps(o: Expr, size: int, out: int, factor: Optional[float], align_corners: bool, calc: str):
    """(i0, i1, w0, w1): output o reads input i0 and i1 = min(i0 + 1, size - 1) with weights
    1 - l and l (torch's compute_indices_weights_linear)."""
    scale = sl.const(_scale(size, out, factor, align_corners), calc)
    pos = sl.cast(calc, o)
    if align_corners:
        real = scale * pos
    else:
        real = scale * (pos + sl.const(0.5, calc)) - sl.const(0.5, calc)
        real = sl.select(real < sl.const(0.0, calc), sl.const(0.0, calc), real)
    i0 = sl.min(sl.cast("int32", sl.floor(real)), sl.const(size - 1, "int32"))
    lam = real - sl.cast(calc, i0)
    lam = sl.min(sl.max(lam, sl.const(0.0, calc)), sl.const(1.0, calc))
    i1 = sl.min(i0 + 1, sl.const(size - 1, "int32"))
    return i0, i1, sl.const(1.0, calc) - lam, lam


def _upsample_linear(ctx, x, n: int, output_size, align_corners, scales, op: str):
    if not sl.dtype(str(x.dtype)).is_float:
        raise Unsupported(f"{op} of a {x.dtype} tensor is not lowered (torch has float kernels only)")
    sizes, outs, scales = _sizes(x, n, output_size, scales, op)
    lead, calc, acc = x.ndim - n, _calc(x), acc_dtype(x.dtype)
    src, last = x, n            # what the outer dims interpolate, and how many dims it still has to
    if n >= 2:
        src, last = _along_last(ctx, x, sizes[-1], outs[-1], scales[-1], bool(align_corners), calc, acc), n - 1

    def body(i):
        taps = [linear_taps(i[lead + d], sizes[d], outs[d], scales[d], bool(align_corners), calc)
                for d in range(last)]

        def interp(d: int, index: Sequence) -> Expr:
            """Torch's order: the last dim's pair innermost, t0 * w0 + t1 * w1 outward."""
            if d == last:
                return sl.cast(acc, src[tuple(list(i[:lead]) + list(index) + list(i[lead + last:]))])
            i0, i1, w0, w1 = taps[d]
            t0, t1 = interp(d + 1, list(index) + [i0]), interp(d + 1, list(index) + [i1])
            return t0 * sl.cast(acc, w0) + t1 * sl.cast(acc, w1)
        return sl.cast(str(x.dtype), interp(0, []))
    return compute(list(x.shape[:lead]) + outs, body, ctx.name())


def _along_last(ctx, x, size: int, out: int, factor, align_corners: bool, calc: str, acc: str) -> sl.Tensor:
    """x interpolated along its last dim only, in acc: t[.., o] = x[.., i0] * w0 + x[.., i1] * w1,
    a sum over two taps, so that it is a kernel of its own (a window reduction): every input
    row is interpolated once and read by the output rows next to it (a 2x bilinear upsample
    makes half the data-dependent reads of interpolating all four corners per output)."""
    tap = sl.reduce_axis((0, 2), name="tap")

    def body(i):
        i0, i1, w0, w1 = linear_taps(i[-1], size, out, factor, align_corners, calc)
        v = x[tuple(list(i[:-1]) + [i0 + tap * (i1 - i0)])]
        return sl.sum(sl.cast(acc, v) * sl.cast(acc, sl.select(tap < 1, w0, w1)), axis=tap)
    return compute(list(x.shape[:-1]) + [out], body, ctx.name("rows"))


def _register_nearest(n: int, exact: bool):
    base = f"aten.{'_upsample_nearest_exact' if exact else 'upsample_nearest'}{n}d"
    op = base[5:]
    dims = ("scales",) if n == 1 else ("scales_d", "scales_h", "scales_w")[3 - n:]

    @register_lowering(f"{base}.vec")
    def vec(ctx, x, output_size, scale_factors):
        return _upsample_nearest(ctx, x, n, output_size, scale_factors, exact, op)

    @register_lowering(f"{base}.default")
    def default(ctx, x, output_size, *scales, **kw):
        given = list(scales) + [kw.get(name) for name in dims[len(scales):]]
        return _upsample_nearest(ctx, x, n, output_size, given, exact, op)
    return vec, default


def _register_linear(n: int):
    name = {1: "upsample_linear1d", 2: "upsample_bilinear2d", 3: "upsample_trilinear3d"}[n]
    dims = ("scales",) if n == 1 else ("scales_d", "scales_h", "scales_w")[3 - n:]

    @register_lowering(f"aten.{name}.vec")
    def vec(ctx, x, output_size, align_corners, scale_factors):
        return _upsample_linear(ctx, x, n, output_size, align_corners, scale_factors, name)

    @register_lowering(f"aten.{name}.default")
    def default(ctx, x, output_size, align_corners, *scales, **kw):
        given = list(scales) + [kw.get(d) for d in dims[len(scales):]]
        return _upsample_linear(ctx, x, n, output_size, align_corners, given, name)
    return vec, default


CUBIC_A = -0.75       # torch's bicubic (Keys') coefficient


def cubic_taps(o: Expr, size: int, out: int, factor: Optional[float], align_corners: bool, calc: str):
    """(index of tap k, [w0, w1, w2, w3]): output o reads input min(max(i - 1 + k, 0), size - 1)
    for k = 0..3 with weight wk, i = floor(real), t = real - i (torch's
    compute_indices_weights_cubic and get_cubic_upsample_coefficients, same operation order)."""
    scale = sl.const(_scale(size, out, factor, align_corners), calc)
    pos = sl.cast(calc, o)
    real = scale * pos if align_corners else scale * (pos + sl.const(0.5, calc)) - sl.const(0.5, calc)
    i = sl.cast("int32", sl.floor(real))
    t = real - sl.cast(calc, i)
    c = lambda v: sl.const(v, calc)       # noqa: E731
    a = CUBIC_A

    def near(x):          # cubic_convolution1: ((A + 2) x - (A + 3)) x x + 1
        return (c(a + 2) * x - c(a + 3)) * x * x + c(1.0)

    def far(x):           # cubic_convolution2: ((A x - 5 A) x + 8 A) x - 4 A
        return ((c(a) * x - c(5 * a)) * x + c(8 * a)) * x - c(4 * a)
    rest = c(1.0) - t
    weights = [far(t + c(1.0)), near(t), near(rest), far(rest + c(1.0))]

    def index(k):
        return sl.min(sl.max(i + (k - 1), sl.const(0, "int32")), sl.const(size - 1, "int32"))
    return index, weights


def _upsample_bicubic(ctx, x, output_size, align_corners, scales, op: str):
    if not sl.dtype(str(x.dtype)).is_float:
        raise Unsupported(f"{op} of a {x.dtype} tensor is not lowered (torch has float kernels only)")
    if x.ndim != 4:
        raise ValueError(f"{op}: expected a 4-d input, got {x.ndim}-d")
    (h, w), (oh, ow), (fh, fw) = _sizes(x, 2, output_size, scales, op)
    calc, acc, corners = _calc(x), acc_dtype(x.dtype), bool(align_corners)
    tap = sl.reduce_axis((0, 4), name="tap")

    def rows(i):
        index, wts = cubic_taps(i[-1], w, ow, fw, corners, calc)
        wt = sl.select(tap < 1, wts[0], sl.select(tap < 2, wts[1], sl.select(tap < 3, wts[2], wts[3])))
        return sl.sum(sl.cast(acc, x[(i[0], i[1], i[2], index(tap))]) * sl.cast(acc, wt), axis=tap)
    along = compute(list(x.shape[:3]) + [ow], rows, ctx.name("rows"))

    def body(i):
        index, wts = cubic_taps(i[2], h, oh, fh, corners, calc)
        total = None
        for k in range(4):      # torch's order: t0 * w0 + t1 * w1 + ...
            term = along[(i[0], i[1], index(k), i[3])] * sl.cast(acc, wts[k])
            total = term if total is None else total + term
        return sl.cast(str(x.dtype), total)
    return compute(list(x.shape[:2]) + [oh, ow], body, ctx.name())


@register_lowering("aten.upsample_bicubic2d.vec")
def upsample_bicubic2d_vec(ctx, x, output_size, align_corners, scale_factors):
    return _upsample_bicubic(ctx, x, output_size, align_corners, scale_factors, "upsample_bicubic2d")


@register_lowering("aten.upsample_bicubic2d.default")
def upsample_bicubic2d(ctx, x, output_size, align_corners, scales_h=None, scales_w=None):
    return _upsample_bicubic(ctx, x, output_size, align_corners, [scales_h, scales_w], "upsample_bicubic2d")


for _n in (1, 2, 3):
    _register_nearest(_n, exact=False)
    _register_nearest(_n, exact=True)
    _register_linear(_n)
