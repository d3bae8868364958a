"""What profile=True reports per kernel: global memory coalescing (32-byte sectors per warp
request), shared-memory bank conflicts (32 banks of 4 bytes), barriers and occupancy."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Optional, Tuple

import numpy as np

from ...expr.extent import ceil_div
from ...expr.nodes import Buffer
from . import jit
from .occupancy import Occupancy

SECTOR = 32        # bytes of a global memory sector
BANKS, BANK_BYTES = 32, 4


class Counters:
    """Per-warp access counts of one kernel, summed over its blocks."""

    def __init__(self):
        self.load_requests = self.load_sectors = 0
        self.store_requests = self.store_sectors = 0
        self.shared_requests = 0
        self.shared_wavefronts = 0
        self.shared_ideal_wavefronts = 0
        self.conflicts: Dict[str, list] = {}     # shared buffer name -> [conflicts on loads, on stores]
        self.barriers = 0
        self.mma = 0          # warp-wide mma.sync m16n8k16 executed (a wmma mma_sync is two)
        self.jit = jit.Warmup()

    def access(self, b: Buffer, warp: np.ndarray, index: np.ndarray, store: bool) -> None:
        """One warp-wide access of b: warp and element index of each active lane (element)."""
        byte = index * b.dtype.bytes
        fast = self.jit.kernels(warp.size)
        if fast is not None:
            self._access_jit(fast, b, warp, byte, store)
            return
        if b.scope == "global":
            w, _ = distinct_pairs(warp, byte // SECTOR)
            warps = _runs(w)
            if store:
                self.store_requests += warps
                self.store_sectors += w.size
            else:
                self.load_requests += warps
                self.load_sectors += w.size
            return
        # shared: lanes reading one 4-byte word share it (a broadcast); distinct words in one bank serialise
        w, word = distinct_pairs(warp, byte // BANK_BYTES)
        per_bank = np.bincount(w * BANKS + word % BANKS, minlength=(int(w[-1]) + 1) * BANKS).reshape(-1, BANKS)
        passes = int(per_bank.max(axis=1).sum())
        # a pass serves at most one word per bank: a warp's float4 access (128 distinct words) needs
        # four passes however its words fall, so only the passes beyond that are conflicts
        ideal = int(ceil_div(per_bank.sum(axis=1), BANKS).sum())
        self.shared_requests += _runs(w)
        self.shared_wavefronts += passes
        self.shared_ideal_wavefronts += ideal
        self.conflicts.setdefault(b.name, [0, 0])[int(store)] += passes - ideal

    def _access_jit(self, fast, b: Buffer, warp: np.ndarray, byte: np.ndarray, store: bool) -> None:
        """access()'s counts by the numba kernels (jit.py)."""
        if b.scope == "global":
            requests, sectors = fast.global_counts(warp, byte // SECTOR, _LOW)
            if store:
                self.store_requests += requests
                self.store_sectors += sectors
            else:
                self.load_requests += requests
                self.load_sectors += sectors
            return
        requests, passes, ideal = fast.shared_counts(warp, byte // BANK_BYTES, _LOW, BANKS)
        self.shared_requests += requests
        self.shared_wavefronts += passes
        self.shared_ideal_wavefronts += ideal
        self.conflicts.setdefault(b.name, [0, 0])[int(store)] += passes - ideal


_LOW = 40      # a pair's key: the warp (from the lowest of the access) above bit 40, the unit below


def distinct_pairs(warp: np.ndarray, unit: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """The distinct (warp, unit) pairs of an access (units: sectors or words, >= 0; at least one
    lane), sorted: (warps counted from the lowest one, units). One sort of one key each: np.unique
    took most of a profiled run (it was called three times an access)."""
    key = np.sort(((warp - warp.min()) << _LOW) | unit)
    keep = np.empty(key.size, dtype=bool)
    keep[0] = True
    np.not_equal(key[1:], key[:-1], out=keep[1:])
    key = key[keep]
    return key >> _LOW, key & ((1 << _LOW) - 1)


def _runs(sorted_values: np.ndarray) -> int:
    """How many distinct values a sorted array holds."""
    return 1 + int(np.count_nonzero(sorted_values[1:] != sorted_values[:-1]))


@dataclass(frozen=True)
class KernelProfile:
    """The figures of one kernel over its whole grid.

    load_requests / load_sectors (store_...): warp-wide global loads (stores), and the 32-byte
    sectors they touch (4 per request is a coalesced float32 access, 32 a fully scattered one);
    shared_requests / shared_wavefronts: warp-wide shared accesses and the bank passes they need;
    shared_ideal_wavefronts: the passes they would need without bank conflicts (one per 32
    distinct words: one for a float access, four for a float4 access); conflicts_by_buffer:
    shared buffer name -> its bank conflicts (on loads, on stores); barriers: __syncthreads()
    executed, summed over blocks; registers: ptxas's count per thread (None without ptxas);
    occupancy from the block size, shared memory and registers."""

    kernel: str
    blocks: int
    threads_per_block: int
    load_requests: int
    load_sectors: int
    store_requests: int
    store_sectors: int
    shared_requests: int
    shared_wavefronts: int
    shared_ideal_wavefronts: int
    barriers: int
    shared_bytes: int
    registers: Optional[int]
    occupancy: Occupancy
    conflicts_by_buffer: Dict[str, Tuple[int, int]] = field(default_factory=dict, compare=False)

    @property
    def global_requests(self) -> int:
        return self.load_requests + self.store_requests

    @property
    def sectors_per_request(self) -> float:
        """32-byte sectors per warp-wide global access, loads and stores together."""
        return (self.load_sectors + self.store_sectors) / self.global_requests if self.global_requests else 0.0

    @property
    def sectors_per_load(self) -> float:
        return self.load_sectors / self.load_requests if self.load_requests else 0.0

    @property
    def sectors_per_store(self) -> float:
        return self.store_sectors / self.store_requests if self.store_requests else 0.0

    @property
    def bank_conflicts(self) -> int:
        """Extra shared-memory passes caused by bank conflicts (beyond the ideal passes)."""
        return self.shared_wavefronts - self.shared_ideal_wavefronts

    @property
    def conflict_degree(self) -> float:
        """Bank passes over the conflict-free passes (1.0: conflict-free, 2.0: two-way conflicts)."""
        return self.shared_wavefronts / self.shared_ideal_wavefronts if self.shared_ideal_wavefronts else 0.0

    @property
    def passes_per_request(self) -> float:
        """Bank passes per warp-wide shared access (1.0 for conflict-free float accesses, 4.0 for float4)."""
        return self.shared_wavefronts / self.shared_requests if self.shared_requests else 0.0

    def __str__(self) -> str:
        regs = "?" if self.registers is None else self.registers
        return (f"{self.kernel}: {self.blocks} blocks x {self.threads_per_block} threads; global sectors/request "
                f"{self.sectors_per_load:.2f} load, {self.sectors_per_store:.2f} store ({self.global_requests} "
                f"requests); shared "
                f"{self.passes_per_request:.2f} passes/request ({self.bank_conflicts} bank conflicts); "
                f"{self.barriers} barriers; {self.shared_bytes} B shared, {regs} registers; occupancy "
                f"{self.occupancy.occupancy:.0%} ({self.occupancy.blocks_per_sm} blocks/SM, limited by "
                f"{self.occupancy.limit})")
