"""The test programs, by shape: placeholders plus schedlang.topi's algorithms (no schedules;
those are schedlang.topi.cpu / .cuda). Each returns its placeholders, the stages a test
schedules, and the output."""
from __future__ import annotations

import schedlang as sl
from schedlang.topi import nn


def gemm(M, N, K, dtype="float32"):
    A = sl.placeholder((M, K), dtype, name="A")
    B = sl.placeholder((K, N), dtype, name="B")
    return A, B, nn.matmul(A, B)


def packed_gemm(M, N, K, bn=32):
    """The TVM CPU GEMM tutorial's algorithm: B packed into [N/bn, K, bn] panels."""
    A = sl.placeholder((M, K), name="A")
    B = sl.placeholder((K, N), name="B")
    C = nn.matmul_packed(A, B, bn)
    return A, B, C.op.input_tensors[1], C


def batch_matmul(batch, M, N, K):
    A = sl.placeholder((batch, M, K), name="A")
    B = sl.placeholder((batch, K, N), name="B")
    return A, B, nn.batch_matmul(A, B)


def conv2d(N, C, H, W, F, R, pad=1):
    X = sl.placeholder((N, C, H, W), name="X")
    Wt = sl.placeholder((F, C, R, R), name="Wt")
    out = nn.conv2d_nchw(X, Wt, pad)
    return X, Wt, out.op.input_tensors[0], out


def softmax(N, M):
    X = sl.placeholder((N, M), name="X")
    out = nn.softmax(X)
    return (X, *nn.softmax_stages(out), out)


def row_sum(N, M):
    A = sl.placeholder((N, M), name="A")
    return A, nn.row_reduce(A, "sum", name="B")


def silu_and_mul(rows, cols, dtype="float32", name="mul"):
    x = sl.placeholder((rows, cols), dtype, name="x")
    return x, nn.silu_and_mul(x, name=name)
