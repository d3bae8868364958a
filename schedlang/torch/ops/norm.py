"""softmax, log_softmax, layer_norm and rms_norm as reductions plus elementwise stages;
batch norm in eval mode as a per-channel affine, or folded into the convolution before it.

softmax is numerically stable as torch's: `<name>_max` over dim, `<name>_exp` =
exp(x - max), `<name>_sum`, then `<name>` = exp / sum (TVM topi's stages). Everything
is computed in float32 for float16/bfloat16 inputs and rounded once at the end."""
from __future__ import annotations

import math

import torch

import schedlang as sl

from .accum import acc_and_result_names, acc_dtype, cast_stage, dtype_arg, is_float, require_float
from .common import compute, norm_dim, same_extent
from .conv import conv_call_of, fold_batch_norm
from .reduce import count_of, mean_of, reduced_index, reduction
from .registry import Unsupported, register_lowering


def _softmax_dtype(x, half_to_float: bool, op: str) -> str:
    require_float(op, x)
    if half_to_float and str(x.dtype) in ("float16", "bfloat16"):
        return "float32"
    return str(x.dtype)


def _shifted(ctx, x, dim: int, acc: str):
    """(x - max over dim) in acc, as a function of an index of x; the max is `<name>_max`."""
    dims = (dim,) if x.ndim else ()
    top = reduction(x.shape, dims, True, sl.max, lambda idx: sl.cast(acc, x[tuple(idx)]), ctx.name("max"))
    return dims, lambda idx: sl.cast(acc, x[tuple(idx)]) - top[reduced_index(idx, dims, True)]


# ln of the smallest normal float32 and float64: an exp below it is subnormal
SUBNORMAL_EXP = {"float32": math.log(2.0 ** -126), "float64": math.log(2.0 ** -1022)}


def softmax_exp(v):
    """exp(v) of a value less its row's max (v <= 0), as softmax and attention take it: 0
    where it would be subnormal, whose share of a row's sum (at least 1) is below the dtype's
    precision. x86 takes a microcode assist (~150 cycles) for every instruction whose result
    (and, in a multiply, whose operand) is subnormal: a mask of -100 (Swin's shifted
    windows) made every such score cost that in the exp and again in the product with v,
    11x an attention's time (64 windows x 3 heads x 49 tokens, 2-core Xeon VM, AVX-512)."""
    floor = SUBNORMAL_EXP.get(str(v.dtype))
    if floor is None:
        return sl.exp(v)
    return sl.exp(sl.select(v < sl.const(floor, v.dtype), sl.const(float("-inf"), v.dtype), v))


def softmax_of(ctx, x, dim, out: str, log: bool, op: str) -> sl.Tensor:
    acc = acc_dtype(out)
    dims, shifted = _shifted(ctx, x, norm_dim(dim, x.ndim, f"{op}: dim"), acc)
    if log:
        total = reduction(x.shape, dims, True, sl.sum, lambda idx: softmax_exp(shifted(idx)), ctx.name("sum"))
        return compute(x.shape, lambda idx: sl.cast(out, shifted(idx) - sl.log(total[reduced_index(idx, dims, True)])),
                       ctx.name())
    e = compute(x.shape, lambda idx: softmax_exp(shifted(idx)), ctx.name("exp"))
    total = reduction(x.shape, dims, True, sl.sum, lambda idx: e[tuple(idx)], ctx.name("sum"))
    return compute(x.shape, lambda idx: sl.cast(out, e[tuple(idx)] / total[reduced_index(idx, dims, True)]),
                   ctx.name())


@register_lowering("aten._softmax.default")
def softmax(ctx, x, dim, half_to_float=False):
    return softmax_of(ctx, x, dim, _softmax_dtype(x, half_to_float, "softmax"), False, "softmax")


@register_lowering("aten._log_softmax.default")
def log_softmax(ctx, x, dim, half_to_float=False):
    return softmax_of(ctx, x, dim, _softmax_dtype(x, half_to_float, "log_softmax"), True, "log_softmax")


def _softmax_int(log: bool, op: str):
    def lowering(ctx, x, dim, dtype=None):
        out = dtype_arg(dtype, op) or str(x.dtype)
        if not is_float(out):
            raise Unsupported(f"{op} into {out}: floating point only")
        return softmax_of(ctx, x, dim, out, log, op)
    return lowering


register_lowering("aten.softmax.int")(_softmax_int(False, "softmax"))
register_lowering("aten.log_softmax.int")(_softmax_int(True, "log_softmax"))


# ---- layer_norm, rms_norm

def _normalized_dims(x, normalized_shape, op: str, *params, any_float: bool = False) -> tuple:
    """The trailing dims normalized_shape names; the weight and bias must have that shape and
    x's dtype (any_float: any floating dtype)."""
    shape = tuple(normalized_shape)
    first = x.ndim - len(shape)
    if not shape or first < 0 or not all(same_extent(a, b) for a, b in zip(x.shape[first:], shape)):
        raise ValueError(f"{op}: normalized_shape {list(shape)} is not the end of the input shape {list(x.shape)}")
    for p in params:
        if p is None:
            continue
        if str(p.dtype) != str(x.dtype) and not (any_float and str(p.dtype).startswith(("float", "bfloat"))):
            raise Unsupported(f"{op}: a {p.dtype} weight or bias with a {x.dtype} input is not lowered")
        if len(p.shape) != len(shape) or not all(same_extent(a, b) for a, b in zip(p.shape, shape)):
            raise ValueError(f"{op}: weight/bias of shape {list(p.shape)}, expected {list(shape)}")
    return tuple(range(first, x.ndim))


def _eps(eps, op: str) -> float:
    if isinstance(eps, bool) or not isinstance(eps, (int, float)):
        raise Unsupported(f"{op}: eps={eps!r} is not a number")
    return float(eps)


def layer_norm_of(ctx, x, normalized_shape, weight, bias, eps, op: str):
    """(out, mean, rstd) as torch's native_layer_norm; mean and rstd keep the normalized
    dims with extent 1."""
    require_float(op, x)
    dims = _normalized_dims(x, normalized_shape, op, weight, bias)
    out, acc = str(x.dtype), acc_dtype(x.dtype)
    eps = _eps(eps, op)
    mean_acc, mean = mean_of(ctx, x, dims, True, out, ctx.name("mean"), op)

    def centered(idx):
        return sl.cast(acc, x[tuple(idx)]) - mean_acc[reduced_index(idx, dims, True)]
    sqsum = reduction(x.shape, dims, True, sl.sum, lambda idx: centered(idx) * centered(idx), ctx.name("sqsum"))
    count = count_of(x.shape, dims, acc)
    rstd_name, rstd_out = acc_and_result_names(ctx.name("rstd"), acc, out)
    rstd_acc = compute(sqsum.shape, lambda idx: sl.rsqrt(sqsum[tuple(idx)] / count + sl.const(eps, acc)), rstd_name)

    def normalized(idx):
        y = centered(idx) * rstd_acc[reduced_index(idx, dims, True)]
        return sl.cast(out, weight_and_bias(y, weight, bias, tuple(idx[d] for d in dims), acc))
    result = compute(x.shape, normalized, ctx.name())
    return result, mean, cast_stage(rstd_acc, out, rstd_out)


def weight_and_bias(y, weight, bias, at: tuple, acc: str):
    """y * weight[at] + bias[at] in acc (either may be None): a normalization's affine part."""
    if weight is not None:
        y = y * sl.cast(acc, weight[at])
    if bias is not None:
        y = y + sl.cast(acc, bias[at])
    return y


@register_lowering("aten.native_layer_norm.default")
def native_layer_norm(ctx, x, normalized_shape, weight, bias, eps):
    return layer_norm_of(ctx, x, normalized_shape, weight, bias, eps, "native_layer_norm")


@register_lowering("aten.layer_norm.default")
def layer_norm(ctx, x, normalized_shape, weight=None, bias=None, eps=1e-5, cudnn_enable=True):
    return layer_norm_of(ctx, x, normalized_shape, weight, bias, eps, "layer_norm")[0]


@register_lowering("aten.rms_norm.default")
def rms_norm(ctx, x, normalized_shape, weight=None, eps=None):
    """torch's rms_norm: x * rsqrt(mean(x^2) + eps) in float32 for float16/bfloat16 (eps
    defaults to the machine epsilon of that compute dtype), rounded to x's dtype, then
    times weight (of any float dtype: torch gives x's dtype, a float16 weight beside a float32
    input as in a half model whose rotary tables are float32): `<name>_sqsum`, `<name>_rstd`,
    `<name>`."""
    require_float("rms_norm", x)
    dims = _normalized_dims(x, normalized_shape, "rms_norm", weight, any_float=True)
    out, acc = str(x.dtype), acc_dtype(x.dtype)
    eps = torch.finfo(getattr(torch, acc)).eps if eps is None else _eps(eps, "rms_norm")

    def square(idx):
        v = sl.cast(acc, x[tuple(idx)])
        return v * v
    sqsum = reduction(x.shape, dims, True, sl.sum, square, ctx.name("sqsum"))
    count = count_of(x.shape, dims, acc)
    rstd = compute(sqsum.shape, lambda idx: sl.rsqrt(sqsum[tuple(idx)] / count + sl.const(eps, acc)),
                   ctx.name("rstd"))

    def normalized(idx):
        y = sl.cast(out, sl.cast(acc, x[tuple(idx)]) * rstd[reduced_index(idx, dims, True)])
        if weight is None:
            return y
        # torch rounds the normalized value to x's dtype before the weight multiplies it
        return sl.cast(out, sl.cast(acc, y) * sl.cast(acc, weight[tuple(idx[d] for d in dims)]))
    return compute(x.shape, normalized, ctx.name())



# ---- batch norm in eval mode

def _channel_params(x, op: str, *params) -> None:
    channels = x.shape[1]
    for p in params:
        if p is None:
            continue
        if p.ndim != 1 or not same_extent(p.shape[0], channels):
            raise ValueError(f"{op}: a parameter of shape {list(p.shape)} for {channels} channels")
        if str(p.dtype) not in (str(x.dtype), "float32"):
            raise Unsupported(f"{op}: a {p.dtype} parameter with a {x.dtype} input is not lowered")


def batch_norm_of(ctx, x, weight, bias, mean, var, eps, op: str) -> sl.Tensor:
    """(x - mean) / sqrt(var + eps) * weight + bias per channel (dim 1): folded into the
    convolution x comes from when its weight and these tensors are constants (conv.py),
    else x * scale + shift with scale and shift per channel (constants made once by the
    compiled module when they can be, else computed in the kernel), in float32 for
    float16/bfloat16."""
    require_float(op, x)
    if x.ndim < 2:
        raise ValueError(f"{op}: expected an input with a channel dim, got {x.ndim}-d")
    if mean is None or var is None:
        raise Unsupported(f"{op} without running statistics is not lowered")
    _channel_params(x, op, weight, bias, mean, var)
    eps = _eps(eps, op)
    call = conv_call_of(x)
    if call is not None:
        folded = fold_batch_norm(ctx, call, weight, bias, mean, var, eps)
        if folded is not None:
            return folded
    out, acc = str(x.dtype), acc_dtype(x.dtype)
    scale = ctx.prepacked("bn_scale", (var, mean, weight, bias, None), 1, (eps,))
    shift = ctx.prepacked("bn_shift", (var, mean, weight, bias, None), 1, (eps,))

    def affine(idx):
        c = idx[1]
        v = sl.cast(acc, x[tuple(idx)])
        if scale is not None and shift is not None:
            return sl.cast(out, v * sl.cast(acc, scale[c]) + sl.cast(acc, shift[c]))
        y = (v - sl.cast(acc, mean[c])) * sl.rsqrt(sl.cast(acc, var[c]) + sl.const(eps, acc))
        if weight is not None:
            y = y * sl.cast(acc, weight[c])
        return sl.cast(out, y + sl.cast(acc, bias[c]) if bias is not None else y)
    return compute(x.shape, affine, ctx.name())


@register_lowering("aten._native_batch_norm_legit_no_training.default")
def batch_norm_no_training(ctx, x, weight, bias, running_mean, running_var, momentum, eps):
    """(out, save_mean, save_rstd): the saved statistics are empty in eval mode (None)."""
    out = batch_norm_of(ctx, x, weight, bias, running_mean, running_var, eps, "batch_norm")
    return out, None, None
