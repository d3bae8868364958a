"""The cuda target's intrinsic library: device functions that tensor intrinsics' bodies call
(call_extern), and the intrinsics built on them (issue 19 items 2-3 add the tensor-core ones).

A DeviceFunction is one definition that both compilers of the generated CUDA C take: NVRTC
compiles its `__CUDA_ARCH__` branch (a CUDA intrinsic or inline PTX), the shim's g++ its
portable C++ branch with the hardware's semantics. The renderer prints a call of a registered
function by name and prepends the definitions a module uses (prelude).

Layout (item 2 adds the files after dp4a.py):
    dp4a.py     sl_dot4_s8s8: int32 += 4 int8 products (__dp4a, sm_61+), and its intrinsic
    mma.py      ldmatrix (.trans), mma.sync m16n8k16 f16/bf16 -> f32 (and f16 accumulate), the
                fragment scopes (decl_buffer scope "warp.fragment.a|b|c") and the intrinsics
                binding them; wmma 16x16x16 for TVM's opt_conv_tensorcore
    copy.py     cp.async (16-byte, sm_80+), commit/wait groups for the N-stage pipeline primitive
The SIMT engine executes a call only where the function has SIMT semantics (item 3: the real
per-lane fragment layouts); until then it refuses the call and names the shim engine.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterable


@dataclass(frozen=True)
class DeviceFunction:
    """A __device__ function of the intrinsic library: name and its CUDA C definition."""

    name: str
    source: str


FUNCTIONS: Dict[str, DeviceFunction] = {}


def register(fn: DeviceFunction) -> DeviceFunction:
    FUNCTIONS[fn.name] = fn
    return fn


def prelude(kernels: Iterable[str]) -> str:
    """The definitions of the library's functions that the rendered kernels call."""
    _load()
    kernels = list(kernels)
    return "".join(fn.source for name, fn in FUNCTIONS.items() if any(f"{name}(" in k for k in kernels))


def is_device_function(name: str) -> bool:
    _load()
    return name in FUNCTIONS


def _load() -> None:
    from . import dp4a  # noqa: F401  (registers its functions)
