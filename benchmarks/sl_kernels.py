"""The schedlang kernels the benchmarks time: schedlang.topi's algorithms and CPU schedules,
built for a target (the host CPU, with its thread count). The programs are placeholders plus
`topi.nn`; the schedules are `topi.cpu`'s (which see for what each does)."""
from __future__ import annotations

import schedlang as sl
from schedlang.topi import cpu, nn


def gemm_program(M: int, N: int = None, K: int = None):
    """[A, B, C] of C = A @ B (N and K default to M)."""
    A = sl.placeholder((M, K or M), name="A")
    B = sl.placeholder((K or M, N or M), name="B")
    return [A, B, nn.matmul(A, B)]


def _packed_gemm(M: int, N: int, K: int, bn: int):
    A = sl.placeholder((M, K), name="A")
    B = sl.placeholder((K, N), name="B")
    return A, B, nn.matmul_packed(A, B, bn)


def gemm(target, M: int, N: int, K: int, bn: int = 32):
    """The classic TVM CPU GEMM tutorial schedule: topi.cpu.schedule_matmul_packed."""
    s, args = gemm_schedule_tutorial(M, N, K, bn)
    return sl.build(s, args, target=target, name="gemm")


def gemm_schedule_tutorial(M: int, N: int, K: int, bn: int = 32):
    """(schedule, [A, B, C]) of gemm: tutorials/01_gemm_cpu.py's final schedule."""
    A, B, C = _packed_gemm(M, N, K, bn)
    return cpu.schedule_matmul_packed(sl.create_schedule(C.op), C), [A, B, C]


def gemm_register_tiled(target, M: int, N: int, K: int, mr: int = 4, nr: int = 16):
    """Not the tutorial schedule: an mr x nr register tile with the k loop outside it, B packed
    in nr-wide panels (topi.cpu.schedule_matmul_register_tiled)."""
    A, B, C = _packed_gemm(M, N, K, nr)
    s = cpu.schedule_matmul_register_tiled(sl.create_schedule(C.op), C, mr)
    return sl.build(s, [A, B, C], target=target, name="gemm_rt")


def conv2d_stages(n: int, c: int, h: int, w: int, f: int, r: int = 3, pad: int = 1):
    """conv2d NCHW, stride 1, unscheduled (topi.nn.conv2d_nchw): (X, W, padded, conv)."""
    X = sl.placeholder((n, c, h, w), name="X")
    W = sl.placeholder((f, c, r, r), name="W")
    out = nn.conv2d_nchw(X, W, pad)
    return X, W, out.op.input_tensors[0], out


def conv2d_nchwc(target, n: int, c: int, h: int, w: int, f: int, wt: int = 8, vecs: int = 1,
                 lanes: int = 0, inline_pad: bool = True):
    """The module of conv2d_nchwc_schedule built for target."""
    target = sl.Target.create(target)
    s, args = conv2d_nchwc_schedule(target, n, c, h, w, f, wt, vecs, lanes, inline_pad)
    return sl.build(s, args, target=target, name="conv2d_nchwc")


def conv2d_nchwc_schedule(target, n: int, c: int, h: int, w: int, f: int, wt: int = 8, vecs: int = 1,
                          lanes: int = 0, inline_pad: bool = True):
    """conv2d NCHW (3x3, pad 1) scheduled as NCHWc blocks (topi.cpu.schedule_conv2d_nchwc);
    returns (schedule, [X, W, conv]). The defaults (8 x 16, padding inlined) are what the
    auto-scheduler's tile_relayout sketch found best at 64 channels 56 x 56: ~1.08 ms (~91% of
    the FMA peak of 2 Zen 4 cores) against ~1.14-1.34 ms for 7 x 32 with the padding
    materialized; 7 x 32 with the padding inlined takes ~2.1 ms (the edge columns are not split
    off when a broadcast feeds two vectors)."""
    X, W, _, out = conv2d_stages(n, c, h, w, f)
    s = cpu.schedule_conv2d_nchwc(sl.create_schedule(out.op), out, target, wt, vecs, lanes, inline_pad)
    return s, [X, W, out]


def silu_program(rows: int, cols: int):
    """[x, out] of SiluAndMul (topi.nn.silu_and_mul), the output named silu_mul."""
    x = sl.placeholder((rows, cols), name="x")
    return [x, nn.silu_and_mul(x, name="silu_mul")]


def silu_and_mul(target, rows: int, cols: int, factor: int):
    """out[i, j] = silu(x[i, j]) * x[i, j + cols/2]: rows parallel, columns split by `factor`,
    the inner part vectorized (topi.cpu.schedule_silu_and_mul)."""
    x, out = silu_program(rows, cols)
    s = cpu.schedule_silu_and_mul(sl.create_schedule(out.op), out, target, factor)
    return sl.build(s, [x, out], target=target, name="silu_mul")


def softmax_stages(rows: int, cols: int):
    """The row softmax algorithm, unscheduled (topi.nn.softmax): (X, maxval, expval, total, softmax)."""
    X = sl.placeholder((rows, cols), name="X")
    out = nn.softmax(X)
    return (X, *nn.softmax_stages(out), out)


def softmax(target, rows: int, cols: int, factor: int, vector_reductions: bool, exp_at_row: bool = False):
    """Row softmax fused per row (topi.cpu.schedule_softmax, which says what the two flags do)."""
    X, *_, out = softmax_stages(rows, cols)
    s = cpu.schedule_softmax(sl.create_schedule(out.op), out, target, factor, vector_reductions, exp_at_row)
    return sl.build(s, [X, out], target=target, name="softmax")
