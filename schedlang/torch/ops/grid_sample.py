"""F.grid_sample on 4-d inputs (aten.grid_sampler_2d), bilinear or nearest, with zeros or
border padding and either align_corners: each output point reads the input at the grid's
(x, y) in [-1, 1], unnormalized as torch does,

    align_corners:  ix = (x + 1) / 2 * (W - 1)        else: ix = ((x + 1) * W - 1) / 2

(border padding clamps ix to [0, W - 1]); bilinear mixes the four neighbours by their
distances, nearest takes the rounded one (half to even, torch's nearbyint). A neighbour
outside the input reads 0 (zeros padding), never memory: the coordinate is clamped before
it becomes an index, so a NaN or huge grid value reads nothing out of bounds. Reflection
padding and bicubic interpolation stay in torch.
"""
from __future__ import annotations

import schedlang as sl

from .accum import acc_dtype, require_float
from .common import compute, static
from .registry import Unsupported, register_lowering

MODES = {0: "bilinear", 1: "nearest", 2: "bicubic"}
PADDINGS = {0: "zeros", 1: "border", 2: "reflection"}


@register_lowering("aten.grid_sampler_2d.default")
def grid_sampler_2d(ctx, x, grid, interpolation_mode, padding_mode, align_corners):
    require_float("grid_sample", x, grid)
    if x.ndim != 4 or grid.ndim != 4 or static(grid.shape[3], "grid_sample: the grid's last dim") != 2:
        raise ValueError(f"grid_sample: input {list(x.shape)} and grid {list(grid.shape)} (expected [N, C, H, W] "
                         "and [N, Ho, Wo, 2])")
    mode, padding = MODES.get(interpolation_mode), PADDINGS.get(padding_mode)
    if mode not in ("bilinear", "nearest") or padding not in ("zeros", "border"):
        raise Unsupported(f"grid_sample with mode={mode} and padding_mode={padding} (bilinear or nearest with "
                          "zeros or border padding are lowered)")
    out, acc = str(x.dtype), acc_dtype(x.dtype)
    H, W = static(x.shape[2], "grid_sample: input height"), static(x.shape[3], "grid_sample: input width")
    c = lambda v: sl.const(float(v), acc)   # noqa: E731

    def unnormalize(v, size: int):
        v = (v + c(1)) / c(2) * c(size - 1) if align_corners else ((v + c(1)) * c(size) - c(1)) / c(2)
        return sl.min(sl.max(v, c(0)), c(size - 1)) if padding == "border" else v

    def tap(n, ch, fy, fx):
        """input[n, ch, fy, fx] for whole-number float coordinates; 0 outside (and for NaN)."""
        inside = sl.all(fy >= c(0), fy <= c(H - 1), fx >= c(0), fx <= c(W - 1))
        iy = sl.cast("int32", sl.min(sl.max(fy, c(0)), c(H - 1)))
        ix = sl.cast("int32", sl.min(sl.max(fx, c(0)), c(W - 1)))
        return sl.if_then_else(inside, sl.cast(acc, x[n, ch, iy, ix]), c(0))

    def body(idx):
        n, ch, i, j = idx
        gx = unnormalize(sl.cast(acc, grid[n, i, j, 0]), W)
        gy = unnormalize(sl.cast(acc, grid[n, i, j, 1]), H)
        if mode == "nearest":
            return sl.cast(out, tap(n, ch, sl.nearbyint(gy), sl.nearbyint(gx)))
        x0, y0 = sl.floor(gx), sl.floor(gy)
        wx, wy = gx - x0, gy - y0
        top = tap(n, ch, y0, x0) * (c(1) - wx) + tap(n, ch, y0, x0 + c(1)) * wx
        bottom = tap(n, ch, y0 + c(1), x0) * (c(1) - wx) + tap(n, ch, y0 + c(1), x0 + c(1)) * wx
        return sl.cast(out, top * (c(1) - wy) + bottom * wy)
    return compute((x.shape[0], x.shape[1], grid.shape[1], grid.shape[2]), body, ctx.name())
