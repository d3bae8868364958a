"""Tensor-core default schedules of the cuda target: a float16 or bfloat16 matmul kernel (mm,
linear, bmm; schedules.schedule_matmul_cuda asks here first) with its elementwise epilogue
(the cast back to the input dtype, a bias, an activation) on mma.sync m16n8k16 fragments.

    tensorcore_plan(s, anchor, matmuls, target)       the tiles, or None where the rule does not apply
    schedule_matmul_tensorcore(s, anchor, mm, plan)   the schedule

A block computes a BM x BN tile of the output as topi/cuda_tensorcore.py's GEMM does (warps
of WM x WN, K staged through shared memory BK at a time: padded rows for ldmatrix, cp.async
and a two-stage pipeline where the operands are read directly), but the accumulators go to a
BM x BN float tile in shared memory, from which the block's threads apply the epilogue and
write the output, four elements a thread at a time (CUTLASS's epilogue through shared memory):
one kernel, the matmul's float32 result never in global memory.

It applies where the GPU has the instruction (sm_80+), the operands are float16 or bfloat16
(the same), the shapes static and whole fragments: M a multiple of 16, N of 8, K of 16. Batch
dims (bmm, a Linear on [b, s, d]) become blockIdx.z. Anything else keeps the CUDA-core schedule.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional

from ..dtypes import dtype
from ..expr.functor import walk
from ..tensor import thread_axis
from ..tensor.op import ComputeOp, PlaceholderOp, TensorRead
from ..topi.cuda_tensorcore import b_fragments, fragment_load, pipeline_shared_bytes
from .fuse import matmul_operands

ELEMENTS = ("float16", "bfloat16")
EPILOGUE_LANES = 4          # elements a thread of the epilogue: a float4 from the shared tile
PAD = 8                     # halves between shared rows beyond a multiple of 16: ldmatrix's rows in other banks
# A 128 x 128 block of four 64 x 64 warps where the shapes and the target's shared memory allow
# (~100 KB with its epilogue tile: a target that opts in beyond 48 KB, CUDAOptions): half the
# operand traffic a flop of 64 x 64 blocks (H200, Linear fp16 4096^3: 0.84 -> 0.50 ms, 0.22x -> 0.36x
# cuBLAS; results-gpu-h200.txt)
LARGE, LARGE_WARP = (128, 128), 64


@dataclass(frozen=True)
class Plan:
    """The tiles of one tensor-core matmul kernel and how it reads its operands."""
    A: object                # the operand indexed by the output's rows (A[..., i, k])
    B: object                # the other (B[..., k, j] with layout "kn", B[..., j, k] with "nk")
    layout: str
    element: str
    acc: str
    BM: int
    BN: int
    BK: int
    WM: int
    WN: int
    async_copy: bool
    stages: int

    @property
    def threads(self):
        """(threadIdx.z, threadIdx.y, threadIdx.x) extents: the warps of the block, 32 lanes."""
        return self.BM // self.WM, self.BN // self.WN, 32


def _divisor(n: int, choices) -> Optional[int]:
    return next((c for c in choices if n % c == 0), None)


def _read_pattern(read, i, j, k) -> Optional[str]:
    """"ik", "kj" or "jk": which of the output's row (i), column (j) and the reduction (k) the
    read's last two indices are, plain variables; None otherwise."""
    if len(read.indices) < 2:
        return None
    pair = [next((name for v, name in ((i, "i"), (j, "j"), (k, "k")) if x is v), None) for x in read.indices[-2:]]
    return None if None in pair else "".join(pair)


def _direct(s, t) -> bool:
    """t is read from memory as it is indexed (a placeholder or a stage with its own buffer, not
    an inlined view): what cp.async's 16-byte copies need."""
    return isinstance(t.op, PlaceholderOp) or s[t.op].attach_type != "inline"


def _reads_at_own_axes(s, op, mm_op) -> Optional[bool]:
    """Whether op (the epilogue) reads mm_op's output only at its own axes, in order, directly or
    through inlined stages that do the same (the block's tile of the output is then the block's
    tile of the matmul); None where it does not read it at all."""
    axes = [a.var for a in op.axis]
    reaches = None
    for read in (n for body in op.bodies for n in walk(body) if isinstance(n, TensorRead)):
        src = read.tensor.op
        if src is mm_op:
            inner = True
        elif isinstance(src, ComputeOp) and src in s.stage_map and s[src].attach_type == "inline":
            inner = _reads_at_own_axes(s, src, mm_op)
        else:
            continue
        if inner is None:
            continue
        if not inner or len(read.indices) != len(axes) or any(x is not v for x, v in zip(read.indices, axes)):
            return False
        reaches = True
    return reaches


def tensorcore_plan(s, anchor, matmuls: List, target) -> Optional[Plan]:
    """The tiles of the tensor-core schedule of this matmul kernel, or None where it does not
    apply (see the module's docstring)."""
    from ..target.cuda.intrin import mma    # (the cuda target's library, loaded when used)
    from .schedules import static
    if len(matmuls) != 1 or not mma.supported(target):
        return None
    op = s[matmuls[0]].op
    reads = matmul_operands(op.body.source[0])
    acc = str(op.output_dtype(0))
    if reads is None or acc not in mma.ACCUMULATORS or len(op.reduce_axis) != 1:
        return None
    dtypes = {str(r.tensor.dtype) for r in reads}
    if len(dtypes) != 1 or dtypes.pop() not in ELEMENTS:
        return None
    *batch, i, j = op.axis
    (k,) = op.reduce_axis
    patterns = [_read_pattern(r, i.var, j.var, k.var) for r in reads]
    if patterns[0] != "ik":
        reads, patterns = reads[::-1], patterns[::-1]
    if patterns[0] != "ik" or patterns[1] not in ("kj", "jk") or reads[0].tensor is reads[1].tensor:
        return None
    if anchor is not matmuls[0] and not _reads_at_own_axes(s, s[anchor].op, op):
        return None
    M, N, K = (static(x.dom.extent) for x in (i, j, k))
    if None in (M, N, K) or any(static(b.dom.extent) is None for b in batch):
        return None
    direct = all(_direct(s, r.tensor) for r in reads)
    layout, element = "kn" if patterns[1] == "kj" else "nk", str(reads[0].tensor.dtype)
    BK = _divisor(K, (32, 16))
    stages = 2 if direct and BK is not None and K > BK else 1
    if (M % LARGE[0] or N % LARGE[1] or BK != 32
            or plan_shared_bytes(layout, element, acc, *LARGE, BK, stages) > target.max_shared_memory_per_block):
        BM, BN = _divisor(M, (64, 32, 16)), _divisor(N, (64, 32, 16, 8))
        if None in (BM, BN, BK):
            return None
        WM, WN = min(32, BM), min(32, BN)
    else:                       # where the target lets a block take the shared memory (sm_80+ opt in)
        (BM, BN), WM, WN = LARGE, LARGE_WARP, LARGE_WARP
    return Plan(reads[0].tensor, reads[1].tensor, layout, element, acc, BM, BN, BK, WM, WN, async_copy=direct,
                stages=stages)


def plan_shared_bytes(layout: str, element: str, acc: str, BM: int, BN: int, BK: int, stages: int) -> int:
    """The shared memory of a plan's kernel: the A and B tiles of every stage and the BM x BN
    accumulator tile the epilogue reads."""
    return pipeline_shared_bytes(layout, BM, BN, BK, PAD, stages, dtype(element).bytes) + BM * BN * dtype(acc).bytes


def _bind(stage, ivar, tag: str) -> None:
    stage.bind(ivar, thread_axis(tag))


def _bind_threads(stage, fused, plan: Plan):
    """Split a fused loop over the block's threads (x innermost); returns the serial rest."""
    tz, ty, tx = plan.threads
    fused, x = stage.split(fused, tx)
    fused, y = stage.split(fused, ty)
    fused, z = stage.split(fused, tz)
    for ivar, tag in ((x, "threadIdx.x"), (y, "threadIdx.y"), (z, "threadIdx.z")):
        _bind(stage, ivar, tag)
    return fused


def schedule_matmul_tensorcore(s, anchor, mm, plan: Plan) -> None:
    """The tensor-core schedule of the kernel of anchor (an elementwise epilogue of mm, or mm
    itself: then a shared write cache is the tile the output is copied from)."""
    from ..target.cuda.intrin import copy, mma    # (as above)
    if anchor is mm:
        mm = s.cache_write(s[anchor].op.output(0), "shared")
    AS, BS = s.cache_read(plan.A, "shared", [mm]), s.cache_read(plan.B, "shared", [mm])
    CF = s.cache_write(s[mm].op.output(0), "warp")
    AF, BF = s.cache_read(AS, "warp", [CF]), s.cache_read(BS, "warp", [CF])
    out, tile = s[anchor], s[mm]
    tile.set_scope("shared")
    block = _schedule_epilogue(out, plan)
    tile.compute_at(out, block)
    *tb, ti, tj = tile.op.axis
    wi, ti = tile.split(ti, plan.WM)
    wj, tj = tile.split(tj, plan.WN)
    fo, fi = tile.split(ti, 16)
    go, gi = tile.split(tj, 8)
    tile.reorder(*tb, wi, wj, fo, go, fi, gi)
    _bind(tile, wi, "threadIdx.z")
    _bind(tile, wj, "threadIdx.y")
    tile.unroll(fo)
    tile.unroll(go)
    tile.tensorize(fi, mma.store_c_intrin(plan.acc, "shared"))
    frag = s[CF]
    frag.compute_at(tile, wj)
    *cb, ci, cj = frag.op.axis
    ko, kk = frag.split(frag.op.reduce_axis[0], plan.BK)
    km, ki = frag.split(kk, 16)
    # through the warp's tile first, so that the unrolled loops' extents are known to be its
    # fragments (WM / 16, WN / 8) when unroll checks them, before bounds are inferred
    cwi, ci = frag.split(ci, plan.WM)
    cwj, cj = frag.split(cj, plan.WN)
    cio, cii = frag.split(ci, 16)
    cjo, cji = frag.split(cj, 8)
    frag.reorder(*cb, cwi, cwj, ko, km, cio, cjo, cii, cji, ki)
    frag.unroll(cio)
    frag.unroll(cjo)
    frag.tensorize(cii, mma.mma_intrin(plan.element, plan.acc, plan.layout))
    # each fragment stage: its region at km (A: WM x 16, B: 16 x WN or WN x 16) in intrinsic tiles
    b_intrin, b_tile, b_region = b_fragments(plan.element, plan.layout, plan.WN)
    for F, intrin, shape, region in ((AF, mma.load_a_intrin(plan.element), (16, 16), (plan.WM, 16)),
                                     (BF, b_intrin, b_tile, b_region)):
        fragment_load(s[F], frag, km, intrin, shape, region)
    for S in (AS, BS):
        st = s[S]
        st.compute_at(frag, ko)
        *lead, r, c = st.op.axis
        st.storage_align(r, 16, PAD)
        if plan.async_copy:
            c, lanes = st.split(c, 8)
            st.tensorize(lanes, copy.cp_async_intrin(plan.element))
        fused = st.fuse(*lead, r, c)
        if plan.stages > 1:
            st.pipeline(plan.stages)
        _bind_threads(st, fused, plan)


def _schedule_epilogue(out, plan: Plan):
    """The output's loops: a block per BM x BN tile (batch dims fused on blockIdx.z), the tile's
    elements over the threads EPILOGUE_LANES at a time; returns the block's innermost loop."""
    *batch, i, j = out.op.axis
    bi, bj, ii, jj = out.tile(i, j, plan.BM, plan.BN)
    if batch:
        _bind(out, out.fuse(*batch), "blockIdx.z")
    _bind(out, bi, "blockIdx.y")
    _bind(out, bj, "blockIdx.x")
    fused, lanes = out.split(out.fuse(ii, jj), EPILOGUE_LANES)
    _bind_threads(out, fused, plan)
    out.vectorize(lanes)
    return bj
