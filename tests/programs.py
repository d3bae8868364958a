"""The test programs, by shape: placeholders plus schedlang.topi's algorithms (no schedules;
those are schedlang.topi.cpu / .cuda). Each returns its placeholders, the stages a test
schedules, and the output."""
from __future__ import annotations

import schedlang as sl
from schedlang.topi import nn


def vector_add(n, dtype="float32"):
    """C = A + B over n elements (n may be an sl.var): TVM's first tensor-expression example."""
    A = sl.placeholder((n,), dtype, name="A")
    B = sl.placeholder((n,), dtype, name="B")
    return A, B, sl.compute(A.shape, lambda i: A[i] + B[i], name="C")


def chain(shape=(8, 8), middle="B"):
    """A -> B = A * 2 -> C = B + 1, elementwise over a 2-d shape (B named `middle`)."""
    A = sl.placeholder(shape, name="A")
    B = sl.compute(shape, lambda i, j: A[i, j] * 2.0, name=middle)
    C = sl.compute(shape, lambda i, j: B[i, j] + 1.0, name="C")
    return A, B, C


def gemm(M, N, K, dtype="float32", suffix=""):
    """C = A @ B, each name ending in suffix."""
    A = sl.placeholder((M, K), dtype, name=f"A{suffix}")
    B = sl.placeholder((K, N), dtype, name=f"B{suffix}")
    return A, B, nn.matmul(A, B, name=f"C{suffix}")


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


def row_sum(N, M, name="B", suffix=""):
    """B[i] = sum over k of A[i, k] (the reduce axis is named k), A's and B's names ending in suffix."""
    A = sl.placeholder((N, M), name=f"A{suffix}")
    return A, nn.row_reduce(A, "sum", name=name + suffix)


def silu_and_mul(rows, cols, dtype="float32", name="mul"):
    x = sl.placeholder((rows, cols), dtype, name="x")
    return x, nn.silu_and_mul(x, name=name)


def arg_reducer(kind="argmax"):
    """TVM's argmax comm_reducer over (index, value) pairs, as its test_reduce, test_tuple_inputs
    and reduction tutorial write it (of equal values the first is kept); kind="argmin" keeps
    the smallest value instead."""
    wins = (lambda a, b: a >= b) if kind == "argmax" else (lambda a, b: a <= b)
    worst = sl.min_value if kind == "argmax" else sl.max_value

    def fcombine(x, y):
        lhs = sl.select(wins(x[1], y[1]), x[0], y[0])
        rhs = sl.select(wins(x[1], y[1]), x[1], y[1])
        return lhs, rhs

    def fidentity(t0, t1):
        return sl.const(-1, t0), worst(t1)

    return sl.comm_reducer(fcombine, fidentity, name=kind)


def arg_reduce(m, n, val_dtype="float32", kind="argmax", names=("idx", "val", "T")):
    """T0[i], T1[i] = the index (from idx, int32) and value of the best val[i, k] (reduce axis k)."""
    idx = sl.placeholder((m, n), name=names[0], dtype="int32")
    val = sl.placeholder((m, n), name=names[1], dtype=val_dtype)
    k = sl.reduce_axis((0, n), "k")
    reducer = arg_reducer(kind)
    T0, T1 = sl.compute((m,), lambda i: reducer((idx[i, k], val[i, k]), axis=k), name=names[2])
    return idx, val, T0, T1


def casts(*casts, vectorize=(), factor=16):
    """One 1-d stage per (input, dtype, name): input[i].astype(dtype); a schedule of them all with
    the stages named in `vectorize` split by factor and vectorized. Returns (s, stages)."""
    outs = [sl.compute(x.shape, lambda i, x=x, d=d: x[i].astype(d), name=name) for x, d, name in casts]
    s = sl.create_schedule([t.op for t in outs])
    for t in outs:
        if t.name in vectorize:
            s[t].vectorize(s[t].split(t.op.axis[0], factor=factor)[1])
    return s, outs
