"""Compile LLVM IR text for the host CPU with llvmlite and hand out function addresses."""
from __future__ import annotations

import threading
from functools import lru_cache
from typing import Callable, Optional, Tuple

import llvmlite.binding as llvm

from ..host import host_cpu, init_llvm  # noqa: F401 (host_cpu: read here by the backend, loaded.py, tests)

# llvmlite parses every module into LLVM's one global context, which is not thread-safe:
# builds from several threads take turns in LLVM (the Python lowering runs concurrently).
_llvm_lock = threading.RLock()


def target_machine(cpu: str, features: str):
    """A new target machine for position-independent code: the object the JIT makes is then
    the one a shared library links (library.py), so exporting a module (or storing it in the
    kernel cache) generates no code again. The large code model, as the JIT's default: its
    references are 64-bit, so they reach wherever LLVM's memory manager maps the sections of
    a JIT-compiled object (the small model's 32-bit rip-relative ones need them within 2 GiB,
    which that memory manager does not promise, and a reference out of range is not
    reported). Not cached: an MCJIT engine takes ownership of the one it is given and
    destroys it with itself."""
    init_llvm()
    with _llvm_lock:
        target = llvm.Target.from_default_triple()
        return target.create_target_machine(cpu=cpu, features=features, opt=3, reloc="pic", codemodel="large")


@lru_cache(maxsize=4)
def triple_and_layout(cpu: str, features: str) -> Tuple[str, str]:
    tm = target_machine(cpu, features)
    return llvm.get_process_triple(), str(tm.target_data)


@lru_cache(maxsize=4)
def pipeline_machine(cpu: str, features: str):
    """The target machine the O3 pipeline reads (its cost model and data layout), one per
    CPU: a pass builder only borrows it, unlike an MCJIT engine. A new one per module also
    rebuilt its subtarget (the instruction-lowering tables): the tutorial GEMM's O3 stage took
    ~1.8 ms more (loaded Zen 1), and a model part's split modules each paid it."""
    return target_machine(cpu, features)


def optimize(text: str, cpu: str, features: str, out_of_line: Optional[Callable[[str], bool]] = None):
    """Stage "llvm.opt": parse and verify LLVM IR text, then run the O3 pipeline on it.
    Functions for which out_of_line(name) holds get `noinline` first (see keep_out_of_line).
    Returns the optimised llvmlite module (str() of it is the stage's text)."""
    with _llvm_lock:
        mod = llvm.parse_assembly(text)
        run_o3(mod, pipeline_machine(cpu, features), out_of_line)
        return mod


def run_o3(mod, tm, out_of_line: Optional[Callable[[str], bool]] = None) -> None:
    """Verify a parsed module and run the O3 pipeline of target machine tm on it, in place
    (the caller holds the lock its module's context needs: optimize, private.py)."""
    mod.verify()
    if out_of_line is not None:
        keep_out_of_line(mod, out_of_line)
    options = llvm.create_pipeline_tuning_options(speed_level=3)
    options.loop_vectorization = True
    options.slp_vectorization = True
    # Unrolling is the schedule's decision (unroll, auto_unroll_max_step). LLVM's own full
    # unrolling of odd-width vector loops made some builds 50x slower to compile (10 s).
    options.loop_unrolling = False
    builder = llvm.create_pass_builder(tm, options)
    passes = builder.getModulePassManager()
    try:
        passes.run(mod, builder)
    finally:
        free_pass_manager(passes)
        builder.close()
        options.close()


def link_modules(mods):
    """One module of several optimised ones (each consumed), for one JIT object.

    Not one engine of several modules: RuntimeDyld resolves a large-code-model GOT-relative
    reference (R_X86_64_GOTOFF64: a constant or internal function) against the GOT of the
    first object it loaded, not its own, so the code of every later object read the wrong
    constants (a split ResNet-50 crashed)."""
    with _llvm_lock:
        linked = mods[0]
        for mod in mods[1:]:
            linked.link_in(mod)
        return linked


def keep_out_of_line(mod, wanted: Callable[[str], bool]) -> None:
    """Mark the defined functions whose name `wanted` accepts `noinline`.

    The body of a parallel loop is called from two places, the OpenMP worker and the serial
    fallback (codegen.py: parallel_for); O3 inlined it into both, so LLVM optimized and
    compiled every parallel loop nest twice. Kept out of line, the O3 pipeline and the JIT
    of the tutorial GEMM took about 30 % less CPU time (benchmarks/compile.py), and the
    kernels ran as fast: the body is called once per thread, and its own code is the same."""
    for fn in mod.functions:
        if not fn.is_declaration and wanted(fn.name):
            fn.add_function_attribute("noinline")


def free_pass_manager(passes) -> None:
    """Delete a new-pass-manager ModulePassManager and every pass in it.

    llvmlite 0.50's ModulePassManager.close() (and its __del__) frees nothing: in its bases
    (ffi.ObjectRef, NewPassManager) ObjectRef's empty _dispose comes first and hides
    NewPassManager's, which deletes the C++ object. The O3 pipeline's passes keep the
    tables they grew while running, so each build kept about 75 KB (30 KB when the
    pipeline is made, the rest when it runs, more for larger modules). What remains is
    about 2 KB per build: the PassInstrumentationCallbacks that llvmlite's
    LLVMPY_CreatePassBuilder allocates and LLVMPY_DisposePassBuilder never deletes
    (unreachable from Python; reusing one pass builder is no way out, as every run adds
    callbacks to it that point into that run's stack frame)."""
    from llvmlite.binding import ffi
    from llvmlite.binding.newpassmanagers import NewPassManager
    if type(passes)._dispose is not ffi.ObjectRef._dispose:     # a llvmlite that frees it itself
        passes.close()
    elif not passes.closed:
        NewPassManager._dispose(passes)
        passes.detach()


class CompiledModule:
    """Stage "jit": machine code for an optimised module, in memory; keeps the engine alive
    as long as it is referenced. object: the relocatable object code the engine loaded
    (position-independent; None if llvmlite did not hand it over)."""

    def __init__(self, mod, cpu: str, features: str):
        with _llvm_lock:
            self._compile(mod, cpu, features)

    def _compile(self, mod, cpu: str, features: str) -> None:
        tm = target_machine(cpu, features)
        self.engine = llvm.create_mcjit_compiler(mod, tm)
        objects = []
        self.engine.set_object_cache(lambda _module, data: objects.append(data))
        self.engine.finalize_object()
        self.object = objects[0] if len(objects) == 1 else None
        self._tm = tm
        self._mod = mod

    def address(self, name: str) -> int:
        addr = self.engine.get_function_address(name)
        if not addr:
            raise KeyError(f"function {name} is not in the compiled module")
        return addr

    def global_address(self, name: str) -> int:
        return self.engine.get_global_value_address(name)

    def assembly(self) -> str:
        with _llvm_lock:
            return self._tm.emit_assembly(self._mod)


def emit_shared_object_code(text: str, cpu: str, features: str) -> bytes:
    """Position-independent object code for LLVM IR text, to link into a shared library
    (the target machine the JIT uses)."""
    with _llvm_lock:
        tm = target_machine(cpu, features)
        mod = llvm.parse_assembly(text)
        mod.verify()
        return tm.emit_object(mod)
