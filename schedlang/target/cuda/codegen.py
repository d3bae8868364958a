"""Kernel IR -> CUDA C, one `extern "C" __global__` function per kernel.

The CUDA dialect of the C renderer the c target shares (target/cexpr.py: one small rule per
node, operators and math functions from tables). float16 is
stored as __half and computed in float (as the llvm target does); bfloat16 is stored as
__nv_bfloat16, computed in float and rounded to bfloat16 after every operation (as the
llvm target does); bool is stored as one byte. Launch axes become `const int i = blockIdx.x;` at the top of the kernel:
the lifter guarantees each tag has one extent, so the launch covers the loop exactly.
"""
from __future__ import annotations

from typing import Dict

from ...dtypes import DType
from ...errors import LoweringError
from ...expr.nodes import Call, Cast, Load
from ...kernel.launch import dynamic_shared_layout, threads_per_block
from ...kernel.nodes import Kernel, KernelModule, LaunchKind
from ...loop.nodes import Barrier, Store
from ...schedule.placement import FRAGMENT_SCOPES
from ...tensor.intrin import EXTERN_PREFIX
from ..cexpr import CRenderer, render_literal, unsigned_type
from . import arithmetic, codegen_vector, intrin, math_calls

DYNAMIC_SHARED = "sl_dynamic_shared"     # a kernel's dynamic shared memory (over the static limit)

# Memory types; float16 is computed as float.
_MEMORY = {"float16": "__half", "bfloat16": "__nv_bfloat16", "float32": "float", "float64": "double", "int8": "signed char",
           "int16": "short", "int32": "int", "int64": "long long", "uint8": "unsigned char",
           "uint16": "unsigned short", "uint32": "unsigned int", "uint64": "unsigned long long", "bool": "bool"}
_FLOAT_BITS = ("__int_as_float", "__longlong_as_double")
# warp shuffles of cross-thread reductions (kernel/thread_allreduce.py)
_SHUFFLE = {"shfl_down_sync": "__shfl_down_sync", "shfl_sync": "__shfl_sync"}

# Helpers every kernel may use; plain C++ that NVRTC and g++ (with the shim) both compile.
PRELUDE = """\
// min/max propagate NaN, like numpy's minimum/maximum (fminf/fmaxf would drop it).
template <typename T> __device__ __forceinline__ T sl_min(T a, T b) {
  return a != a ? a : (b != b ? b : (b < a ? b : a));
}
template <typename T> __device__ __forceinline__ T sl_max(T a, T b) {
  return a != a ? a : (b != b ? b : (b > a ? b : a));
}
__device__ __forceinline__ float sl_sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ double sl_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
"""


def memory_type(dt: DType) -> str:
    return _MEMORY[str(dt)]


def compute_type(dt: DType) -> str:
    return "float" if dt.is_float and dt.bits == 16 else memory_type(dt)


def literal(value, dt: DType) -> str:
    return render_literal(value, dt, memory_type, _FLOAT_BITS)


class CUDARenderer(CRenderer):
    """The CUDA dialect of the shared C renderer (target/cexpr.py): templates for the defined
    arithmetic, __half/__nv_bfloat16 storage, float2/float4 vectors, shared memory, barriers
    and warp shuffles."""

    LANGUAGE = "CUDA"
    MEMORY = _MEMORY
    FLOAT_BITS = _FLOAT_BITS
    HALF = ("__half2float", "__float2half")
    BFLOAT = ("__bfloat162float", "__float2bfloat16_rn")

    def __init__(self):
        super().__init__()
        self.alignments: Dict[object, int] = {}    # buffer -> bytes its vector accesses need
        self.dynamic_offsets: Dict[object, int] = {}   # shared buffer -> byte offset (dynamic shared memory)

    def round_bfloat(self, text: str, lanes: int) -> str:
        if lanes > 1:
            return f"sl_round_bf16({text})"
        return f"__bfloat162float(__float2bfloat16_rn({text}))"

    def int_helper(self, op: str, dt: DType) -> str:
        return f"sl_{op}<{compute_type(dt)}, {unsigned_type(dt)}>"

    def float_helper(self, op: str, dt: DType) -> str:
        return f"sl_float_{op}"

    def f2i_helper(self, dst: DType, ftype: DType) -> str:
        return f"sl_f2i<{compute_type(dst)}, {compute_type(ftype)}>"

    def bit_count_helper(self, name: str, dt: DType) -> str:
        return f"sl_{name}<{compute_type(dt)}>"

    def allocation_qualifier(self, b) -> str:
        qualifier = "__shared__ " if b.scope == "shared" else ""
        if b in self.alignments:     # its vector accesses need it
            qualifier += f"__align__({self.alignments[b]}) "
        return qualifier

    def stmt_Allocate(self, s, depth: int) -> None:
        if s.buffer.scope == "shared" and s.buffer in self.dynamic_offsets:
            return self.dynamic_shared(s, depth)
        if s.buffer.scope not in FRAGMENT_SCOPES:
            return super().stmt_Allocate(s, depth)
        b = s.buffer       # a warp's fragments: each lane holds 1/32 (target/cuda/intrin/mma.py)
        self.emit(depth, f"__align__(16) {self.memory_type(b.dtype)} {self.define(b, b.name)}[{b.size // 32}];")
        self.stmt(s.body, depth)

    def dynamic_shared(self, s, depth: int) -> None:
        """A shared buffer of a kernel over the static limit: on the GPU a pointer into the
        kernel's dynamic shared memory (kernel/launch.py: dynamic_shared_layout); in the shim
        (no __CUDA_ARCH__), which has no dynamic shared memory, the static array as before."""
        b = s.buffer
        ty = self.memory_type(b.dtype)
        name = self.define(b, b.name)
        self.lines.append("#if defined(__CUDA_ARCH__)")
        self.emit(depth, f"{ty}* {name} = reinterpret_cast<{ty}*>({DYNAMIC_SHARED} + {self.dynamic_offsets[b]});")
        self.lines.append("#else")
        self.emit(depth, f"{self.allocation_qualifier(b)}{ty} {name}[{b.size}];")
        self.lines.append("#endif")
        self.stmt(s.body, depth)

    def expr_Load(self, e: Load) -> str:
        _fragment_access(e.buffer)
        return super().expr_Load(e)

    def stmt_Store(self, s: Store, depth: int) -> None:
        _fragment_access(s.buffer)
        value = self.stored_16bit(s)
        if value is None:
            return super().stmt_Store(s, depth)
        text = f"{self.names[s.buffer]}[{self.expr(s.indices[0])}] = {value};"
        self.emit(depth, text if s.predicate is None else f"if ({self.expr(s.predicate)}) {text}")

    def stored_16bit(self, s: Store):
        """The stored text of a scalar 16-bit float store made without a round trip through float,
        or None: a value loaded unguarded from a buffer of the same dtype is stored as loaded
        (a cache_read into shared memory; not __float2half(__half2float(x))), a float32 cast to
        the dtype is converted once (not to half, back to float and to half again)."""
        v, dt = s.value, s.buffer.dtype
        if v.dtype.lanes != 1 or not (dt.is_float and dt.bits == 16):
            return None
        if isinstance(v, Load) and v.predicate is None and v.buffer.dtype == dt:
            _fragment_access(v.buffer)
            return f"{self.names[v.buffer]}[{self.expr(v.indices[0])}]"
        if isinstance(v, Cast) and v.dtype == dt and str(v.value.dtype) == "float32":
            return f"{(self.BFLOAT if dt.is_bfloat else self.HALF)[1]}({self.expr(v.value)})"
        return None

    def expr_Call(self, e: Call) -> str:
        if e.name in _SHUFFLE:      # (mask, value, lane or offset, width)
            mask, *rest = e.args
            return f"{_SHUFFLE[e.name]}({mask.value:#010x}u, {', '.join(self.expr(a) for a in rest)})"
        name = e.name[len(EXTERN_PREFIX):]
        if e.name.startswith(EXTERN_PREFIX) and intrin.is_device_function(name):    # a tensor intrinsic's call
            return f"{name}({', '.join(self.expr(a) for a in e.args)})"
        return super().expr_Call(e)

    def vector_load(self, e: Load) -> str:
        return codegen_vector.render_load(self, e)

    def vector_store(self, s: Store, depth: int) -> None:
        codegen_vector.render_store(self, s, depth)

    def expr_Broadcast(self, e) -> str:
        return codegen_vector.render_broadcast(self, e)

    def stmt_Barrier(self, s: Barrier, depth: int) -> None:
        self.emit(depth, "__syncthreads();")


def _fragment_access(b) -> None:
    """A fragment buffer (scope warp or wmma.*) is spread over the lanes: only the intrinsic
    library's calls address it, never an element access."""
    if b.scope in FRAGMENT_SCOPES:
        raise LoweringError("cuda codegen", f"{b.scope}-scope buffer '{b.name}' (tensor-core fragments, each lane "
                            "holding its part) is accessed element by element; only tensor intrinsics "
                            "(target/cuda/intrin/mma.py) may read or write it: tensorize every stage that uses it, on whole tiles "
                            "(pad the shapes to multiples of the tiles, or choose split factors that divide them)")


# CUDA's grid limits: x up to 2**31 - 1 blocks, y and z up to 65535.
MAX_GRID = {"blockIdx.x": 2 ** 31 - 1, "blockIdx.y": 65535, "blockIdx.z": 65535}


def check_grid(k, grid, sizes) -> None:
    """A call's grid (evaluated from the size variables) within CUDA's limits."""
    for c, n in zip("xyz", grid):
        tag = f"blockIdx.{c}"
        if n > MAX_GRID[tag]:
            given = ", ".join(f"{v.name}={value}" for v, value in sizes.items())
            raise ValueError(f"kernel {k.name} would launch {n} blocks along {tag} with {given}; CUDA allows at "
                             f"most {MAX_GRID[tag]}")


def render_kernel(k: Kernel) -> str:
    r = CUDARenderer()
    r.alignments = codegen_vector.vector_alignments(k.body)
    for b, n in intrin.alignments(k.body).items():    # ldmatrix / cp.async addresses
        r.alignments[b] = max(r.alignments.get(b, 1), n)
    params = [f"{memory_type(b.dtype)}* __restrict__ {r.define(b, b.name)}" for b in k.params]
    params = ", ".join(params + [f"{compute_type(v.dtype)} {r.define(v, v.name)}" for v in k.sizes])
    r.emit(0, f'extern "C" __global__ void __launch_bounds__({threads_per_block(k)}) {k.name}({params}) {{')
    layout = dynamic_shared_layout(k)
    if layout is not None:
        r.dynamic_offsets = layout[0]
        r.lines += ["#if defined(__CUDA_ARCH__)", f"  extern __shared__ __align__(16) unsigned char {DYNAMIC_SHARED}[];",
                    "#endif"]
    for a in k.launch:
        if a.kind is LaunchKind.VTHREAD:
            raise LoweringError("cuda codegen", f"kernel {k.name} binds '{a.var.name}' to vthread; virtual "
                                "threads are not supported by the cuda target yet (they come later): bind the "
                                "loop to threadIdx, or leave it serial")
        if a.kind not in (LaunchKind.BLOCK, LaunchKind.THREAD):
            raise LoweringError("cuda codegen", f"kernel {k.name} has a {a.kind.value} launch axis, "
                                "which the cuda target cannot run")
        r.emit(1, f"const int {r.define(a.var, a.var.name)} = {a.tag};")
        r.counters.add(id(a.var))
        r.ranges.enter(a.var, a.extent)      # for the whole kernel
    r.stmt(k.body, 1)
    r.emit(0, "}")
    return "\n".join(r.lines)


def render_cuda(m: KernelModule) -> str:
    """The CUDA C source of a module: the prelude, then one kernel function per kernel."""
    kernels = [render_kernel(k) for k in m.kernels]
    head = [f"// schedlang module {m.name}: {len(kernels)} kernel(s)"]
    if any("__half" in k for k in kernels):
        head.append("#include <cuda_fp16.h>")
    if any("__nv_bfloat16" in k for k in kernels):
        head.append("#include <cuda_bf16.h>")
    prelude = PRELUDE
    if any(arithmetic.uses_helpers(k) for k in kernels):
        prelude += arithmetic.ARITHMETIC_PRELUDE
    prelude += math_calls.prelude(kernels) + intrin.prelude(kernels)   # the intrinsic library's functions used
    if any("float2" in k or "float4" in k for k in kernels):
        prelude += codegen_vector.VECTOR_PRELUDE
        if "#include <cuda_bf16.h>" in head:
            prelude += codegen_vector.BFLOAT16_VECTOR_PRELUDE
    return "\n".join(head) + "\n" + prelude + "\n" + "\n\n".join(kernels) + "\n"
