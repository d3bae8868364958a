"""GPU schedules the CUDA tests build (each binds its loops to blockIdx/threadIdx), and their inputs."""
import numpy as np

import schedlang as sl
from tests import programs
from tests.helpers import random_input


def arrays_for(s, args, seed=0):
    """Random inputs and output arrays filled with 7, in argument order; and the inputs by tensor."""
    rng = np.random.default_rng(seed)
    arrays, feed = [], {}
    for t in args:
        if isinstance(s[t].op, sl.tensor.PlaceholderOp):
            feed[t] = random_input(t.shape, t.dtype, rng)
            arrays.append(feed[t])
        else:
            arrays.append(np.full(t.shape, 7, dtype=t.dtype_obj.numpy))
    return arrays, feed


def bind(s, t, outer, inner, x="x"):
    s[t].bind(outer, sl.thread_axis(f"blockIdx.{x}"))
    s[t].bind(inner, sl.thread_axis(f"threadIdx.{x}"))


def elementwise(n=1000, factor=64):
    """B = exp(A) * 2 over n elements, n not a multiple of the block size (a tail)."""
    A = sl.placeholder((n,), name="A")
    B = sl.compute((n,), lambda i: sl.exp(A[i]) * 2.0, name="B")
    s = sl.create_schedule(B.op)
    bind(s, B, *s[B].split(B.op.axis[0], factor=factor))
    return s, [A, B]


def silu_and_mul(rows=3, d=50):
    x = sl.placeholder((rows, 2 * d), name="x")
    out = sl.compute((rows, d), lambda i, j: x[i, j] * sl.sigmoid(x[i, j]) * x[i, j + d], name="out")
    s = sl.create_schedule(out.op)
    fused = s[out].fuse(*out.op.axis)
    xo, xi = s[out].split(fused, factor=128)
    to, lanes = s[out].split(xi, factor=4)
    bind(s, out, xo, to)
    s[out].vectorize(lanes)      # a serial loop on the GPU for now
    return s, [x, out]


def tiled_gemm(M=70, N=50, K=30, cache_shared=False):
    """C = A @ B: 8x16 tiles, one per block, one C element per thread in a local accumulator;
    with cache_shared, A is read through shared memory at the reduction's outer loop."""
    A, B, C = programs.gemm(M, N, K)
    s = sl.create_schedule(C.op)
    CC = s.cache_write(C, "local")
    bi, bj, ti, tj = s[C].tile(C.op.axis[0], C.op.axis[1], 8, 16)
    s[C].bind(bi, sl.thread_axis("blockIdx.y"))
    s[C].bind(bj, sl.thread_axis("blockIdx.x"))
    s[C].bind(ti, sl.thread_axis("threadIdx.y"))
    s[C].bind(tj, sl.thread_axis("threadIdx.x"))
    s[CC].compute_at(s[C], tj)
    if cache_shared:
        AS = s.cache_read(A, "shared", [CC])
        ko, _ = s[CC].split(CC.op.reduce_axis[0], factor=8)
        s[AS].compute_at(s[CC], ko)
    return s, [A, B, C]


def row_sum(rows=37, cols=20):
    """One thread per row, each summing its row serially."""
    X = sl.placeholder((rows, cols), name="X")
    k = sl.reduce_axis((0, cols), name="k")
    Y = sl.compute((rows,), lambda i: sl.sum(X[i, k], axis=k), name="Y")
    s = sl.create_schedule(Y.op)
    bind(s, Y, *s[Y].split(Y.op.axis[0], factor=16))
    return s, [X, Y]
