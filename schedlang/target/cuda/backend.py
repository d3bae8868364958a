"""The cuda backend: NVIDIA GPUs, through CUDA C and NVRTC.

Stages after Kernel IR, in order, each one's text kept in mod.ir:
  "cuda"  Kernel IR rendered as CUDA C (codegen.py)
  "ptx"   NVRTC's PTX for the target's architecture (nvrtc.py); ptxas -v gives mod.ptxas_info
mod(*tensors) launches on the GPU (gpu.py); mod.emulate() runs the CUDA C on the CPU (shim.py).
For the auto-scheduler: the GPU sketch rules (autoschedule/sketch_gpu.py), measurement on the GPU
or an estimate without one (autoschedule/gpu_estimate.py), the launch features
(autoschedule/features_gpu.py) and the launch checks below; for the torch frontend the
schedule_*_cuda default schedules of torch/schedules.py.
"""
from __future__ import annotations

from functools import partial
from typing import Dict, Sequence

from ...errors import LoweringError, ScheduleError
from ...expr.nodes import Expr
from ...kernel.double_buffer import inject_double_buffer
from ...kernel.flatten import flatten_buffers
from ...kernel.launch import shared_bytes
from ...kernel.lower import ADD_SIZE_PARAMS, SPLIT_KERNELS
from ...kernel.nodes import KernelModule, LaunchKind
from ...kernel.thread_allreduce import lower_thread_allreduce
from ...kernel.virtual_threads import inject_virtual_threads
from ...kernel.thread_guards import sink_thread_guards
from ...kernel.thread_sync import insert_barriers
from ...kernel.unroll import unroll_loops
from ...kernel.widen import widen_index_arith
from ...loop.functor import walk_stmts
from ...loop.simplify import simplify_stmt
from ...loop.nodes import Allocate, Store
from ...schedule.annotate import BIND, PARALLEL
from ...schedule.placement import enclosing_loops
from ...tensor.op import PlaceholderOp
from ..backend import Backend, BuildState, run_stages
from ..target import Target
from .codegen import MAX_GRID, render_cuda, threads_per_block
from .intrin import collective_calls
from .intrin.copy import ASYNC, complete_async_copies
from .module import ENGINES, CUDAModule
from .nvrtc import compile_ptx, ptxas_info
from .vectorize import cuda_vectorize_loops


class CUDABackend(Backend):
    kind = "cuda"

    def check_schedule(self, schedule, target: Target) -> None:
        for st in schedule.stages:
            if isinstance(st.op, PlaceholderOp) or st.attach_type == "inline":
                continue
            for ivar, ann in st.annotations.items():   # (bind() itself refuses reduction axes)
                if ann.kind == PARALLEL:
                    raise ScheduleError("parallel", st.name, "parallel() is a CPU loop kind; the cuda target runs "
                                        "loops on GPU threads", axis=ivar.name,
                                        hint="bind the loop to blockIdx.x / threadIdx.x instead")
            if st.scope == "shared":
                check_shared_stage(st)
            if st.double_buffered:
                check_double_buffer(st)

    def kernel_passes(self, target: Target):
        """The Kernel IR passes, in order."""
        return [
            ("flatten_buffers", flatten_buffers),     # one flat index per access
            ("inject_virtual_threads", inject_virtual_threads),   # vthread loops become serial loops
            ("unroll_loops", unroll_loops),
            ("simplify", simplify_stmt),
            ("widen_index_arith", widen_index_arith),   # int64 where int32 terms may wrap
            ("vectorize_loops", cuda_vectorize_loops),   # CUDA vector accesses where aligned (vectorize.py)
            ("simplify", simplify_stmt),
            ("lower_thread_allreduce", lower_thread_allreduce),   # warp shuffles and shared memory
            ("insert_barriers", insert_barriers),         # __syncthreads() between shared writes and reads
            ("inject_double_buffer", partial(inject_double_buffer, copies=ASYNC)),   # fetch ahead (cp.async too)
            ("complete_async_copies", complete_async_copies),   # cp.async lands before the next barrier
            ("sink_thread_guards", sink_thread_guards),   # every thread reaches each barrier and cooperative fetch
            ("split_kernels", SPLIT_KERNELS),         # thread-bound loops become the launch geometry
            ("add_size_params", ADD_SIZE_PARAMS),
        ]

    def stages(self, target: Target):
        return [
            ("cuda", render_stage),   # Kernel IR rendered as CUDA C (codegen.py)
            ("ptx", ptx_stage),       # NVRTC's PTX for the target's architecture (nvrtc.py)
        ]

    def build(self, kernel: KernelModule, target: Target, is_output: Sequence[bool],
              texts: Dict[str, str], trace=None) -> CUDAModule:
        check_kernels(kernel, target)
        st = run_stages(self.stages(target), BuildState(kernel, target, texts), trace)
        return CUDAModule(kernel, is_output, target, st.texts, st.ptxas_info)

    # ---- for the auto-scheduler, the torch frontend and the CLI -------------------------------

    builds_static_shapes = True       # a block's threads and its shared memory are fixed at compile time
    torch_device = "cuda"
    sketches_tensorize = True         # the tensor-core sketch (autoschedule: mma.sync fragments)
    emulation_engines = ENGINES
    emulation_note = "(no CUDA GPU here): the CUDA C above, compiled by g++ with the shim"
    source_title = "CUDA C"

    def sketch_rules(self):
        from ...autoschedule.sketch_gpu import GPU_SKETCH_RULES    # the auto-scheduler loads when it asks
        return GPU_SKETCH_RULES

    def measure_candidate(self, task, schedule, arrays, number: int, repeat: int) -> dict:
        """Timed on the GPU where there is one, else an estimate from the SIMT profile."""
        from ...autoschedule.gpu_estimate import run_cuda_candidate    # the auto-scheduler loads when it asks
        return run_cuda_candidate(task, schedule, arrays, number, repeat)

    def search_features(self):
        from ...autoschedule.features_gpu import GPU_TARGET_FEATURES    # (as above)
        return GPU_TARGET_FEATURES

    def check_launch(self, kernel, target: Target) -> None:
        check_kernels(kernel, target)

    def run_on_host(self, module, arrays) -> None:
        """The CUDA C itself, run on the CPU (as on a GPU, without one)."""
        module.emulate(*arrays, engine="shim")

    def module_notes(self, compiled):
        """Registers, spills and shared memory per CUDA kernel, where ptxas reported them."""
        info = {}
        for mod in compiled.modules.values():
            info.update(getattr(mod, "ptxas_info", None) or {})
        return [f"ptxas: {kernel}: {r.registers} registers, {r.spill_bytes} bytes spilled, "
                f"{r.shared_bytes} bytes shared memory" for kernel, r in info.items()]

    def default_schedules(self):
        from ...torch import schedules as ts          # the frontend (and torch) load only when it asks
        from ...torch import attention_schedule as at, conv_schedules as cs    # (as above)
        return {"matmul": ts.schedule_matmul_cuda, "rows": ts.schedule_rows_cuda,
                "pointwise": ts.schedule_pointwise_cuda, "conv": cs.schedule_conv_cuda,
                "attention": at.schedule_attention_cuda}


def render_stage(st: BuildState) -> str:
    return render_cuda(st.kernel)


def ptx_stage(st: BuildState) -> str:
    ptx = compile_ptx(st.texts["cuda"], st.target.arch, st.kernel.name)
    st.ptxas_info = ptxas_info(ptx, st.target.arch)
    return ptx


def check_shared_stage(st) -> None:
    """Shared memory lives as long as one block: a shared stage is computed inside a loop bound
    to blockIdx, where it holds the tile that block needs."""
    blocks = [a for owner, a in enclosing_loops(st) if owner.annotations.get(a) is not None
              and owner.annotations[a].kind == BIND and owner.annotations[a].thread_tag.startswith("blockIdx.")]
    if not blocks:
        where = "at the root" if st.attach_type != "at" else f"at loop '{st.attach_ivar.name}' of " \
                f"'{st.attach_stage.name}', outside every loop bound to blockIdx"
        raise ScheduleError("compute_at", st.name, f"is stored in shared memory but computed {where}; shared "
                            "memory belongs to one block, so a shared stage is computed inside the block",
                            hint=f"compute it at a loop inside the block's loops, as TVM's tutorials do: "
                            f"s[{st.name}].compute_at(s[C], ko) with ko the outer reduction loop of the "
                            "stage that reads it")


def check_double_buffer(st) -> None:
    """A double-buffered stage is computed at a serial loop, in shared or local memory or in
    tensor-core fragments (scope warp: the next fragments loaded while these are used)."""
    if st.attach_type != "at":
        raise ScheduleError("double_buffer", st.name, "is computed at the root; a stage gets two buffers to fill "
                            "in turn at the iterations of the loop it is computed at",
                            hint=f"s[{st.name}].compute_at(s[C], ko) with ko the outer reduction loop that reads it")
    if (st.scope or "local") not in ("shared", "local", "warp"):
        raise ScheduleError("double_buffer", st.name, f"is stored in {st.scope} memory; double buffering is for "
                            "shared, local or warp (mma fragment) stages", choices=("shared", "local", "warp"))
    ann = st.attach_stage.annotations.get(st.attach_ivar)
    if ann is not None:
        raise ScheduleError("double_buffer", st.name, f"is computed at loop '{st.attach_ivar.name}' of "
                            f"'{st.attach_stage.name}', which is {ann}; only a serial loop runs its iterations "
                            "in turn, so that one can fetch ahead for the next", axis=st.attach_ivar.name,
                            hint="compute it at a serial loop (the outer reduction loop in TVM's GEMM tutorial)")


def writes_one_element(kernel) -> bool:
    """Every store of the kernel writes a buffer of one element (a scalar result, such as a
    full reduction with several values, argmax): one thread is all it has to run on."""
    return all(isinstance(s.buffer.size, int) and s.buffer.size == 1
               for s in walk_stmts(kernel.body) if isinstance(s, Store))


def check_kernels(kernel: KernelModule, target: Target) -> None:
    """Every kernel runs on a grid, within the target's launch limits (a grid of symbolic
    extent is checked when called: check_grid)."""
    for k in kernel.kernels:
        check_symbolic(k)
        check_no_global_allocation(k)
        if not any(a.kind in (LaunchKind.BLOCK, LaunchKind.THREAD) for a in k.launch) and not writes_one_element(k):
            raise ScheduleError("bind", None, f"kernel {k.name} has no loop bound to a GPU axis, so it would run "
                                "on a single GPU thread", hint="bind an outer loop to blockIdx.x and an inner one "
                                "to threadIdx.x: xo, xi = s[T].split(axis, factor=64); "
                                "s[T].bind(xo, sl.thread_axis('blockIdx.x')); "
                                "s[T].bind(xi, sl.thread_axis('threadIdx.x'))")
        n = threads_per_block(k)
        if n > target.max_threads_per_block:
            shape = " x ".join(f"{a.tag}={a.extent}" for a in k.launch if a.kind is LaunchKind.THREAD)
            raise LoweringError("kernel launch", f"kernel {k.name} has {n} threads a block ({shape}); "
                                f"{target.arch} allows at most {target.max_threads_per_block}: split the "
                                "thread-bound loops with a smaller factor, and bind the outer part to blockIdx")
        check_whole_warps(k, n)
        for a in k.launch:
            if a.tag in MAX_GRID and isinstance(a.extent, int) and a.extent > MAX_GRID[a.tag]:
                raise LoweringError("kernel launch", f"kernel {k.name} has {a.extent} blocks along {a.tag}; CUDA "
                                    f"allows at most {MAX_GRID[a.tag]}: bind the longest loop to blockIdx.x")
        smem = shared_bytes(k)
        if smem > target.max_shared_memory_per_block:
            raise LoweringError("kernel launch", f"kernel {k.name} needs {smem} bytes of shared memory; "
                                f"{target.arch} allows {target.max_shared_memory_per_block} a block "
                                "(CUDAOptions.max_shared_memory_per_block): cache smaller tiles")


def check_whole_warps(k, threads: int) -> None:
    """A warp-collective call (ldmatrix, mma.sync, wmma) needs every lane of its warp: a block of
    threads not a multiple of 32 has a partial last warp, undefined on a GPU (the shim would
    gather garbage)."""
    calls = collective_calls(k.body) if threads % 32 else []
    if calls:
        shape = " x ".join(f"{a.tag}={a.extent}" for a in k.launch if a.kind is LaunchKind.THREAD)
        raise LoweringError("kernel launch", f"kernel {k.name} has {threads} threads a block ({shape}), not a "
                            f"multiple of 32, but calls {calls[0]}, a warp-collective function that every lane "
                            "of a warp must reach: bind loops whose extents multiply to whole warps")


def check_no_global_allocation(k) -> None:
    """A kernel allocates shared and local memory only: a stage in global memory is computed at the
    root (its own kernel, its buffer the module's) or is an argument."""
    for s in walk_stmts(k.body):
        if isinstance(s, Allocate) and s.buffer.scope == "global":
            raise ScheduleError("compute_at", s.buffer.name, f"is stored in global memory but computed inside "
                                f"kernel {k.name}, which cannot allocate global memory (every thread would get a "
                                "private copy of the whole region)", hint=f"s[{s.buffer.name}].set_scope('shared') "
                                "to share it in the block, 'local' for one thread's copy, or compute it at the root")


def check_symbolic(k) -> None:
    """Symbolic extents (size variables) may size the grid and loops; a block's threads and
    its shared and local buffers are fixed when the kernel is compiled."""
    for a in k.launch:
        if a.kind is LaunchKind.THREAD and isinstance(a.extent, Expr):
            raise LoweringError("kernel launch", f"kernel {k.name} binds {a.tag} to a loop of symbolic extent "
                                f"'{a.extent}'; the threads of a block are fixed when the kernel is compiled: split "
                                "the loop by a constant factor, bind the inner loop to threadIdx and the outer "
                                "(symbolic) one to blockIdx")
    for s in walk_stmts(k.body):
        if isinstance(s, Allocate) and s.buffer.is_symbolic:
            raise LoweringError("kernel launch", f"kernel {k.name} allocates its {s.buffer.scope} buffer "
                                f"'{s.buffer.name}' with the symbolic size '{s.buffer.size}'; shared and local "
                                "memory are fixed when the kernel is compiled: cache a tile of constant size "
                                "(split by a constant factor and compute_at the inner loop)")


BACKEND = CUDABackend()
