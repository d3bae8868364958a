"""The shared-memory race check: between two barriers, two different threads of a block
touching one shared address, at least one of them writing, is a race.

Lockstep execution alone would hide a missing barrier (every statement ends with all
threads in step), so each shared buffer has shadow arrays, one entry per address of each
block: the thread that wrote it since the last barrier (and in which statement), and the
thread that read it (-2: several threads). A barrier clears them."""
from __future__ import annotations

from typing import Dict, List

import numpy as np

from ...errors import LoweringError
from ...expr.nodes import Buffer
from . import jit

NONE, MANY = -1, -2


class SharedMemoryRace(LoweringError):
    """Two threads of a block touched one shared address between barriers, one writing."""

    def __init__(self, stage: str, problem: str):
        super().__init__(stage, problem)


class _Shadow:
    def __init__(self, n: int):
        self.writer = np.full(n, NONE, np.int64)
        self.wstmt = np.full(n, NONE, np.int64)
        self.reader = np.full(n, NONE, np.int64)
        self.rstmt = np.full(n, NONE, np.int64)

    def clear(self):
        for a in (self.writer, self.wstmt, self.reader, self.rstmt):
            a.fill(NONE)


class RaceChecker:
    """Shadow state of the shared buffers of one chunk of blocks. Addresses are flat:
    local block * buffer size + index."""

    def __init__(self, chunk, kernel_name: str):
        self.chunk = chunk
        self.kernel = kernel_name
        self.shadows: Dict[Buffer, _Shadow] = {}
        self.statements: List[object] = []
        self._ids: Dict[int, int] = {}
        self.jit = jit.Warmup()

    def add(self, buffer: Buffer, n: int) -> None:
        self.shadows[buffer] = _Shadow(n)

    def barrier(self) -> None:
        for s in self.shadows.values():
            s.clear()

    def _stmt_id(self, stmt) -> int:
        i = self._ids.get(id(stmt))
        if i is None:
            i = self._ids[id(stmt)] = len(self.statements)
            self.statements.append(stmt)
        return i

    def read(self, buffer: Buffer, addr: np.ndarray, tid: np.ndarray, stmt) -> None:
        sh = self.shadows[buffer]
        fast = self.jit.kernels(addr.size)
        if fast is not None and fast.shared_read(sh.writer, sh.reader, sh.rstmt, addr, tid, self._stmt_id(stmt)) < 0:
            return          # (a race: nothing was recorded, and the numpy code below reports it)
        w = sh.writer[addr]
        self._check(buffer, addr, tid, (w != NONE) & (w != tid), "reads", "wrote", sh.wstmt, w, stmt)
        prior = sh.reader[addr]
        new = np.where((prior == NONE) | (prior == tid), tid, MANY)
        sh.reader[addr] = new
        sh.reader[addr[sh.reader[addr] != new]] = MANY     # two threads reading in this statement
        sh.rstmt[addr] = self._stmt_id(stmt)

    def write(self, buffer: Buffer, addr: np.ndarray, tid: np.ndarray, stmt) -> None:
        sh = self.shadows[buffer]
        fast = self.jit.kernels(addr.size)
        if fast is not None:
            found, _ = fast.shared_write(sh.writer, sh.wstmt, sh.reader, addr, tid, self._stmt_id(stmt))
            if found == 0:
                return
            if found == 3:      # two threads of this write: the writes were done, as numpy's below
                back = sh.writer[addr]
                self._check(buffer, addr, tid, back != tid, "writes", "writes", sh.wstmt, back, stmt)
        w = sh.writer[addr]
        self._check(buffer, addr, tid, (w != NONE) & (w != tid), "writes", "wrote", sh.wstmt, w, stmt)
        r = sh.reader[addr]
        self._check(buffer, addr, tid, (r != NONE) & (r != tid), "writes", "read", sh.rstmt, r, stmt)
        sh.writer[addr] = tid
        sh.wstmt[addr] = self._stmt_id(stmt)
        back = sh.writer[addr]
        self._check(buffer, addr, tid, back != tid, "writes", "writes", sh.wstmt, back, stmt)

    def _check(self, buffer, addr, tid, bad, doing, did, stmts, other, stmt) -> None:
        if not bad.any():
            return
        k = int(np.argmax(bad))
        size = buffer.size
        block = self.chunk.start + int(addr[k]) // size
        gx, gy, _ = self.chunk.geometry.grid
        block_xyz = (block % gx, block // gx % gy, block // (gx * gy))
        o = int(other[k])
        who = "several other threads" if o == MANY else f"thread {self.chunk.thread_name(o)}"
        sid = int(stmts[addr[k]])
        where = f" in `{_first_line(self.statements[sid])}`" if sid >= 0 and sid != self._stmt_id(stmt) \
            else " in the same statement"
        raise SharedMemoryRace("simt race check", f"kernel {self.kernel}: a shared-memory race on '{buffer.name}' "
                               f"at index {int(addr[k]) % size} in block {block_xyz}: thread "
                               f"{self.chunk.thread_name(int(tid[k]))} {doing} it in `{_first_line(stmt)}` while "
                               f"{who} {did} it{where}, with no barrier between them; a __syncthreads() "
                               "(barrier) is missing, or several threads write the same address")


def _first_line(stmt) -> str:
    return str(stmt).strip().splitlines()[0]


class GlobalMemoryRace(LoweringError):
    """Two threads of one kernel wrote one global address."""


class GlobalWrites:
    """Which thread of a kernel (block * threads + thread id) last wrote each global address:
    blocks never synchronise with each other, and threads of a block that both write one
    address leave whichever value lands last, so two writers are an error."""

    def __init__(self, geometry):
        self.geometry = geometry
        self.writer: Dict[Buffer, np.ndarray] = {}
        self.wstmt: Dict[Buffer, np.ndarray] = {}
        self.statements: List[object] = []
        self._ids: Dict[int, int] = {}
        self.jit = jit.Warmup()

    def write(self, buffer: Buffer, addr: np.ndarray, thread: np.ndarray, stmt, size: int) -> None:
        """size: the buffer's elements (its array's, with symbolic shapes)."""
        if buffer not in self.writer:
            self.writer[buffer] = np.full(size, NONE, np.int64)
            self.wstmt[buffer] = np.full(size, NONE, np.int64)
        writer, wstmt = self.writer[buffer], self.wstmt[buffer]
        sid = self._ids.setdefault(id(stmt), len(self.statements))
        if sid == len(self.statements):
            self.statements.append(stmt)
        fast = self.jit.kernels(addr.size)
        if fast is not None:
            if fast.global_write(writer, wstmt, addr, thread, sid) < 0:
                return
            if (writer[addr] != thread).any():       # two threads of this write (done, as numpy's below)
                self._check(buffer, addr, thread, writer[addr] != thread, writer[addr], wstmt, stmt)
        w = writer[addr]
        self._check(buffer, addr, thread, (w != NONE) & (w != thread), w, wstmt, stmt)
        writer[addr] = thread
        wstmt[addr] = sid
        back = writer[addr]
        self._check(buffer, addr, thread, back != thread, back, wstmt, stmt)

    def _name(self, thread: int) -> str:
        g = self.geometry
        block, tid = divmod(thread, g.threads)
        (bx, by, _), (gx, gy, _) = g.block, g.grid
        return f"thread {(tid % bx, tid // bx % by, tid // (bx * by))} of block " \
               f"{(block % gx, block // gx % gy, block // (gx * gy))}"

    def _check(self, buffer, addr, thread, bad, other, wstmt, stmt) -> None:
        if not bad.any():
            return
        k = int(np.argmax(bad))
        first = self.statements[int(wstmt[addr[k]])]
        where = "the same statement" if first is stmt else f"`{_first_line(first)}`"
        raise GlobalMemoryRace("simt race check", f"kernel {self.geometry.kernel.name}: {self._name(int(thread[k]))} "
                               f"writes global buffer '{buffer.name}' at index {int(addr[k])} in "
                               f"`{_first_line(stmt)}`, which {self._name(int(other[k]))} also writes in {where}; "
                               "each element a kernel writes belongs to one thread (bind every loop of the stage "
                               "to a thread axis, or guard the store so one thread writes it)")
