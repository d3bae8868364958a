"""F.fold (aten.col2im): sum sliding blocks back into an image, the adjoint of F.unfold.

    out[n, c, y, x] = sum over kernel offsets (i, j) of cols[n, (c * kh + i) * kw + j, by * Lw + bx]

for the block (by, bx) whose offset (i, j) lands on (y, x): by = (y + ph - i * dh) / sh exactly,
within [0, Lh) (bx alike). A reduction over the kernel offsets, those that land on no block
left out by its condition, in torch's order (offsets outer), every read clamped into cols.
torch decomposes col2im into an index_put with two index tensors, which runs in torch; VOLO's
outlook attention folds its windows this way.
"""
from __future__ import annotations

import schedlang as sl

from .common import compute, static
from .registry import register_lowering


def _pair(v, what: str):
    vals = [static(e, f"col2im: {what}") for e in (v if isinstance(v, (list, tuple)) else (v, v))]
    if len(vals) != 2:
        raise ValueError(f"col2im: {what} {list(vals)} must have 2 entries")
    return vals


@register_lowering("aten.col2im.default")
def col2im(ctx, cols, output_size, kernel_size, dilation, padding, stride):
    (h, w), (kh, kw) = _pair(output_size, "output_size"), _pair(kernel_size, "kernel_size")
    (dh, dw), (ph, pw), (sh, sw) = _pair(dilation, "dilation"), _pair(padding, "padding"), _pair(stride, "stride")
    if min(kh, kw, dh, dw, sh, sw) <= 0 or min(ph, pw) < 0:
        raise ValueError("col2im: kernel_size, dilation and stride must be positive, padding not negative")
    batched = cols.ndim == 3
    if cols.ndim not in (2, 3):
        raise ValueError(f"col2im: expected a 2-d or 3-d input, got {cols.ndim}-d")
    rows, length = (static(e, "col2im: input size") for e in cols.shape[-2:])
    lh, lw = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1, (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    if rows % (kh * kw) or lh <= 0 or lw <= 0 or lh * lw != length:
        raise ValueError(f"col2im: an input of {rows} x {length} does not hold {kh} x {kw} blocks of a "
                         f"{h} x {w} output ({lh} x {lw} of them)")
    channels = rows // (kh * kw)
    i, j = sl.reduce_axis((0, kh), name="ki"), sl.reduce_axis((0, kw), name="kj")
    c32 = lambda v: sl.const(v, "int32")      # noqa: E731

    def body(idx):
        c, y, x = idx[-3], idx[-2], idx[-1]
        ty, tx = y + c32(ph) - i * dh, x + c32(pw) - j * dw       # where the block's top-left sits, times the stride
        by, bx = sl.floordiv(ty, sh), sl.floordiv(tx, sw)
        lands = sl.all(sl.all(ty >= 0, ty % sh == 0), sl.all(by < lh, sl.all(tx >= 0, sl.all(tx % sw == 0, bx < lw))))
        block = sl.min(sl.max(by, c32(0)), c32(lh - 1)) * lw + sl.min(sl.max(bx, c32(0)), c32(lw - 1))
        at = tuple(idx[:-3]) + ((c * kh + i) * kw + j, block)
        return sl.sum(cols[at], axis=(i, j), where=lands)
    shape = ([cols.shape[0]] if batched else []) + [channels, h, w]
    return compute(shape, body, ctx.name())
