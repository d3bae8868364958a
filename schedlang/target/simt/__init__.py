"""The SIMT engine: CUDA modules' Kernel IR interpreted on the CPU with numpy.

A block's threads run in lockstep as numpy vectors (one lane per thread, blocks batched),
every access is checked against its buffer, shared-memory races between barriers are
errors, and profile=True counts coalescing, bank conflicts, barriers and occupancy.
CUDAModule.emulate(*arrays, engine="simt") is the entry point (run.py). On large kernels the
race check and profile run as numba-compiled kernels where numba is installed (jit.py;
SCHEDLANG_SIMT_JIT=0 keeps numpy, the reference: the same results)."""
from .races import GlobalMemoryRace, SharedMemoryRace  # noqa: F401
from .profile import KernelProfile  # noqa: F401
from .run import run_module  # noqa: F401
