"""Kernel IR -> C99: one static function per kernel and an entry function that allocates the
module's temporaries and runs the kernels in order.

The expression and statement rules are the ones the CUDA printer uses (target/cexpr.py); this
dialect names C99 types and the helpers of prelude.py. A kernel's CPU workers (its parallel outer
loop) and any other parallel loop become `#pragma omp parallel for`; vectorized loops arrive as
plain loops, which the C compiler vectorizes. Local buffers live on the stack up to 1 MiB a
function (as the llvm target keeps them), beyond that and when symbolic on the heap.

The entry is `int32_t <name>(void **args, int64_t *failed)`: args holds the arguments' data
pointers, then the size variables' values as pointer-sized integers; it returns 1 (and *failed
holds the bytes) when a temporary cannot be allocated.
"""
from __future__ import annotations

import json
from typing import Dict, List

from ...dtypes import DType, int64
from ...errors import LoweringError
from ...expr.nodes import Buffer, Call, Cast, Expr
from ...kernel.nodes import Kernel, KernelModule, LaunchKind
from ...limits import INT32_MAX
from ...loop.nodes import PARALLEL, Allocate, CallPacked, For
from ...tensor.intrin import EXTERN_PREFIX
from ..cexpr import MATH, CRenderer, c_name
from ..library_names import LIBRARY_FUNCTIONS
from ..target import Target
from .prelude import prelude

# A function keeps at most 1 MiB of local buffers on its stack (target/llvm/codegen.py: the
# stacks of OpenMP workers are the pthread default, often 2 to 8 MiB).
STACK_BYTES = 1 << 20
INFO_SYMBOL = "schedlang_module_info"
FAILED = "sl_failed"
# Set in a process forked from one whose OpenMP pool may exist (module.py): parallel loops then
# run on the calling thread, as libgomp's first parallel region in such a child waits forever.
SERIAL_FLAG = "schedlang_serial_only"
_MEMORY = {"float16": "uint16_t", "bfloat16": "uint16_t", "float32": "float", "float64": "double", "int8": "int8_t",
           "int16": "int16_t", "int32": "int32_t", "int64": "int64_t", "uint8": "uint8_t", "uint16": "uint16_t",
           "uint32": "uint32_t", "uint64": "uint64_t", "bool": "bool"}
# C99 keywords and the library's names: an IR name equal to one gets a suffix (define()).
_RESERVED = set("""auto break case char const continue default do double else enum extern float for goto if inline
int long register restrict return short signed sizeof static struct switch typedef union unsigned void volatile while
_Bool _Complex _Imaginary bool true false NULL main malloc free memcpy args intptr_t size_t""".split())
_RESERVED |= {f"{u}int{n}_t" for u in ("", "u") for n in (8, 16, 32, 64)}
_RESERVED |= LIBRARY_FUNCTIONS     # the math functions (float and double) and the rest of the C library's
_C_MATH = {"rsqrt": "sl_rsqrtf", "exp10": "sl_exp10f"}     # not in C99: the prelude's


def entry_name(module_name: str) -> str:
    """The C name of a module's entry function: its name, unless C or the C library has it."""
    name = c_name(module_name)
    return name + "_" if name in _RESERVED or name.startswith("sl_") else name


def type_suffix(dt: DType) -> str:
    """The suffix of the prelude's helpers for values of dt (float16/bfloat16 compute as float)."""
    if dt.is_float:
        return "f64" if dt.bits == 64 else "f32"
    return "b" if dt.is_bool else f"{dt.kind[0]}{dt.bits}"


class CSourceRenderer(CRenderer):
    """The C99 dialect of the shared C renderer."""

    LANGUAGE = "C"
    MEMORY = _MEMORY
    FLOAT_BITS = ("sl_bits_to_f32", "sl_bits_to_f64")
    HALF = ("sl_h2f", "sl_f2h")
    BFLOAT = ("sl_bf2f", "sl_f2bf")

    def __init__(self, target: Target, reserved=()):
        super().__init__()
        self.target = target
        self.taken |= _RESERVED | set(reserved) | {FAILED, SERIAL_FLAG}
        self.stack_bytes = 0

    def round_bfloat(self, text: str, lanes: int) -> str:
        return f"sl_bf16_round({text})"

    def cast_half(self, v: str, src: DType) -> str:
        if src.is_float and src.bits == 64:
            return f"sl_h2f(sl_d2h({v}))"
        return super().cast_half(v, src)

    def int_helper(self, op: str, dt: DType) -> str:
        return f"sl_{op}_{type_suffix(dt)}"

    def float_helper(self, op: str, dt: DType) -> str:
        return f"sl_float_{op}_{type_suffix(dt)}"

    def f2i_helper(self, dst: DType, ftype: DType) -> str:
        return f"sl_f2i_{type_suffix(dst)}_{type_suffix(ftype)}"

    def bit_count_helper(self, name: str, dt: DType) -> str:
        return f"sl_{name}_{type_suffix(dt)}"

    def min_max(self, op: str, dt: DType) -> str:
        return f"sl_{op}_{type_suffix(dt)}"

    def math_function(self, name: str, dt: DType) -> str:
        fn = _C_MATH.get(name, MATH[name])
        return fn[:-1] if dt.bits == 64 else fn

    def expr_Call(self, e: Call) -> str:
        if e.name.startswith(EXTERN_PREFIX):      # call_pure_extern: the C library's function, by name
            args = ", ".join(self.expr(a) for a in e.args)
            return f"{e.name[len(EXTERN_PREFIX):]}({args})"
        return super().expr_Call(e)

    def stmt_Barrier(self, s, depth: int) -> None:
        pass     # CPU threads share no block-level memory (as on the llvm target)

    def stmt_CallPacked(self, s: CallPacked, depth: int) -> None:
        raise LoweringError("c codegen", f"the program calls the registered Python function '{s.func}' "
                            "(sl.extern / call_packed), which the c target cannot call yet: build it for "
                            "target='llvm'")

    def stmt_For(self, s: For, depth: int) -> None:
        if s.kind == PARALLEL and self.target.threading == "openmp":
            threads = f" num_threads({self.target.num_threads})" if self.target.num_threads else ""
            self.emit(0, f"#pragma omp parallel for schedule(static){threads} if(!{SERIAL_FLAG})")
        check_extent(s)
        super().stmt_For(s, depth)

    def stmt_Allocate(self, s: Allocate, depth: int) -> None:
        b = s.buffer
        nbytes = b.size * b.dtype.bytes if not b.is_symbolic else None
        if nbytes is not None and self.stack_bytes + nbytes <= STACK_BYTES:
            self.stack_bytes += nbytes
            super().stmt_Allocate(s, depth)
            return
        name = self.define(b, b.name)
        ty = self.memory_type(b.dtype)
        self.emit(depth, f"{ty}* {name} = ({ty}*)malloc({self.byte_count(b)});")
        self.emit(depth, f"if ({name} == NULL) {{")
        self.emit(depth + 1, f"sl_alloc_failed({FAILED}, {self.byte_count(b)});")
        self.emit(depth, "} else {")
        self.stmt(s.body, depth + 1)
        self.emit(depth + 1, f"free({name});")
        self.emit(depth, "}")

    def byte_count(self, b: Buffer) -> str:
        """The bytes of buffer b as an int64_t expression (at least 1: malloc(0) may give NULL)."""
        if not b.is_symbolic:
            return f"{max(1, b.size * b.dtype.bytes)}ll"
        return f"((int64_t){self.operand(Cast(int64, b.size), 15)} * {b.dtype.bytes} + 1)"


def check_extent(s: For) -> None:
    """Loop variables and flat buffer indices are int32, as in the llvm target."""
    if isinstance(s.extent, int) and s.extent > INT32_MAX:     # symbolic ones are checked at call time
        raise LoweringError("c codegen", f"loop '{s.var.name}' runs {s.extent} iterations, more than int32 "
                            f"indices reach ({INT32_MAX}); split the computation into smaller stages")


def _parameters(r: CSourceRenderer, k: Kernel) -> List[str]:
    params = [f"{r.memory_type(b.dtype)}* restrict {r.define(b, b.name)}" for b in k.params]
    params += [f"{r.compute_type(v.dtype)} {r.define(v, v.name)}" for v in k.sizes]
    return params + [f"int64_t* {FAILED}"]


def render_kernel(k: Kernel, target: Target, name: str) -> str:
    r = CSourceRenderer(target)
    body = k.body
    for axis in k.launch:
        if axis.kind is not LaunchKind.CPU_WORKER:
            raise LoweringError("c codegen", f"kernel {k.name} is launched over {axis.tag}, a GPU thread axis; "
                                "the c target runs CPU workers only (use parallel() instead of bind())")
        body = For(axis.var, axis.extent, body, PARALLEL)
    r.emit(0, f"static void {name}({', '.join(_parameters(r, k))}) {{")
    r.stmt(body, 1)
    r.emit(0, "}")
    return "\n".join(r.lines)


def render_entry(m: KernelModule, target: Target, kernel_names: List[str]) -> str:
    """The entry function: reads the arguments, allocates the temporaries, runs the kernels, frees."""
    name = entry_name(m.name)
    r = CSourceRenderer(target, kernel_names + [name])
    r.emit(0, f"int32_t {name}(void** args, int64_t* {FAILED}) {{")
    for i, b in enumerate(m.params):
        ty = r.memory_type(b.dtype)
        r.emit(1, f"{ty}* const {r.define(b, b.name)} = ({ty}*)args[{i}];")
    for j, v in enumerate(m.sizes):
        ty = r.compute_type(v.dtype)
        r.emit(1, f"const {ty} {r.define(v, v.name)} = ({ty})(intptr_t)args[{len(m.params) + j}];")
    for b in m.temps:
        ty = r.memory_type(b.dtype)
        r.emit(1, f"{ty}* const {r.define(b, b.name)} = ({ty}*)malloc({r.byte_count(b)});")
    if m.temps:
        missing = " || ".join(f"{r.names[b]} == NULL" for b in m.temps)
        r.emit(1, f"if ({missing}) {{")
        for b in m.temps:
            r.emit(2, f"if ({r.names[b]} == NULL) sl_alloc_failed({FAILED}, {r.byte_count(b)});")
            r.emit(2, f"free({r.names[b]});")
        r.emit(2, "return 1;")
        r.emit(1, "}")
    for k, kname in zip(m.kernels, kernel_names):
        args = [r.names[b] for b in k.params] + [r.names[v] for v in k.sizes] + [FAILED]
        r.emit(1, f"{kname}({', '.join(args)});")
    for b in m.temps:
        r.emit(1, f"free({r.names[b]});")
    r.emit(1, f"return *{FAILED} != 0;")
    r.emit(0, "}")
    return "\n".join(r.lines)


def c_string(text: str) -> str:
    """A C string literal of ASCII text."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render_c(m: KernelModule, target: Target, info: Dict) -> str:
    """The C99 source of a module: the prelude, one function per kernel, the entry function
    `<name>`, and the module record `schedlang_module_info` (JSON) that load_module reads."""
    names: List[str] = []
    for k in m.kernels:
        name = c_name(k.name)
        while name in names or name == entry_name(m.name) or name in _RESERVED or name.startswith("sl_"):
            name += "_"
        names.append(name)
    kernels = [render_kernel(k, target, name) for k, name in zip(m.kernels, names)]
    head = f"/* schedlang module {m.name}: {len(kernels)} kernel(s), C99 for target '{target}' */"
    record = f"const char {INFO_SYMBOL}[] = {c_string(json.dumps(info, sort_keys=True))};"
    flag = f"int32_t {SERIAL_FLAG} = 0;"
    return "\n\n".join([head, prelude().rstrip(), flag] + kernels + [render_entry(m, target, names), record]) + "\n"
