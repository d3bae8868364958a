"""Calls that tensor intrinsics' bodies make (TVM's tir.call_llvm_pure_intrin, call_extern,
reinterpret, Buffer.access_ptr): expressions for the llvm target, which emits each one as
the call or instruction it names (target/llvm/emit_expr.py: more_calls)."""
from __future__ import annotations

import re

from ..dtypes import dtype as parse_dtype
from ..expr.nodes import Broadcast, Call, Const, Expr, Load, as_expr
from .intrin import EXTERN_PREFIX

LLVM_PREFIX = "llvm."            # a Call of this name is the LLVM intrinsic itself: "llvm.x86.avx512.vpdpbusd.512"
REINTERPRET = "reinterpret"      # the same bits as another dtype (LLVM bitcast)
ADDRESS_OF = "address_of"        # the address of a buffer element, as an integer of pointer width
POINTER_DTYPE = parse_dtype("uint64")   # what a pointer argument is in the IR (TVM's "handle")


def call_llvm_pure_intrin(dtype, name: str, *args) -> Call:
    """The LLVM intrinsic `name` applied to args, giving dtype (a vector dtype for SIMD ones),
    as tvm.tir.call_llvm_pure_intrin. TVM's argument count (a uint32 before the arguments) may
    be given or left out. The target must have the instructions: ask it before choosing."""
    if not isinstance(name, str) or not name.startswith(LLVM_PREFIX) or not re.fullmatch(r"[\w.]+", name):
        raise ValueError(f"call_llvm_pure_intrin: {name!r} is not an LLVM intrinsic name (llvm.x86.avx2.pmadd.wd, ...)")
    exprs = [as_expr(a) for a in args]
    if exprs and _is_arg_count(exprs[0], len(exprs) - 1):
        exprs = exprs[1:]
    return Call(name, tuple(exprs), parse_dtype(dtype))


call_llvm_intrin = call_llvm_pure_intrin   # no intrinsic a body calls has effects beyond its result


def _is_arg_count(e: Expr, n: int) -> bool:
    return isinstance(e, Const) and e.dtype.is_int and e.value == n


def call_extern(dtype, func_name: str, *args) -> Call:
    """A call of the C function func_name (linked into the process: libm, or a library loaded
    with llvmlite's load_library_permanently), as tvm.tir.call_extern; buffer pointers come
    from DeclBuffer.access_ptr. A statement of a tensor intrinsic's body when emitted."""
    if not isinstance(func_name, str) or not func_name.isidentifier():
        raise ValueError(f"call_extern: the function name must be a C identifier, got {func_name!r}")
    dt = parse_dtype(dtype)
    if dt.lanes != 1:
        raise TypeError(f"call_extern: the result dtype must be a scalar, got {dt}")
    return Call(EXTERN_PREFIX + func_name, tuple(as_expr(a) for a in args), dt)


def reinterpret(dtype, value) -> Call:
    """value's bits as dtype (the same total width), as tvm.tir.reinterpret: uint8x4 -> int32."""
    x = as_expr(value)
    dt = parse_dtype(dtype)
    if dt.bits * dt.lanes != x.dtype.bits * x.dtype.lanes or dt.is_bool or x.dtype.is_bool:
        raise TypeError(f"reinterpret: {x.dtype} ({x.dtype.bits * x.dtype.lanes} bits) cannot be read as {dt} "
                        f"({dt.bits * dt.lanes} bits)")
    return Call(REINTERPRET, (x,), dt)


def address_of(load: Load) -> Call:
    """The address of the element load reads (not read), for pointer arguments of extern calls."""
    if not isinstance(load, Load) or load.dtype.lanes != 1:
        raise TypeError(f"address_of takes a scalar buffer element, got {load!r}")
    return Call(ADDRESS_OF, (load,), POINTER_DTYPE)


def broadcast(value, lanes: int):
    """value (a scalar) in every one of lanes lanes, as tvm.tir.Broadcast."""
    return Broadcast(as_expr(value), int(lanes))


def call_intrin(dtype, name: str, *args) -> Call:
    """TVM's tir.call_intrin for the wmma calls its tensor-core tutorials emit
    (tir.tvm_load_matrix_sync, tvm_fill_fragment, tvm_mma_sync, tvm_store_matrix_sync): each
    becomes a call of the cuda target's intrinsic library (target/cuda/intrin/mma.py)."""
    from ..target.cuda.intrin.mma import call_intrin as cuda_call_intrin   # CUDA's library loads when asked
    return cuda_call_intrin(dtype, name, *args)
