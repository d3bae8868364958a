"""The tensor-core GEMM on the cuda target: C = A @ B in float16 or bfloat16, accumulated in
float32 or float16, with mma.sync m16n8k16 fed by ldmatrix (target/cuda/intrin/mma.py),
optionally fetched with cp.async and pipelined over N shared-memory stages (intrin/copy.py,
schedule/pipeline.py).

    matmul(A, B, acc="float32", layout="kn")       the algorithm: B as [k, n], or [n, k] ("nk")
    schedule_matmul(s, C, layout="kn", ...)        blocks of BM x BN, warps of WM x WN, K staged
                                                   through shared memory BK at a time; pad,
                                                   async_copy and stages as tutorial 10 shows
    gemm(M, N, K, element, acc, layout, **tiles)   placeholders, algorithm and schedule: (s, [A, B, C])

A block is (BM / WM) x (BN / WN) warps of 32 threads; each warp computes a WM x WN tile of C
in 16 x 8 accumulator fragments. The fragments take whole tiles only: a shape that is not a
multiple of the block tile and the k step is refused (ValueError) unless check=False."""
from __future__ import annotations

import schedlang as sl

from .find import operands, require
from .nn import matmul as _matmul_kn

LAYOUTS = ("kn", "nk")


def matmul(A, B, acc: str = "float32", layout: str = "kn", name: str = "C"):
    """C[i, j] = sum over k of A[i, k] * B[k, j] (layout "kn") or A[i, k] * B[j, k] ("nk"),
    the operands cast to the accumulator type acc."""
    require(layout in LAYOUTS, "cuda_tensorcore.matmul", f"layout is one of {LAYOUTS}, not {layout!r}")
    if layout == "kn":
        return _matmul_kn(A, B, name=name, out_dtype=acc)
    (M, K), (N, _) = A.shape, B.shape
    k = sl.reduce_axis((0, K), name="k")
    return sl.compute((M, N), lambda i, j: sl.sum(A[i, k].astype(acc) * B[j, k].astype(acc), axis=k), name=name)


def program(M: int, N: int, K: int, element: str = "float16", acc: str = "float32", layout: str = "kn"):
    """Placeholders A [M, K] and B ([K, N], or [N, K] with layout "nk") of dtype element, and C."""
    A = sl.placeholder((M, K), element, name="A")
    B = sl.placeholder((K, N) if layout == "kn" else (N, K), element, name="B")
    return A, B, matmul(A, B, acc, layout)


def schedule_matmul(s, C, layout: str = "kn", BM: int = 64, BN: int = 64, BK: int = 32, WM: int = 32,
                    WN: int = 16, check: bool = True, load_b=None, pad: int = 0, async_copy: bool = False,
                    stages: int = 1):
    """The tensor-core schedule of C = matmul(A, B, acc, layout); returns s. ValueError (with
    check) for shapes that are not whole tiles. load_b replaces the B fragment's intrinsic
    (tests of wrong layouts); pad (8: rows 16k + 8 elements apart, storage_align) moves
    ldmatrix's rows to other banks; async_copy fetches with cp.async, 16 bytes a thread;
    stages > 1 pipelines the shared stages over the k steps."""
    from ..target.cuda.intrin import copy, mma     # (the cuda target's library, loaded when used)
    A, B = operands(C, "schedule_matmul (tensor cores)")
    (M, N), K = C.shape, A.shape[1]
    if check and (M % BM or N % BN or K % BK):
        raise ValueError(f"tensor-core GEMM {M}x{N}x{K}: M, N and K must be multiples of the block tile "
                         f"{BM}x{BN} and the k step {BK} (pad the operands)")
    element, acc = str(A.dtype), str(C.dtype)
    AS, BS = s.cache_read(A, "shared", [C]), s.cache_read(B, "shared", [C])
    CF = s.cache_write(C, "warp")
    AF, BF = s.cache_read(AS, "warp", [CF]), s.cache_read(BS, "warp", [CF])
    i, j = C.op.axis
    bi, i = s[C].split(i, BM)
    bj, j = s[C].split(j, BN)
    wi, i = s[C].split(i, WM)
    wj, j = s[C].split(j, WN)
    ti, ii = s[C].split(i, 16)
    tj, jj = s[C].split(j, 8)
    s[C].reorder(bi, bj, wi, wj, ti, tj, ii, jj)
    s[C].bind(bi, sl.thread_axis("blockIdx.y"))
    s[C].bind(bj, sl.thread_axis("blockIdx.x"))
    s[C].bind(wi, sl.thread_axis("threadIdx.z"))
    s[C].bind(wj, sl.thread_axis("threadIdx.y"))
    s[C].unroll(ti)
    s[C].unroll(tj)
    s[C].tensorize(ii, mma.store_c_intrin(acc))
    s[CF].compute_at(s[C], wj)
    ci, cj = s[CF].op.axis
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
    b_tile, b_region = ((16, 8), (16, WN)) if layout == "kn" else ((8, 16), (WN, 16))
    for F, intrin, tile, region in ((AF, mma.load_a_intrin(element), (16, 16), (WM, 16)),
                                    (BF, load_b or mma.load_b_intrin(element, layout), b_tile, b_region)):
        s[F].compute_at(s[CF], km)
        r, c = s[F].op.axis
        ro, ri = s[F].split(s[F].split(r, region[0])[1], tile[0])     # (the region at km first, as above)
        co, ci_ = s[F].split(s[F].split(c, region[1])[1], tile[1])
        s[F].reorder(ro, co, ri, ci_)
        s[F].unroll(ro)
        s[F].unroll(co)
        s[F].tensorize(ri, intrin)
    for S in (AS, BS):
        s[S].compute_at(s[CF], ko)
        if pad:
            row = s[S].op.axis[0]
            s[S].storage_align(row, 16, pad)      # rows 16k + pad elements apart
        if async_copy:
            r, c = s[S].op.axis
            c, lanes = s[S].split(c, 8)
            f = s[S].fuse(r, c)
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


def gemm(M: int, N: int, K: int, element: str = "float16", acc: str = "float32", layout: str = "kn", **tiles):
    """The placeholders, the algorithm and its schedule: (s, [A, B, C]); tiles are
    schedule_matmul's keywords."""
    A, B, C = program(M, N, K, element, acc, layout)
    return schedule_matmul(sl.create_schedule(C.op), C, layout, **tiles), [A, B, C]
