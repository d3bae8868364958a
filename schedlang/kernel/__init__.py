"""Kernel IR: kernels, launch geometry, flat buffers, vector accesses."""
from .nodes import Kernel, KernelModule, LaunchAxis, LaunchKind  # noqa: F401
from .lower import lower_to_kernel_ir  # noqa: F401
