"""Occupancy: how many warps of a kernel an SM holds at once, out of the most it can hold,
from the block size, the shared memory a block uses and the registers a thread uses (the
figures of NVIDIA's occupancy calculator)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ...expr.extent import ceil_div

# compute capability -> (threads per SM, blocks per SM, registers per SM, shared bytes per SM,
#                        shared bytes the system reserves per block)
_SM = {70: (2048, 32, 65536, 98304, 0), 75: (1024, 16, 65536, 65536, 0),
       80: (2048, 32, 65536, 167936, 1024), 86: (1536, 16, 65536, 102400, 1024),
       87: (1536, 16, 65536, 167936, 1024), 89: (1536, 24, 65536, 102400, 1024),
       90: (2048, 32, 65536, 233472, 1024), 100: (2048, 32, 65536, 233472, 1024),
       120: (1536, 32, 65536, 102400, 1024)}
REGISTER_UNIT = 256        # registers are allocated per warp in units of 256
SHARED_UNIT = 128          # shared memory is allocated per block in units of 128 bytes
WARP = 32


@dataclass(frozen=True)
class Occupancy:
    """blocks_per_sm: resident blocks an SM holds; occupancy: their warps / the SM's most;
    limit: what bounds it ("threads", "blocks", "registers" or "shared memory")."""

    blocks_per_sm: int
    warps_per_sm: int
    max_warps_per_sm: int
    limit: str

    @property
    def occupancy(self) -> float:
        return self.warps_per_sm / self.max_warps_per_sm


def sm_limits(arch: str):
    cc = int("".join(c for c in arch[3:] if c.isdigit()))
    known = [k for k in sorted(_SM) if k <= cc]
    return _SM[known[-1] if known else min(_SM)]


def occupancy(arch: str, threads: int, shared_bytes: int, registers: Optional[int]) -> Occupancy:
    """registers None (no ptxas figure): the register limit is left out."""
    max_threads, max_blocks, regs_sm, smem_sm, reserved = sm_limits(arch)
    max_warps = max_threads // WARP
    warps = ceil_div(threads, WARP)
    limits = {"threads": max_warps // warps, "blocks": max_blocks}
    if registers:
        per_warp = ceil_div(registers * WARP, REGISTER_UNIT) * REGISTER_UNIT
        limits["registers"] = (regs_sm // per_warp) // warps
    if shared_bytes:
        per_block = ceil_div(shared_bytes + reserved, SHARED_UNIT) * SHARED_UNIT
        limits["shared memory"] = smem_sm // per_block
    limit = min(limits, key=lambda k: limits[k])
    blocks = limits[limit]
    return Occupancy(blocks, blocks * warps, max_warps, limit)
