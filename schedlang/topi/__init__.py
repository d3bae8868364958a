"""schedlang.topi: reference algorithms and schedules, TVM's `topi` in schedlang's terms.

The tests, benchmarks and tutorials use these instead of writing their own copies; users call
them as they would `topi.nn.conv2d_nchw` and `topi.x86.schedule_...` / `topi.cuda.schedule_...`.

Algorithms, `topi.nn` (take tensors, return the output tensor; the stages in between are
reached through `out.op.input_tensors`):

    matmul(A, B, name="C", out_dtype=None)   C = A @ B
    matmul_packed(A, B, bn, name="C")        the TVM CPU GEMM tutorial's: B packed [N/bn, K, bn]
    batch_matmul(A, B, name="C")             C[b] = A[b] @ B[b]
    pad_nchw(X, pad, name="pad")             zero padding of H and W
    conv2d_nchw(X, W, pad=1, name="conv")    stride 1, the padding a stage of its own
    conv2d_nchwc(X, W, pad=1, name="conv")   the same in blocked layouts, TVM's conv2d_NCHWc
    softmax(X, name="softmax")               over rows, safe (stages maxval, expval, total)
    silu_and_mul(x, name="out")              silu(x[:, :d]) * x[:, d:]
    row_reduce(X, reducer="sum", name="Y")   Y[i] = sum/max/min over k of X[i, k]

CPU schedules, `topi.cpu` (s, output, [target=, sizes]) -> s; vector widths from the target:

    native_lanes(target, dtype)              lanes of one native vector register
    schedule_matmul_packed(s, C)             TVM's CPU GEMM tutorial schedule
    schedule_matmul_cached(s, C, tile)       the same on nn.matmul: a write-cached tile, no packing
    schedule_matmul_register_tiled(s, C)     the BLAS-style mr x bn register tile
    schedule_conv2d_nchw(s, out, target)     filter x column tiles (tutorial 04)
    schedule_conv2d_nchwc(s, out, target)    NCHWc register tiles: of conv2d_nchwc, or of conv2d_nchw
                                             with its weights packed (oneDNN/TVM x86)
    schedule_softmax(s, out, target)         fused per row, optional vector reductions
    schedule_injective(s, out, target)       an elementwise chain inlined, vectorized, parallel
    schedule_silu_and_mul(s, out, target)    schedule_injective
    schedule_row_reduce(s, Y, target)        rfactor into vector partial sums

GPU schedules, `topi.cuda` (s, output, [sizes]) -> s:

    bind_tile, cooperative_fetch             the building blocks
    schedule_matmul_shared(s, C)             shared-memory tiles, one element a thread
    schedule_matmul_register_tiled(s, C)     TVM's GPU GEMM tutorial: vthreads, register tiles
    schedule_batch_matmul(s, C)              blockIdx.z over the batch
    schedule_conv2d_nchw(s, out)             weights in shared memory
    schedule_row_reduce(s, Y)                cross-thread reduction
    schedule_softmax(s, out)                 cross-thread max and sum, a row a block
    schedule_silu_and_mul(s, out)            float4 columns

Tensor cores, `topi.cuda_tensorcore` (float16/bfloat16 GEMM: mma.sync + ldmatrix, cp.async pipeline):

    matmul(A, B, acc, layout), program(M, N, K, element, acc, layout)
    schedule_matmul(s, C, layout, BM, BN, BK, WM, WN, pad=, async_copy=, stages=)
    gemm(M, N, K, element, acc, layout, **tiles) -> (s, [A, B, C])

Winograd convolution, `topi.winograd` (3x3 stride 1, F(m x m, 3 x 3), NCHWc; see its docstring):

    transform_matrices(m), transform_weight(w, m, nr)       A^T, G, B^T and U = G w G^T in bgemm panels
    conv2d_winograd_nchwc(X, U, channels, m, pad)           the stages D, T, V, M (bgemm), Y, out
    schedule_conv2d_winograd(s, out, target)                transforms unrolled, 6 x 16 bgemm register tiles

x86 tensor intrinsics, `topi.x86_intrin` (tensorize; see its docstring):

    dot_int8_intrin(target)                  u8 x s8 -> i32 groups of 4: VNNI where the target has it
    dense_int8(A, B, lanes), schedule_dense_int8(s, C, intrin, lanes)   the int8 dense tensorized

A schedule given the wrong tensor (not its algorithm's output) raises ValueError naming the
schedule; a size the target refuses raises ScheduleError or LoweringError from the build.
"""
from . import cpu, cuda, cuda_tensorcore, nn, winograd, x86_intrin  # noqa: F401
