"""Small algorithms shared by the tests (no schedules)."""
from __future__ import annotations

import schedlang as sl


def gemm(M, N, K, dtype="float32"):
    A = sl.placeholder((M, K), dtype, name="A")
    B = sl.placeholder((K, N), dtype, name="B")
    k = sl.reduce_axis((0, K), name="k")
    C = sl.compute((M, N), lambda i, j: sl.sum(A[i, k] * B[k, j], axis=k), name="C")
    return A, B, C


def packed_gemm(M, N, K, bn=32):
    """The TVM CPU GEMM tutorial's algorithm: B packed into [N/bn, K, bn] panels."""
    A = sl.placeholder((M, K), name="A")
    B = sl.placeholder((K, N), name="B")
    k = sl.reduce_axis((0, K), name="k")
    packed = sl.compute((N // bn, K, bn), lambda x, y, z: B[y, x * bn + z], name="packedB")
    C = sl.compute((M, N), lambda x, y: sl.sum(A[x, k] * packed[y // bn, k, y % bn], axis=k), name="C")
    return A, B, packed, C


def conv2d(N, C, H, W, F, R, pad=1):
    X = sl.placeholder((N, C, H, W), name="X")
    Wt = sl.placeholder((F, C, R, R), name="Wt")
    padded = sl.compute(
        (N, C, H + 2 * pad, W + 2 * pad),
        lambda n, c, h, w: sl.if_then_else(sl.all(h >= pad, h < H + pad, w >= pad, w < W + pad),
                                           X[n, c, h - pad, w - pad], 0.0),
        name="pad")
    rc = sl.reduce_axis((0, C), name="rc")
    rh = sl.reduce_axis((0, R), name="rh")
    rw = sl.reduce_axis((0, R), name="rw")
    OH, OW = H + 2 * pad - R + 1, W + 2 * pad - R + 1
    out = sl.compute((N, F, OH, OW),
                     lambda n, f, h, w: sl.sum(padded[n, rc, h + rh, w + rw] * Wt[f, rc, rh, rw], axis=[rc, rh, rw]),
                     name="conv")
    return X, Wt, padded, out


def softmax(N, M):
    X = sl.placeholder((N, M), name="X")
    k = sl.reduce_axis((0, M), name="k")
    mx = sl.compute((N,), lambda i: sl.max(X[i, k], axis=k), name="maxval")
    ex = sl.compute((N, M), lambda i, j: sl.exp(X[i, j] - mx[i]), name="expval")
    k2 = sl.reduce_axis((0, M), name="k2")
    total = sl.compute((N,), lambda i: sl.sum(ex[i, k2], axis=k2), name="total")
    out = sl.compute((N, M), lambda i, j: ex[i, j] / total[i], name="softmax")
    return X, mx, ex, total, out


def row_sum(N, M):
    A = sl.placeholder((N, M), name="A")
    k = sl.reduce_axis((0, M), name="k")
    B = sl.compute((N,), lambda i: sl.sum(A[i, k], axis=k), name="B")
    return A, B


def silu_and_mul(rows, cols):
    x = sl.placeholder((rows, cols), name="x")
    half = cols // 2
    out = sl.compute((rows, half), lambda i, j: x[i, j] * sl.sigmoid(x[i, j]) * x[i, j + half], name="mul")
    return x, out


def schedule_tvm_cpu_gemm(s, C, packed, bn):
    """The TVM CPU GEMM tutorial's final schedule on packed_gemm's stages: a write cache per
    bn x bn tile, k split by 4 and unrolled, the tile's columns vectorized, rows parallel,
    and the packing vectorized and parallel."""
    CC = s.cache_write(C, "global")
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], bn, bn)
    s[CC].compute_at(s[C], yo)
    xc, yc = s[CC].op.axis
    (k,) = s[CC].op.reduce_axis
    ko, ki = s[CC].split(k, factor=4)
    s[CC].reorder(ko, xc, ki, yc)
    s[CC].unroll(ki)
    s[CC].vectorize(yc)
    s[C].parallel(xo)
    x, y, z = s[packed].op.axis
    s[packed].vectorize(z)
    s[packed].parallel(x)
    return s
