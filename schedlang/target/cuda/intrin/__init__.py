"""The cuda target's intrinsic library: device functions that tensor intrinsics' bodies call
(call_extern), and the intrinsics built on them.

A DeviceFunction is one definition that both compilers of the generated CUDA C take: NVRTC
compiles its `__CUDA_ARCH__` branch (a CUDA intrinsic or inline PTX), the shim's g++ its
portable C++ branch with the hardware's semantics. The renderer prints a call of a registered
function by name and prepends the definitions a module uses (prelude), with the functions
they require first; a function's align is what its shared-memory addresses need (alignments).
By convention a function writes through its first argument (kernel/thread_sync.call_output).

    dp4a.py     sl_dot4_s8s8: int32 += 4 int8 products (__dp4a, sm_61+), and its intrinsic
    mma.py      ldmatrix (x1/x2/x4, .trans), mma.sync m16n8k16 f16/bf16 -> f32 (and f16
                accumulate), fragments in scope "warp" (each lane 1/32) and the intrinsics
                binding them; wmma 16x16x16 in TVM's scopes (wmma.matrix_a|b|accumulator) and
                call_intrin for TVM's tir.tvm_*_matrix_sync / tvm_mma_sync (opt_conv_tensorcore)
    copy.py     cp.async (16 bytes, .ca/.cg), commit/wait groups, the pass that completes them
                before a barrier, and what the N-stage pipeline (schedule/pipeline.py) uses
A collective function (ldmatrix, mma.sync, wmma) needs its whole warp: the build refuses a call
of one from a block of partial warps (collective_calls; target/cuda/backend.check_whole_warps).
The SIMT engine executes these calls with the same semantics (target/simt/intrin.py); it
refuses a call it has no rule for (dp4a) and names the shim engine.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterable, List, Tuple

from ....expr.functor import walk
from ....expr.nodes import Call
from ....loop.functor import stmt_exprs, walk_stmts
from ....tensor.intrin import EXTERN_PREFIX
from ....tensor.intrin_calls import ADDRESS_OF


@dataclass(frozen=True)
class DeviceFunction:
    """A __device__ function of the intrinsic library: name and its CUDA C definition."""

    name: str
    source: str
    requires: Tuple[str, ...] = ()      # library functions its definition calls (defined before it)
    align: int = 0                      # the byte alignment its shared-memory pointer arguments need
    collective: bool = False            # the whole warp takes part (ldmatrix, mma.sync, wmma): whole warps only


FUNCTIONS: Dict[str, DeviceFunction] = {}


def register(fn: DeviceFunction) -> DeviceFunction:
    FUNCTIONS[fn.name] = fn
    return fn


def prelude(kernels: Iterable[str]) -> str:
    """The definitions of the library's functions that the rendered kernels call."""
    _load()
    kernels = list(kernels)
    used: List[str] = []

    def use(name: str) -> None:
        if name not in used:
            for dep in FUNCTIONS[name].requires:
                use(dep)
            used.append(name)
    for name in FUNCTIONS:
        if any(f"{name}(" in k or f"{name}<" in k for k in kernels):
            use(name)
    return "".join(FUNCTIONS[name].source for name in used)


def _library_calls(body):
    """(function, call) for each call of a library function in the Kernel IR body."""
    _load()
    for s in walk_stmts(body):
        for e in stmt_exprs(s):
            for n in walk(e):
                if isinstance(n, Call) and n.name.startswith(EXTERN_PREFIX) and \
                        n.name[len(EXTERN_PREFIX):] in FUNCTIONS:
                    yield FUNCTIONS[n.name[len(EXTERN_PREFIX):]], n


def alignments(body) -> Dict[object, int]:
    """shared buffer -> the byte alignment the library calls that take its elements' addresses
    need (ldmatrix's and cp.async's 16 bytes); the renderer aligns those allocations so."""
    out: Dict[object, int] = {}
    for fn, n in _library_calls(body):
        if not fn.align:
            continue
        for a in n.args:
            if isinstance(a, Call) and a.name == ADDRESS_OF and a.args[0].buffer.scope == "shared":
                out[a.args[0].buffer] = max(out.get(a.args[0].buffer, 1), fn.align)
    return out


def is_collective(name: str) -> bool:
    """Whether the library function name gathers across the warp, itself or through one it requires."""
    _load()
    fn = FUNCTIONS[name]
    return fn.collective or any(is_collective(dep) for dep in fn.requires)


def collective_calls(body) -> List[str]:
    """The names of the warp-collective library functions (is_collective) that the Kernel IR
    body calls, in order of first call."""
    out: List[str] = []
    for fn, _ in _library_calls(body):
        if fn.name not in out and is_collective(fn.name):
            out.append(fn.name)
    return out


def is_device_function(name: str) -> bool:
    _load()
    return name in FUNCTIONS


def _load() -> None:
    from . import copy, dp4a, mma  # noqa: F401  (register their functions)
