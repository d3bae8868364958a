"""Launch geometry as lanes: the blocks of one chunk, their threads in CUDA's linear order
(threadIdx.x fastest, then y, z), and each lane's launch-variable values and warp."""
from __future__ import annotations

import numpy as np

from ...expr.extent import ceil_div
from ...kernel.launch import launch_dims
from ...kernel.nodes import Kernel, LaunchKind

WARP = 32
MAX_LANES = 1 << 16      # lanes interpreted at once (whole blocks): bounds the memory of one chunk


class Geometry:
    """Grid and block of a kernel; chunks() yields the blocks of each batch run together."""

    def __init__(self, kernel: Kernel, sizes=None):
        for a in kernel.launch:
            if a.kind not in (LaunchKind.BLOCK, LaunchKind.THREAD):
                raise ValueError(f"kernel {kernel.name}: the SIMT engine runs GPU launches only, not a "
                                 f"{a.kind.value} axis ('{a.var.name}')")
        self.kernel = kernel
        self.grid, self.block = launch_dims(kernel, sizes)
        self.threads = int(np.prod(self.block))
        self.blocks = int(np.prod(self.grid))
        self.warps_per_block = ceil_div(self.threads, WARP)

    def chunks(self):
        per = max(1, MAX_LANES // self.threads)
        for start in range(0, self.blocks, per):
            yield Chunk(self, start, min(self.blocks, start + per))


class Chunk:
    """Blocks [start, stop) as lanes: lane = local block * threads + thread id."""

    def __init__(self, g: Geometry, start: int, stop: int):
        self.geometry = g
        self.start = start
        self.nblocks = stop - start
        self.lanes = self.nblocks * g.threads
        lane = np.arange(self.lanes, dtype=np.int64)
        self.tid = lane % g.threads                 # linear thread id within the block
        self.local_block = lane // g.threads        # block index within the chunk
        bx, by, _ = g.block
        gx, gy, _ = g.grid
        blk = self.local_block + start
        self.thread_xyz = (self.tid % bx, self.tid // bx % by, self.tid // (bx * by))
        self.block_xyz = (blk % gx, blk // gx % gy, blk // (gx * gy))
        self.warp = self.local_block * g.warps_per_block + self.tid // WARP    # warp id within the chunk
        self.lane_in_warp = self.tid % WARP

    def launch_values(self):
        """Launch variable -> its value in every lane."""
        out = {}
        for a in self.geometry.kernel.launch:
            axis = "xyz".index(a.tag[-1])
            v = (self.block_xyz if a.kind is LaunchKind.BLOCK else self.thread_xyz)[axis]
            out[a.var] = v.astype(a.var.dtype.numpy)
        return out

    def where(self, lane: int) -> str:
        """'thread (x, y, z) of block (x, y, z)' for a lane."""
        t = tuple(int(c[lane]) for c in self.thread_xyz)
        b = tuple(int(c[lane]) for c in self.block_xyz)
        return f"thread {t} of block {b}"

    def thread_name(self, tid: int) -> str:
        bx, by, _ = self.geometry.block
        return str((tid % bx, tid // bx % by, tid // (bx * by)))
