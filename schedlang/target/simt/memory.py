"""The memory of one chunk of blocks: global buffers (the caller's arrays and the module's
temporaries, flat), shared buffers (one copy per block) and local buffers (one per thread).
Every access is checked against its buffer; shared accesses go through the race check and,
when profiling, every global and shared access is counted per warp."""
from __future__ import annotations

from typing import Dict, Optional

import numpy as np

from ...expr.nodes import Buffer
from ...schedule.placement import FRAGMENT_SCOPES
from .races import RaceChecker


def _storage_dtype(b: Buffer) -> np.dtype:
    return b.dtype.numpy


class Memory:
    # A local buffer read or written at an index every thread shares (a register tile's
    # constant index, the common case) is one column of its (lanes, size) view; False: every
    # access takes the general path (the reference the fast path is tested against).
    fast_local = True

    def __init__(self, chunk, globals_: Dict[Buffer, np.ndarray], races: RaceChecker, global_writes=None,
                 counters=None):
        self.chunk = chunk
        self.global_writes = global_writes
        self.globals = globals_
        self.shared: Dict[Buffer, np.ndarray] = {}
        self.local: Dict[Buffer, np.ndarray] = {}
        self.sizes: Dict[Buffer, int] = {}
        self.local_rows: Dict[Buffer, np.ndarray] = {}      # local buffer -> its (lanes, size) view
        self.lanes = np.arange(chunk.lanes)
        self.races = races
        self.counters = counters

    def allocate(self, b: Buffer) -> None:
        """Static storage, as CUDA's: an allocation reached again (in a loop) keeps its contents.
        Floats start as NaN, so that reading memory nobody wrote shows in the results."""
        if b in self.shared or b in self.local:
            return
        rows = self.chunk.nblocks if b.scope == "shared" else self.chunk.lanes
        fill = np.nan if b.dtype.is_float else 0
        data = np.full(rows * self._size(b), fill, dtype=_storage_dtype(b))
        if b.scope == "shared":
            self.shared[b] = data
            self.races.add(b, data.size)
        else:
            # element-major (address index * lanes + lane): a register's column over the lanes is
            # contiguous, not one cache line a lane (a register-tiled GEMM reads one per statement)
            self.local[b] = data
            if b.scope == "local":      # (not a fragment: a warp's lanes hold its elements between them)
                self.local_rows[b] = data.reshape(self._size(b), rows).T

    def _address(self, b: Buffer, index: np.ndarray, mask: np.ndarray, stmt):
        """(storage, flat addresses, lanes, indices, active) of the active elements (idx.size ==
        active.size when every element is active); IndexError when out of bounds."""
        index = np.asarray(index)
        if index.dtype != np.int64:
            index = index.astype(np.int64)
        if index.ndim == 0:
            index = np.full(self.chunk.lanes, index, np.int64)
        if index.ndim == 1 and mask.ndim == 1:          # one element a thread: no broadcasting needed
            active = mask
            if mask.all():
                idx, lane = index, self.lanes
            else:
                idx, lane = index[mask], self.lanes[mask]
        else:
            extra = (1,) * (index.ndim - 1)       # a vector access: (lanes, vector lanes)
            lanes = np.broadcast_to(self.lanes.reshape((-1,) + extra), index.shape)
            active = np.broadcast_to(mask.reshape(mask.shape + (1,) * (index.ndim - mask.ndim)), index.shape)
            idx, lane = index[active], lanes[active]
        size = self._global(b).size if b.scope == "global" else self._size(b)   # (symbolic shapes: the array's)
        if idx.size and (idx.min() < 0 or idx.max() >= size):
            bad = (idx < 0) | (idx >= size)
            k = int(np.argmax(bad))
            raise IndexError(f"kernel {self.races.kernel}: `{_first_line(stmt)}` accesses {b.scope} buffer "
                             f"'{b.name}' at index {int(idx[k])}, outside its {size} elements, in "
                             f"{self.chunk.where(int(lane[k]))}")
        if b.scope == "global":
            data, addr = self._global(b), idx
        elif b.scope == "shared":
            data, addr = self.shared[b], self.chunk.local_block[lane] * size + idx
        else:
            data, addr = self.local[b], idx * self.chunk.lanes + lane
        return data, addr, lane, idx, active

    def _size(self, b: Buffer) -> int:
        """A shared or local buffer's elements (Buffer.size is recomputed on each access)."""
        size = self.sizes.get(b)
        if size is None:      # a warp-scope buffer (fragments): each lane holds 1/32 (simt/intrin.py)
            size = self.sizes[b] = b.size // 32 if b.scope in FRAGMENT_SCOPES else b.size
        return size

    def _global(self, b: Buffer) -> np.ndarray:
        data = self.globals.get(b)
        if data is None:
            raise KeyError(f"kernel {self.races.kernel}: global buffer '{b.name}' is neither an argument nor a "
                           "temporary of the module")
        return data

    def _local_column(self, b: Buffer, index) -> Optional[np.ndarray]:
        """The (lanes,) column of local buffer b at a uniform index inside it, or None (the general path)."""
        rows = self.local_rows.get(b) if self.fast_local else None
        if rows is None or (index.ndim if type(index) is np.ndarray else np.ndim(index)):
            return None
        i = int(index)
        return rows[:, i] if 0 <= i < rows.shape[1] else None

    def load(self, b: Buffer, index, mask: np.ndarray, stmt, dtype: np.dtype, full: Optional[bool] = None
             ) -> np.ndarray:
        """b[index] in the active lanes (0 elsewhere), converted to dtype; full: whether every lane
        of mask is active, when the caller knows."""
        column = self._local_column(b, index)
        if column is not None:
            if mask.all() if full is None else full:
                return column.astype(dtype)
            out = np.zeros(mask.shape, dtype=dtype)
            out[mask] = column[mask]
            return out
        data, addr, lane, idx, active = self._address(b, index, mask, stmt)
        if b.scope == "shared":
            self.races.read(b, addr, self.chunk.tid[lane], stmt)
        self._count(b, lane, idx, False)
        if idx.size == active.size:         # every element active
            return data[addr].astype(dtype, copy=False).reshape(active.shape)
        out = np.zeros(active.shape, dtype=dtype)
        out[active] = data[addr]
        return out

    def store(self, b: Buffer, index, value, mask: np.ndarray, stmt, full: Optional[bool] = None) -> None:
        """b[index] = value in the active lanes; full as load's."""
        column = self._local_column(b, index)
        if column is not None and np.ndim(value) <= 1:
            if mask.all() if full is None else full:
                column[...] = value         # (numpy's assignment broadcasts and converts, as astype)
            else:
                value = np.asarray(value)
                column[mask] = np.broadcast_to(value, mask.shape)[mask] if value.ndim else value
            return
        data, addr, lane, idx, active = self._address(b, index, mask, stmt)
        if b.scope == "shared":
            self.races.write(b, addr, self.chunk.tid[lane], stmt)
        elif b.scope == "global" and self.global_writes is not None:
            c = self.chunk
            self.global_writes.write(b, addr, (c.start + c.local_block[lane]) * c.geometry.threads + c.tid[lane], stmt,
                                    data.size)
        self._count(b, lane, idx, True)
        value = np.asarray(value)
        if idx.size == active.size:         # every element active
            value = np.broadcast_to(value, active.shape).reshape(-1)
        else:
            value = np.broadcast_to(value, active.shape)[active]
        data[addr] = value.astype(data.dtype, copy=False)

    def _count(self, b: Buffer, lane: np.ndarray, idx: np.ndarray, store: bool) -> None:
        if self.counters is not None and b.scope in ("global", "shared") and lane.size:
            self.counters.access(b, self.chunk.warp[lane], idx, store)


def _first_line(stmt) -> str:
    return str(stmt).strip().splitlines()[0]
