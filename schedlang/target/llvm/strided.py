"""Vector loads of a small constant stride (x[2 * i + c]: the taps of a stride-2 convolution
or pooling window along a row) as one contiguous masked load and a shuffle, not a gather;
stride -1 (a row read backwards: torch.flip) as one load and a reversing shuffle.

A gather loads one lane at a time (16 loads for a 16-lane float vector on AVX-512); a load
of lanes * stride consecutive elements is `stride` vector loads, and keeping every
stride-th lane is one permute per result vector. Only the wanted elements are enabled in
the wide load's mask (lane j when j % stride == 0 and the access's own predicate holds at
j // stride), so no element is read past the last wanted one: the access stays in bounds
exactly when the gather would.
"""
from __future__ import annotations

from typing import Optional

from ...expr.nodes import Const, Expr, Load, Ramp
from .types import scalar_memory, suffix

MAX_STRIDE = 4        # beyond this, the wide load reads more than a gather's loads are worth


def load_stride(index: Expr) -> Optional[int]:
    """The stride of a vector index that load_strided handles (a ramp of constant stride
    2..MAX_STRIDE, or -1: a row read backwards, torch.flip), else None."""
    if isinstance(index, Ramp) and isinstance(index.stride, Const) and isinstance(index.stride.value, int) \
            and (2 <= index.stride.value <= MAX_STRIDE or index.stride.value == -1):
        return int(index.stride.value)
    return None


def load_strided(em, e: Load, stride: int) -> str:
    """The raw memory value (as a vector load gives it) of e, whose index is a ramp of
    `stride`; em is the FunctionEmitter (its fn, ptrs, expr, index64, declare)."""
    index, lanes, buf = e.indices[0], e.dtype.lanes, e.buffer
    elem = scalar_memory(buf.dtype)
    if stride == -1:
        return _load_reversed(em, e, lanes, buf, elem)
    wide = lanes * stride
    wty = f"<{wide} x {elem}>"
    base = em.fn.emit(f"getelementptr inbounds {elem}, ptr {em.ptrs[buf]}, i64 {em.index64(index.base)}", "addr")
    if e.predicate is None:
        mask = "<" + ", ".join(f"i1 {'true' if j % stride == 0 else 'false'}" for j in range(wide)) + ">"
    else:   # lane j of the wide mask: the predicate's lane j // stride where j % stride == 0, else off
        spread = ", ".join(f"i32 {j // stride if j % stride == 0 else lanes}" for j in range(wide))
        mask = em.fn.emit(f"shufflevector <{lanes} x i1> {em.expr(e.predicate)}, <{lanes} x i1> zeroinitializer, "
                          f"<{wide} x i32> <{spread}>", "mask")
    raw = _masked_load(em, wty, wide, base, mask, buf)
    keep = ", ".join(f"i32 {i * stride}" for i in range(lanes))
    return em.fn.emit(f"shufflevector {wty} {raw}, {wty} poison, <{lanes} x i32> <{keep}>", f"{buf.name}.strided")


def _load_reversed(em, e: Load, lanes: int, buf, elem: str) -> str:
    """x[ramp(b, -1, lanes)]: the lanes contiguous elements ending at b, loaded forwards (masked
    by the predicate's lanes, reversed) and reversed by one shuffle."""
    vty = f"<{lanes} x {elem}>"
    first = em.fn.emit(f"getelementptr inbounds {elem}, ptr {em.ptrs[buf]}, i64 {em.index64(e.indices[0].base)}", "addr")
    base = em.fn.emit(f"getelementptr inbounds {elem}, ptr {first}, i64 {-(lanes - 1)}", "addr")
    backwards = ", ".join(f"i32 {lanes - 1 - j}" for j in range(lanes))
    if e.predicate is None:
        raw = em.fn.emit(f"load {vty}, ptr {base}, align {buf.dtype.bytes}", buf.name)
    else:
        mask = em.fn.emit(f"shufflevector <{lanes} x i1> {em.expr(e.predicate)}, <{lanes} x i1> poison, "
                          f"<{lanes} x i32> <{backwards}>", "mask")
        raw = _masked_load(em, vty, lanes, base, mask, buf)
    return em.fn.emit(f"shufflevector {vty} {raw}, {vty} poison, <{lanes} x i32> <{backwards}>", f"{buf.name}.reversed")


def _masked_load(em, vty: str, lanes: int, base: str, mask: str, buf) -> str:
    """llvm.masked.load of a <lanes x elem> vector (vty) at pointer base under mask, zeros off it."""
    name = f"llvm.masked.load.{suffix(vty)}.p0"
    em.declare(f"declare {vty} @{name}(ptr, i32, <{lanes} x i1>, {vty})")
    return em.fn.emit(f"call {vty} @{name}(ptr {base}, i32 {buf.dtype.bytes}, <{lanes} x i1> {mask}, "
                      f"{vty} zeroinitializer)", buf.name)
