"""The llvm backend: the host CPU (or a named one), through LLVM IR and llvmlite's JIT.

Stages after Kernel IR, in order, each one's text kept in mod.ir:
  "llvm"      Kernel IR rendered as LLVM IR text (codegen.py)
  "llvm.opt"  the O3 pipeline of the target machine, parallel loop bodies kept out of line
              (jit.optimize)
  "jit"       machine code in memory (jit.CompiledModule: position-independent, its object
              kept for export_library); mod.get_source("asm") prints it
A module of many kernels (a model part) is rendered as several LLVM modules (split.py),
each optimised on a worker thread while the next is rendered (where the machine has two
cores: two workers, each in an LLVM context of its own, which also generate each module's
code, linked in memory: private.py, orc.py); the "llvm" text holds them all, one after
another.
The auto-scheduler's CPU sketch rules and timing and the torch frontend's CPU default schedules
come with HostCPUBackend (target/backend.py).
"""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Dict, Sequence

from ...kernel.flatten import flatten_buffers
from ...kernel.lower import ADD_SIZE_PARAMS, SPLIT_KERNELS
from ...kernel.nodes import KernelModule
from ...kernel.unroll import unroll_loops
from ...kernel.vectorize import vectorize_loops
from ...kernel.widen import widen_index_arith
from ...loop.simplify import simplify_stmt
from ...build_pool import default_workers
from ..backend import BuildState, HostCPUBackend, run_stages
from ..target import Target
from . import forksafe, private
from .codegen import is_parallel_body, render_llvm
from ..host import host_cpu, vector_bits_of
from ..shapes import check_index_width
from .cpus import check_cpu, merge_features, why_not_runnable
from .jit import CompiledModule, link_modules, optimize, triple_and_layout
from .loaded import load_module
from .orc import LinkedObjects, exported_functions
from .module import LLVMModule
from .runtime import openmp_library
from .split import MODULE_BREAK, render_llvm_split, splits

# Indices and loop counters are 32-bit in the generated code.


class LLVMBackend(HostCPUBackend):
    kind = "llvm"
    kernel_passes_per_nest = True      # none of kernel_passes looks beyond one stage nest
    profiles_kernels = True            # "llvm -profile": target/llvm/profile.py

    def resolve_target(self, target: Target) -> Target:
        """Fill in the host CPU (cpu=""), merge -mattr switches into its features, check a
        named CPU against LLVM's list, and derive vector_bits from the features."""
        options = target.options
        check_triple(options.triple)
        host_name, host_features = host_cpu()
        if options.cpu:
            cpu, features = options.cpu, options.features
        else:
            cpu, features = host_name, merge_features(host_features, options.features)
        if (cpu, features) == (host_name, host_features):
            bits = vector_bits_of(features)
        else:
            bits = check_cpu(cpu, features, options.features)
        return target.with_options(cpu=cpu, features=features, vector_bits=options.vector_bits or bits)

    def kernel_passes(self, target: Target):
        """The Kernel IR passes, in order."""
        return [
            ("flatten_buffers", flatten_buffers),     # one flat index per access
            ("unroll_loops", unroll_loops),
            ("simplify", simplify_stmt),
            ("widen_index_arith", widen_index_arith),   # int64 where int32 terms may wrap
            ("vectorize_loops", partial(vectorize_loops, target=target)),   # lanes from target.native_lanes
            ("simplify", simplify_stmt),
            ("split_kernels", SPLIT_KERNELS),         # a parallel outer loop becomes the CPU worker axis
            ("add_size_params", ADD_SIZE_PARAMS),
        ]

    def stages(self, target: Target):
        return [
            ("llvm", render_stage),          # Kernel IR rendered as LLVM IR text (codegen.py)
            ("llvm.opt", optimize_stage),    # the target machine's O3 pipeline
            ("jit", jit_stage),              # machine code in memory
        ]

    def build(self, kernel: KernelModule, target: Target, is_output: Sequence[bool],
              texts: Dict[str, str], trace=None) -> LLVMModule:
        check_index_width(kernel)
        st = BuildState(kernel, target, texts)
        if trace is None and splits(kernel, target):
            compile_split(st)
        else:
            run_stages(self.stages(target), st, trace)
        not_runnable = why_not_runnable(target.cpu, target.features, *host_cpu())
        return LLVMModule(kernel, is_output, target, st.texts, st.compiled, st.buffer_names, st.runtime,
                          not_runnable)

    def load_module(self, path: str):
        return load_module(path)

    # ---- for the torch frontend and the CLI (the auto-scheduler's: HostCPUBackend's) ----------

    prepacks_weights = True
    moves_register_blocks = True
    source_title = "LLVM IR"


def render_stage(st: BuildState) -> str:
    target = st.target
    st.runtime = openmp_library() if target.threading == "openmp" else None
    triple, layout = triple_and_layout(target.cpu, target.features)
    st.source, st.buffer_names = render_llvm(st.kernel, target, triple, layout, st.runtime is not None)
    return st.source


def optimize_stage(st: BuildState) -> str:
    st.optimized = optimize(st.source, st.target.cpu, st.target.features, out_of_line=is_parallel_body)
    return str(st.optimized)


def jit_stage(st: BuildState) -> None:
    if st.runtime is not None:
        forksafe.bind_flag()     # parallel launches read the process's fork flag by name
    st.compiled = CompiledModule(st.optimized, st.target.cpu, st.target.features)


def compile_split(st: BuildState) -> None:
    """The three stages for a module of many kernels (split.py): each LLVM module goes
    through the O3 pipeline on a worker thread as soon as it is rendered (LLVM releases the
    GIL, so the rendering of the next runs meanwhile). With two cores, two workers each
    optimise and compile a module to an object in an LLVM context of their own (private.py),
    and the objects are linked in memory (orc.py); the "llvm.opt" text (the modules read
    into the global context and linked into one) is made when read. Else one worker
    optimises in the global context, and the modules, linked into one, are compiled by the
    JIT (one object, as a module of few kernels). A profiled module takes the second way
    (its counters are a global the JIT finds by name)."""
    target = st.target
    st.runtime = openmp_library() if target.threading == "openmp" else None
    triple, layout = triple_and_layout(target.cpu, target.features)
    texts, optimized = [], []
    apart = default_workers() >= 2 and private.supported() and not target.profile
    run = private.compile_to_object if apart else optimize
    with ThreadPoolExecutor(max_workers=2 if apart else 1, thread_name_prefix="sl-llvm") as worker:
        def emit(text: str) -> None:
            texts.append(text)
            optimized.append(worker.submit(run, text, target.cpu, target.features, is_parallel_body))
        st.buffer_names = render_llvm_split(st.kernel, target, triple, layout, st.runtime is not None, emit)
        done = [f.result() for f in optimized]
    st.source = st.texts["llvm"] = MODULE_BREAK.join(texts)
    if not apart:
        st.optimized = link_modules(done)
        st.texts["llvm.opt"] = str(st.optimized)
        jit_stage(st)
        return
    linked = _once(lambda: private.in_global_context([bitcode for bitcode, _ in done]))
    st.texts["llvm.opt"] = lambda: str(linked())
    st.compiled = LinkedObjects([code for _, code in done], exported_functions(texts[-1]), linked,
                                target.cpu, target.features)


def _once(make):
    """make, called on the first call only (from any thread); its result kept."""
    made, lock = [], threading.Lock()

    def get():
        with lock:
            if not made:
                made.append(make())
            return made[0]
    return get


def check_triple(triple: str) -> None:
    """TVM's -mtriple: the host's architecture and OS are accepted (x86_64-linux-gnu for
    x86_64-unknown-linux-gnu); another is a ValueError, as code is JIT-compiled for the host."""
    if not triple:
        return
    import llvmlite.binding as llvm
    host = llvm.get_process_triple()

    def arch_os(t: str):
        parts = t.split("-")
        return parts[0], next((p for p in parts[1:] if p in ("linux", "darwin", "windows", "freebsd")), None)
    if arch_os(triple) != arch_os(host):
        raise ValueError(f"target triple {triple!r} is not this machine's ({host}); the llvm target compiles "
                         "for the host only (no cross-compilation): drop -mtriple or use the host's")


BACKEND = LLVMBackend()
