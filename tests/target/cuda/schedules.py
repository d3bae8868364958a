"""GPU schedules the CUDA tests build (each binds its loops to blockIdx/threadIdx), and their inputs."""
import schedlang as sl
from schedlang.topi import cuda, nn
from schedlang.topi.cuda import bind_tile, cooperative_fetch  # noqa: F401 (the tests' building blocks)
from tests import programs
from tests.helpers import arrays_for  # noqa: F401 (imported from here by the CUDA tests)


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


def mixed_dtypes(n=77):
    """float16, int32, int8 and float64 elementwise stages, a thread an element: half computed in
    float, floordiv/floormod of negative ints, int8 wrapping before it is divided, double math."""
    H = sl.placeholder((n,), "float16", name="H")
    I = sl.placeholder((n,), "int32", name="I")
    J = sl.placeholder((n,), "int8", name="J")
    D = sl.placeholder((n,), "float64", name="D")
    h = sl.compute((n,), lambda i: H[i] * H[i] + sl.const(0.5, "float16"), name="h")
    q = sl.compute((n,), lambda i: sl.floordiv(I[i], 7) * 100 + sl.floormod(I[i], 7) + sl.max(I[i], 3), name="q")
    w = sl.compute((n,), lambda i: sl.floordiv(J[i] * sl.const(3, "int8"), sl.const(5, "int8")), name="w")
    d = sl.compute((n,), lambda i: sl.tanh(D[i]) + sl.sqrt(sl.abs(D[i])), name="d")
    s = sl.create_schedule([h.op, q.op, w.op, d.op])
    for t in (h, q, w, d):
        bind(s, t, *s[t].split(t.op.axis[0], factor=32))
    return s, [H, I, J, D, h, q, w, d]


def two_kernels():
    """C = (3 A).T - A.T through a root intermediate B: two kernels, B a global temporary."""
    A = sl.placeholder((45, 13), name="A")
    B = sl.compute((45, 13), lambda i, j: A[i, j] * 3.0, name="B")
    C = sl.compute((13, 45), lambda i, j: B[j, i] - A[j, i], name="C")
    s = sl.create_schedule(C.op)
    for t in (B, C):
        bind(s, t, t.op.axis[0], t.op.axis[1])
    return s, [A, C]


def silu_and_mul(rows=3, d=50):
    x, out = programs.silu_and_mul(rows, 2 * d, name="out")
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
    schedule_tiled_gemm(s, A, C, cache_shared)
    return s, [A, B, C]


def schedule_tiled_gemm(s, A, C, cache_shared=False):
    """tiled_gemm's schedule of C = A @ B, in s."""
    CC = s.cache_write(C, "local")
    _, _, _, tj = bind_tile(s, C, C.op.axis[0], C.op.axis[1], (8, 16))
    s[CC].compute_at(s[C], tj)
    if cache_shared:
        AS = s.cache_read(A, "shared", [CC])
        ko, _ = s[CC].split(CC.op.reduce_axis[0], factor=8)
        s[AS].compute_at(s[CC], ko)


def row_sum(rows=37, cols=20):
    """One thread per row, each summing its row serially."""
    X = sl.placeholder((rows, cols), name="X")
    Y = nn.row_reduce(X)
    s = sl.create_schedule(Y.op)
    bind(s, Y, *s[Y].split(Y.op.axis[0], factor=16))
    return s, [X, Y]


def shared_gemm(M=70, N=50, K=30, block=(8, 16), k_tile=8, fetch=True, local_a=False, double_buffer=False):
    """C = A @ B through shared tiles: topi.cuda.schedule_matmul_shared."""
    A, B, C = programs.gemm(M, N, K)
    s = cuda.schedule_matmul_shared(sl.create_schedule(C.op), C, block, k_tile, fetch, local_a, double_buffer)
    return s, [A, B, C]


def row_reduce(rows=5, cols=100, threads=32, reducer="sum", rows_per_block=1, store_predicate=False):
    """Y[i] = reduce over k of X[i, k] across threadIdx.x: topi.cuda.schedule_row_reduce."""
    X = sl.placeholder((rows, cols), name="X")
    Y = nn.row_reduce(X, reducer)
    return cuda.schedule_row_reduce(sl.create_schedule(Y.op), Y, threads, rows_per_block, store_predicate), [X, Y]


def softmax(rows=6, cols=70, threads=32, fused=True):
    """Softmax, a row a block, cross-thread max and sum: topi.cuda.schedule_softmax."""
    X = sl.placeholder((rows, cols), name="X")
    Y = nn.softmax(X, name="Y")
    return cuda.schedule_softmax(sl.create_schedule(Y.op), Y, threads, fused), [X, Y]


def vthread_gemm(M=37, N=35, K=13, k_tile=4):
    """C = A @ B in TVM's GEMM-tutorial shape, small: a 16x16 tile a block, 2x2 virtual threads of
    4x4 threads, each thread a 2x2 register tile (topi.cuda.schedule_matmul_register_tiled)."""
    A, B, C = programs.gemm(M, N, K)
    s = cuda.schedule_matmul_register_tiled(sl.create_schedule(C.op), C, tile=16, threads=4, vthreads=2, k_tile=k_tile)
    return s, [A, B, C]


def silu_and_mul_vec(rows=3, d=64, threads=8, dtype="float32", lanes=4):
    """SiluAndMul, `lanes` adjacent outputs a thread in one vectorized loop (topi.cuda.schedule_silu_and_mul)."""
    x, out = programs.silu_and_mul(rows, 2 * d, dtype, name="out")
    return cuda.schedule_silu_and_mul(sl.create_schedule(out.op), out, threads, lanes), [x, out]


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
    """C[b] = A[b] @ B[b]: topi.cuda.schedule_batch_matmul."""
    A, B, C = programs.batch_matmul(batch, M, N, K)
    return cuda.schedule_batch_matmul(sl.create_schedule(C.op), C, tile, k_tile), [A, B, C]


def conv2d(N=1, C=3, H=9, W=11, F=5, R=3, tile=(4, 8)):
    """A padded NCHW conv2d, weights in shared memory: topi.cuda.schedule_conv2d_nchw."""
    X, Wt, _, out = programs.conv2d(N, C, H, W, F, R)
    return cuda.schedule_conv2d_nchw(sl.create_schedule(out.op), out, tile), [X, Wt, out]
