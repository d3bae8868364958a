"""The SIMT engine's semantics of the cuda intrinsic library's calls: tensor cores (target/
cuda/intrin/mma.py: ldmatrix, mma.sync m16n8k16, wmma 16x16x16) with the hardware's per-lane
fragment layouts, the chunk's lanes in lockstep, grouped in warps of 32, so each lane's
fragment registers are gathered from the other lanes' as ldmatrix and mma.sync do; and
asynchronous copies (copy.py: a copy reads its source when issued and writes shared memory
at the wait_group that covers its group, as the shim does). Memory goes through
Memory.load/store: bounds, the shared-memory race check and the profile's counters see
ldmatrix's row reads by the lanes that address them.

A fragment buffer (scope warp or wmma.*) holds N/32 elements a lane (Memory allocates so); a call's
fragment pointer is an element index into it.
"""
from __future__ import annotations

import numpy as np

from ...errors import LoweringError
from ...tensor.intrin import EXTERN_PREFIX
from ...tensor.intrin_calls import ADDRESS_OF
from .evaluate import Evaluator, compute_dtype

WARP = 32
_PER_THREAD = ("cp_async", "commit", "wait")     # the calls that are not warp-collective
_G = np.arange(WARP) // 4           # groupID of each lane
_T = np.arange(WARP) % 4            # thread in group


def execute(machine, s, mask) -> None:
    """Run the Evaluate statement s (a library call); LoweringError for a call without SIMT semantics."""
    call = s.value
    name = call.name[len(EXTERN_PREFIX):] if call.name.startswith(EXTERN_PREFIX) else call.name
    rule = _rule(name)
    if rule is None:
        raise LoweringError("simt", f"kernel {machine.kernel.name} calls '{s.value}' (a tensor intrinsic's device "
                            "function), which the SIMT engine does not execute yet; emulate with engine='shim'")
    _Call(machine, s, mask, name, collective=rule[0] not in _PER_THREAD).run(rule)


def _rule(name: str):
    parts = name.split("_")
    if name.startswith("sl_ldmatrix_x"):
        return ("ldmatrix", int(parts[2][1:]), name.endswith("_trans"))
    if name.startswith("sl_mma_load_"):
        return ("load", parts[3] if parts[3] in ("a", "b") else None, "_".join(parts[3:-1]))
    if name.startswith("sl_mma_m16n8k16_"):
        return ("mma", parts[3])               # the accumulator: f32 or f16
    if name.startswith("sl_mma_store_c_"):
        return ("store",)
    if name.startswith("sl_mma_fill_c_"):
        return ("fill",)
    if name.startswith("sl_wmma_load_"):
        return ("wmma_load", parts[3])
    if name.startswith("sl_wmma_mma_"):
        return ("wmma_mma",)
    if name.startswith("sl_wmma_store_"):
        return ("wmma_store",)
    if name.startswith("sl_wmma_fill_"):
        return ("fill", 8)
    if name.startswith("sl_cp_async_16_"):
        return ("cp_async",)
    if name == "sl_cp_async_commit":
        return ("commit",)
    if name.startswith("sl_cp_async_wait_"):
        return ("wait", int(parts[-1]))
    return None


class _Call:
    """One warp-collective call over the chunk's lanes."""

    def __init__(self, machine, s, mask, name, collective=True):
        self.machine, self.s, self.mask, self.name = machine, s, mask, name
        self.ev = Evaluator(machine, mask, s)
        self.memory = machine.memory
        chunk = machine.chunk
        self.lanes = chunk.lanes
        self.lane = chunk.lane_in_warp
        if not collective:
            return
        if chunk.geometry.threads % WARP:
            raise LoweringError("simt", f"kernel {machine.kernel.name}: {name} is a warp-collective call, but a "
                                f"block has {chunk.geometry.threads} threads (not whole warps)")
        warps = mask.reshape(-1, WARP)
        partial = warps.any(axis=1) & ~warps.all(axis=1)
        if partial.any():
            lane = int(np.argmax(partial)) * WARP + int(np.argmin(warps[int(np.argmax(partial))]))
            raise LoweringError("simt", f"kernel {machine.kernel.name}: {name} is a warp-collective call "
                                f"(.sync.aligned) that only part of a warp reaches ({chunk.where(lane)} does not): "
                                "undefined on a GPU")

    def pointer(self, e):
        """(buffer, per-lane element index) of an address_of argument."""
        if not (hasattr(e, "name") and e.name == ADDRESS_OF):
            raise LoweringError("simt", f"{self.name}: expected an element's address, got '{e}'")
        load = e.args[0]
        return load.buffer, np.broadcast_to(np.asarray(self.ev.eval(load.indices[0]), np.int64), (self.lanes,))

    def value(self, e):
        return np.broadcast_to(np.asarray(self.ev.eval(e)), (self.lanes,))

    def load(self, ptr, count: int, mask=None) -> np.ndarray:
        b, base = ptr
        return self.memory.load(b, base[:, None] + np.arange(count), self.mask if mask is None else mask, self.s,
                                np.dtype(np.float32))

    def store(self, ptr, values: np.ndarray, index=None) -> None:
        b, base = ptr
        index = base[:, None] + np.arange(values.shape[1]) if index is None else index
        self.memory.store(b, index, values, self.mask, self.s)

    def warps(self, x: np.ndarray) -> np.ndarray:
        return x.reshape(-1, WARP, *x.shape[1:])

    def run(self, rule) -> None:
        getattr(self, "rule_" + rule[0])(*rule[1:])

    # ldmatrix .m8n8.b16: lane 8m + r addresses row r of matrix m; register m of lane 4g + t holds
    # row g, columns 2t, 2t+1 of matrix m (.trans: rows 2t, 2t+1 of column g).
    def ldmatrix(self, frag, row, count: int, trans: bool) -> None:
        rows = self.warps(self.load(row, 8, self.mask & (self.lane < 8 * count)))    # (warps, 32, 8)
        out = np.empty((rows.shape[0], WARP, 2 * count), np.float32)
        for m in range(count):
            for i in range(2):
                if trans:
                    out[:, :, 2 * m + i] = rows[:, 8 * m + 2 * _T + i, _G]
                else:
                    out[:, :, 2 * m + i] = rows[:, 8 * m + _G, 2 * _T + i]
        self.store(frag, out.reshape(self.lanes, -1))

    def rule_ldmatrix(self, count: int, trans: bool) -> None:
        frag, row = (self.pointer(a) for a in self.s.value.args)
        self.ldmatrix(frag, row, count, trans)

    def rule_load(self, which, layout) -> None:
        frag, (b, tile), ld = self.pointer(self.s.value.args[0]), self.pointer(self.s.value.args[1]), \
            self.value(self.s.value.args[2]).astype(np.int64)
        lane = self.lane
        if which == "a":           # mma.py's sl_mma_load_a: ldmatrix.x4, rows (l % 16), columns (l / 16) * 8
            self.ldmatrix(frag, (b, tile + (lane % 16) * ld + (lane // 16) * 8), 4, False)
        elif layout == "b_kn":     # ldmatrix.x2.trans, rows l % 16
            self.ldmatrix(frag, (b, tile + (lane % 16) * ld), 2, True)
        elif layout == "b_kn_x4":  # ldmatrix.x4.trans, rows l % 16, columns (l / 16) * 8
            self.ldmatrix(frag, (b, tile + (lane % 16) * ld + (lane // 16) * 8), 4, True)
        elif layout == "b_nk":     # ldmatrix.x2, rows l % 8, columns (l / 8 % 2) * 8
            self.ldmatrix(frag, (b, tile + (lane % 8) * ld + (lane // 8 % 2) * 8), 2, False)
        else:                      # b_nk_x4: ldmatrix.x4, rows l % 8 + (l / 16) * 8, columns (l / 8 % 2) * 8
            self.ldmatrix(frag, (b, tile + (lane % 8 + lane // 16 * 8) * ld + (lane // 8 % 2) * 8), 4, False)

    def rule_mma(self, acc: str) -> None:
        self.mma(*(self.pointer(x) for x in self.s.value.args), acc)

    def mma(self, d, a, b, acc: str) -> None:
        """d (16x8) += a (16x16) b (16x8): lane 4g + t holds a0,a1 (g, 2t+i), a2,a3 (g+8, 2t+i),
        a4,a5 (g, 2t+8+i), a6,a7 (g+8, 2t+8+i); b0,b1 (k 2t+i, n g), b2,b3 (k 2t+8+i, n g);
        c0,c1 (g, 2t+i), c2,c3 (g+8, 2t+i). Summed in float32 in k order, as the shim does."""
        counters = self.memory.counters
        if counters is not None:
            counters.mma += int(self.warps(self.mask).any(axis=1).sum())
        fa, fb, fd = (self.warps(self.load(p, n)) for p, n in ((a, 8), (b, 4), (d, 4)))
        A = fa[:, _A_LANE, _A_SLOT]           # (warps, 16, 16)
        B = fb[:, _B_LANE, _B_SLOT]           # (warps, 16, 8)
        acc_ = fd[:, _C_LANE, _C_SLOT]        # (warps, 16, 8)
        for k in range(16):
            acc_ = acc_ + A[:, :, k, None] * B[:, None, k, :]
        out = acc_[:, _D_ROW, _D_COL]          # (warps, 32, 4)
        if acc == "f16":
            out = out.astype(np.float16)
        self.store(d, out.reshape(self.lanes, 4).astype(np.float32))

    def rule_store(self) -> None:
        dst, ld, frag = self.pointer(self.s.value.args[0]), self.value(self.s.value.args[1]).astype(np.int64), \
            self.pointer(self.s.value.args[2])
        values = self.load(frag, 4)
        i = np.arange(4)
        offset = (self.lane[:, None] // 4 + 8 * (i // 2)) * ld[:, None] + 2 * (self.lane[:, None] % 4) + i % 2
        self.store(dst, values, dst[1][:, None] + offset)

    def rule_fill(self, count: int = 4) -> None:
        frag = self.pointer(self.s.value.args[0])
        v = self.value(self.s.value.args[1]).astype(np.float32)
        self.store(frag, np.repeat(v[:, None], count, axis=1))

    # wmma 16x16x16 (mma.py): a lane's 8 elements of a tile at the m16n8k16 layouts' places
    def wmma_offsets(self, kind: str, ldm: np.ndarray) -> np.ndarray:
        row, col = _WMMA[kind]
        lane = self.lane
        return row[lane] * ldm[:, None] + col[lane]

    def rule_wmma_load(self, kind: str) -> None:
        frag, (b, base) = self.pointer(self.s.value.args[0]), self.pointer(self.s.value.args[1])
        ldm = self.value(self.s.value.args[2]).astype(np.int64)
        values = self.memory.load(b, base[:, None] + self.wmma_offsets(kind, ldm), self.mask, self.s,
                                  compute_dtype(b.dtype))
        self.store(frag, values)

    def rule_wmma_store(self) -> None:
        (b, base), frag = self.pointer(self.s.value.args[0]), self.pointer(self.s.value.args[2])
        ldm = self.value(self.s.value.args[1]).astype(np.int64)
        self.store((b, base), self.load(frag, 8), base[:, None] + self.wmma_offsets("c", ldm))

    def rule_wmma_mma(self) -> None:
        (db, d), a, (bb, b) = (self.pointer(x) for x in self.s.value.args)
        self.mma((db, d), a, (bb, b), "f32")              # columns 0-7
        self.mma((db, d + 4), a, (bb, b + 4), "f32")      # columns 8-15

    # cp.async: the source read now, shared memory written at the wait_group covering its group
    def rule_cp_async(self) -> None:
        (dst, index), (src, src_index) = (self.pointer(a) for a in self.s.value.args)
        n = 16 // dst.dtype.bytes
        values = self.memory.load(src, src_index[:, None] + np.arange(n), self.mask, self.s,
                                  compute_dtype(src.dtype))
        state = _async(self.machine)
        state.pending.append((state.committed.copy(), dst, index[:, None] + np.arange(n), values, self.mask.copy()))

    def rule_commit(self) -> None:
        _async(self.machine).committed += self.mask

    def rule_wait(self, n: int) -> None:
        state = _async(self.machine)
        still = []
        for group, dst, index, values, lanes in state.pending:
            land = lanes & self.mask & (group + n < state.committed)
            if land.any():
                self.memory.store(dst, index, values, land, self.s)
            lanes = lanes & ~land
            if lanes.any():
                still.append((group, dst, index, values, lanes))
        state.pending = still


def _layouts():
    """Index tables: which lane and register slot hold each element of A, B and C."""
    r, c = np.meshgrid(np.arange(16), np.arange(16), indexing="ij")
    a_lane, a_slot = 4 * (r % 8) + (c % 8) // 2, c % 2 + 2 * (r // 8) + 4 * (c // 8)
    k, n = np.meshgrid(np.arange(16), np.arange(8), indexing="ij")
    b_lane, b_slot = 4 * n + (k % 8) // 2, k % 2 + 2 * (k // 8)
    r, c = np.meshgrid(np.arange(16), np.arange(8), indexing="ij")
    c_lane, c_slot = 4 * (r % 8) + (c // 2), c % 2 + 2 * (r // 8)
    i = np.arange(4)
    d_row, d_col = _G[:, None] + 8 * (i // 2), 2 * _T[:, None] + i % 2     # (32, 4)
    return a_lane, a_slot, b_lane, b_slot, c_lane, c_slot, d_row, d_col


_A_LANE, _A_SLOT, _B_LANE, _B_SLOT, _C_LANE, _C_SLOT, _D_ROW, _D_COL = _layouts()
_I = np.arange(8)
_WMMA = {"a": (_G[:, None] + 8 * (_I // 2 % 2), 2 * _T[:, None] + _I % 2 + 8 * (_I // 4)),      # (32, 8) each
         "b": (2 * _T[:, None] + _I % 2 + 8 * (_I // 2 % 2), _G[:, None] + 8 * (_I // 4))}
_WMMA["c"] = _WMMA["a"]


class _AsyncCopies:
    """A chunk's cp.async copies in flight: (group, buffer, indices, values, lanes) each, and
    each lane's count of committed groups."""

    def __init__(self, lanes: int):
        self.pending = []
        self.committed = np.zeros(lanes, np.int64)


def _async(machine) -> _AsyncCopies:
    state = getattr(machine, "async_copies", None)
    if state is None:
        state = machine.async_copies = _AsyncCopies(machine.chunk.lanes)
    return state

