"""GPU schedules (the cuda target) of the algorithms in `nn.py`, as TVM's `topi.cuda.schedule_*`.

Each takes the schedule `s` and the algorithm's output, binds its loops to blockIdx/threadIdx
(and vthread), applies its steps and returns `s`. Block and tile sizes are parameters with
small defaults; a block must stay within the target's limits (1024 threads, 48 KB of shared
memory), which `sl.build(..., target="cuda")` checks."""
from __future__ import annotations

import schedlang as sl

from .find import compute_inputs, operands, placeholder_inputs, require
from .nn import softmax_stages


def bind_tile(s, t, i, j, tile):
    """Tile loops i, j of stage t by tile = (rows, cols), the tiles bound to blockIdx.y/x and the
    points of a tile to threadIdx.y/x; returns (bi, bj, ti, tj)."""
    bi, bj, ti, tj = s[t].tile(i, j, *tile)
    s[t].bind(bi, sl.thread_axis("blockIdx.y"))
    s[t].bind(bj, sl.thread_axis("blockIdx.x"))
    s[t].bind(ti, sl.thread_axis("threadIdx.y"))
    s[t].bind(tj, sl.thread_axis("threadIdx.x"))
    return bi, bj, ti, tj


def cooperative_fetch(s, T, threads_y: int, threads_x: int, vector: int = 1):
    """TVM's cooperative fetch of a shared stage T: its loops fused, split so that consecutive
    threads copy consecutive elements (`vector` adjacent ones each, as one float4 access where
    aligned), and bound to threadIdx.y/x of a threads_y x threads_x block."""
    fused = s[T].fuse(*s[T].op.axis)
    if vector > 1:
        fused, lanes = s[T].split(fused, factor=vector)
    rest, x = s[T].split(fused, factor=threads_x)
    y, _ = s[T].split(rest, nparts=threads_y)
    s[T].bind(y, sl.thread_axis("threadIdx.y"))
    s[T].bind(x, sl.thread_axis("threadIdx.x"))
    if vector > 1:
        s[T].vectorize(lanes)
    return s


def schedule_matmul_shared(s, C, block=(8, 16), k_tile: int = 8, fetch: bool = True, local_a: bool = False,
                           double_buffer: bool = False, fetch_vector: int = 1):
    """`nn.matmul` as in TVM's GPU GEMM tutorials: a block-sized tile of C per block, one element
    per thread in a local accumulator, and at each step of k_tile along k the A and B tiles the
    block needs copied into shared memory by all its threads, `fetch_vector` adjacent elements
    a thread at a time (fetch=False: leave the copy unbound, one thread's loop). local_a: each thread also copies its row of the A tile into
    registers. double_buffer: the shared tiles (and that row) get two buffers, the next step
    fetched while this one is used."""
    A, B = operands(C, "schedule_matmul_shared")
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
            cooperative_fetch(s, T, *block, fetch_vector)
    if local_a:
        s[AL].compute_at(s[CL], ko)
    if double_buffer:
        for T in (AA, BB) + ((AL,) if local_a else ()):
            s[T].double_buffer()
    return s


def schedule_matmul_register_tiled(s, C, tile: int = 64, threads: int = 8, vthreads: int = 2, k_tile: int = 8,
                                   fetch_vector: int = 1, vectorize: bool = False, unroll_k: bool = False,
                                   align_a: bool = False):
    """`nn.matmul` in TVM's GPU GEMM tutorial shape (`tutorials/07_cuda_gemm.py`): a tile x tile
    block of C per block of threads x threads threads, each thread a (tile / threads)^2 register
    tile of C, split into vthreads x vthreads virtual threads (strips tile / vthreads apart, so a
    warp's accesses are adjacent); at each step of k_tile along k, the A and B tiles fetched
    cooperatively into shared memory (`fetch_vector` elements a thread at a time) and from there,
    a column of A and a row of B per k, into registers.
    vectorize: B's register row read and C's rows written as vectors; unroll_k: the inner k loop
    unrolled; align_a: the A tile's rows padded to k_tile + 1 (storage_align), off its banks."""
    require(tile % (threads * vthreads) == 0, "schedule_matmul_register_tiled",
            f"tile ({tile}) must be a multiple of threads * vthreads ({threads} * {vthreads})")
    A, B = operands(C, "schedule_matmul_register_tiled")
    AA = s.cache_read(A, "shared", [C])
    BB = s.cache_read(B, "shared", [C])
    AL = s.cache_read(AA, "local", [C])
    BL = s.cache_read(BB, "local", [C])
    CC = s.cache_write(C, "local")
    by, yi = s[C].split(C.op.axis[0], factor=tile)
    bx, xi = s[C].split(C.op.axis[1], factor=tile)
    if vthreads > 1:
        vy, yi = s[C].split(yi, nparts=vthreads)
        ty, yi = s[C].split(yi, nparts=threads)
        vx, xi = s[C].split(xi, nparts=vthreads)
        tx, xi = s[C].split(xi, nparts=threads)
        s[C].reorder(by, bx, vy, vx, ty, tx, yi, xi)
    else:
        ty, yi = s[C].split(yi, nparts=threads)
        tx, xi = s[C].split(xi, nparts=threads)
        s[C].reorder(by, bx, ty, tx, yi, xi)
    s[C].bind(by, sl.thread_axis("blockIdx.y"))
    s[C].bind(bx, sl.thread_axis("blockIdx.x"))
    if vthreads > 1:
        s[C].bind(vy, sl.thread_axis((0, vthreads), "vthread", name="vy"))
        s[C].bind(vx, sl.thread_axis((0, vthreads), "vthread", name="vx"))
    s[C].bind(ty, sl.thread_axis("threadIdx.y"))
    s[C].bind(tx, sl.thread_axis("threadIdx.x"))
    s[CC].compute_at(s[C], tx)                     # each thread's tile of C in registers
    ko, ki = s[CC].split(CC.op.reduce_axis[0], factor=k_tile)
    s[CC].reorder(ko, ki, *CC.op.axis)
    if unroll_k:
        s[CC].unroll(ki)
    for T in (AA, BB):                             # shared tiles: one copy per k_tile steps of k
        s[T].compute_at(s[CC], ko)
        cooperative_fetch(s, T, threads, threads, fetch_vector)
    for T in (AL, BL):                             # registers: a column of A, a row of B per k
        s[T].compute_at(s[CC], ki)
    if vectorize:
        s[BL].vectorize(BL.op.axis[1])
        s[C].vectorize(xi)
    if align_a:
        s[AA].storage_align(AA.op.axis[0], k_tile, 1)
    return s


def schedule_batch_matmul(s, C, tile=(4, 16), k_tile: int = 8):
    """`nn.batch_matmul`: blockIdx.z over the batch, a tile of C per block, shared A and B tiles
    fetched cooperatively at each step of k_tile along k, one element per thread in a local
    accumulator."""
    A, B = operands(C, "schedule_batch_matmul")
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
    return s


def schedule_conv2d_nchw(s, out, tile=(4, 8)):
    """`nn.conv2d_nchw`: the padding inlined, one block per (image, filter, tile of output rows
    and columns), one output a thread accumulating in a local stage, and the filter's weights
    for the block staged in shared memory at each input channel."""
    (padded,) = compute_inputs(out, 4, "cuda.schedule_conv2d_nchw", "conv2d_nchw's padding")
    (W,) = placeholder_inputs(out, 4, "cuda.schedule_conv2d_nchw", "the weights")
    s[padded].compute_inline()
    WS = s.cache_read(W, "shared", [out])
    OL = s.cache_write(out, "local")
    n, f, h, w = out.op.axis
    s[out].bind(s[out].fuse(n, f), sl.thread_axis("blockIdx.z"))
    _, _, _, wi = bind_tile(s, out, h, w, tile)
    s[OL].compute_at(s[out], wi)
    s[WS].compute_at(s[OL], OL.op.reduce_axis[0])
    cooperative_fetch(s, WS, *tile)
    return s


def schedule_row_reduce(s, Y, threads: int = 32, rows_per_block: int = 1, store_predicate: bool = False):
    """`nn.row_reduce` as a cross-thread reduction: a row per block (rows_per_block > 1: that
    many rows, over threadIdx.y), the reduction split over threadIdx.x (each thread reduces
    cols / threads elements, then the block combines them with warp shuffles).
    store_predicate: only the last thread stores the result (TVM's set_store_predicate)."""
    require(Y.ndim == 1 and len(Y.op.reduce_axis) == 1, "cuda.schedule_row_reduce",
            f"{Y.name} must reduce one axis into a 1-d output")
    _, ki = s[Y].split(Y.op.reduce_axis[0], factor=threads)
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
    return s


def schedule_softmax(s, out, threads: int = 32, fused: bool = True):
    """`nn.softmax`, a row per block: exp inlined, the row max and the row sum cross-thread
    reductions over threadIdx.x. fused: both computed at the output's row loop (one kernel; each
    thread reads the results from its registers); otherwise each is a kernel of its own."""
    mx, ex, tot = softmax_stages(out)
    s[ex].compute_inline()
    _, ji = s[out].split(out.op.axis[1], factor=threads)
    s[out].bind(out.op.axis[0], sl.thread_axis("blockIdx.x"))
    s[out].bind(ji, sl.thread_axis("threadIdx.x"))
    for R in (mx, tot):
        _, ki = s[R].split(R.op.reduce_axis[0], factor=threads)
        s[R].bind(ki, sl.thread_axis("threadIdx.x"))
        if fused:
            s[R].compute_at(s[out], out.op.axis[0])
        else:
            s[R].bind(R.op.axis[0], sl.thread_axis("blockIdx.x"))
    return s


def schedule_silu_and_mul(s, out, threads: int = 256, lanes: int = 4):
    """`nn.silu_and_mul` (any 2-d elementwise output): a row's columns over blockIdx.x blocks of
    `threads` threads, each thread `lanes` adjacent columns in one vectorized loop (float4 loads
    and stores where the row length keeps them aligned, per-lane accesses where not, a scalar
    tail where it is not a multiple of lanes); rows over blockIdx.y."""
    require(out.ndim == 2 and not out.op.reduce_axis, "cuda.schedule_silu_and_mul",
            f"{out.name} must be a 2-d elementwise output")
    jo, vec = s[out].split(out.op.axis[1], factor=lanes)
    bo, to = s[out].split(jo, factor=threads)
    s[out].bind(out.op.axis[0], sl.thread_axis("blockIdx.y"))
    s[out].bind(bo, sl.thread_axis("blockIdx.x"))
    s[out].bind(to, sl.thread_axis("threadIdx.x"))
    s[out].vectorize(vec)
    return s
