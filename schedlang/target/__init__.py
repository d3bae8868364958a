"""Targets: what the generated code runs on (target.py, a leaf), and the backends that
render and run Kernel IR for each kind (registry.py; llvm/, cuda/, c/)."""
from .backend import Backend, HostCPUBackend, KernelPass  # noqa: F401
from .registry import get_backend, register_backend  # noqa: F401
from .target import COptions, CUDAOptions, LLVMOptions, Target  # noqa: F401
