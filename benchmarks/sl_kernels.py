"""The schedlang kernels the benchmarks time: algorithm plus a hand-written schedule each.

Every builder takes the target to build for (the host CPU, with its thread count)."""
from __future__ import annotations

import schedlang as sl


def _packed_gemm(M: int, N: int, K: int, bn: int):
    """C = A @ B with B packed into [N/bn, K, bn] panels read through y // bn, y % bn."""
    A = sl.placeholder((M, K), name="A")
    B = sl.placeholder((K, N), name="B")
    k = sl.reduce_axis((0, K), name="k")
    packedB = sl.compute((N // bn, K, bn), lambda x, y, z: B[y, x * bn + z], name="packedB")
    C = sl.compute((M, N), lambda x, y: sl.sum(A[x, k] * packedB[y // bn, k, y % bn], axis=k), name="C")
    return A, B, packedB, C


def gemm(target, M: int, N: int, K: int, bn: int = 32):
    """The module of gemm_schedule_tutorial (which see) built for target."""
    s, args = gemm_schedule_tutorial(M, N, K, bn)
    return sl.build(s, args, target=target, name="gemm")


def gemm_schedule_tutorial(M: int, N: int, K: int, bn: int = 32):
    """The classic TVM CPU GEMM tutorial schedule (tutorials/01_gemm_cpu.py's final one): B
    packed into [N/bn, K, bn] panels, a write cache computed at each 32x32 tile, k split by 4
    and unrolled, the tile's columns vectorized, tile rows parallel. Returns (schedule, [A, B, C])."""
    A, B, packedB, C = _packed_gemm(M, N, K, bn)
    s = sl.create_schedule(C.op)
    CC = s.cache_write(C, "global")
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], bn, bn)
    s[CC].compute_at(s[C], yo)
    xc, yc = s[CC].op.axis
    (kc,) = s[CC].op.reduce_axis
    ko, ki = s[CC].split(kc, factor=4)
    s[CC].reorder(ko, xc, ki, yc)
    s[CC].unroll(ki)
    s[CC].vectorize(yc)
    s[C].parallel(xo)
    x, _, z = s[packedB].op.axis
    s[packedB].vectorize(z)
    s[packedB].parallel(x)
    return s, [A, B, C]


def gemm_register_tiled(target, M: int, N: int, K: int, mr: int = 4, nr: int = 16):
    """Not the tutorial schedule: an mr x nr write-cache tile per (xo, yo), with the whole k loop
    outside the fully unrolled tile, so the mr * nr / lanes accumulators live in registers (a
    BLAS-style micro-kernel: 8 ymm accumulators for 4x16 with AVX2). B is packed in nr-wide panels."""
    A, B, packedB, C = _packed_gemm(M, N, K, nr)
    s = sl.create_schedule(C.op)
    CC = s.cache_write(C, "global")
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], mr, nr)
    s[CC].compute_at(s[C], yo)
    xc, yc = s[CC].op.axis
    (kc,) = s[CC].op.reduce_axis
    s[CC].reorder(kc, xc, yc)
    s[CC].unroll(xc)
    s[CC].vectorize(yc)
    s[C].parallel(xo)
    x, _, z = s[packedB].op.axis
    s[packedB].vectorize(z)
    s[packedB].parallel(x)
    return sl.build(s, [A, B, C], target=target, name="gemm_rt")


def conv2d_stages(n: int, c: int, h: int, w: int, f: int, r: int = 3, pad: int = 1):
    """conv2d NCHW, stride 1, unscheduled: (X, W, padded, conv), the padding a stage of its own
    (an if_then_else), the sum over rc, rh, rw."""
    X = sl.placeholder((n, c, h, w), name="X")
    W = sl.placeholder((f, c, r, r), name="W")
    padded = sl.compute((n, c, h + 2 * pad, w + 2 * pad), lambda nn, cc, hh, ww: sl.if_then_else(
        sl.all(hh >= pad, hh < h + pad, ww >= pad, ww < w + pad), X[nn, cc, hh - pad, ww - pad], 0.0), name="pad")
    rc, rh, rw = (sl.reduce_axis((0, e), name=nm) for e, nm in ((c, "rc"), (r, "rh"), (r, "rw")))
    out = sl.compute((n, f, h + 2 * pad - r + 1, w + 2 * pad - r + 1), lambda nn, ff, hh, ww: sl.sum(
        padded[nn, rc, hh + rh, ww + rw] * W[ff, rc, rh, rw], axis=[rc, rh, rw]), name="conv")
    return X, W, padded, out


def conv2d_nchwc(target, n: int, c: int, h: int, w: int, f: int, wt: int = 8, vecs: int = 1,
                 lanes: int = 0, inline_pad: bool = True):
    """The module of conv2d_nchwc_schedule (which see) built for target."""
    target = sl.Target.create(target) if isinstance(target, str) else target
    s, args = conv2d_nchwc_schedule(target, n, c, h, w, f, wt, vecs, lanes, inline_pad)
    return sl.build(s, args, target=target, name="conv2d_nchwc")


def conv2d_nchwc_schedule(target, n: int, c: int, h: int, w: int, f: int, wt: int = 8, vecs: int = 1,
                          lanes: int = 0, inline_pad: bool = True):
    """conv2d NCHW (3x3, pad 1) scheduled as oneDNN's and TVM's x86 NCHWc kernels: vectorized
    over `lanes` output channels (default: the target's float32 vector width), the weights
    packed [F/lanes, C, 3, 3, lanes] (a cache_read copy re-laid out by cache_write, then
    inlined), a register tile of wt output columns by `vecs` vectors of channels in a local
    cache laid out [.., wt, lanes], the reductions outside the unrolled tile (per step: wt
    broadcasts of an input value, `vecs` vector loads of weights, wt * vecs FMAs), the tile
    written back to NCHW after the reduction, a row of wt columns per store (a vector over the
    channels would be a scatter); (filter tile, row) parallel.

    inline_pad: read the input through the padding's if_then_else (LLVM splits off the edge
    columns: the inner columns become FMAs with a broadcast memory operand) instead of
    materializing the padded input in a pass of its own. The defaults (8 x 16, padding
    inlined) are what the auto-scheduler's tile_relayout sketch found best at 64 channels
    56 x 56: ~1.08 ms (~91% of the FMA peak of 2 Zen 4 cores) against ~1.14-1.34 ms for 7 x 32
    with the padding materialized; 7 x 32 with the padding inlined takes ~2.1 ms (the edge
    columns are not split off when a broadcast feeds two vectors).
    Returns (schedule, [X, W, conv])."""
    X, W, padded, out = conv2d_stages(n, c, h, w, f)
    target = sl.Target.create(target) if isinstance(target, str) else target
    lanes = lanes or max(1, (target.vector_bits or 256) // 32)
    s = sl.create_schedule(out.op)
    Wc = s.cache_read(W, "global", [out])
    fa, ca, ra, qa = s[Wc].op.axis
    fo, fi = s[Wc].split(fa, factor=lanes)
    s[Wc].reorder(fo, ca, ra, qa, fi)
    Wp = s.cache_write(Wc, "global")               # its buffer follows the loops: [F/lanes, C, 3, 3, lanes]
    s[Wc].compute_inline()
    nn, ff, hh, ww = out.op.axis
    fo, fi = s[out].split(ff, factor=lanes)
    s[out].reorder(nn, fo, hh, ww, fi)
    CC = s.cache_write(out, "local")               # laid out [.., ww, lanes]: the vector innermost
    nn, ff, hh, ww = s[out].op.axis
    fo, fi = s[out].split(ff, factor=vecs * lanes)
    wo, wi = s[out].split(ww, factor=wt)
    s[out].reorder(nn, fo, hh, wo, fi, wi)           # written back a row of columns at a time: contiguous stores
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
    return s, [X, W, out]


def silu_and_mul(target, rows: int, cols: int, factor: int):
    """out[i, j] = silu(x[i, j]) * x[i, j + cols/2]: rows parallel, columns split by `factor`,
    the inner part vectorized (sigmoid uses schedlang's vectorised polynomial exp)."""
    half = cols // 2
    x = sl.placeholder((rows, cols), name="x")
    out = sl.compute((rows, half), lambda i, j: x[i, j] * sl.sigmoid(x[i, j]) * x[i, j + half], name="silu_mul")
    s = sl.create_schedule(out.op)
    i, j = out.op.axis
    _, ji = s[out].split(j, factor=factor)
    s[out].vectorize(ji)
    s[out].parallel(i)
    return sl.build(s, [x, out], target=target, name="silu_mul")


def softmax_stages(rows: int, cols: int):
    """The row softmax algorithm, unscheduled: (X, rowmax, expval, rowsum, softmax)."""
    X = sl.placeholder((rows, cols), name="X")
    k = sl.reduce_axis((0, cols), name="k")
    mx = sl.compute((rows,), lambda i: sl.max(X[i, k], axis=k), name="rowmax")
    ex = sl.compute((rows, cols), lambda i, j: sl.exp(X[i, j] - mx[i]), name="expval")
    k2 = sl.reduce_axis((0, cols), name="k2")
    tot = sl.compute((rows,), lambda i: sl.sum(ex[i, k2], axis=k2), name="rowsum")
    out = sl.compute((rows, cols), lambda i, j: ex[i, j] / tot[i], name="softmax")
    return X, mx, ex, tot, out


def softmax(target, rows: int, cols: int, factor: int, vector_reductions: bool, exp_at_row: bool = False):
    """Row softmax as four stages: row max, exp (inlined, so computed in the sum and again in
    the normalize), row sum, normalize. Both reductions are computed at the output's row loop,
    rows run in parallel, and the normalize loop's inner split is vectorized.

    vector_reductions: also split each reduction by `factor` and rfactor the inner part, so the
    max and the sum run on `factor`-lane vector accumulators (a final short reduction folds them);
    without it the reductions are scalar loops (LLVM may not reassociate float adds).
    exp_at_row: compute exp once per row into a row buffer at the output's row loop (its loop
    split by `factor` and vectorized), read by the sum and the normalize, instead of inlining it.
    """
    X, mx, ex, tot, out = softmax_stages(rows, cols)
    s = sl.create_schedule(out.op)
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
    return sl.build(s, [X, out], target=target, name="softmax")
