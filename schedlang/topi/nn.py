"""Algorithms (compute definitions), as TVM's `topi.nn`: each takes placeholders (or other
tensors) and returns the output tensor; the stages in between are reachable through
`out.op.input_tensors`, which is how the schedules in `cpu.py` and `cuda.py` find them.

The names of stages, reduce axes and loop variables are fixed (a schedule names them, and the
generated code shows them); every function takes the output's name."""
from __future__ import annotations

import numpy as np

import schedlang as sl

REDUCERS = ("sum", "max", "min", "prod")


def matmul(A, B, name: str = "C", out_dtype: str = None):
    """C[i, j] = sum over k of A[i, k] * B[k, j]. With out_dtype, A and B are cast to it before
    the product (float16 inputs accumulated in float32); a cast to their own dtype is a no-op."""
    (M, K), (K2, N) = _shape(A, 2, "matmul: A"), _shape(B, 2, "matmul: B")
    _same_extent(K, K2, "matmul: A's columns and B's rows")
    cast = (lambda e: e.astype(out_dtype)) if out_dtype else (lambda e: e)
    k = sl.reduce_axis((0, K), name="k")
    return sl.compute((M, N), lambda i, j: sl.sum(cast(A[i, k]) * cast(B[k, j]), axis=k), name=name)


def matmul_packed(A, B, bn: int, name: str = "C"):
    """The TVM CPU GEMM tutorial's algorithm: C = A @ B with B first copied into panels
    packedB[N/bn, K, bn] (stage "packedB") that C reads through y // bn, y % bn, so a block
    of bn columns of B is contiguous. N must be a multiple of bn."""
    (M, K), (K2, N) = _shape(A, 2, "matmul_packed: A"), _shape(B, 2, "matmul_packed: B")
    _same_extent(K, K2, "matmul_packed: A's columns and B's rows")
    if not isinstance(bn, int) or bn < 1 or not isinstance(N, int) or N % bn:
        raise ValueError(f"matmul_packed: B's columns ({N}) must be a constant multiple of the panel width bn={bn!r}")
    k = sl.reduce_axis((0, K), name="k")
    packed = sl.compute((N // bn, K, bn), lambda x, y, z: B[y, x * bn + z], name="packedB")
    return sl.compute((M, N), lambda x, y: sl.sum(A[x, k] * packed[y // bn, k, y % bn], axis=k), name=name)


def batch_matmul(A, B, name: str = "C"):
    """C[b, i, j] = sum over k of A[b, i, k] * B[b, k, j]."""
    (batch, M, K), (batch2, K2, N) = _shape(A, 3, "batch_matmul: A"), _shape(B, 3, "batch_matmul: B")
    _same_extent(batch, batch2, "batch_matmul: the batch sizes")
    _same_extent(K, K2, "batch_matmul: A's columns and B's rows")
    k = sl.reduce_axis((0, K), name="k")
    return sl.compute((batch, M, N), lambda b, i, j: sl.sum(A[b, i, k] * B[b, k, j], axis=k), name=name)


def pad_nchw(X, pad: int, name: str = "pad"):
    """X[N, C, H, W] with `pad` zeros on each side of H and W: an if_then_else, so the border
    never reads X."""
    n, c, H, W = _shape(X, 4, "pad_nchw: X")
    return sl.compute((n, c, H + 2 * pad, W + 2 * pad), lambda n, c, h, w: sl.if_then_else(
        sl.all(h >= pad, h < H + pad, w >= pad, w < W + pad), X[n, c, h - pad, w - pad], 0.0), name=name)


def conv2d_nchw(X, W, pad: int = 1, name: str = "conv"):
    """2-d convolution, stride 1: X[N, C, H, W] and weights W[F, C, R, S] give
    out[N, F, H + 2 pad - R + 1, W + 2 pad - S + 1], summed over rc, rh, rw. The padding is a
    stage of its own (pad_nchw, out.op.input_tensors[0]), to inline or compute_at."""
    n, c, h, w = _shape(X, 4, "conv2d_nchw: X")
    f, c2, r, q = _shape(W, 4, "conv2d_nchw: W")
    _same_extent(c, c2, "conv2d_nchw: the input channels of X and W")
    _check_pad(pad, "conv2d_nchw")
    padded = pad_nchw(X, pad)
    rc, rh, rw = sl.reduce_axis((0, c), name="rc"), sl.reduce_axis((0, r), name="rh"), sl.reduce_axis((0, q), name="rw")
    return sl.compute((n, f, h + 2 * pad - r + 1, w + 2 * pad - q + 1), lambda n, f, h, w: sl.sum(
        padded[n, rc, h + rh, w + rw] * W[f, rc, rh, rw], axis=[rc, rh, rw]), name=name)


def conv2d_nchw_prepacked(X, Wp, channels: int, pad: int = 1, stride: int = 1, name: str = "conv"):
    """conv2d_nchw (with a stride) whose weights W[F, C, R, S] come packed ahead of time as
    Wp[ceil(F / L), C, R, S, L] (pack_conv_weights; the torch frontend's prepack.py "conv"
    blocks, TVM's alter_op_layout): out[N, F, OH, OW] reads Wp[f // L, rc, rh, rw, f % L], so a
    vector of L output channels loads contiguous weights and no packing is part of the kernel.
    channels: F (the blocks' zero columns past it are never read)."""
    n, c, h, w = _shape(X, 4, "conv2d_nchw_prepacked: X")
    blocks, c2, r, q, width = _shape(Wp, 5, "conv2d_nchw_prepacked: Wp")
    _same_extent(c, c2, "conv2d_nchw_prepacked: the input channels of X and Wp")
    if not 0 < channels <= blocks * width or channels <= (blocks - 1) * width:
        raise ValueError(f"conv2d_nchw_prepacked: {channels} output channels do not fill {blocks} blocks of {width}")
    if not isinstance(stride, int) or stride < 1:
        raise ValueError(f"conv2d_nchw_prepacked: stride must be a positive int, got {stride!r}")
    _check_pad(pad, "conv2d_nchw_prepacked")
    padded = pad_nchw(X, pad)
    oh, ow = (h + 2 * pad - r) // stride + 1, (w + 2 * pad - q) // stride + 1
    rc, rh, rw = sl.reduce_axis((0, c), name="rc"), sl.reduce_axis((0, r), name="rh"), sl.reduce_axis((0, q), name="rw")
    return sl.compute((n, channels, oh, ow), lambda n, f, h, w: sl.sum(
        padded[n, rc, h * stride + rh, w * stride + rw] * Wp[f // width, rc, rh, rw, f % width],
        axis=[rc, rh, rw]), name=name)


def pack_conv_weights(w, width: int):
    """Weights w[F, C, R, S] (numpy) as the blocks conv2d_nchw_prepacked reads:
    [ceil(F / width), C, R, S, width], output channel f at [f // width, ..., f % width], the
    last block's columns past F zero."""
    f = w.shape[0]
    blocks = -(-f // width)
    out = np.zeros((blocks * width,) + w.shape[1:], dtype=w.dtype)
    out[:f] = w
    return np.ascontiguousarray(out.reshape((blocks, width) + w.shape[1:]).transpose(0, 2, 3, 4, 1))


def conv2d_nchwc(X, W, pad: int = 1, name: str = "conv"):
    """2-d convolution, stride 1, in TVM's blocked layouts (`topi.nn.conv2d_NCHWc`):
    X[N, C/ic, H, W, ic] and W[F/oc, C/ic, R, S, ic, oc] give out[N, F/oc, OH, OW, oc], summed
    over the input-channel blocks, rh, rw and the channels of a block. The padding (of H and W)
    is the stage out.op.input_tensors[0]."""
    n, cb, h, w, ic = _shape(X, 5, "conv2d_nchwc: X")
    fb, cb2, r, q, ic2, oc = _shape(W, 6, "conv2d_nchwc: W")
    _same_extent(cb, cb2, "conv2d_nchwc: the input channel blocks of X and W")
    _same_extent(ic, ic2, "conv2d_nchwc: the input channels per block of X and W")
    _check_pad(pad, "conv2d_nchwc")
    padded = sl.compute((n, cb, h + 2 * pad, w + 2 * pad, ic), lambda n, c, y, x, i: sl.if_then_else(
        sl.all(y >= pad, y < h + pad, x >= pad, x < w + pad), X[n, c, y - pad, x - pad, i], 0.0), name="pad")
    rc, rh, rw = sl.reduce_axis((0, cb), name="rc"), sl.reduce_axis((0, r), name="rh"), sl.reduce_axis((0, q), name="rw")
    ri = sl.reduce_axis((0, ic), name="ri")
    return sl.compute((n, fb, h + 2 * pad - r + 1, w + 2 * pad - q + 1, oc), lambda n, f, y, x, o: sl.sum(
        padded[n, rc, y + rh, x + rw, ri] * W[f, rc, rh, rw, ri, o], axis=[rc, rh, rw, ri]), name=name)


def softmax(X, name: str = "softmax"):
    """Softmax over the rows of X[N, M], safe from overflow: stages "maxval" (the row max),
    "expval" (exp of X minus it), "total" (the row sum of expval) and the quotient. Returns the
    output; `softmax_stages(out)` names the three stages in between."""
    rows, cols = _shape(X, 2, "softmax: X")
    k = sl.reduce_axis((0, cols), name="k")
    mx = sl.compute((rows,), lambda i: sl.max(X[i, k], axis=k), name="maxval")
    ex = sl.compute((rows, cols), lambda i, j: sl.exp(X[i, j] - mx[i]), name="expval")
    k2 = sl.reduce_axis((0, cols), name="k2")
    total = sl.compute((rows,), lambda i: sl.sum(ex[i, k2], axis=k2), name="total")
    return sl.compute((rows, cols), lambda i, j: ex[i, j] / total[i], name=name)


def softmax_stages(out):
    """(maxval, expval, total) of a softmax built by `softmax`."""
    (ex,), (total,) = _by_ndim(out.op.input_tensors, 2), _by_ndim(out.op.input_tensors, 1)
    (mx,) = _by_ndim(ex.op.input_tensors, 1)
    return mx, ex, total


def _by_ndim(tensors, ndim: int) -> list:
    return [t for t in tensors if t.ndim == ndim]


def silu_and_mul(x, name: str = "out"):
    """SiluAndMul of x[rows, 2d]: out[i, j] = silu(x[i, j]) * x[i, j + d] (the gated MLP's
    activation; silu(v) = v * sigmoid(v))."""
    rows, cols = _shape(x, 2, "silu_and_mul: x")
    if not isinstance(cols, int) or cols % 2:
        raise ValueError(f"silu_and_mul: x's last extent must be an even constant, got {cols}")
    half = cols // 2
    return sl.compute((rows, half), lambda i, j: x[i, j] * sl.sigmoid(x[i, j]) * x[i, j + half], name=name)


def row_reduce(X, reducer: str = "sum", name: str = "Y"):
    """Y[i] = reducer over k of X[i, k]; reducer is "sum", "max", "min" or "prod"."""
    if reducer not in REDUCERS:
        raise ValueError(f"row_reduce: unknown reducer {reducer!r}; use one of {', '.join(REDUCERS)}")
    rows, cols = _shape(X, 2, "row_reduce: X")
    k = sl.reduce_axis((0, cols), name="k")
    return sl.compute((rows,), lambda i: getattr(sl, reducer)(X[i, k], axis=k), name=name)


def _shape(t, ndim: int, what: str) -> tuple:
    if not isinstance(t, sl.Tensor):
        raise TypeError(f"{what} must be a Tensor (sl.placeholder or sl.compute), got {type(t).__name__}")
    if t.ndim != ndim:
        raise ValueError(f"{what} ({t.name}) must have {ndim} dimensions, got shape {tuple(t.shape)}")
    return tuple(t.shape)


def _same_extent(a, b, what: str) -> None:
    if isinstance(a, int) and isinstance(b, int) and a != b:
        raise ValueError(f"{what} differ: {a} and {b}")


def _check_pad(pad, who: str) -> None:
    if not isinstance(pad, int) or isinstance(pad, bool) or pad < 0:
        raise ValueError(f"{who}: pad must be an int >= 0, got {pad!r}")
