"""Kernel IR statements over a chunk's lanes in lockstep: loops are uniform (their extents
do not depend on the thread), conditions narrow the active mask, stores write the active
lanes, and a barrier must be reached by all threads of a block or none."""
from __future__ import annotations

import numpy as np

from ...errors import InternalError, LoweringError
from ...loop.nodes import (Allocate, Barrier, CallPacked, For, IfThen, Let, Seq, StageNest, Stmt, Store,
                           ThreadAllReduce)
from .evaluate import Evaluator
from .intrin import execute


class Machine:
    """The state of one chunk of blocks running one kernel."""

    def __init__(self, kernel, chunk, memory, races, counters=None, sizes=None):
        self.kernel = kernel
        self.chunk = chunk
        self.memory = memory
        self.races = races
        self.counters = counters
        self.load_dtypes = {}      # Load node -> its compute dtype
        self.consts = {}           # id of a Const node -> (the node, its read-only value)
        self.loop_ints = {}        # loop variable -> its value now (a Python int)
        self.index_vars = {}       # id of a Binary node -> (the node, its loop variables or None: evaluate.py)
        self.uniform = {}          # (id of a Binary node, its loop variables' values) -> its read-only value
        self.last_mask = (None, False)      # the mask an Evaluator last asked about, whether it is all True
        self.env = dict(chunk.launch_values())
        self.env.update((v, np.asarray(sizes[v], dtype=v.dtype.numpy)) for v in kernel.sizes)

    def run(self) -> None:
        self.stmt(self.kernel.body, np.ones(self.chunk.lanes, dtype=bool))

    def stmt(self, s: Stmt, mask: np.ndarray) -> None:
        rule = getattr(self, "stmt_" + type(s).__name__, None)
        if rule is None:
            raise InternalError(f"the SIMT engine has no rule for {type(s).__name__}")
        rule(s, mask)

    def stmt_Seq(self, s: Seq, mask) -> None:
        for x in s.stmts:
            self.stmt(x, mask)

    def stmt_StageNest(self, s: StageNest, mask) -> None:
        self.stmt(s.body, mask)

    def stmt_For(self, s: For, mask) -> None:
        extent = s.extent
        if not isinstance(extent, int):
            value = np.asarray(Evaluator(self, mask, s).eval(extent))
            if value.ndim:
                raise InternalError(f"loop '{s.var.name}' has an extent that differs between threads")
            extent = int(value)
        dt = s.var.dtype.numpy
        for i in range(extent):
            self.env[s.var] = np.asarray(i, dtype=dt)
            self.loop_ints[s.var] = i
            self.stmt(s.body, mask)
        self.env.pop(s.var, None)
        self.loop_ints.pop(s.var, None)

    def stmt_IfThen(self, s: IfThen, mask) -> None:
        cond = np.broadcast_to(np.asarray(Evaluator(self, mask, s).eval(s.cond)), mask.shape)
        taken = mask & cond
        if taken.any():
            self.stmt(s.then_body, taken)
        if s.else_body is not None:
            other = mask & ~cond
            if other.any():
                self.stmt(s.else_body, other)

    def stmt_Allocate(self, s: Allocate, mask) -> None:
        self.memory.allocate(s.buffer)
        self.stmt(s.body, mask)

    def stmt_Let(self, s: Let, mask) -> None:
        self.env[s.var] = Evaluator(self, mask, s).eval(s.value)
        shadowed = self.loop_ints.pop(s.var, None)      # (a Let that rebinds a loop's variable)
        self.stmt(s.body, mask)
        self.env.pop(s.var, None)
        if shadowed is not None:
            self.loop_ints[s.var] = shadowed

    def stmt_Store(self, s: Store, mask) -> None:
        ev = Evaluator(self, mask, s)
        if s.predicate is not None:
            p = np.asarray(ev.eval(s.predicate))
            if p.ndim <= 1:      # one predicate a thread: nothing of the store runs where it is false
                mask = mask & np.broadcast_to(p, mask.shape)
                ev = Evaluator(self, mask, s)
            else:                # one a vector lane: the lanes where it is false are not written
                value, index = ev.eval(s.value), ev.eval(s.indices[0])
                self.memory.store(s.buffer, index, value, mask[:, None] & np.broadcast_to(p, np.shape(index)), s)
                return
        value = ev.eval(s.value)
        self.memory.store(s.buffer, ev.eval(s.indices[0]), value, mask, s, ev.full)

    def stmt_Barrier(self, s: Barrier, mask) -> None:
        g = self.chunk.geometry
        per_block = mask.reshape(self.chunk.nblocks, g.threads).sum(axis=1)
        partial = (per_block > 0) & (per_block < g.threads)
        if partial.any():
            b = int(np.argmax(partial))
            lane = b * g.threads + int(np.argmin(mask[b * g.threads:(b + 1) * g.threads]))
            raise LoweringError("simt barrier", f"kernel {self.kernel.name}: a barrier is reached by "
                                f"{int(per_block[b])} of the {g.threads} threads of a block ({self.chunk.where(lane)} "
                                "does not reach it); __syncthreads() in divergent code hangs or is undefined")
        self.races.barrier()
        if self.counters is not None:
            self.counters.barriers += int((per_block > 0).sum())

    def stmt_ThreadAllReduce(self, s: ThreadAllReduce, mask) -> None:
        raise InternalError("a ThreadAllReduce reached the SIMT engine: the cuda backend's "
                            "lower_thread_allreduce pass lowers it first")

    def stmt_Evaluate(self, s, mask) -> None:
        if mask.any():
            execute(self, s, mask)      # the intrinsic library's calls (intrin.py)

    def stmt_CallPacked(self, s: CallPacked, mask) -> None:
        raise LoweringError("simt", f"kernel {self.kernel.name} calls the packed function '{s.func}', "
                            "which a GPU kernel cannot run")
