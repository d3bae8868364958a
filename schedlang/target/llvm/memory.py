"""Loads and stores: scalar, contiguous vector, masked, gather/scatter — and, when the
target asks for bounds checks, a check of every lane against the buffer's size.

A checked access that would leave its buffer is redirected to a scratch area (or
masked off), counted in the call's status record (status.py), and reported by the module after the call as an IndexError
naming the buffer and the index: a debugging mode that turns an out-of-bounds access
into an error instead of a crash or silent corruption.
"""
from __future__ import annotations

from typing import Optional, Tuple

from ...errors import InternalError
from ...expr.nodes import Buffer, Const, Expr, Load, Ramp
from ...loop.nodes import Store
from .status import STATUS
from .streaming import METADATA, streaming_alignment
from .strided import load_stride, load_strided
from .types import compute_type, memory_type, scalar_memory, suffix

SCRATCH_BYTES = 4096
# Where a bad access goes instead; the count and the first bad index go to the call's status record.
OOB_GLOBALS = (f"@sl.oob.scratch = internal global [{SCRATCH_BYTES} x i8] zeroinitializer, align 64",)


class MemoryEmitter:
    """Mixin for FunctionEmitter: needs self.fn, self.ptrs, self.module, self.expr."""

    @staticmethod
    def contiguous(index: Expr) -> bool:
        return isinstance(index, Ramp) and isinstance(index.stride, Const) and index.stride.value == 1

    def index64(self, index: Expr) -> str:
        self.in_index = True          # index arithmetic: nsw where loop ranges prove it
        try:
            i = self.expr(index)
        finally:
            self.in_index = False
        if index.dtype.bits == 64:
            return i
        lanes = index.dtype.lanes
        return self.fn.emit(f"sext {compute_type(index.dtype)} {i} to {'i64' if lanes == 1 else f'<{lanes} x i64>'}", "idx")

    def pointer(self, buffer: Buffer, index: Expr) -> Tuple[str, bool]:
        """(pointer, is_vector_of_pointers): the element address, the first lane's address for a
        contiguous ramp, or one address per lane for any other vector index."""
        mem = scalar_memory(buffer.dtype)
        base = self.ptrs[buffer]
        if index.dtype.lanes == 1 or self.contiguous(index):
            scalar = index.base if isinstance(index, Ramp) else index
            return self.fn.emit(f"getelementptr inbounds {mem}, ptr {base}, i64 {self.index64(scalar)}", "addr"), False
        lanes = index.dtype.lanes
        return self.fn.emit(f"getelementptr inbounds {mem}, ptr {base}, <{lanes} x i64> {self.index64(index)}",
                            "addrs"), True

    def access(self, buffer: Buffer, index: Expr, predicate: Optional[Expr]):
        """(kind, pointer(s), mask) of an access; kind is scalar, vector, masked or gather."""
        lanes = index.dtype.lanes
        ptr, per_lane = self.pointer(buffer, index)
        mask = None if predicate is None else self.expr(predicate)
        if lanes == 1 and mask is not None:
            raise InternalError("scalar predicated accesses are not produced by lowering")
        kind = "scalar" if lanes == 1 else "gather" if per_lane else "masked" if mask is not None else "vector"
        if self.module.bounds_check:
            ptr, mask, kind = self.checked(buffer, index, ptr, mask, kind)
        return kind, ptr, mask

    def checked(self, buffer: Buffer, index: Expr, ptr: str, mask: Optional[str], kind: str):
        lanes = index.dtype.lanes
        vty = "i64" if lanes == 1 else f"<{lanes} x i64>"
        if kind in ("vector", "masked"):
            base = self.index64(index.base)
            ins = self.fn.emit(f"insertelement <{lanes} x i64> poison, i64 {base}, i64 0", "b")
            spl = self.fn.emit(f"shufflevector <{lanes} x i64> {ins}, <{lanes} x i64> poison, <{lanes} x i32> zeroinitializer", "b")
            offsets = "<" + ", ".join(f"i64 {i}" for i in range(lanes)) + ">"
            idx = self.fn.emit(f"add <{lanes} x i64> {spl}, {offsets}", "lanes")
        else:
            idx = self.index64(index)
        size = buffer.size if lanes == 1 else f"splat (i64 {buffer.size})"
        if isinstance(buffer.size, Expr):     # a symbolic size, computed where it is checked
            scalar = self.index64(buffer.size)
            size = scalar if lanes == 1 else self.splat(scalar, "i64", lanes, False)
        bad = self.fn.emit(f"icmp uge {vty} {idx}, {size}", "oob")      # unsigned: negatives are huge
        bty = "i1" if lanes == 1 else f"<{lanes} x i1>"
        if mask is not None:
            bad = self.fn.emit(f"and {bty} {bad}, {mask}", "oob")
        if lanes == 1:
            anybad, first = bad, idx
        else:
            self.declare(f"declare i1 @llvm.vector.reduce.or.v{lanes}i1(<{lanes} x i1>)")
            anybad = self.fn.emit(f"call i1 @llvm.vector.reduce.or.v{lanes}i1(<{lanes} x i1> {bad})", "anyoob")
            picked = self.fn.emit(f"select <{lanes} x i1> {bad}, <{lanes} x i64> {idx}, <{lanes} x i64> zeroinitializer", "badidx")
            self.declare(f"declare i64 @llvm.vector.reduce.umax.v{lanes}i64(<{lanes} x i64>)")
            first = self.fn.emit(f"call i64 @llvm.vector.reduce.umax.v{lanes}i64(<{lanes} x i64> {picked})", "first")
        bid = self.module.buffer_id(buffer)
        report, cont = self.fn.label("oob.report"), self.fn.label("oob.ok")
        self.fn.do(f"br i1 {anybad}, label %{report}, label %{cont}")
        self.fn.start_block(report)
        self.fn.do(f"call void @sl.oob.report(ptr {self.ptrs[STATUS]}, i64 {bid}, i64 {first})")
        self.fn.do(f"br label %{cont}")
        self.fn.start_block(cont)
        if kind == "gather":     # keep the lanes that were wanted and are inside the buffer
            inside = self.fn.emit(f"icmp ult {vty} {idx}, {size}", "inb")
            keep = inside if mask is None else self.fn.emit(f"and {bty} {inside}, {mask}", "keep")
            return ptr, keep, "gather"
        if lanes * buffer.dtype.bytes > SCRATCH_BYTES:
            raise InternalError("a checked vector access is wider than the scratch area")
        return self.fn.emit(f"select i1 {anybad}, ptr @sl.oob.scratch, ptr {ptr}", "safe"), mask, kind

    def load(self, e: Load) -> str:
        buf = e.buffer
        stride = load_stride(e.indices[0])
        if stride is not None and not self.module.bounds_check:     # checked: per lane, as a gather
            return self.from_memory(load_strided(self, e, stride), e.dtype)
        kind, ptr, mask = self.access(buf, e.indices[0], e.predicate)
        mty, align, lanes = memory_type(e.dtype), buf.dtype.bytes, e.dtype.lanes
        if kind in ("scalar", "vector"):
            raw = self.fn.emit(f"load {mty}, ptr {ptr}, align {align}", buf.name)
        elif kind == "masked":
            name = f"llvm.masked.load.{suffix(mty)}.p0"
            self.declare(f"declare {mty} @{name}(ptr, i32, <{lanes} x i1>, {mty})")
            raw = self.fn.emit(f"call {mty} @{name}(ptr {ptr}, i32 {align}, <{lanes} x i1> {mask}, {mty} zeroinitializer)",
                               buf.name)
        else:
            mask = mask or "splat (i1 true)"
            name = f"llvm.masked.gather.{suffix(mty)}.v{lanes}p0"
            self.declare(f"declare {mty} @{name}(<{lanes} x ptr>, i32, <{lanes} x i1>, {mty})")
            raw = self.fn.emit(f"call {mty} @{name}(<{lanes} x ptr> {ptr}, i32 {align}, <{lanes} x i1> {mask}, "
                               f"{mty} zeroinitializer)", buf.name)
        return self.from_memory(raw, e.dtype)

    def store(self, s: Store) -> None:
        buf, dt = s.buffer, s.value.dtype
        value = self.to_memory(self.stored_value(s), dt)
        kind, ptr, mask = self.access(buf, s.indices[0], s.predicate)
        mty, align, lanes = memory_type(dt), buf.dtype.bytes, dt.lanes
        nt_align = streaming_alignment(s) if kind == "vector" and buf in self.module.streaming else 0
        if nt_align:
            self.streaming_store(s, mty, value, ptr, align, nt_align)
        elif kind in ("scalar", "vector"):
            self.fn.do(f"store {mty} {value}, ptr {ptr}, align {align}")
        elif kind == "masked":
            name = f"llvm.masked.store.{suffix(mty)}.p0"
            self.declare(f"declare void @{name}({mty}, ptr, i32, <{lanes} x i1>)")
            self.fn.do(f"call void @{name}({mty} {value}, ptr {ptr}, i32 {align}, <{lanes} x i1> {mask})")
        else:
            mask = mask or "splat (i1 true)"
            name = f"llvm.masked.scatter.{suffix(mty)}.v{lanes}p0"
            self.declare(f"declare void @{name}({mty}, <{lanes} x ptr>, i32, <{lanes} x i1>)")
            self.fn.do(f"call void @{name}({mty} {value}, <{lanes} x ptr> {ptr}, i32 {align}, <{lanes} x i1> {mask})")

    def streaming_store(self, s: Store, mty: str, value: str, ptr: str, align: int, nt_align: int) -> None:
        """A non-temporal store where the buffer is aligned at run time, else an ordinary one
        (the test is loop-invariant: LLVM hoists it)."""
        base = self.fn.emit(f"ptrtoint ptr {self.ptrs[s.buffer]} to i64", "base")
        low = self.fn.emit(f"and i64 {base}, {nt_align - 1}", "misalign")
        ok = self.fn.emit(f"icmp eq i64 {low}, 0", "aligned")
        nt_l, plain_l, join_l = self.fn.label("store.nt"), self.fn.label("store"), self.fn.label("store.end")
        self.fn.do(f"br i1 {ok}, label %{nt_l}, label %{plain_l}")
        self.fn.start_block(nt_l)
        self.fn.do(f"store {mty} {value}, ptr {ptr}, align {nt_align}, {METADATA}")
        self.fn.do(f"br label %{join_l}")
        self.fn.start_block(plain_l)
        self.fn.do(f"store {mty} {value}, ptr {ptr}, align {align}")
        self.fn.do(f"br label %{join_l}")
        self.fn.start_block(join_l)
        self.streamed = True
