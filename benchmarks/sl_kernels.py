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
    """The classic TVM CPU GEMM tutorial schedule: B packed into [N/bn, K, bn] panels, a write
    cache computed at each 32x32 tile, k split by 4 and unrolled, the tile's columns vectorized,
    tile rows parallel."""
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
    return sl.build(s, [A, B, C], target=target, name="gemm")


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
