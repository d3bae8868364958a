"""Pooling over the last 1-3 dims: max pooling (values, and indices when read), average
pooling and adaptive average/max pooling, with torch's output sizes and windows.

Each is one Reduction stage over a small window (reduce axes the size of the kernel)
followed, for averages, by a stage dividing by the window's count. A window tap outside
the input (padding, a ceil_mode window past the end, the shorter windows of an adaptive
pool) reads nothing: its read sits under `sl.if_then_else` and gives the reduction's
identity (-inf, or the dtype's lowest value, for max; 0 for sums), so no read is out of
bounds. F.max_pool1d and the 1-d adaptive pools reach here as their 2-d forms (torch
unsqueezes); 3-d pools are lowered by the same code.

Max pooling's indices (flat over the pooled dims of the input, as torch's) are a stage of
their own, an argmax over the window, built only when the graph reads them: when it does
not (every eval-mode CNN), the kernel computes the values alone.
"""
from __future__ import annotations

from typing import Callable, List, Sequence, Tuple

import schedlang as sl
from schedlang.expr.nodes import Expr

from .accum import acc_and_result_names, acc_dtype, cast_stage
from .common import compute, static
from .registry import LowerContext, Unsupported, register_lowering

# A tap: (input coordinate, conditions under which it lies inside the input and the window).
Tap = Callable[[Expr, Expr], Tuple[Expr, List[Expr]]]


def _ints(value, n: int, what: str, op: str) -> List[int]:
    """A pooling argument (int or list of 1 or n ints) as n static ints."""
    vals = [value] if isinstance(value, (int, Expr)) else list(value)
    if len(vals) == 1:
        vals = vals * n
    if len(vals) != n:
        raise ValueError(f"{op}: {what} must be one int or {n} ints, got {list(vals)}")
    return [static(v, f"{op}: {what}") for v in vals]


def _spatial(x, n: int, op: str) -> List[int]:
    """The n pooled extents of x (the last n dims; x has one or two dims before them)."""
    if x.ndim not in (n + 1, n + 2):
        raise ValueError(f"{op}: expected a {n + 1}-d or {n + 2}-d input, got {x.ndim}-d")
    return [static(e, f"{op}: input size") for e in x.shape[x.ndim - n:]]


def pool_out_size(size: int, k: int, stride: int, pad: int, dilation: int, ceil_mode: bool, op: str) -> int:
    """torch's pooling_output_shape: with ceil_mode the last window may hang over the end but
    must start inside the input or its left padding."""
    if k <= 0 or stride <= 0 or dilation <= 0 or pad < 0:
        raise ValueError(f"{op}: kernel {k}, stride {stride}, dilation {dilation} must be positive and "
                         f"padding {pad} non-negative")
    if 2 * pad > k:
        raise ValueError(f"{op}: padding {pad} must be at most half of the kernel size {k}")
    span = size + 2 * pad - dilation * (k - 1) - 1
    out = (span + (stride - 1 if ceil_mode else 0)) // stride + 1
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1
    if out <= 0:
        raise ValueError(f"{op}: an input of size {size} is too small for kernel {k} (dilation {dilation}, "
                         f"padding {pad}): the output would be empty")
    return out


def strided_tap(size: int, out: int, k: int, stride: int, pad: int, dilation: int = 1) -> Tap:
    """Tap r of output o at o * stride - pad + r * dilation; bounds tested only where some
    window crosses them."""
    def tap(o, r):
        e = o * stride + r * dilation - pad if (stride, dilation) != (1, 1) else o + r - pad
        conds = []
        if pad > 0:
            conds.append(e >= 0)
        if (out - 1) * stride - pad + (k - 1) * dilation >= size:
            conds.append(e < size)
        return e, conds
    return tap


def adaptive_bounds(o, size: int, out: int) -> Tuple[Expr, Expr]:
    """torch's adaptive window of output o: [floor(o * size / out), ceil((o + 1) * size / out))."""
    start = sl.floordiv(o * size, out)
    end = sl.floordiv((o + 1) * size + (out - 1), out)
    return start, end


def adaptive_window(size: int, out: int) -> int:
    """The longest adaptive window (all are size / out long when out divides size)."""
    return max(-(-(o + 1) * size // out) - o * size // out for o in range(out))


def adaptive_tap(size: int, out: int) -> Tap:
    def tap(o, r):
        if size % out == 0:
            return o * (size // out) + r, []
        start, end = adaptive_bounds(o, size, out)
        return start + r, [start + r < end]
    return tap


def window_reduce(x, taps: Sequence[Tap], windows: Sequence[int], out_sizes: Sequence[int], reducer,
                  source: Callable, name: str) -> sl.Tensor:
    """out[lead..., o...] = reducer over the window r of source(read, inside, coords): the last
    len(taps) dims of x pooled, read is x at the tap (evaluated only where inside holds; inside
    is None when every tap of the window is in bounds), coords the taps' input coordinates."""
    n = len(taps)
    lead = list(x.shape[:x.ndim - n])
    raxes = [sl.reduce_axis((0, k), name=f"r{d}" if n > 1 else "r") for d, k in enumerate(windows)]

    def body(i):
        o = i[len(lead):]
        coords, conds = [], []
        for d in range(n):
            e, c = taps[d](o[d], raxes[d].var)
            coords.append(e)
            conds += c
        read = x[tuple(list(i[:len(lead)]) + coords)]
        inside = sl.all(*conds) if conds else None
        return reducer(source(read, inside, coords), axis=raxes)
    return compute(lead + list(out_sizes), body, name)


def _guarded(read: Expr, inside, fill: Expr) -> Expr:
    return read if inside is None else sl.if_then_else(inside, read, fill)


def _lowest(dtype: str) -> Expr:
    return sl.const(float("-inf"), dtype) if sl.dtype(dtype).is_float else sl.min_value(dtype)


def _check_dtype(x, op: str, floats_only: bool = False) -> None:
    dt = sl.dtype(str(x.dtype))
    if dt.is_bool or (floats_only and not dt.is_float):
        raise Unsupported(f"{op} of a {x.dtype} tensor is not lowered")


def max_values(x, taps, windows, out_sizes, name: str) -> sl.Tensor:
    """The window maxima (NaN wins, as in torch), in x's dtype."""
    acc = acc_dtype(x.dtype)
    lowest = _lowest(acc)
    acc_name, out_name = acc_and_result_names(name, acc, x.dtype)
    red = window_reduce(x, taps, windows, out_sizes, sl.max,
                        lambda v, inside, _: _guarded(sl.cast(acc, v), inside, lowest), acc_name)
    return cast_stage(red, x.dtype, out_name)


def _argmax_combine(a, b):
    """(value, index) pairs: the larger value; among equal values the first index; among NaNs
    the last (torch's scan keeps `val > max || isnan(val)`). Commutative, so any reduction
    order gives torch's answer."""
    (av, ai), (bv, bi) = a, b
    better, same = av > bv, av == bv
    if av.dtype.is_float:
        both_nan = sl.isnan(av) & sl.isnan(bv)
        better = better | (sl.isnan(av) & ~sl.isnan(bv))
        take_a = sl.select(both_nan, ai > bi, sl.select(same, ai < bi, better))
    else:
        take_a = sl.select(same, ai < bi, better)
    return sl.select(take_a, av, bv), sl.select(take_a, ai, bi)


def _argmax_identity(value_dtype, index_dtype):
    return _lowest(str(value_dtype)), sl.max_value(index_dtype)


pool_argmax = sl.comm_reducer(_argmax_combine, _argmax_identity, name="pool_argmax")


def max_indices(x, taps, windows, out_sizes, name: str) -> sl.Tensor:
    """The int64 flat input index (over the pooled dims) of each window's maximum."""
    acc = acc_dtype(x.dtype)
    sizes = list(x.shape[x.ndim - len(taps):])
    lowest, none = _lowest(acc), sl.max_value("int64")

    def source(v, inside, coords):
        flat = sl.cast("int64", coords[0])
        for c, size in zip(coords[1:], sizes[1:]):
            flat = flat * size + sl.cast("int64", c)
        return _guarded(sl.cast(acc, v), inside, lowest), (flat if inside is None else sl.select(inside, flat, none))
    return window_reduce(x, taps, windows, out_sizes, pool_argmax, source, name)[1]


# ---- max pooling

def _max_pool(ctx: LowerContext, x, n: int, kernel_size, stride, padding, dilation, ceil_mode, op: str):
    _check_dtype(x, op)
    sizes = _spatial(x, n, op)
    k = _ints(kernel_size, n, "kernel_size", op)
    s = _ints(stride, n, "stride", op) if stride not in (None, [], ()) else k
    p = _ints(padding, n, "padding", op)
    d = _ints(dilation, n, "dilation", op)
    outs = [pool_out_size(sizes[i], k[i], s[i], p[i], d[i], bool(ceil_mode), op) for i in range(n)]
    taps = [strided_tap(sizes[i], outs[i], k[i], s[i], p[i], d[i]) for i in range(n)]
    values = max_values(x, taps, k, outs, ctx.name())
    return values, max_indices(x, taps, k, outs, ctx.name("indices"))


@register_lowering("aten.max_pool2d_with_indices.default")
def max_pool2d_with_indices(ctx, x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return _max_pool(ctx, x, 2, kernel_size, stride, padding, dilation, ceil_mode, "max_pool2d")


@register_lowering("aten.max_pool3d_with_indices.default")
def max_pool3d_with_indices(ctx, x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return _max_pool(ctx, x, 3, kernel_size, stride, padding, dilation, ceil_mode, "max_pool3d")


def _values_only(n: int, op: str):
    def lower(ctx, x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
        return _max_pool(ctx, x, n, kernel_size, stride, padding, dilation, ceil_mode, op)[0]
    lower.__name__ = op
    return lower


for _n, _op in ((1, "max_pool1d"), (2, "max_pool2d"), (3, "max_pool3d")):
    register_lowering(f"aten.{_op}.default")(_values_only(_n, _op))


# ---- average pooling

def _avg_pool(ctx, x, n: int, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override,
              op: str):
    _check_dtype(x, op, floats_only=True)    # torch divides integer sums with truncation: not lowered
    sizes = _spatial(x, n, op)
    k = _ints(kernel_size, n, "kernel_size", op)
    s = _ints(stride, n, "stride", op) if stride not in (None, [], ()) else k
    p = _ints(padding, n, "padding", op)
    if divisor_override is not None and static(divisor_override, f"{op}: divisor_override") == 0:
        raise ValueError(f"{op}: divisor_override must not be zero")
    outs = [pool_out_size(sizes[i], k[i], s[i], p[i], 1, bool(ceil_mode), op) for i in range(n)]
    taps = [strided_tap(sizes[i], outs[i], k[i], s[i], p[i]) for i in range(n)]
    acc = acc_dtype(x.dtype)
    zero = sl.const(0, acc)
    total = window_reduce(x, taps, k, outs, sl.sum, lambda v, inside, _: _guarded(sl.cast(acc, v), inside, zero),
                          ctx.name("sum"))

    def divisor(o) -> Expr:
        """torch's divide factor of window o: the override, else the window clipped to the
        padded input (count_include_pad) or to the input."""
        if divisor_override is not None:
            return sl.const(float(divisor_override), acc)
        count = None
        for d in range(n):
            crosses_end = (outs[d] - 1) * s[d] - p[d] + k[d] > sizes[d] + (p[d] if count_include_pad else 0)
            if not crosses_end and (count_include_pad or p[d] == 0):
                count = k[d] if count is None else count * k[d]      # every window is whole: a constant
                continue
            start = o[d] * s[d] - p[d]
            end = sl.min(start + k[d], sl.const(sizes[d] + p[d], start.dtype))
            if not count_include_pad:
                start, end = sl.max(start, sl.const(0, start.dtype)), sl.min(end, sl.const(sizes[d], start.dtype))
            count = end - start if count is None else (end - start) * count
        return sl.const(float(count), acc) if isinstance(count, int) else sl.cast(acc, count)
    lead = x.ndim - n
    acc_name, out_name = acc_and_result_names(ctx.name(), acc, x.dtype)
    mean = compute(total.shape, lambda i: total[tuple(i)] / divisor(i[lead:]), acc_name)
    return cast_stage(mean, x.dtype, out_name)


@register_lowering("aten.avg_pool2d.default")
def avg_pool2d(ctx, x, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    return _avg_pool(ctx, x, 2, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override,
                     "avg_pool2d")


@register_lowering("aten.avg_pool3d.default")
def avg_pool3d(ctx, x, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    return _avg_pool(ctx, x, 3, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override,
                     "avg_pool3d")


@register_lowering("aten.avg_pool1d.default")
def avg_pool1d(ctx, x, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True):
    return _avg_pool(ctx, x, 1, kernel_size, stride, padding, ceil_mode, count_include_pad, None, "avg_pool1d")


# ---- adaptive pooling

def _adaptive(x, n: int, output_size, op: str):
    sizes = _spatial(x, n, op)
    outs = [sizes[d] if o is None else o for d, o in enumerate(_ints_or_none(output_size, n, op))]
    if any(o <= 0 for o in outs):
        raise ValueError(f"{op}: output_size {outs} must be positive")
    taps = [adaptive_tap(sizes[d], outs[d]) for d in range(n)]
    windows = [adaptive_window(sizes[d], outs[d]) for d in range(n)]
    return sizes, outs, taps, windows


def _ints_or_none(value, n: int, op: str):
    vals = [value] if isinstance(value, (int, Expr)) or value is None else list(value)
    vals = vals * n if len(vals) == 1 else vals
    if len(vals) != n:
        raise ValueError(f"{op}: output_size must be one int or {n} ints, got {vals}")
    return [None if v is None else static(v, f"{op}: output_size") for v in vals]


def _adaptive_avg(ctx, x, n: int, output_size, op: str):
    _check_dtype(x, op, floats_only=True)
    sizes, outs, taps, windows = _adaptive(x, n, output_size, op)
    acc = acc_dtype(x.dtype)
    zero = sl.const(0, acc)
    total = window_reduce(x, taps, windows, outs, sl.sum,
                          lambda v, inside, _: _guarded(sl.cast(acc, v), inside, zero), ctx.name("sum"))

    def divisor(o) -> Expr:
        count = 1
        for d in range(n):
            if sizes[d] % outs[d] == 0:
                count = count * (sizes[d] // outs[d])
            else:
                start, end = adaptive_bounds(o[d], sizes[d], outs[d])
                count = (end - start) * count
        return sl.const(float(count), acc) if isinstance(count, int) else sl.cast(acc, count)
    lead = x.ndim - n
    acc_name, out_name = acc_and_result_names(ctx.name(), acc, x.dtype)
    mean = compute(total.shape, lambda i: total[tuple(i)] / divisor(i[lead:]), acc_name)
    return cast_stage(mean, x.dtype, out_name)


@register_lowering("aten._adaptive_avg_pool2d.default", "aten.adaptive_avg_pool2d.default")
def adaptive_avg_pool2d(ctx, x, output_size):
    return _adaptive_avg(ctx, x, 2, output_size, "adaptive_avg_pool2d")


@register_lowering("aten._adaptive_avg_pool3d.default", "aten.adaptive_avg_pool3d.default")
def adaptive_avg_pool3d(ctx, x, output_size):
    return _adaptive_avg(ctx, x, 3, output_size, "adaptive_avg_pool3d")


@register_lowering("aten.adaptive_avg_pool1d.default")
def adaptive_avg_pool1d(ctx, x, output_size):
    return _adaptive_avg(ctx, x, 1, output_size, "adaptive_avg_pool1d")


def _adaptive_max(ctx, x, n: int, output_size, op: str):
    _check_dtype(x, op)
    _, outs, taps, windows = _adaptive(x, n, output_size, op)
    return (max_values(x, taps, windows, outs, ctx.name()),
            max_indices(x, taps, windows, outs, ctx.name("indices")))


@register_lowering("aten.adaptive_max_pool2d.default")
def adaptive_max_pool2d(ctx, x, output_size):
    return _adaptive_max(ctx, x, 2, output_size, "adaptive_max_pool2d")


@register_lowering("aten.adaptive_max_pool3d.default")
def adaptive_max_pool3d(ctx, x, output_size):
    return _adaptive_max(ctx, x, 3, output_size, "adaptive_max_pool3d")


@register_lowering("aten.adaptive_max_pool1d.default")
def adaptive_max_pool1d(ctx, x, output_size):
    return _adaptive_max(ctx, x, 1, output_size, "adaptive_max_pool1d")
