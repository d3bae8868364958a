"""The tensor-core sketch rule of the cuda backend (TVM MetaSchedule's cuda-tensorcore idea in
the classic schedule language): a float16 / bfloat16 matmul or batch matmul, accumulated in
float32 (or float16), scheduled by topi/cuda_tensorcore.schedule_matmul: blocks of BM x BN,
warps of WM x WN, m16n8k16 fragments (ldmatrix + mma.sync through tensorize), A and B staged
through shared memory BK at a time, optionally padded (ldmatrix without bank conflicts),
fetched by cp.async and pipelined over several shared stages.

Its decisions, named as the other rules' (sample.Trace), so mutation and crossover apply:
    C|tile|i   [blocks, warps, fragments] of M / 16 (WM = 16 * fragments, BM = WM * warps)
    C|tile|j   [blocks, warps, fragments] of N / 8  (WN = 8 * fragments,  BN = WN * warps)
    C|tile|k   [k steps, fragments] of K / 16       (BK = 16 * fragments)
    C|tc|async cp.async (True) or plain copies;  C|tc|stages  shared buffers (1: no pipeline)
    C|tc|pad   8 (rows 16k + 8 elements apart: no ldmatrix bank conflicts) or 0
Tiles always divide the GEMM exactly (tile keys are factorizations: a mutation that breaks
one is drawn again), and the whole-block limits are kept in the draws: threads a block,
accumulator registers a warp (MAX_FRAGMENTS), shared memory of all stages. The rule applies
only to what the fragments cover exactly (cuda_tensorcore.match_gemm and whole m16n8k16
tiles, a target with mma.sync m16n8k16): any other GEMM is left to gpu_tile, never padded.
A convolution written as an implicit GEMM (cuda_tensorcore.conv2d_implicit_gemm: the weight
[OC, K] shared by the batch, im2col columns inlined into the shared fetch) is such a GEMM;
its inlined operands are fetched with plain copies (C|tc|async is False).
"""
from __future__ import annotations

import functools
from typing import List

from ..errors import ScheduleError
from ..schedule import legal
from ..schedule.tensorize import declare_intrin
from ..tensor.op import PlaceholderOp
from ..topi import cuda_tensorcore as tc
from .sample import Trace
from .sketch import Condition, SketchRule

MAX_FRAGMENTS = 16       # 16 x 8 accumulators a warp (64 float registers a lane: no spills on sm_80)
MAX_FRAGMENTS_AXIS = 8   # fragments along M or along N in a warp (WM <= 128, WN <= 64)
MAX_WARPS_AXIS = 4       # warps along M or along N in a block
MAX_K_FRAGMENTS = 4      # BK at most 64
STAGES = (1, 2, 3, 4)
PADS = (0, 8)
MIN_ARCH = 80            # mma.sync m16n8k16 and cp.async


def arch_number(target) -> int:
    """80 for sm_80, 90 for sm_90a (the target's CUDA architecture as a number)."""
    return int("".join(ch for ch in target.arch[3:] if ch.isdigit()))


def _factorizations(n: int, levels: int, limits: List[int]) -> List[List[int]]:
    """Every [outer, *inner] with product n, the inner sizes within limits (innermost last)."""
    if levels == 1:
        return [[n]]
    out = []
    for f in legal.divisors(n, limits[-1]):
        out += [rest + [f] for rest in _factorizations(n // f, levels - 1, limits[:-1])]
    return out


def _tile_pick(trace: Trace, key: str, options: List[List[int]]) -> List[int]:
    if not options:
        raise ScheduleError("tensor-core sketch", key.split("|")[0], f"no tiling of {key} fits the block's limits "
                            "(threads, accumulator registers, shared memory)")
    return list(trace.pick(key, lambda rng: rng.choice(options), lambda v: isinstance(v, list) and v in options))


def shared_bytes(g: tc.GemmShape, BM: int, BN: int, BK: int, pad: int, stages: int) -> int:
    """The shared memory of the A and B tiles, all stages."""
    return tc.pipeline_shared_bytes(g.layout, BM, BN, BK, pad, stages)


def tensor_core_tile(trace: Trace, s, st, target) -> None:
    """Draw the decisions (module docstring) and apply schedule_matmul with them."""
    C = st.op.output(0)
    g = tc.match_gemm(C)
    if g is None or not g.whole_fragments or arch_number(target) < MIN_ARCH:
        raise ScheduleError("tensor-core sketch", st.name, "the stage is not a GEMM the m16n8k16 fragments cover "
                            f"on {target.arch}")
    max_warps, limit = target.max_threads_per_block // 32, target.max_shared_memory_per_block
    pad = trace.pick(f"{st.name}|tc|pad", lambda rng: rng.choice(PADS), lambda v: v in PADS)
    # each level's draw keeps the smallest completion within the shared memory (BN 8, BK 16, 1 stage)
    ti = _tile_pick(trace, f"{st.name}|tile|i", [
        v for v in _factorizations(g.M // 16, 3, [MAX_WARPS_AXIS, MAX_FRAGMENTS_AXIS])
        if v[1] <= max_warps and shared_bytes(g, 16 * v[1] * v[2], 8, 16, pad, 1) <= limit])
    warps_i, frags_i = ti[1], ti[2]
    BM = 16 * frags_i * warps_i
    tj = _tile_pick(trace, f"{st.name}|tile|j", [
        v for v in _factorizations(g.N // 8, 3, [MAX_WARPS_AXIS, MAX_FRAGMENTS_AXIS])
        if v[1] * warps_i <= max_warps and v[2] * frags_i <= MAX_FRAGMENTS
        and shared_bytes(g, BM, 8 * v[1] * v[2], 16, pad, 1) <= limit])
    BN = 8 * tj[1] * tj[2]
    tk = _tile_pick(trace, f"{st.name}|tile|k", [v for v in _factorizations(g.K // 16, 2, [MAX_K_FRAGMENTS])
                                                 if shared_bytes(g, BM, BN, 16 * v[1], pad, 1) <= limit])
    WM, WN, BK = 16 * frags_i, 8 * tj[2], 16 * tk[1]
    # cp.async copies 16 bytes as they are in memory: operands read directly (not an inlined
    # view such as a convolution's im2col columns, conv2d_implicit_gemm) or no async copies
    # (the inline rule inlines them on the GPU, after this stage's rule: can_inline says which)
    direct = all(isinstance(t.op, PlaceholderOp) or not (s[t.op].attach_type == "inline" or legal.can_inline(s[t.op]))
                 for t in tc.operands(C, st.name))
    copy_async = trace.pick(f"{st.name}|tc|async", lambda rng: direct and rng.random() < 0.75,
                            lambda v: isinstance(v, bool) and (direct or not v))
    fits = [n for n in STAGES if n <= tk[0] and shared_bytes(g, BM, BN, BK, pad, n) <= limit]
    stages = trace.pick(f"{st.name}|tc|stages", lambda rng: rng.choice(fits), lambda v: v in fits)
    tc.schedule_matmul(s, C, g.layout, BM=BM, BN=BN, BK=BK, WM=WM, WN=WN, pad=pad, async_copy=copy_async,
                       stages=stages)


@functools.lru_cache(maxsize=None)
def declare_intrinsics() -> None:
    """Declare every intrinsic the rule's schedules tensorize with (once a process), so that
    their steps replay where no sample was drawn: a measurement worker, a resumed log."""
    for intrin in tc.intrinsics():
        declare_intrin(intrin)


class GPUTensorCore(SketchRule):
    """A float16 / bfloat16 (batch) matmul of whole m16n8k16 tiles on tensor cores; gpu_tile
    (the next rule) is the other sketch of the same stage, so the estimate ranks the two."""

    name = "gpu_tensor_core"

    def supports(self, target) -> bool:
        return arch_number(target) >= MIN_ARCH

    def condition(self, s, st) -> Condition:
        g = tc.match_gemm(st.op.output(0)) if legal.is_reduction(st) else None
        return Condition.APPLY if g is not None and g.whole_fragments else Condition.SKIP

    def apply(self, trace, s, st, target) -> None:
        tensor_core_tile(trace, s, st, target)

