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


def bind_tile(s, t, i, j, tile):
    """Tile loops i, j of stage t by tile, the tiles bound to blockIdx.y/x and the points in
    a tile to threadIdx.y/x; returns (bi, bj, ti, tj)."""
    bi, bj, ti, tj = s[t].tile(i, j, *tile)
    s[t].bind(bi, sl.thread_axis("blockIdx.y"))
    s[t].bind(bj, sl.thread_axis("blockIdx.x"))
    s[t].bind(ti, sl.thread_axis("threadIdx.y"))
    s[t].bind(tj, sl.thread_axis("threadIdx.x"))
    return bi, bj, ti, tj


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
    s[out].vectorize(lanes)
    return s, [x, out]


def tiled_gemm(M=70, N=50, K=30, cache_shared=False):
    """C = A @ B: 8x16 tiles, one per block, one C element per thread in a local accumulator;
    with cache_shared, A is read through shared memory at the reduction's outer loop."""
    A, B, C = programs.gemm(M, N, K)
    s = sl.create_schedule(C.op)
    CC = s.cache_write(C, "local")
    _, _, _, tj = bind_tile(s, C, C.op.axis[0], C.op.axis[1], (8, 16))
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


def cooperative_fetch(s, T, ty=8, tx=16):
    """TVM's cooperative fetch: the shared stage's loops fused, split by the block's threads
    and bound to threadIdx.y/x, so each thread copies a few elements of the tile."""
    fused = s[T].fuse(*s[T].op.axis)
    rest, x = s[T].split(fused, factor=tx)
    y, _ = s[T].split(rest, nparts=ty)
    s[T].bind(y, sl.thread_axis("threadIdx.y"))
    s[T].bind(x, sl.thread_axis("threadIdx.x"))


def shared_gemm(M=70, N=50, K=30, block=(8, 16), k_tile=8, fetch=True, local_a=False, double_buffer=False):
    """C = A @ B as in TVM's GPU GEMM tutorials: an 8x16 tile of C per block, one element per
    thread in a local accumulator, and at each step of the outer reduction loop the A and B
    tiles the block needs copied into shared memory by all of its threads. With local_a, each
    thread also copies its row of the A tile from shared memory into registers. With double_buffer,
    both shared tiles (and the register row) get two buffers, the next step's fetched while this
    one is used."""
    A, B, C = programs.gemm(M, N, K)
    s = sl.create_schedule(C.op)
    AA = s.cache_read(A, "shared", [C])
    BB = s.cache_read(B, "shared", [C])
    AL = s.cache_read(AA, "local", [C]) if local_a else None
    CL = s.cache_write(C, "local")
    _, _, _, tj = bind_tile(s, C, C.op.axis[0], C.op.axis[1], block)
    s[CL].compute_at(s[C], tj)
    ko, _ = s[CL].split(CL.op.reduce_axis[0], factor=k_tile)
    for T in (AA, BB):
        s[T].compute_at(s[CL], ko)
        if fetch:
            cooperative_fetch(s, T, *block)
    if local_a:
        s[AL].compute_at(s[CL], ko)
    if double_buffer:
        for T in (AA, BB) + ((AL,) if local_a else ()):
            s[T].double_buffer()
    return s, [A, B, C]


def row_reduce(rows=5, cols=100, threads=32, reducer="sum", rows_per_block=1, store_predicate=False):
    """Y[i] = reduce over k of X[i, k] with the reduction across threadIdx.x (a cross-thread
    reduction: each thread reduces cols / threads elements, then the block combines them);
    rows_per_block > 1 binds rows to threadIdx.y as well."""
    X = sl.placeholder((rows, cols), name="X")
    k = sl.reduce_axis((0, cols), name="k")
    Y = sl.compute((rows,), lambda i: getattr(sl, reducer)(X[i, k], axis=k), name="Y")
    s = sl.create_schedule(Y.op)
    ko, ki = s[Y].split(k, factor=threads)
    tx = sl.thread_axis("threadIdx.x")
    if rows_per_block > 1:
        bo, bi = s[Y].split(Y.op.axis[0], factor=rows_per_block)
        s[Y].bind(bo, sl.thread_axis("blockIdx.x"))
        s[Y].bind(bi, sl.thread_axis("threadIdx.y"))
    else:
        s[Y].bind(Y.op.axis[0], sl.thread_axis("blockIdx.x"))
    s[Y].bind(ki, tx)
    if store_predicate:
        s[Y].set_store_predicate(tx.var == threads - 1)
    return s, [X, Y]


def softmax(rows=6, cols=70, threads=32, fused=True):
    """Softmax over rows, one row a block: the row max and the row sum of exponentials are
    cross-thread reductions over threadIdx.x; fused, both are computed at the output's row loop
    and every thread reads the broadcast results from its registers."""
    X = sl.placeholder((rows, cols), name="X")
    k1 = sl.reduce_axis((0, cols), name="k1")
    k2 = sl.reduce_axis((0, cols), name="k2")
    M = sl.compute((rows,), lambda i: sl.max(X[i, k1], axis=k1), name="M")
    E = sl.compute((rows, cols), lambda i, j: sl.exp(X[i, j] - M[i]), name="E")
    S = sl.compute((rows,), lambda i: sl.sum(E[i, k2], axis=k2), name="S")
    Y = sl.compute((rows, cols), lambda i, j: E[i, j] / S[i], name="Y")
    s = sl.create_schedule(Y.op)
    s[E].compute_inline()
    jo, ji = s[Y].split(Y.op.axis[1], factor=threads)
    s[Y].bind(Y.op.axis[0], sl.thread_axis("blockIdx.x"))
    s[Y].bind(ji, sl.thread_axis("threadIdx.x"))
    for R in (M, S):
        ko, ki = s[R].split(R.op.reduce_axis[0], factor=threads)
        s[R].bind(ki, sl.thread_axis("threadIdx.x"))
        if fused:
            s[R].compute_at(s[Y], Y.op.axis[0])
        else:
            s[R].bind(R.op.axis[0], sl.thread_axis("blockIdx.x"))
    return s, [X, Y]


def vthread_gemm(M=37, N=35, K=13, k_tile=4):
    """C = A @ B in TVM's GEMM-tutorial shape: a 16x16 tile of C a block, 2x2 virtual threads
    (thread_axis((0, 2), "vthread")) of 4x4 threads, each thread a 2x2 register tile of C,
    A and B fetched cooperatively into shared memory and from there into registers."""
    A, B, C = programs.gemm(M, N, K)
    s = sl.create_schedule(C.op)
    AA = s.cache_read(A, "shared", [C])
    BB = s.cache_read(B, "shared", [C])
    AL = s.cache_read(AA, "local", [C])
    BL = s.cache_read(BB, "local", [C])
    CC = s.cache_write(C, "local")
    by, yi = s[C].split(C.op.axis[0], factor=16)
    bx, xi = s[C].split(C.op.axis[1], factor=16)
    tyz, yi = s[C].split(yi, nparts=2)
    ty, yi = s[C].split(yi, nparts=4)
    txz, xi = s[C].split(xi, nparts=2)
    tx, xi = s[C].split(xi, nparts=4)
    s[C].reorder(by, bx, tyz, txz, ty, tx, yi, xi)
    s[C].bind(by, sl.thread_axis("blockIdx.y"))
    s[C].bind(bx, sl.thread_axis("blockIdx.x"))
    s[C].bind(tyz, sl.thread_axis((0, 2), "vthread", name="vy"))
    s[C].bind(txz, sl.thread_axis((0, 2), "vthread", name="vx"))
    s[C].bind(ty, sl.thread_axis("threadIdx.y"))
    s[C].bind(tx, sl.thread_axis("threadIdx.x"))
    s[CC].compute_at(s[C], tx)
    ko, ki = s[CC].split(CC.op.reduce_axis[0], factor=k_tile)
    s[CC].reorder(ko, ki, *CC.op.axis)
    for T in (AA, BB):
        s[T].compute_at(s[CC], ko)
        cooperative_fetch(s, T, 4, 4)
    for T in (AL, BL):
        s[T].compute_at(s[CC], ki)
    return s, [A, B, C]


def silu_and_mul_vec(rows=3, d=64, threads=8, dtype="float32", lanes=4):
    """SiluAndMul with each thread computing `lanes` adjacent outputs in one vectorized loop: float4
    loads and stores where the row length keeps them aligned (d a multiple of 4), per-lane scalar
    accesses where not, and a scalar tail where d is not a multiple of lanes."""
    x = sl.placeholder((rows, 2 * d), dtype, name="x")
    out = sl.compute((rows, d), lambda i, j: x[i, j] * sl.sigmoid(x[i, j]) * x[i, j + d], name="out")
    s = sl.create_schedule(out.op)
    jo, vec = s[out].split(out.op.axis[1], factor=lanes)
    bo, to = s[out].split(jo, factor=threads)
    s[out].bind(out.op.axis[0], sl.thread_axis("blockIdx.y"))
    s[out].bind(bo, sl.thread_axis("blockIdx.x"))
    s[out].bind(to, sl.thread_axis("threadIdx.x"))
    s[out].vectorize(vec)
    return s, [x, out]


def shared_transpose(n=40, m=36, tile=16, align=None):
    """B = A.T through a shared tile: a block reads a tile of A by rows (coalesced), writes B by
    rows from the tile's columns; storage_align(factor, offset) pads the tile's rows so that a
    column of the tile falls in different shared-memory banks."""
    A = sl.placeholder((n, m), name="A")
    B = sl.compute((m, n), lambda i, j: A[j, i], name="B")
    s = sl.create_schedule(B.op)
    AS = s.cache_read(A, "shared", [B])
    bi, bj, ti, tj = s[B].tile(B.op.axis[0], B.op.axis[1], tile, tile)
    s[B].bind(bi, sl.thread_axis("blockIdx.y"))
    s[B].bind(bj, sl.thread_axis("blockIdx.x"))
    s[B].bind(ti, sl.thread_axis("threadIdx.y"))
    s[B].bind(tj, sl.thread_axis("threadIdx.x"))
    s[AS].compute_at(s[B], bj)
    r, c = s[AS].op.axis
    s[AS].bind(r, sl.thread_axis("threadIdx.y"))
    s[AS].bind(c, sl.thread_axis("threadIdx.x"))
    if align is not None:
        s[AS].storage_align(r, *align)
    return s, [A, B]


def batch_matmul(batch=3, M=21, N=34, K=19, tile=(4, 16), k_tile=8):
    """C[b] = A[b] @ B[b]: blockIdx.z over the batch, a tile of C per block, shared A and B
    tiles fetched cooperatively at each step of the outer reduction loop, one element per
    thread in a local accumulator."""
    A = sl.placeholder((batch, M, K), name="A")
    B = sl.placeholder((batch, K, N), name="B")
    k = sl.reduce_axis((0, K), name="k")
    C = sl.compute((batch, M, N), lambda b, i, j: sl.sum(A[b, i, k] * B[b, k, j], axis=k), name="C")
    s = sl.create_schedule(C.op)
    AA, BB = s.cache_read(A, "shared", [C]), s.cache_read(B, "shared", [C])
    CL = s.cache_write(C, "local")
    b, i, j = C.op.axis
    s[C].bind(b, sl.thread_axis("blockIdx.z"))
    _, _, _, tj = bind_tile(s, C, i, j, tile)
    s[CL].compute_at(s[C], tj)
    ko, _ = s[CL].split(CL.op.reduce_axis[0], factor=k_tile)
    for T in (AA, BB):
        s[T].compute_at(s[CL], ko)
        cooperative_fetch(s, T, *tile)
    return s, [A, B, C]


def conv2d(N=1, C=3, H=9, W=11, F=5, R=3, tile=(4, 8)):
    """A padded NCHW conv2d: the padding inlined, one block per (image, filter, tile of output
    rows and columns), one output a thread accumulating in a local stage, and the filter's
    weights for this block staged in shared memory (read by every thread of the block)."""
    X, Wt, padded, out = programs.conv2d(N, C, H, W, F, R)
    s = sl.create_schedule(out.op)
    s[padded].compute_inline()
    WS = s.cache_read(Wt, "shared", [out])
    OL = s.cache_write(out, "local")
    n, f, h, w = out.op.axis
    s[out].bind(s[out].fuse(n, f), sl.thread_axis("blockIdx.z"))
    _, _, _, wi = bind_tile(s, out, h, w, tile)
    s[OL].compute_at(s[out], wi)
    rc = OL.op.reduce_axis[0]
    s[WS].compute_at(s[OL], rc)
    cooperative_fetch(s, WS, *tile)
    return s, [X, Wt, out]
