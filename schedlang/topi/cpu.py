"""CPU schedules (the llvm target) of the algorithms in `nn.py`, as TVM's `topi.x86.schedule_*`.

Each takes the schedule `s` (from `sl.create_schedule`, possibly of a larger program) and the
algorithm's output, applies its steps and returns `s`. Vector widths come from the target
(`native_lanes`): pass `target=` (a string or a Target) or an explicit factor; nothing assumes
AVX-512 or AVX2."""
from __future__ import annotations

import schedlang as sl

from .find import compute_inputs, placeholder_inputs, require, upstream_computes
from .nn import softmax_stages


def native_lanes(target="llvm", dtype: str = "float32") -> int:
    """Elements of `dtype` in one native vector register of `target` (16 float32 lanes with
    AVX-512, 8 with AVX2, 4 with SSE/NEON)."""
    return sl.Target.create(target).native_lanes(sl.dtype(dtype).bits)


def schedule_matmul_packed(s, C, parallel: bool = True, k_factor: int = 4):
    """TVM's CPU GEMM tutorial (`tutorials/01_gemm_cpu.py`), final schedule, on the output of
    `nn.matmul_packed`: a bn x bn tile of C per (xo, yo) (bn: the packing's panel width)
    accumulated in a write cache computed at yo, k split by k_factor with the inner part
    unrolled inside the tile rows, the tile's columns vectorized; the packing vectorized. With
    parallel, the tile rows and the packing's panels run on all cores."""
    packed = _packing(C, "schedule_matmul_packed")
    bn = packed.shape[2]
    schedule_matmul_cached(s, C, (bn, bn), k_factor, "global", parallel=parallel)
    x, _, z = s[packed].op.axis
    s[packed].vectorize(z)
    if parallel:
        s[packed].parallel(x)
    return s


def schedule_matmul_cached(s, C, tile=(16, 16), k_factor: int = 4, scope: str = "local",
                           vectorize_tile: bool = False, parallel: bool = True):
    """`nn.matmul` (or any C[i, j] = sum over k) as the TVM CPU GEMM tutorial's final schedule
    without the packing: a tile of C per (xo, yo) accumulated in a write cache (`scope`)
    computed at yo, k split by k_factor with ko outside the tile and ki (unrolled) inside its
    rows, the tile's columns vectorized; with vectorize_tile also the copy-out's columns; with
    parallel, the tile rows on all cores. Odd sizes leave guarded tails."""
    CC = s.cache_write(C, scope)
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], *tile)
    s[CC].compute_at(s[C], yo)
    xc, yc = s[CC].op.axis
    (k,) = s[CC].op.reduce_axis
    ko, ki = s[CC].split(k, factor=k_factor)
    s[CC].reorder(ko, xc, ki, yc)
    s[CC].unroll(ki)
    s[CC].vectorize(yc)
    if vectorize_tile:
        s[C].vectorize(yi)
    if parallel:
        s[C].parallel(xo)
    return s


def schedule_matmul_register_tiled(s, C, mr: int = 4, k_unroll: int = 4, prefetch: int = 16):
    """A BLAS-style micro-kernel on the output of `nn.matmul_packed`: an mr x bn write-cache
    tile per (xo, yo) (bn: the panel width) with the whole k loop outside the fully unrolled
    tile, so its mr * bn / lanes accumulators stay in registers (4 x 16 float32: 8 AVX2 or 4
    AVX-512 registers), k_unroll copies of the k step where they divide the k loop (as BLIS's
    kernels do; made by LLVM's unroller: the "unroll_count" pragma), B's panel row `prefetch`
    k steps ahead prefetched at each step (0: none); tile rows and panels in parallel."""
    packed = _packing(C, "schedule_matmul_register_tiled")
    CC = s.cache_write(C, "global")
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], mr, packed.shape[2])
    s[CC].compute_at(s[C], yo)
    xc, yc = s[CC].op.axis
    (k,) = s[CC].op.reduce_axis
    s[CC].reorder(k, xc, yc)
    extent = k.dom.extent
    if k_unroll > 1 and isinstance(extent, int) and extent > k_unroll and extent % k_unroll == 0:
        s[CC].pragma(k, "unroll_count", k_unroll)    # LLVM's unroller makes the copies
    if prefetch:
        s[CC].prefetch(packed, k, prefetch)
    s[CC].unroll(xc)
    s[CC].vectorize(yc)
    s[C].parallel(xo)
    x, _, z = s[packed].op.axis
    s[packed].vectorize(z)
    s[packed].parallel(x)
    return s


def schedule_conv2d_nchw(s, out, target="llvm", filters: int = 4, lanes: int = 0):
    """`nn.conv2d_nchw` as in `tutorials/04_reductions_and_conv.py`: a tile of `filters` output
    channels by `lanes` output columns (default: the target's float32 vector) accumulated in a
    local stage with the reductions outside it, the taps and filters unrolled and the columns
    vectorized; the padding computed per output row; filter blocks in parallel."""
    (padded,) = compute_inputs(out, 4, "schedule_conv2d_nchw", "conv2d_nchw's padding")
    lanes = lanes or native_lanes(target, out.dtype)
    OL = s.cache_write(out, "local")
    n, f, h, w = s[out].op.axis
    fo, fi = s[out].split(f, factor=filters)
    wo, wi = s[out].split(w, factor=lanes)
    s[out].reorder(n, fo, h, wo, fi, wi)
    s[OL].compute_at(s[out], wo)
    s[padded].compute_at(s[out], h)
    nc, fc, hc, wc = s[OL].op.axis
    rc, rh, rw = s[OL].op.reduce_axis
    s[OL].reorder(nc, hc, rc, rh, rw, fc, wc)
    s[OL].vectorize(wc)
    s[OL].unroll(rw)
    s[OL].unroll(fc)
    s[out].vectorize(wi)
    s[out].parallel(fo)
    return s


def schedule_conv2d_nchwc(s, out, target="llvm", wt: int = 8, vecs: int = 1, lanes: int = 0,
                          inline_pad: bool = True):
    """The NCHWc convolution schedule (oneDNN's and TVM's x86 kernels), for either algorithm.

    On `nn.conv2d_nchwc`'s output (5-d, already blocked): `_schedule_blocked_conv2d`; its block
    of output channels is the vector, so vecs and lanes do not apply.
    On `nn.conv2d_nchw`'s output (4-d), computed in NCHWc blocks: vectorized over `lanes`
    output channels (default: the target's float32 vector), the weights packed
    [F/lanes, C, R, S, lanes] (a cache_read copy re-laid out by cache_write, then inlined), a
    register tile of wt output columns by `vecs` vectors of channels in a local cache laid out
    [.., wt, lanes], the reductions outside the unrolled tile (per step: wt broadcasts of an
    input value, `vecs` vector loads of weights, wt * vecs FMAs), the tile written back to NCHW
    a row of wt columns per store; (image, filter tile, row) parallel.

    inline_pad: read the input through the padding's if_then_else (LLVM splits off the edge
    columns) instead of materializing the padded input in a pass of its own. The defaults
    (8 columns by 1 vector, padding inlined) are what the auto-scheduler found best at 64
    channels, 56 x 56 (benchmarks/sl_kernels.py: conv2d_nchwc_schedule has the figures)."""
    if out.ndim == 5:
        return _schedule_blocked_conv2d(s, out, wt, inline_pad)
    (padded,) = compute_inputs(out, 4, "schedule_conv2d_nchwc", "conv2d_nchw's padding")
    (W,) = placeholder_inputs(out, 4, "schedule_conv2d_nchwc", "the weights")
    lanes = lanes or native_lanes(target, out.dtype)
    Wc = s.cache_read(W, "global", [out])
    fa, ca, ra, qa = s[Wc].op.axis
    fo, fi = s[Wc].split(fa, factor=lanes)
    s[Wc].reorder(fo, ca, ra, qa, fi)
    Wp = s.cache_write(Wc, "global")               # its buffer follows the loops: [F/lanes, C, R, S, lanes]
    s[Wc].compute_inline()
    nn, ff, hh, ww = out.op.axis
    fo, fi = s[out].split(ff, factor=lanes)
    s[out].reorder(nn, fo, hh, ww, fi)
    CC = s.cache_write(out, "local")               # laid out [.., ww, lanes]: the vector innermost
    nn, ff, hh, ww = s[out].op.axis
    fo, fi = s[out].split(ff, factor=vecs * lanes)
    wo, wi = s[out].split(ww, factor=wt)
    s[out].reorder(nn, fo, hh, wo, fi, wi)         # written back a row of columns at a time: contiguous stores
    s[CC].compute_at(s[out], wo)
    cn, cfo, ch, cw, cfi = s[CC].op.axis
    s[CC].reorder(cn, ch, *s[CC].op.reduce_axis, cw, cfo, cfi)
    s[CC].unroll(cw)
    s[CC].unroll(cfo)
    s[CC].vectorize(cfi)
    s[out].parallel(s[out].fuse(nn, fo, hh))
    s[out].unroll(fi)
    s[out].vectorize(wi)
    if inline_pad:
        s[padded].compute_inline()
    else:
        s[padded].parallel(s[padded].fuse(*padded.op.axis[:3]))
    s[Wp].parallel(s[Wp].fuse(*s[Wp].op.axis[:2]))
    s[Wp].vectorize(s[Wp].op.axis[-1])
    return s


def _schedule_blocked_conv2d(s, out, wt: int, inline_pad: bool):
    """`nn.conv2d_nchwc`'s output [N, F/oc, OH, OW, oc]: a register tile of wt output columns by
    the oc channels of a block (one vector) in a local cache, the four reductions outside the
    unrolled tile, the block's channels vectorized; (image, channel block, row) parallel."""
    (padded,) = compute_inputs(out, 5, "schedule_conv2d_nchwc", "conv2d_nchwc's padding")
    CC = s.cache_write(out, "local")
    n, f, y, x, o = s[out].op.axis
    xo, xi = s[out].split(x, factor=wt)
    s[out].reorder(n, f, y, xo, xi, o)
    s[CC].compute_at(s[out], xo)
    cn, cf, cy, cx, co = s[CC].op.axis
    s[CC].reorder(cn, cf, cy, *s[CC].op.reduce_axis, cx, co)
    s[CC].unroll(cx)
    s[CC].vectorize(co)
    s[out].vectorize(o)
    s[out].parallel(s[out].fuse(n, f, y))
    if inline_pad:
        s[padded].compute_inline()
    else:
        s[padded].parallel(s[padded].fuse(*padded.op.axis[:3]))
    return s


def schedule_softmax(s, out, target="llvm", factor: int = 0, vector_reductions: bool = False,
                     exp_at_row: bool = False):
    """`nn.softmax` as four stages fused per row: exp inlined (computed in the sum and again in
    the quotient), the row max and the row sum computed at the output's row loop, rows in
    parallel, each row's quotient split by `factor` (default: the target's vector lanes) and
    vectorized.

    vector_reductions: also split each reduction by `factor` and rfactor the inner part, so the
    max and the sum run on `factor`-lane vector accumulators (a final short reduction folds them);
    without it they are scalar loops (LLVM may not reassociate float adds).
    exp_at_row: compute exp once per row into a row buffer (split by `factor`, vectorized),
    read by the sum and the quotient, instead of inlining it."""
    mx, ex, tot = _softmax_stages(out, "schedule_softmax")
    factor = factor or native_lanes(target, out.dtype)
    i, j = out.op.axis
    if exp_at_row:
        s[ex].compute_at(s[out], i)
        _, ei = s[ex].split(ex.op.axis[1], factor=factor)
        s[ex].vectorize(ei)
    else:
        s[ex].compute_inline()
    for red in (mx, tot):
        s[red].compute_at(s[out], i)
        if vector_reductions:
            _, lanes = s[red].split(red.op.reduce_axis[0], factor=factor)
            rf = s.rfactor(red, lanes)                  # rf[lane, i] = partial result per lane
            s[rf].compute_at(s[out], i)
            lane, *rest = rf.op.axis
            s[rf].reorder(*rest, *rf.op.reduce_axis, lane)
            s[rf].vectorize(lane)
    _, ji = s[out].split(j, factor=factor)
    s[out].vectorize(ji)
    s[out].parallel(i)
    return s


def schedule_injective(s, out, target="llvm", factor: int = 0):
    """An elementwise chain (TVM's `schedule_injective`): every compute stage that feeds `out`
    inlined into it, its last axis split by `factor` (default: the target's vector lanes) and
    the inner part vectorized, the axis before it (or the outer part, for 1-d) in parallel."""
    require(all(not st.op.reduce_axis for st in upstream_computes(out)) and not out.op.reduce_axis,
            "schedule_injective", "the stages must be elementwise (no reductions)")
    for t in upstream_computes(out):
        s[t].compute_inline()
    factor = factor or native_lanes(target, out.dtype)
    *_, last = out.op.axis
    outer, inner = s[out].split(last, factor=factor)
    s[out].vectorize(inner)
    s[out].parallel(out.op.axis[-2] if out.ndim >= 2 else outer)
    return s


def schedule_silu_and_mul(s, out, target="llvm", factor: int = 0):
    """`nn.silu_and_mul` (or a SiluAndMul written as chunks and elementwise stages): rows in
    parallel, each row in vectors of `factor` (default: the target's lanes); `schedule_injective`."""
    return schedule_injective(s, out, target, factor)


def schedule_row_reduce(s, Y, target="llvm", factor: int = 0):
    """`nn.row_reduce` as TVM's rfactor tutorial: k split by `factor` (default: the target's
    lanes) and rfactored on the inner part, so a row's `factor` partial results are one vector
    register (the new stage Y.rf[i, lane], lanes innermost, computed per row of Y)."""
    require(len(Y.op.reduce_axis) == 1 and Y.ndim == 1, "schedule_row_reduce", "Y must reduce one axis into a 1-d output")
    factor = factor or native_lanes(target, Y.dtype)
    (k,) = s[Y].op.reduce_axis
    _, ki = s[Y].split(k, factor=factor)
    YF = s.rfactor(Y, ki, factor_axis=1)
    i, lane = s[YF].op.axis
    (kr,) = s[YF].op.reduce_axis
    s[YF].reorder(i, kr, lane)
    s[YF].vectorize(lane)
    s[YF].compute_at(s[Y], s[Y].op.axis[0])
    return s


def _packing(C, who: str):
    (packed,) = compute_inputs(C, 3, who, "matmul_packed's packedB")
    return packed


def _softmax_stages(out, who: str):
    try:
        return softmax_stages(out)
    except ValueError:
        raise ValueError(f"{who}: {out.name} is not the output of nn.softmax") from None
