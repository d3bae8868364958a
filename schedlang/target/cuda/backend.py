"""The cuda backend, a stub for now: sl.lower(..., level="kernel", target="cuda") shows the
Kernel IR with its launch geometry; building (CUDA C, NVRTC, launch) is not written yet."""
from __future__ import annotations

from typing import Dict, Sequence

from ...kernel.lower import standard_passes
from ..backend import Backend
from ..target import Target


class CUDABackend(Backend):
    kind = "cuda"

    def kernel_passes(self, target: Target):
        return standard_passes(target)

    def build(self, kernel, target: Target, is_output: Sequence[bool], texts: Dict[str, str]):
        raise NotImplementedError("the cuda target cannot build modules yet (only sl.lower(..., level='kernel', "
                                  "target='cuda') works); build with target='llvm'")


BACKEND = CUDABackend()
