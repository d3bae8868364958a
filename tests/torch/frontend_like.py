"""DSL programs shaped like what the PyTorch frontend produces: one stage per ATen op or
decomposition step (chunk as IndexMaps, silu decomposed, keepdim reductions, a Linear's
weight read through a transpose), for the default-schedule and fusion tests. Each returns
(args, outputs): the argument tensors in call order and the outputs among them."""
import math

import schedlang as sl
from schedlang.topi import nn
from tests import programs


def silu_and_mul(tokens=32, hidden=64, batch=1):
    """left, right = x.chunk(2, -1); out = silu(left) * right, silu as the seed decomposes it."""
    x = sl.placeholder((batch, tokens, 2 * hidden), name="x")
    shape = (batch, tokens, hidden)
    c0 = sl.compute(shape, lambda i, j, k: x[i, j, k], name="chunk_0")
    c1 = sl.compute(shape, lambda i, j, k: x[i, j, k + hidden], name="chunk_1")
    neg = sl.compute(shape, lambda i, j, k: -c0[i, j, k], name="silu_neg")
    ex = sl.compute(shape, lambda i, j, k: sl.exp(neg[i, j, k]), name="silu_exp")
    add = sl.compute(shape, lambda i, j, k: ex[i, j, k] + 1.0, name="silu_add")
    rec = sl.compute(shape, lambda i, j, k: 1.0 / add[i, j, k], name="silu_reciprocal")
    silu = sl.compute(shape, lambda i, j, k: c0[i, j, k] * rec[i, j, k], name="silu")
    mul = sl.compute(shape, lambda i, j, k: silu[i, j, k] * c1[i, j, k], name="mul")
    return [x, mul], [mul]


def residual_add(batch=2, tokens=7, dim=13):
    """out = x + residual + bias, the bias broadcast (expand) over the leading axes."""
    x = sl.placeholder((batch, tokens, dim), name="x")
    r = sl.placeholder((batch, tokens, dim), name="residual")
    b = sl.placeholder((dim,), name="bias")
    expand = sl.compute((batch, tokens, dim), lambda i, j, k: b[k], name="expand")
    add = sl.compute(x.shape, lambda i, j, k: x[i, j, k] + r[i, j, k], name="add")
    out = sl.compute(x.shape, lambda i, j, k: add[i, j, k] + expand[i, j, k], name="add_1")
    return [x, r, b, out], [out]


def softmax(shape=(2, 5, 64)):
    """softmax over the last axis with keepdim reductions, as aten._softmax decomposes."""
    *lead, n = shape
    x = sl.placeholder(tuple(shape), name="x")
    keep = tuple(lead) + (1,)
    k = sl.reduce_axis((0, n), name="k")
    amax = sl.compute(keep, lambda *i: sl.max(x[i[:-1] + (k,)], axis=k), name="softmax_amax")
    sub = sl.compute(x.shape, lambda *i: x[i] - amax[i[:-1] + (0,)], name="softmax_sub")
    ex = sl.compute(x.shape, lambda *i: sl.exp(sub[i]), name="softmax_exp")
    k2 = sl.reduce_axis((0, n), name="k2")
    total = sl.compute(keep, lambda *i: sl.sum(ex[i[:-1] + (k2,)], axis=k2), name="softmax_sum")
    out = sl.compute(x.shape, lambda *i: ex[i] / total[i[:-1] + (0,)], name="softmax")
    return [x, out], [out]


def layer_norm(rows=6, dim=32, eps=1e-5):
    x = sl.placeholder((rows, dim), name="x")
    w = sl.placeholder((dim,), name="weight")
    b = sl.placeholder((dim,), name="bias")
    k = sl.reduce_axis((0, dim), name="k")
    s1 = sl.compute((rows, 1), lambda i, _: sl.sum(x[i, k], axis=k), name="ln_sum")
    mean = sl.compute((rows, 1), lambda i, j: s1[i, j] / float(dim), name="ln_mean")
    diff = sl.compute((rows, dim), lambda i, j: x[i, j] - mean[i, 0], name="ln_sub")
    sq = sl.compute((rows, dim), lambda i, j: diff[i, j] * diff[i, j], name="ln_square")
    k2 = sl.reduce_axis((0, dim), name="k2")
    s2 = sl.compute((rows, 1), lambda i, _: sl.sum(sq[i, k2], axis=k2), name="ln_sum_1")
    rstd = sl.compute((rows, 1), lambda i, j: sl.rsqrt(s2[i, j] / float(dim) + eps), name="ln_rsqrt")
    out = sl.compute((rows, dim), lambda i, j: diff[i, j] * rstd[i, 0] * w[j] + b[j], name="layer_norm")
    return [x, w, b, out], [out]


def rms_norm(rows=6, dim=48, eps=1e-6, batch=None):
    """rms_norm over the last axis; batch=None: 2-D, else a leading (possibly symbolic) batch."""
    lead = (rows,) if batch is None else (batch, rows)
    x = sl.placeholder(lead + (dim,), name="x")
    w = sl.placeholder((dim,), name="weight")
    k = sl.reduce_axis((0, dim), name="k")
    sq = sl.compute(x.shape, lambda *i: x[i] * x[i], name="rms_pow")
    ms = sl.compute(lead + (1,), lambda *i: sl.sum(sq[i[:-1] + (k,)], axis=k), name="rms_sum")
    r = sl.compute(lead + (1,), lambda *i: sl.rsqrt(ms[i] / float(dim) + eps), name="rms_rsqrt")
    out = sl.compute(x.shape, lambda *i: x[i] * r[i[:-1] + (0,)] * w[i[-1]], name="rms_norm")
    return [x, w, out], [out]


def linear(M=37, N=45, K=29, act=None, bias=True, batch=None):
    """act(x @ W.T + b) as the frontend lowers a Linear: W read through a permute IndexMap;
    act None, "relu" or "gelu" (erf form). batch: a leading axis of x (int or size var)."""
    lead = (M,) if batch is None else (batch, M)
    x = sl.placeholder(lead + (K,), name="x")
    W = sl.placeholder((N, K), name="weight")
    b = sl.placeholder((N,), name="bias")
    wt = sl.compute((K, N), lambda k, n: W[n, k], name="permute")
    k = sl.reduce_axis((0, K), name="k")
    mm = sl.compute(lead + (N,), lambda *i: sl.sum(x[i[:-1] + (k,)] * wt[k, i[-1]], axis=k), name="mm")
    out = mm
    if bias:
        out = sl.compute(out.shape, lambda *i: mm[i] + b[i[-1]], name="addmm")
    if act == "relu":
        pre = out
        out = sl.compute(out.shape, lambda *i: sl.max(pre[i], 0.0), name="relu")
    elif act == "gelu":
        pre = out
        half = sl.compute(out.shape, lambda *i: pre[i] * 0.5, name="gelu_mul")
        erf = sl.compute(out.shape, lambda *i: sl.erf(pre[i] * (1 / math.sqrt(2))), name="gelu_erf")
        out = sl.compute(out.shape, lambda *i: half[i] * (erf[i] + 1.0), name="gelu")
    args = [x, W] + ([b] if bias else []) + [out]
    return args, [out]


def matmul_nn(M=37, N=45, K=29):
    """C = A @ B with B stored [K, N] (contiguous along the output columns)."""
    A = sl.placeholder((M, K), name="A")
    B = sl.placeholder((K, N), name="B")
    C = nn.matmul(A, B, name="mm")
    return [A, B, C], [C]


def merged_heads_matmul(H=3, M=7, D=8, N=17):
    """C = merge(A) @ B with A [H, M, D] read as [M, H * D] through an IndexMap (attention's
    output merged into the output projection's input: k walks memory in runs of D)."""
    A = sl.placeholder((H, M, D), name="A")
    B = sl.placeholder((H * D, N), name="B")
    merged = sl.compute((M, H * D), lambda i, c: A[c // D, i, c % D], name="merge")
    C = nn.matmul(merged, B, name="mm")
    return [A, B, C], [C]


def rotary(H=3, S=7, D=8):
    """x * cos(angles) + x * sin(angles) with angles [S, D] read broadcast by x [H, S, D] (a
    rotary embedding's tables, rotate_half left out), and the same with [H, S, D] angles."""
    x = sl.placeholder((H, S, D), name="x")
    a = sl.placeholder((S, D), name="angles")
    full = sl.placeholder((H, S, D), name="full_angles")
    cos = sl.compute((S, D), lambda i, d: sl.cos(a[i, d]), name="cos")
    sin = sl.compute((S, D), lambda i, d: sl.sin(a[i, d]), name="sin")
    out = sl.compute((H, S, D), lambda h, i, d: x[h, i, d] * cos[i, d] + x[h, i, d] * sin[i, d], name="rot")
    fcos = sl.compute((H, S, D), lambda h, i, d: sl.cos(full[h, i, d]), name="full_cos")
    same = sl.compute((H, S, D), lambda h, i, d: x[h, i, d] * fcos[h, i, d], name="same")
    return [x, a, full, out, same], [out, same]


def bmm(B=3, M=9, N=20, K=17):
    a = sl.placeholder((B, M, K), name="a")
    b = sl.placeholder((B, K, N), name="b")
    k = sl.reduce_axis((0, K), name="k")
    c = sl.compute((B, M, N), lambda z, i, j: sl.sum(a[z, i, k] * b[z, k, j], axis=k), name="bmm")
    return [a, b, c], [c]


def swiglu(tokens=10, dim=32, hidden=48):
    """down(silu(gate(x)) * up(x)), three bias-free Linears."""
    x = sl.placeholder((tokens, dim), name="x")
    w1 = sl.placeholder((hidden, dim), name="w1")
    w3 = sl.placeholder((hidden, dim), name="w3")
    w2 = sl.placeholder((dim, hidden), name="w2")
    k = sl.reduce_axis((0, dim), name="k")
    gate = sl.compute((tokens, hidden), lambda i, j: sl.sum(x[i, k] * w1[j, k], axis=k), name="gate")
    k1 = sl.reduce_axis((0, dim), name="k1")
    up = sl.compute((tokens, hidden), lambda i, j: sl.sum(x[i, k1] * w3[j, k1], axis=k1), name="up")
    silu = sl.compute(gate.shape, lambda i, j: gate[i, j] * sl.sigmoid(gate[i, j]), name="silu")
    h = sl.compute(gate.shape, lambda i, j: silu[i, j] * up[i, j], name="mul")
    k2 = sl.reduce_axis((0, hidden), name="k2")
    out = sl.compute((tokens, dim), lambda i, j: sl.sum(h[i, k2] * w2[j, k2], axis=k2), name="down")
    return [x, w1, w3, w2, out], [out]


def argmax(rows=7, cols=13):
    reducer = programs.arg_reducer()
    x = sl.placeholder((rows, cols), name="x")
    k = sl.reduce_axis((0, cols), name="k")
    idx, val = sl.compute((rows,), lambda i: reducer((k.var, x[i, k]), axis=k), name="argmax")
    return [x, idx, val], [idx, val]


def row_sum(rows=3, cols=5000):
    x = sl.placeholder((rows, cols), name="x")
    k = sl.reduce_axis((0, cols), name="k")
    out = sl.compute((rows,), lambda i: sl.sum(x[i, k], axis=k), name="sum")
    return [x, out], [out]


def column_sum(rows=50, cols=40):
    """x.sum(0): the reduction runs across rows, the outputs along the contiguous axis."""
    x = sl.placeholder((rows, cols), name="x")
    k = sl.reduce_axis((0, rows), name="k")
    out = sl.compute((cols,), lambda j: sl.sum(x[k, j], axis=k), name="sum")
    return [x, out], [out]


def sum_two_axes(a=4, b=6, c=40):
    """x.sum((1, 2))."""
    x = sl.placeholder((a, b, c), name="x")
    k1 = sl.reduce_axis((0, b), name="k1")
    k2 = sl.reduce_axis((0, c), name="k2")
    out = sl.compute((a,), lambda i: sl.sum(x[i, k1, k2], axis=[k1, k2]), name="sum")
    return [x, out], [out]
