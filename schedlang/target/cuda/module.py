"""The module that build(..., target="cuda") returns: CUDA C and PTX to inspect, ptxas
figures, and two ways to run it: on a GPU (torch CUDA tensors) or on the CPU with emulate()."""
from __future__ import annotations

from typing import Dict, Optional, Sequence

import numpy as np

from ...kernel.launch import launch_dims
from ...kernel.nodes import KernelModule
from ..module import BuiltModule
from ..simt import run_module
from ..target import Target
from . import shim
from .codegen import check_grid
from .codegen_vector import vector_alignments
from .gpu import GPUProgram, gpu_problem
from .nvrtc import PtxasInfo

ENGINES = ("shim", "simt")


class CUDAModule(BuiltModule):
    """A program compiled for a CUDA GPU.

    ir: the text of every level and stage ("tensor", "loop", "tile", "kernel", "cuda", "ptx").
    ptxas_info: kernel name -> PtxasInfo(registers, spill_bytes, shared_bytes), or None when
    no ptxas was found.
    kernel_ir: the KernelModule it was built from (the auto-scheduler's GPU estimate runs it).
    """

    def __init__(self, kernel_ir: KernelModule, is_output: Sequence[bool], target: Target, texts: Dict[str, str],
                 ptxas_info: Optional[Dict[str, PtxasInfo]]):
        super().__init__(kernel_ir, is_output, target, texts)
        self.kernels = [k.name for k in kernel_ir.kernels]
        self.ptxas_info = ptxas_info
        self.kernel_ir = kernel_ir
        self._gpu: Optional[GPUProgram] = None     # loaded on the first GPU call
        # argument -> the byte alignment its float4/float2/half2 accesses need
        self._alignments = {b: n for k in kernel_ir.kernels for b, n in vector_alignments(k.body).items()}

    def _arguments(self, arrays, device: str = "cpu"):
        """(arrays, their data pointers, size variable -> value) of a call, after BuiltModule.bind_call's
        checks; with symbolic shapes each kernel's grid is checked against CUDA's limits."""
        arrays, pointers, values = self.bind_call(arrays, device)
        sizes = dict(zip(self.kernel_ir.sizes, values))
        for k in self.kernel_ir.kernels:
            if sizes:
                check_grid(k, launch_dims(k, sizes)[0], sizes)
        return arrays, pointers, sizes

    def _check_alignment(self, pointers) -> None:
        for b, p in zip(self.params, pointers):
            need = self._alignments.get(b)
            if need and p % need:
                raise ValueError(f"{self.name}: argument '{b.name}' starts at address {p:#x}, not a multiple of "
                                 f"{need} bytes, and the kernel reads or writes it with {need}-byte vector "
                                 "accesses; pass an array with its own storage (e.g. a .clone() or np.copy of "
                                 "the view)")

    def get_source(self, fmt: str = "cuda") -> str:
        """The generated code: "cuda" (CUDA C, as NVRTC compiles it) or "ptx"."""
        if fmt in ("cuda", "cu"):
            return self.ir["cuda"]
        if fmt == "ptx":
            return self.ir["ptx"]
        raise ValueError(f"unknown source format {fmt!r}; use 'cuda' or 'ptx'")

    def __call__(self, *arrays) -> None:
        """Run on the GPU on torch CUDA tensors, in argument order, in torch's current stream;
        outputs are written in place."""
        problem = gpu_problem()
        if problem is not None:
            raise RuntimeError(f"{self.name} needs an NVIDIA GPU and no GPU is present here ({problem}); "
                               "mod.emulate(*arrays, engine='shim') runs the same CUDA C on the CPU, on numpy arrays")
        arrays, pointers, sizes = self._arguments(arrays, device="cuda")
        self._check_alignment(pointers)
        if self._gpu is None:
            self._gpu = GPUProgram(self.ir["ptx"], self.kernel_ir)
        self._gpu.launch(pointers, sizes)

    def emulate(self, *arrays, engine: str = "shim", sanitize: Optional[str] = None, profile: bool = False,
                bounds_check: bool = True):
        """Run the module on the CPU on numpy arrays (or CPU torch tensors), in argument order;
        outputs are written in place, as a GPU call would.

        engine="shim": the exact CUDA C compiled by g++ against a small CUDA header, each
        block's threads as fibers of one worker thread (a worker per core takes blocks in
        turn) and __syncthreads() as a barrier; under sanitize="thread" real OS threads.
        sanitize="thread": build with ThreadSanitizer and raise RuntimeError on a data race;
        sanitize="undefined": build with UndefinedBehaviorSanitizer and raise RuntimeError on
        any undefined behaviour of the C (overflow, division, shifts, float -> int conversion).
        bounds_check (engine="shim"; on unless False): every access of an argument or global
        temporary is checked against its elements, and the first one outside raises
        IndexError naming the kernel, buffer, index, thread and block, as engine="simt"
        does (without it, a gather out of bounds reads or writes the process's memory).
        engine="simt": the Kernel IR interpreted with numpy (target/simt), every access checked
        (IndexError) and shared-memory races between barriers raised (SharedMemoryRace); with
        profile=True it returns {kernel name: KernelProfile} (coalescing, bank conflicts,
        barriers, occupancy)."""
        if engine not in ENGINES:
            raise ValueError(f"unknown emulation engine {engine!r}; choose one of {', '.join(ENGINES)}")
        if sanitize is not None and sanitize not in shim.SANITIZERS:
            raise ValueError(f"unknown sanitizer {sanitize!r}; choose one of {', '.join(shim.SANITIZERS)} or None")
        if not isinstance(bounds_check, bool):
            raise TypeError(f"bounds_check must be True or False, got {bounds_check!r}")
        if engine != "simt" and profile:
            raise ValueError("profile=True needs engine='simt'")
        if engine == "simt" and sanitize is not None:
            raise ValueError("engine='simt' always checks shared-memory races; sanitize= is for engine='shim'")
        arrays, pointers, sizes = self._arguments(arrays)
        self._check_alignment(pointers)
        if engine == "simt":
            flat = [(x if isinstance(x, np.ndarray) else x.detach().numpy()).reshape(-1) for x in arrays]
            return run_module(self.kernel_ir, flat, self.target.arch, self.ptxas_info, profile, sizes)
        source = shim.checked_source(self.ir["cuda"]) if bounds_check else self.ir["cuda"]
        built = shim.build(source, shim.driver_source(self.kernel_ir, bounds_check), sanitize)
        extra = [shim.geometry(self.kernel_ir, sizes)] if sizes else []      # kept alive through the call
        if bounds_check:
            extra.append(shim.extents(arrays))
        if sanitize is None:
            shim.run_in_process(built, pointers + [x.ctypes.data for x in extra])
        else:
            shim.run_sanitized(built, self.name, list(arrays) + extra, self._is_output + [False] * len(extra),
                               sanitize)

    def target_text(self) -> str:
        return f"{self.target.kind} -arch={self.target.arch}"
