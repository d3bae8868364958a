"""The tensor-core GEMM on the cuda target: C = A @ B in float16 or bfloat16, accumulated in
float32 or float16, with mma.sync m16n8k16 fed by ldmatrix (target/cuda/intrin/mma.py),
optionally fetched with cp.async and pipelined over N shared-memory stages (intrin/copy.py,
schedule/pipeline.py).

    matmul(A, B, acc="float32", layout="kn")       the algorithm: B as [k, n], or [n, k] ("nk");
                                                   3-D A and B: a batch matmul (batch first)
    schedule_matmul(s, C, layout="kn", ...)        blocks of BM x BN, warps of WM x WN, K staged
                                                   through shared memory BK at a time; pad,
                                                   async_copy and stages as tutorial 10 shows;
                                                   a batch bound to blockIdx.z
    gemm(M, N, K, element, acc, layout, **tiles)   placeholders, algorithm and schedule: (s, [A, B, C])
    match_gemm(C)                                  what the schedule needs to know of C (GemmShape),
                                                   or None when C is not a GEMM it takes
    conv2d_implicit_gemm(x, w, ...)                a 2-d convolution (NCHW) as a batch GEMM
                                                   [N, OC, pixels] of the weight [OC, K] and the
                                                   im2col columns [N, K, pixels] (both index maps:
                                                   inlined, the im2col is the shared fetch's indexing)
    intrinsics()                                   every tensor intrinsic the schedule may use

A block is (BM / WM) x (BN / WN) warps of 32 threads; each warp computes a WM x WN tile of C
in 16 x 8 accumulator fragments. The fragments take whole tiles only: a shape that is not a
multiple of the block tile and the k step is refused (ValueError) unless check=False."""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Tuple

import schedlang as sl

from ..expr.nodes import Binary, Cast
from ..tensor.op import ComputeOp, TensorRead
from ..tensor.reduce import Reduce
from .find import operands, require
from .nn import matmul as _matmul_kn

LAYOUTS = ("kn", "nk")
ELEMENTS = ("float16", "bfloat16")
ACCUMULATORS = {"float16": ("float32", "float16"), "bfloat16": ("float32",)}   # what mma.sync takes
FRAGMENT_M, FRAGMENT_N, FRAGMENT_K = 16, 8, 16                                 # m16n8k16


def matmul(A, B, acc: str = "float32", layout: str = "kn", name: str = "C"):
    """C[i, j] = sum over k of A[i, k] * B[k, j] (layout "kn") or A[i, k] * B[j, k] ("nk"),
    the operands cast to the accumulator type acc."""
    require(layout in LAYOUTS, "cuda_tensorcore.matmul", f"layout is one of {LAYOUTS}, not {layout!r}")
    require(A.ndim == B.ndim and A.ndim in (2, 3), "cuda_tensorcore.matmul",
            f"A and B are both 2-D (a matmul) or both 3-D (a batch matmul), not {A.ndim}-D and {B.ndim}-D")
    if layout == "kn" and A.ndim == 2:
        return _matmul_kn(A, B, name=name, out_dtype=acc)
    *batch, M, K = A.shape
    N = B.shape[-1] if layout == "kn" else B.shape[-2]
    k = sl.reduce_axis((0, K), name="k")
    at = lambda e: e.astype(acc)      # noqa: E731
    if not batch:
        return sl.compute((M, N), lambda i, j: sl.sum(at(A[i, k]) * at(B[j, k]), axis=k), name=name)
    if layout == "kn":
        return sl.compute((*batch, M, N), lambda b, i, j: sl.sum(at(A[b, i, k]) * at(B[b, k, j]), axis=k), name=name)
    return sl.compute((*batch, M, N), lambda b, i, j: sl.sum(at(A[b, i, k]) * at(B[b, j, k]), axis=k), name=name)


def program(M: int, N: int, K: int, element: str = "float16", acc: str = "float32", layout: str = "kn",
            batch: int = 0):
    """Placeholders A [M, K] and B ([K, N], or [N, K] with layout "nk") of dtype element, and C;
    with batch > 0, A [batch, M, K], B [batch, ...] and C [batch, M, N] (a batch matmul)."""
    lead = (batch,) if batch else ()
    A = sl.placeholder((*lead, M, K), element, name="A")
    B = sl.placeholder((*lead, K, N) if layout == "kn" else (*lead, N, K), element, name="B")
    return A, B, matmul(A, B, acc, layout)


PIXELS = 16    # conv2d_implicit_gemm pads the pixels (the GEMM's columns) to a multiple of this


def conv2d_implicit_gemm(x, w, stride=(1, 1), padding=(0, 0), dilation=(1, 1), acc: str = "float32",
                         weight_at=None, name: str = "conv"):
    """The convolution of x [N, IC, H, W] with w [OC, IC, KH, KW] (weight_at(oc, ic, kh, kw)
    reads it instead when given: a packed copy) as an implicit GEMM; returns (wmat, cols,
    gemm):

        wmat[oc, k]    = w[oc, k // KHW, k // KW % KH, k % KW]               [OC, K]
        cols[n, k, p]  = x[n, ic, oh * s + kh * d - pad, ...] or 0 (padding)  [N, K, P']
        gemm[n, oc, p] = sum over k of acc(wmat[oc, k]) * acc(cols[n, k, p])  [N, OC, P']

    with K = IC * KH * KW, p = oh * OW + ow and the pixels padded to P', a multiple of PIXELS
    (their columns read zeros). wmat and cols are index maps: inlined, the GEMM's shared
    fetch does the im2col. match_gemm takes gemm where OC and K are multiples of 16."""
    N, IC, H, W = x.shape
    OC, _, KH, KW = w.shape
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    OH, OW = (H + 2 * ph - dh * (KH - 1) - 1) // sh + 1, (W + 2 * pw - dw * (KW - 1) - 1) // sw + 1
    P, K, KHW = OH * OW, IC * KH * KW, KH * KW
    Pp = -(-P // PIXELS) * PIXELS
    read_w = weight_at or (lambda o, c, i, j: w[o, c, i, j])
    wmat = sl.compute((OC, K), lambda o, k: read_w(o, k // KHW, k // KW % KH, k % KW), name=f"{name}_wmat")

    def col(n, k, p):
        h, v = p // OW * sh + (k // KW % KH) * dh - ph, p % OW * sw + (k % KW) * dw - pw
        conds = ([p < P] if Pp > P else []) + [h >= 0, h < H, v >= 0, v < W]
        return sl.if_then_else(sl.all(*conds), x[n, k // KHW, h, v], sl.const(0, str(x.dtype)))
    cols = sl.compute((N, K, Pp), col, name=f"{name}_cols")
    r = sl.reduce_axis((0, K), name="k")
    gemm = sl.compute((N, OC, Pp), lambda n, o, p: sl.sum(wmat[o, r].astype(acc) * cols[n, r, p].astype(acc),
                                                          axis=r), name=f"{name}_gemm")
    return wmat, cols, gemm


@dataclass(frozen=True)
class GemmShape:
    """A GEMM as the tensor-core schedule sees it: C[*batch, M, N] = sum over k of
    acc(A[*batch, M, K]) * acc(B[*batch, K, N] ("kn") or B[*batch, N, K] ("nk")); A [M, K]
    without the batch dims where shared_a (the same A for each batch entry: a convolution's
    weight, conv2d_implicit_gemm)."""

    element: str
    acc: str
    layout: str
    batch: Tuple[int, ...]
    M: int
    N: int
    K: int
    shared_a: bool = False

    @property
    def whole_fragments(self) -> bool:
        """M, N and K are whole m16n8k16 tiles (what the fragments take without tails)."""
        return not (self.M % FRAGMENT_M or self.N % FRAGMENT_N or self.K % FRAGMENT_K)


def match_gemm(C) -> Optional[GemmShape]:
    """C's GemmShape when C is a (batch) matmul this schedule takes: one sum over k of the
    product A[..., i, k] * B[..., k, j] (or B[..., j, k]) in C's order of axes, A read first,
    both of an element type of ELEMENTS, cast to an accumulator ACCUMULATORS allows for it,
    static extents, A and B exactly the shapes C reads (A without the batch dims: shared_a).
    None for anything else."""
    op = C.op
    if not isinstance(op, ComputeOp) or op.num_outputs != 1 or not isinstance(op.body, Reduce):
        return None
    red = op.body
    if red.combiner.name != "sum" or len(red.source) != 1 or red.condition is not None or red.init \
            or len(red.axis) != 1 or len(op.axis) not in (2, 3):
        return None
    prod, acc = red.source[0], str(C.dtype)
    if not (isinstance(prod, Binary) and prod.op == "mul"):
        return None
    reads = [_read_in(x, acc) for x in (prod.a, prod.b)]
    if None in reads or not all(isinstance(x, int) for x in (*C.shape, red.axis[0].dom.extent)):
        return None
    (A, ia), (B, ib) = reads
    *lead, i, j = (a.var for a in op.axis)
    k = red.axis[0].var
    element = str(A.dtype)
    if element not in ELEMENTS or str(B.dtype) != element or acc not in ACCUMULATORS[element] or A is B:
        return None
    shared_a = bool(lead) and _same_vars(ia, (i, k))
    if not shared_a and not _same_vars(ia, (*lead, i, k)):
        return None
    layout = "kn" if _same_vars(ib, (*lead, k, j)) else "nk" if _same_vars(ib, (*lead, j, k)) else None
    if layout is None:
        return None
    *batch, M, N = C.shape
    K = int(red.axis[0].dom.extent)
    if tuple(A.shape) != ((M, K) if shared_a else (*batch, M, K)) \
            or tuple(B.shape) != ((*batch, K, N) if layout == "kn" else (*batch, N, K)):
        return None
    return GemmShape(element, acc, layout, tuple(batch), M, N, K, shared_a)


def intrinsics() -> List:
    """Every tensor intrinsic schedule_matmul may tensorize with (its defaults: no load_b),
    for each element, accumulator and layout it takes."""
    from ..target.cuda.intrin import copy, mma     # (the cuda target's library, loaded when used)
    out = []
    for element in ELEMENTS:
        out += [mma.load_a_intrin(element), copy.cp_async_intrin(element)]
        for layout in LAYOUTS:
            out += [mma.load_b_intrin(element, layout, n) for n in (8, 16)]
            out += [mma.mma_intrin(element, acc, layout) for acc in ACCUMULATORS[element]]
    return out + [mma.store_c_intrin(acc) for acc in ACCUMULATORS["float16"]]


def _read_in(e, acc: str):
    """(tensor, indices) of a read of a tensor, cast to acc unless already of it; else None."""
    if isinstance(e, Cast) and str(e.dtype) == acc:
        e = e.value
    elif str(e.dtype) != acc:
        return None
    return (e.tensor, e.indices) if isinstance(e, TensorRead) else None


def _same_vars(indices, want) -> bool:
    return len(indices) == len(want) and all(x is v for x, v in zip(indices, want))


def schedule_matmul(s, C, layout: str = "kn", BM: int = 64, BN: int = 64, BK: int = 32, WM: int = 32,
                    WN: int = 16, check: bool = True, load_b=None, pad: int = 0, async_copy: bool = False,
                    stages: int = 1, prefetch_fragments: bool = False):
    """The tensor-core schedule of C = matmul(A, B, acc, layout); returns s. ValueError (with
    check) for shapes that are not whole tiles. load_b replaces the B fragment's intrinsic
    (tests of wrong layouts); pad (8: rows 16k + 8 elements apart, storage_align) moves
    ldmatrix's rows to other banks; async_copy fetches with cp.async, 16 bytes a thread;
    stages > 1 pipelines the shared stages over the k steps; prefetch_fragments double-buffers
    the warp's A and B fragments over the 16-deep slices of a k step (the next slice's ldmatrix
    issued before this one's mma, as CUTLASS's warp loop). A batch matmul (3-D C) runs a
    batch element per blockIdx.z, the tiles as above."""
    from ..target.cuda.intrin import copy, mma     # (the cuda target's library, loaded when used)
    A, B = operands(C, "schedule_matmul (tensor cores)")
    (*batch, M, N), K = C.shape, A.shape[-1]
    if check and (M % BM or N % BN or K % BK):
        raise ValueError(f"tensor-core GEMM {M}x{N}x{K}: M, N and K must be multiples of the block tile "
                         f"{BM}x{BN} and the k step {BK} (pad the operands)")
    element, acc = str(A.dtype), str(C.dtype)
    AS, BS = s.cache_read(A, "shared", [C]), s.cache_read(B, "shared", [C])
    CF = s.cache_write(C, "warp")
    AF, BF = s.cache_read(AS, "warp", [CF]), s.cache_read(BS, "warp", [CF])
    *lead, i, j = C.op.axis
    bi, i = s[C].split(i, BM)
    bj, j = s[C].split(j, BN)
    wi, i = s[C].split(i, WM)
    wj, j = s[C].split(j, WN)
    ti, ii = s[C].split(i, 16)
    tj, jj = s[C].split(j, 8)
    if lead:
        bz = s[C].fuse(*lead) if len(lead) > 1 else lead[0]      # (ndim 3: one batch axis)
        s[C].reorder(bz, bi, bj, wi, wj, ti, tj, ii, jj)
        s[C].bind(bz, sl.thread_axis("blockIdx.z"))
    else:
        s[C].reorder(bi, bj, wi, wj, ti, tj, ii, jj)
    s[C].bind(bi, sl.thread_axis("blockIdx.y"))
    s[C].bind(bj, sl.thread_axis("blockIdx.x"))
    s[C].bind(wi, sl.thread_axis("threadIdx.z"))
    s[C].bind(wj, sl.thread_axis("threadIdx.y"))
    s[C].unroll(ti)
    s[C].unroll(tj)
    s[C].tensorize(ii, mma.store_c_intrin(acc))
    s[CF].compute_at(s[C], wj)
    *_, ci, cj = s[CF].op.axis       # (a batch axis: one iteration a block)
    ko, kk = s[CF].split(s[CF].op.reduce_axis[0], BK)
    km, ki = s[CF].split(kk, 16)
    # through the warp's tile first: unroll checks the extents before bounds are inferred, and
    # these are the warp's fragments (WM / 16, WN / 8) whatever M and N are
    cio, cii = s[CF].split(s[CF].split(ci, WM)[1], 16)
    cjo, cji = s[CF].split(s[CF].split(cj, WN)[1], 8)
    s[CF].reorder(ko, km, cio, cjo, cii, cji, ki)
    for ax in (cio, cjo):
        s[CF].unroll(ax)          # constant fragment indices: the fragments stay in registers
    s[CF].tensorize(cii, mma.mma_intrin(element, acc, layout))
    b_intrin, b_tile, b_region = b_fragments(element, layout, WN)
    if load_b is not None:
        b_intrin, b_tile = load_b, ((16, 8) if layout == "kn" else (8, 16))
    for F, intrin, tile, region in ((AF, mma.load_a_intrin(element), (16, 16), (WM, 16)),
                                    (BF, b_intrin, b_tile, b_region)):
        fragment_load(s[F], s[CF], km, intrin, tile, region)
        if prefetch_fragments:
            s[F].double_buffer()
    for S in (AS, BS):
        s[S].compute_at(s[CF], ko)
        if pad:
            row = s[S].op.axis[-2]
            s[S].storage_align(row, 16, pad)      # rows 16k + pad elements apart
        if async_copy:
            *lead_s, r, c = s[S].op.axis
            c, lanes = s[S].split(c, 8)
            f = s[S].fuse(*lead_s, r, c)
            s[S].tensorize(lanes, copy.cp_async_intrin(element))
        else:
            f = s[S].fuse(*s[S].op.axis)
        if stages > 1:
            s[S].pipeline(stages)
        f, tx = s[S].split(f, 32)
        f, ty = s[S].split(f, BN // WN)
        f, tz = s[S].split(f, BM // WM)
        s[S].bind(tx, sl.thread_axis("threadIdx.x"))
        s[S].bind(ty, sl.thread_axis("threadIdx.y"))
        s[S].bind(tz, sl.thread_axis("threadIdx.z"))
    return s


def padded_row(row: int, pad: int) -> int:
    """The row stride storage_align(row, 16, pad) gives a shared tile's row of `row` elements."""
    return row if not pad else row + (pad - row) % 16


def pipeline_shared_bytes(layout: str, BM: int, BN: int, BK: int, pad: int, stages: int,
                          element_bytes: int = 2) -> int:
    """The shared memory of schedule_matmul's A and B tiles, every stage."""
    a = BM * padded_row(BK, pad)
    b = BK * padded_row(BN, pad) if layout == "kn" else BN * padded_row(BK, pad)
    return element_bytes * stages * (a + b)


def b_fragments(element: str, layout: str, WN: int):
    """(intrinsic, tile, region) of a warp's B fragments at a 16-deep k step: the region 16 x WN
    ("kn") or WN x 16 ("nk"), loaded two fragments an ldmatrix.x4 where WN allows (half the
    instructions of one an ldmatrix.x2)."""
    from ..target.cuda.intrin import mma     # (the cuda target's library, loaded when used)
    n = 16 if WN % 16 == 0 else 8
    tile, region = ((16, n), (16, WN)) if layout == "kn" else ((n, 16), (WN, 16))
    return mma.load_b_intrin(element, layout, n), tile, region


def fragment_load(st, at, loop, intrin, tile, region) -> None:
    """A warp fragment stage st (a cache_read of a shared one) loaded at loop of at, tile by tile:
    its region there (rows, columns) split into intrinsic tiles (the region first, so that the
    unrolled loops' extents are known when unroll checks them), the tile loops unrolled and the
    innermost tile tensorized with intrin (an ldmatrix or fragment load)."""
    st.compute_at(at, loop)
    *_, r, c = st.op.axis
    ro, ri = st.split(st.split(r, region[0])[1], tile[0])
    co, ci = st.split(st.split(c, region[1])[1], tile[1])
    st.reorder(ro, co, ri, ci)
    st.unroll(ro)
    st.unroll(co)
    st.tensorize(ri, intrin)


def gemm(M: int, N: int, K: int, element: str = "float16", acc: str = "float32", layout: str = "kn",
         batch: int = 0, **tiles):
    """The placeholders, the algorithm and its schedule: (s, [A, B, C]); tiles are
    schedule_matmul's keywords; batch > 0: a batch matmul (program)."""
    A, B, C = program(M, N, K, element, acc, layout, batch)
    return schedule_matmul(sl.create_schedule(C.op), C, layout, **tiles), [A, B, C]
