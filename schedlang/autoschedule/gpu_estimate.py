"""Measuring a cuda candidate: timed on the GPU when there is one, otherwise an ESTIMATE.

Without a GPU (cuInit fails: this machine, CI) the candidate is still built with NVRTC
(so ptxas's registers and spills are known), run by the SIMT interpreter with
profile=True, and its time estimated from the profile by the roofline-style model below.
Records of such candidates carry "estimated": true and "timing": "estimate:<GPU>"; an
estimate is a ranking signal for the search, never a GPU timing.

The SIMT interpreter is numpy: when a kernel has more than PROFILE_LANES threads in all,
only its first blocks (PROFILE_LANES threads' worth, whole blocks) are interpreted and the
counters scaled by blocks / blocks run. Blocks of one kernel differ only at the tails of
non-dividing tiles, so the scaled figures are close for the big programs this applies to.
The interpreter's cost grows with each thread's serial work too (loop trip counts, which
sampling does not shorten): tune a smaller instance of a big program (a GEMM of 64..256)
and apply its schedule's shape to the big one, or run the search where there is a GPU.

The time model, per kernel, with the figures of the reference GPU (REFERENCE):
- the SMs with work: min(SMs, blocks); resident warps per such SM: the blocks it holds at
  once (the profile's occupancy, fewer if the grid is small) times warps per block;
- t_dram: the kernel's argument bytes once through DRAM (its compulsory traffic);
- t_l2: every 32-byte sector the warps request, through L2, at most L2_BYTES_PER_CLK per
  active SM and L2_BW in all (L1 hits are not modelled: uncoalesced and repeated reads
  cost, which is what shared-memory staging removes);
- t_lsu: warp-wide global requests plus shared-memory passes (bank conflicts add passes),
  one per clock per active SM (the SM's 32 load/store units serve one warp a clock);
- t_tensor: the kernel's mma.sync m16n8k16 (the profile counts them: 4096 flops each) at the
  tensor cores' dense float16 / bfloat16 peak of the active SMs, times MMA_SYNC_SHARE (the
  share of that peak mma.sync reaches on Hopper, whose full rate needs wgmma);
- t_flops: the kernel's share of the program's other arithmetic (its flops less the tensor
  cores') at FP32 peak of the active SMs (the share: its global and shared requests over all
  kernels' requests);
- the slowest of the five, divided by a latency-hiding factor min(1, resident warps /
  HIDING_WARPS) and by the wave efficiency (blocks / (waves * resident block slots));
- plus barriers (per block, times the waves) at BARRIER_CYCLES each, LAUNCH_S per kernel,
  and SPILL_FACTOR when ptxas reports register spills.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Dict, List

import numpy as np

from ..driver import build
from ..expr.extent import ceil_div
from ..kernel.launch import shared_bytes
from .executor import phase

PROFILE_LANES = 1 << 16     # threads interpreted per kernel, at most (whole blocks)


@dataclass(frozen=True)
class ReferenceGPU:
    """Device constants of the GPU the estimate models."""

    name: str
    sms: int
    clock_hz: float
    fp32_flops: float            # FP32 (non-tensor-core) peak, whole GPU
    tensor_flops: float          # dense float16 / bfloat16 tensor-core peak (float32 accumulate), whole GPU
    dram_bw: float               # bytes/s
    l2_bw: float                 # bytes/s, whole GPU
    l2_bytes_per_clk: int        # per SM


# NVIDIA H100 SXM5 (sm_90, the cuda target's default arch). From NVIDIA's H100 datasheet and
# "NVIDIA H100 Tensor Core GPU Architecture" whitepaper: 132 SMs, boost clock 1.98 GHz, FP32
# 67 TFLOPS (132 SMs x 128 FP32 lanes x 2 x 1.98 GHz), HBM3 3.35 TB/s. L2 bandwidth is not
# published: 2.5x DRAM (about 8.4 TB/s, in line with microbenchmarks of Hopper) and 64 B a
# clock per SM are assumptions of this model.
# Dense FP16/BF16 tensor-core peak: 989.4 TFLOPS (the datasheet's 1979 is with sparsity).
H100_SXM5 = ReferenceGPU("NVIDIA H100 SXM5", sms=132, clock_hz=1.98e9, fp32_flops=67e12, tensor_flops=989.4e12,
                         dram_bw=3.35e12, l2_bw=2.5 * 3.35e12, l2_bytes_per_clk=64)
# NVIDIA H200 SXM (the GPU lent to this project): the H100's GH100 chip, SMs, clocks and peaks
# (NVIDIA's H200 datasheet: FP32 67 TFLOPS, FP16 tensor 989 TFLOPS dense) with HBM3e at 4.8 TB/s;
# the L2 is the H100's (the same assumption as above).
H200_SXM = ReferenceGPU("NVIDIA H200 SXM", sms=132, clock_hz=1.98e9, fp32_flops=67e12, tensor_flops=989.4e12,
                        dram_bw=4.8e12, l2_bw=2.5 * 3.35e12, l2_bytes_per_clk=64)
REFERENCE = H200_SXM
MMA_FLOPS = 2 * 16 * 8 * 16   # one mma.sync m16n8k16
MMA_SYNC_SHARE = 0.6          # of the tensor peak that mma.sync reaches on Hopper (public measurements
                              # put it at about 60-70% of wgmma's; an assumption of this model)
LAUNCH_S = 2e-6               # kernel launch overhead (a typical measured figure; an assumption)
BARRIER_CYCLES = 20           # one __syncthreads() of a block (an assumption)
HIDING_WARPS = 16             # resident warps per SM that hide memory latency (25% occupancy on sm_90)
SPILL_FACTOR = 1.5            # a kernel that spills registers to local memory


def sampled_profile(mod, arrays: List[np.ndarray], max_lanes: int = PROFILE_LANES) -> Dict[str, dict]:
    """Per kernel, the SIMT profile's figures over the whole grid, interpreting at most
    max_lanes threads' worth of blocks and scaling the counters (see the module docstring)."""
    # the CUDA emulator (target/simt) loads when a GPU candidate is estimated
    from ..target.simt.geometry import Chunk, Geometry
    from ..target.simt.interpret import Machine
    from ..target.simt.memory import Memory
    from ..target.simt.occupancy import occupancy
    from ..target.simt.profile import Counters
    from ..target.simt.races import GlobalWrites, RaceChecker
    module = mod.kernel_ir
    flat = [a.reshape(-1) for a in arrays]
    globals_ = dict(zip(module.params, flat))
    for t in module.temps:
        globals_[t] = np.zeros(t.size, dtype=t.dtype.numpy)
    out = {}
    with np.errstate(all="ignore"):
        for k in module.kernels:
            g = Geometry(k)
            run = max(1, min(g.blocks, max_lanes // max(1, g.threads)))
            counters = Counters()
            chunk = Chunk(g, 0, run)
            races = RaceChecker(chunk, k.name)
            Machine(k, chunk, Memory(chunk, globals_, races, GlobalWrites(g), counters), races, counters).run()
            scale = g.blocks / run
            info = (mod.ptxas_info or {}).get(k.name)
            regs = info.registers if info is not None else None
            smem = shared_bytes(k)
            occ = occupancy(mod.target.arch, g.threads, smem, regs)
            figures = {n: int(round(getattr(counters, n) * scale)) for n in (
                "load_requests", "load_sectors", "store_requests", "store_sectors", "shared_requests",
                "shared_wavefronts", "barriers", "mma")}
            figures.update(blocks=g.blocks, threads=g.threads, shared_bytes=smem, registers=regs,
                           spill_bytes=info.spill_bytes if info is not None else 0,
                           blocks_per_sm=occ.blocks_per_sm, occupancy=occ.occupancy,
                           arg_bytes=sum(int(b.size) * b.dtype.bytes for b in k.params),
                           sampled_blocks=run)
            out[k.name] = figures
    return out


def estimate_seconds(profile: Dict[str, dict], flops: int, gpu: ReferenceGPU = REFERENCE) -> float:
    """The modelled seconds of one call of a module from its kernels' figures (the module
    docstring states the model)."""
    work = {k: p["load_requests"] + p["store_requests"] + p["shared_requests"] for k, p in profile.items()}
    total_work = sum(work.values()) or 1
    other_flops = max(0, flops - MMA_FLOPS * sum(p.get("mma", 0) for p in profile.values()))
    total = 0.0
    for name, p in profile.items():
        blocks, warps = p["blocks"], ceil_div(p["threads"], 32)
        active = min(gpu.sms, blocks)
        per_sm = max(1, min(p["blocks_per_sm"], ceil_div(blocks, active)))
        waves = ceil_div(blocks, active * per_sm)
        wave_eff = blocks / (waves * active * per_sm)
        hiding = min(1.0, per_sm * warps / HIDING_WARPS)
        sectors = p["load_sectors"] + p["store_sectors"]
        t_dram = p["arg_bytes"] / gpu.dram_bw
        t_l2 = sectors * 32 / min(gpu.l2_bw, active * gpu.l2_bytes_per_clk * gpu.clock_hz)
        t_lsu = (p["load_requests"] + p["store_requests"] + p["shared_wavefronts"]) / (active * gpu.clock_hz)
        t_tensor = p.get("mma", 0) * MMA_FLOPS / (gpu.tensor_flops * MMA_SYNC_SHARE * active / gpu.sms)
        t_flops = other_flops * work[name] / total_work / (gpu.fp32_flops * active / gpu.sms)
        body = max(t_dram, t_l2, t_lsu, t_tensor, t_flops) / (hiding * wave_eff)
        t_bar = p["barriers"] / max(1, blocks) * waves * BARRIER_CYCLES / gpu.clock_hz
        t = LAUNCH_S + body + t_bar
        total += t * (SPILL_FACTOR if p.get("spill_bytes") else 1.0)
    return total


def host_tensor(a: np.ndarray):
    """The CPU torch tensor of a numpy array, sharing its memory: an ml_dtypes bfloat16 array
    (which torch.from_numpy refuses) through its bits, a uint16 view read as torch.bfloat16."""
    import torch
    a = np.ascontiguousarray(a)
    if a.dtype.name == "bfloat16":
        return torch.from_numpy(a.view(np.uint16)).view(torch.bfloat16)
    return torch.from_numpy(a)


def time_on_gpu(mod, arrays: List[np.ndarray], number: int, repeat: int) -> List[float]:
    """Seconds per call on the GPU (CUDA events around `number` calls, `repeat` times), after a warm-up."""
    import torch
    tensors = [host_tensor(a).cuda() for a in arrays]
    mod(*tensors)
    torch.cuda.synchronize()
    phase("run")
    times = []
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(number):
            mod(*tensors)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3 / number)
    return times


def run_cuda_candidate(task, s, arrays: List[np.ndarray], number: int, repeat: int) -> dict:
    """What a measurement worker returns for a cuda candidate: GPU timings, or without a GPU
    the estimate (with "estimated": True and the profile figures)."""
    from ..target.cuda.gpu import gpu_problem      # CUDA's bindings (and torch) load only here
    start = time.perf_counter()
    mod = build(s, task.args, target=task.target, cache=False)
    build_s = time.perf_counter() - start
    if gpu_problem() is None:
        load = os.getloadavg()
        times = time_on_gpu(mod, arrays, number, repeat)
        return {"times": times, "build_s": build_s, "load": list(load), "estimated": False, "timing": "gpu"}
    load = os.getloadavg()      # no phase("run"): nothing is timed, so no timing lock or run timeout
    profile = sampled_profile(mod, arrays)
    t = estimate_seconds(profile, task.flops)
    return {"times": [t], "build_s": build_s, "load": list(load), "estimated": True,
            "timing": f"estimate:{REFERENCE.name}", "profile": profile}


def profile_summary(profile: Dict[str, dict]) -> Dict[str, float]:
    """The module's figures pooled over its kernels (for the cost model's features)."""
    if not profile:
        return {}
    ps = list(profile.values())
    req = sum(p["load_requests"] + p["store_requests"] for p in ps)
    sec = sum(p["load_sectors"] + p["store_sectors"] for p in ps)
    sh = sum(p["shared_requests"] for p in ps)
    wf = sum(p["shared_wavefronts"] for p in ps)
    return {"global_requests": float(req), "global_sectors": float(sec),
            "sectors_per_request": sec / req if req else 0.0,
            "shared_requests": float(sh), "conflict_degree": wf / sh if sh else 0.0,
            "barriers_per_block": max(p["barriers"] / max(1, p["blocks"]) for p in ps),
            "registers": float(max((p["registers"] or 0) for p in ps)),
            "spill_bytes": float(sum(p["spill_bytes"] for p in ps)),
            "occupancy": min(p["occupancy"] for p in ps)}


PROFILE_FEATURES = ("global_requests", "global_sectors", "sectors_per_request", "shared_requests",
                    "conflict_degree", "barriers_per_block", "registers", "spill_bytes", "occupancy")
