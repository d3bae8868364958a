"""A 3x3 stride-1 convolution as Winograd F(4 x 4, 3 x 3) (topi/winograd.py) on the CPU,
where `winograd_tile` says so: its weight transformed once by the compiled module (prepack.py
"winograd": U = G w G^T with a following batch norm folded in, [36, OC / nr, IC, nr] in
the bgemm's panels of nr output channels), the stages tagged so that fusion keeps them and the
default schedule places them (winograd_schedules.py), and the result `<name>` the inverse
transform plus the bias, which fusion inlines into the epilogue (batch norm, ReLU, residual add).

Measured (benchmarks/results-winograd-zen1-avx2.txt, one Zen 1 thread, CPU time, loaded):
F(4x4) takes 0.46-0.63x prepacked oneDNN's time on ResNet's 3x3 stride-1 layers (64 channels
at 56x56 to 512 at 7x7), where the direct NCHWc kernels take 1.04-1.18x; F(2x2) lost at 56x56.
On a Zen 3 (two 256-bit FMA pipes; results-winograd-zen3-avx2.txt) F(4x4) takes 0.44-0.57x
oneDNN's time from 56x56 to 14x14 and 0.99x at 7x7, where the direct kernels take 1.01-1.34x:
at 7x7 the bgemm (4 tiles per U element read, U 4x the direct weight) is bound by memory, not
by the FMA pipes, yet still no slower than the direct kernel, and whole ResNet-18/50 were 2-10 %
faster with it than with 7x7 direct; F(6x6) won at 56x56 only (0.44x) and not on the whole
model. So one rule for both: F(4x4) wherever it applies.
On AVX-512 (32 registers, two 512-bit FMA pipes: an Emerald Rapids Xeon,
results-models-emr-avx512.txt) the direct kernel is twice as fast per FLOP, so the bgemm needs
more reuse of U than 7x7's 4 tiles give: whole ResNet-18 at 2 threads took 0.76x the direct
model's time with F(4x4) from 14x14 (16 tiles) up, 0.80x from 28x28 up, 1.05x (1 thread) with
7x7 too; ResNet-50 0.95x and 0.93x. So there F(4x4) starts at 16 tiles (MIN_TILES).
Not measured below 64 channels: those keep the direct kernels.
"""
from __future__ import annotations

from typing import Optional

import schedlang as sl

from ...topi.winograd import winograd_inverse
from .common import cpu_layouts

ENABLED = True           # benchmarks switch it off for an A/B of the whole model in one process
TILE = 4                 # m of F(m x m, 3 x 3): 6 x 6 input tiles
MIN_CHANNELS = 64        # the narrowest layer measured (ResNet's 64 at 56x56)
MIN_SIZE = 7             # the smallest output measured (7 x 7: 4 tiles of 4 x 4, 1.31x the pixels)
MIN_TILES = {16: 4,      # vector registers -> the fewest output tiles per image (the reuse of each U
             32: 16}     # element in the bgemm) where F(m x m) beat the direct kernel; other files: direct


def winograd_tile(ctx, call) -> Optional[int]:
    """m when call (a ConvCall) runs as F(m x m, 3 x 3): ENABLED, a CPU target with packed
    weights and a register file in MIN_TILES, float32 or bfloat16 (computed in float32: the
    direct bfloat16 kernel converts every value it reads and runs the float32 tile anyway),
    groups 1, a 3x3 kernel of stride and dilation 1, padding 0 or 1 (both dims alike), input
    and output channels at least MIN_CHANNELS in native vectors, an output at least MIN_SIZE
    square of at least the register file's MIN_TILES m x m tiles; else None."""
    target = ctx.target
    if not ENABLED or not cpu_layouts(target):
        return None
    min_tiles = MIN_TILES.get(target.native_registers())
    if min_tiles is None or str(call.x.dtype) not in ("float32", "bfloat16") or call.x.ndim != 4:
        return None
    oc, ic, kh, kw = call.weight.shape
    lanes = target.native_lanes(32)
    if call.groups != 1 or (kh, kw) != (3, 3) or call.stride != (1, 1) or call.dilation != (1, 1) \
            or call.padding not in ((0, 0), (1, 1)):
        return None
    oh, ow = call.out_shape[2:]
    if min(ic, oc) < MIN_CHANNELS or ic % lanes or oc % lanes or min(oh, ow) < MIN_SIZE:
        return None
    if -(-oh // TILE) * -(-ow // TILE) < min_tiles:
        return None
    return TILE


def bgemm_tile(target) -> tuple:
    """(rows, columns) of the bgemm's register tile: the matmul kernels' (schedules.py)."""
    from ..schedules import panel_width, register_rows
    nr = panel_width(target, 1 << 20)
    return register_rows(target, nr), nr


def winograd_conv(ctx, call, m: int, bn: tuple = (), params: tuple = (), bias=None) -> Optional[sl.Tensor]:
    """call as F(m x m, 3 x 3) with the batch norm tensors bn (params: its eps) folded into the
    transformed weight and bias in place of call's (when given); None when the weight or a
    batch norm tensor is not a constant of the module."""
    mr, nr = bgemm_tile(ctx.target)
    u = ctx.prepacked("winograd", (call.weight,) + bn, nr, (m,) + params)
    if u is None:
        return None
    x = call.x
    oc = call.weight.shape[0]
    # the transforms and the bgemm in float32 (U is float32 for a bfloat16 weight: prepack.dtype_of),
    # the result rounded to x's dtype once
    value, _ = winograd_inverse(lambda n, c, y, w: sl.cast("float32", x[n, c, y, w]), x.shape, u, oc, m,
                                call.padding[0], mr, name=ctx.name("wino"))
    bias = call.bias if bias is None else bias

    def body(n, o, y, w):
        v = value(n, o, y, w)
        return sl.cast(x.dtype, v + sl.cast("float32", bias[o]) if bias is not None else v)
    return sl.compute(call.out_shape, body, name=ctx.name())
