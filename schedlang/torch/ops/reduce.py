"""Reductions: sum, mean, prod, amax/amin, var/var_mean, argmax/argmin, max.dim/min.dim.

Each is one Reduction stage over the reduced dims (float16/bfloat16 accumulate in
float32) followed, where torch's result needs it, by an elementwise stage that divides
or casts back. Index results are int64 and, as torch's, the first index of the extreme
value; NaN counts as the largest and the smallest value (max/argmax return it)."""
from __future__ import annotations

from typing import Callable, Sequence, Tuple

import schedlang as sl
from schedlang.expr.nodes import Expr

from .accum import acc_and_result_names, acc_dtype, cast_stage, dtype_arg, is_float, norm_dims, require_float
from .common import compute, norm_dim, numel
from .registry import Unsupported, register_lowering


def reduced_shape(shape: Sequence, dims: Sequence[int], keepdim: bool) -> tuple:
    """The shape of a reduction of shape over dims."""
    return tuple(1 if d in dims else e for d, e in enumerate(shape) if keepdim or d not in dims)


def reduced_index(index: Sequence, dims: Sequence[int], keepdim: bool) -> tuple:
    """Where the element at index of the input lands in a reduction over dims."""
    return tuple(0 if d in dims else i for d, i in enumerate(index) if keepdim or d not in dims)


def reduction(shape: Sequence, dims: Sequence[int], keepdim: bool, reducer, source: Callable, name: str,
              axis_name: str = "r"):
    """A compute reducing source(index) over dims of shape: source gets the index of a whole
    input element (reduce axes at dims) and returns an expression, or a tuple of them for a
    tuple reducer (one output per value). With no dims left to reduce (a 0-d input) it is
    the source itself."""
    names = [axis_name] if len(dims) == 1 else [f"{axis_name}{n}" for n in range(len(dims))]
    raxes = {d: sl.reduce_axis((0, shape[d]), name=n) for d, n in zip(dims, names)}

    def body(out):
        it = iter(out)
        index = []
        for d in range(len(shape)):
            if keepdim or d not in dims:
                i = next(it)
            index.append(raxes[d] if d in dims else i)
        value = source(index)
        return reducer(value, axis=list(raxes.values())) if raxes else value
    return compute(reduced_shape(shape, dims, keepdim), body, name)


def count_of(shape: Sequence, dims: Sequence[int], dtype: str) -> Expr:
    """The number of elements a reduction over dims combines, as a dtype value."""
    n = numel([shape[d] for d in dims])
    return sl.const(float(n), dtype) if isinstance(n, int) else sl.cast(dtype, n)


def _read(x: sl.Tensor, dtype: str):
    return lambda index: sl.cast(dtype, x[tuple(index)])


# ---- sum, prod, mean

def _sum_dtype(x: sl.Tensor, dtype, op: str) -> str:
    """torch's result dtype of sum/prod: dtype= when given; integers and bool become int64."""
    dtype = dtype_arg(dtype, op)
    return dtype or (str(x.dtype) if is_float(x.dtype) else "int64")


def _accumulate(ctx, x, dims, keepdim, dtype, reducer, op: str) -> sl.Tensor:
    out = _sum_dtype(x, dtype, op)
    acc = acc_dtype(out)
    acc_name, name = acc_and_result_names(ctx.name(), acc, out)
    total = reduction(x.shape, norm_dims(dims, x.ndim, op), keepdim, reducer, _read(x, acc), acc_name)
    return cast_stage(total, out, name)


@register_lowering("aten.sum.dim_IntList")
def sum_dim(ctx, x, dim=None, keepdim=False, *, dtype=None):
    return _accumulate(ctx, x, dim, keepdim, dtype, sl.sum, "sum")


@register_lowering("aten.sum.default")
def sum_all(ctx, x, *, dtype=None):
    return _accumulate(ctx, x, None, False, dtype, sl.sum, "sum")


@register_lowering("aten.prod.dim_int")
def prod_dim(ctx, x, dim, keepdim=False, *, dtype=None):
    return _accumulate(ctx, x, [dim], keepdim, dtype, sl.prod, "prod")


@register_lowering("aten.prod.default")
def prod_all(ctx, x, *, dtype=None):
    return _accumulate(ctx, x, None, False, dtype, sl.prod, "prod")


def mean_of(ctx, x: sl.Tensor, dims, keepdim: bool, out: str, name: str, op: str = "mean") -> Tuple:
    """(the mean in the accumulation dtype, the mean as an out tensor): `<name>_sum` then
    `<name>` (or `<name>_acc` and a cast `<name>` when out is narrower)."""
    acc = acc_dtype(out)
    dims = norm_dims(dims, x.ndim, op)
    total = reduction(x.shape, dims, keepdim, sl.sum, _read(x, acc), f"{name}_sum")
    count = count_of(x.shape, dims, acc)
    acc_name, out_name = acc_and_result_names(name, acc, out)
    mean = compute(total.shape, lambda idx: total[tuple(idx)] / count, acc_name)
    return mean, cast_stage(mean, out, out_name)


@register_lowering("aten.mean.dim")
def mean_dim(ctx, x, dim=None, keepdim=False, *, dtype=None):
    out = dtype_arg(dtype, "mean") or str(x.dtype)
    if not is_float(out):
        raise Unsupported(f"mean of {x.dtype} into {out}: torch needs a floating point result dtype")
    return mean_of(ctx, x, dim, keepdim, out, ctx.name())[1]


@register_lowering("aten.mean.default")
def mean_all(ctx, x, *, dtype=None):
    return mean_dim(ctx, x, None, False, dtype=dtype)


# ---- amax, amin, max, min (values only)

def _extreme(ctx, x, dims, keepdim, reducer, op: str) -> sl.Tensor:
    if str(x.dtype) == "bool":
        raise Unsupported(f"{op} of a bool tensor is not lowered")
    acc = acc_dtype(x.dtype)
    acc_name, name = acc_and_result_names(ctx.name(), acc, x.dtype)
    value = reduction(x.shape, norm_dims(dims, x.ndim, op), keepdim, reducer, _read(x, acc), acc_name)
    return cast_stage(value, x.dtype, name)


@register_lowering("aten.amax.default")
def amax(ctx, x, dim=(), keepdim=False):
    return _extreme(ctx, x, dim, keepdim, sl.max, "amax")


@register_lowering("aten.amin.default")
def amin(ctx, x, dim=(), keepdim=False):
    return _extreme(ctx, x, dim, keepdim, sl.min, "amin")


@register_lowering("aten.max.default")
def max_all(ctx, x):
    return _extreme(ctx, x, None, False, sl.max, "max")


@register_lowering("aten.min.default")
def min_all(ctx, x):
    return _extreme(ctx, x, None, False, sl.min, "min")


# ---- var, var_mean

def _correction(correction, unbiased) -> float:
    if correction is None:
        return 1.0 if unbiased else 0.0
    if isinstance(correction, bool) or not isinstance(correction, (int, float)):
        raise Unsupported(f"var: correction={correction!r} is not a number")
    return float(correction)


def var_and_mean(ctx, x, dims, correction: float, keepdim: bool, op: str):
    """(var, mean) of x over dims, torch's var_mean: the mean `<name>_mean`, the sum of
    squared deviations `<name>_sqsum`, the variance `<name>` = sqsum / max(N - correction, 0)."""
    require_float(op, x)
    out, acc = str(x.dtype), acc_dtype(x.dtype)
    dims = norm_dims(dims, x.ndim, op)
    mean_acc, mean = mean_of(ctx, x, dims, keepdim, out, ctx.name("mean"), op)

    def deviation2(index):
        d = sl.cast(acc, x[tuple(index)]) - mean_acc[reduced_index(index, dims, keepdim)]
        return d * d
    sqsum = reduction(x.shape, dims, keepdim, sl.sum, deviation2, ctx.name("sqsum"))
    divisor = sl.max(count_of(x.shape, dims, acc) - sl.const(correction, acc), sl.const(0.0, acc))
    var = compute(sqsum.shape, lambda idx: sl.cast(out, sqsum[tuple(idx)] / divisor), ctx.name())
    return var, mean


@register_lowering("aten.var.correction")
def var_correction(ctx, x, dim=None, *, correction=None, keepdim=False):
    return var_and_mean(ctx, x, dim, _correction(correction, True), keepdim, "var")[0]


@register_lowering("aten.var.dim")
def var_dim(ctx, x, dim, unbiased=True, keepdim=False):
    return var_and_mean(ctx, x, dim, _correction(None, unbiased), keepdim, "var")[0]


@register_lowering("aten.var.default")
def var_all(ctx, x, unbiased=True):
    return var_and_mean(ctx, x, None, _correction(None, unbiased), False, "var")[0]


@register_lowering("aten.var_mean.correction")
def var_mean_correction(ctx, x, dim=None, *, correction=None, keepdim=False):
    return var_and_mean(ctx, x, dim, _correction(correction, True), keepdim, "var_mean")


@register_lowering("aten.var_mean.dim")
def var_mean_dim(ctx, x, dim, unbiased=True, keepdim=False):
    return var_and_mean(ctx, x, dim, _correction(None, unbiased), keepdim, "var_mean")


# ---- argmax, argmin, max.dim, min.dim

def _arg_combine(largest: bool):
    """combine((value, index), (value, index)) keeping the larger (smaller) value; NaN beats
    every number; on a tie the smaller index (torch returns the first). It is commutative,
    so any order of reduction (rfactor, threads) gives torch's answer."""
    def fcombine(x, y):
        (xv, xi), (yv, yi) = x, y
        same = xv == yv
        better = xv > yv if largest else xv < yv
        if xv.dtype.is_float:
            same = same | (sl.isnan(xv) & sl.isnan(yv))
            better = better | sl.isnan(xv)
        take_x = sl.select(same, xi < yi, better)
        return sl.select(take_x, xv, yv), sl.select(take_x, xi, yi)
    return fcombine


def _arg_identity(largest: bool):
    def fidentity(value_dtype, index_dtype):
        worst = sl.min_value(value_dtype) if largest else sl.max_value(value_dtype)
        return worst, sl.max_value(index_dtype)
    return fidentity


argmax_reducer = sl.comm_reducer(_arg_combine(True), _arg_identity(True), name="argmax")
argmin_reducer = sl.comm_reducer(_arg_combine(False), _arg_identity(False), name="argmin")


def arg_reduce(ctx, x, dims, keepdim: bool, largest: bool, op: str):
    """(values in the accumulation dtype, int64 indices) of the extreme of x over dims; the
    index is flat (row-major) over dims, as torch's argmax with dim=None."""
    if str(x.dtype) == "bool":
        raise Unsupported(f"{op} of a bool tensor is not lowered")
    acc = acc_dtype(x.dtype)

    def source(index):
        flat = sl.const(0, "int64")
        for n, d in enumerate(dims):
            i = sl.cast("int64", index[d])
            flat = i if n == 0 else flat * sl.cast("int64", x.shape[d]) + i
        return sl.cast(acc, x[tuple(index)]), flat
    reducer = argmax_reducer if largest else argmin_reducer
    return reduction(x.shape, dims, keepdim, reducer, source, ctx.name())


@register_lowering("aten.argmax.default")
def argmax(ctx, x, dim=None, keepdim=False):
    dims = norm_dims(None if dim is None else [dim], x.ndim, "argmax")
    return arg_reduce(ctx, x, dims, keepdim, True, "argmax")[1]


@register_lowering("aten.argmin.default")
def argmin(ctx, x, dim=None, keepdim=False):
    dims = norm_dims(None if dim is None else [dim], x.ndim, "argmin")
    return arg_reduce(ctx, x, dims, keepdim, False, "argmin")[1]


def _value_and_index(ctx, x, dim, keepdim, largest, op):
    dims = (norm_dim(dim, x.ndim, f"{op}: dim"),) if x.ndim else ()
    values, indices = arg_reduce(ctx, x, dims, keepdim, largest, op)
    return cast_stage(values, x.dtype, ctx.name("values")), indices


@register_lowering("aten.max.dim")
def max_dim(ctx, x, dim, keepdim=False):
    return _value_and_index(ctx, x, dim, keepdim, True, "max")


@register_lowering("aten.min.dim")
def min_dim(ctx, x, dim, keepdim=False):
    return _value_and_index(ctx, x, dim, keepdim, False, "min")


# ---- any, all

any_reducer = sl.comm_reducer(lambda x, y: sl.any(x, y), lambda dtype: sl.const(False, "bool"), name="any")
all_reducer = sl.comm_reducer(lambda x, y: sl.all(x, y), lambda dtype: sl.const(True, "bool"), name="all")


def _truth(ctx, x, dims, keepdim, reducer, op: str) -> sl.Tensor:
    """Whether any (all) elements of x over dims are nonzero: bool, or uint8 for a uint8 x
    as torch gives (NaN is nonzero)."""
    out = "uint8" if str(x.dtype) == "uint8" else "bool"
    dims = norm_dims(dims, x.ndim, op)

    def nonzero(index):
        v = x[tuple(index)]
        return v if v.dtype.is_bool else v != sl.const(0, v.dtype)
    acc_name, name = acc_and_result_names(ctx.name(), "bool", out)
    value = reduction(x.shape, dims, keepdim, reducer, nonzero, acc_name)
    return cast_stage(value, out, name)


@register_lowering("aten.any.dim", "aten.any.dims")
def any_dim(ctx, x, dim=None, keepdim=False):
    return _truth(ctx, x, dim, keepdim, any_reducer, "any")


@register_lowering("aten.any.default")
def any_all(ctx, x):
    return _truth(ctx, x, None, False, any_reducer, "any")


@register_lowering("aten.all.dim", "aten.all.dims")
def all_dim(ctx, x, dim=None, keepdim=False):
    return _truth(ctx, x, dim, keepdim, all_reducer, "all")


@register_lowering("aten.all.default")
def all_all(ctx, x):
    return _truth(ctx, x, None, False, all_reducer, "all")
