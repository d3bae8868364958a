"""A float16 / bfloat16 2-d convolution on tensor cores (the cuda target, sm_80+): lowered as an
implicit GEMM, which the frontend's matmul schedule puts on mma.sync (tensorcore_schedules.py).

    applies(call, target)                       whether the convolution takes this form
    implicit_gemm(ctx, call, weight_at, bias)   the stages

Per batch entry n, the output channels are the GEMM's rows, the output pixels its columns and
(input channel, tap) its reduction:

    <n>_wmat[oc, k]     = w[oc, k // KHW, k // KW % KH, k % KW]          (the weight as [OC, K])
    <n>_cols[n, k, p]   = x[n, ic, oh * s + kh * d - pad, ...] or 0      (im2col, never stored)
    <n>_gemm[n, oc, p]  = sum_k wmat[oc, k] * cols[n, k, p]              (float32)
    <n>_bias[n, oc, p]  = gemm + bias, cast back                         (the matmul's epilogue)
    <n>[n, oc, oh, ow]  = bias[n, oc, oh * OW + ow]                      (a view, inlined by its readers)

wmat and cols are index maps: fusion inlines them, so the im2col indexing happens in the
GEMM's shared-memory fetch. The pixels are padded to P' (a multiple of topi's PIXELS, 16:
whole fragments for any spatial size); the padded columns read zeros and are never read back. It applies
where K = IC * KH * KW is a multiple of 16 and OC of 16 (groups = 1); anything else keeps
the CUDA-core convolution.
"""
from __future__ import annotations

from typing import Callable, Optional

import schedlang as sl

from .accum import acc_dtype
from .common import compute

ELEMENTS = ("float16", "bfloat16")


def applies(call, target) -> bool:
    """Whether convolution call takes the implicit GEMM on target (see the module's docstring)."""
    from ...target.cuda.intrin import mma    # (the cuda target's library, loaded when used)
    if not getattr(target, "arch", None) or not mma.supported(target) or call.x.ndim != 4 or call.groups != 1:
        return False
    if str(call.x.dtype) not in ELEMENTS:
        return False
    oc, ic, kh, kw = call.weight.shape
    return oc % 16 == 0 and (ic * kh * kw) % 16 == 0


def implicit_gemm(ctx, call, weight_at: Callable, bias) -> sl.Tensor:
    """The stages of call as an implicit GEMM (topi/cuda_tensorcore.conv2d_implicit_gemm);
    weight_at(oc, ic, kh, kw) reads the weight, bias (or None) is added in float32 before
    the cast back."""
    from ...topi import cuda_tensorcore as tc
    x = call.x
    el, acc = str(x.dtype), acc_dtype(x.dtype)
    N, OC, OH, OW = call.out_shape
    _, _, gemm = tc.conv2d_implicit_gemm(x, call.weight, call.stride, call.padding, call.dilation, acc, weight_at,
                                         ctx.name())
    out = sl.compute(gemm.shape, lambda n, o, p: sl.cast(el, gemm[n, o, p] + sl.cast(acc, bias[o])
                                                         if bias is not None else gemm[n, o, p]),
                     name=ctx.name("bias"))
    return compute((N, OC, OH, OW), lambda i: out[i[0], i[1], i[2] * OW + i[3]], ctx.name())


def maybe(ctx, call, weight_at: Callable, bias) -> Optional[sl.Tensor]:
    """implicit_gemm where it applies, else None."""
    return implicit_gemm(ctx, call, weight_at, bias) if applies(call, ctx.target) else None
