"""Launching a CUDA module on a real GPU through the CUDA driver API (cuda.bindings.driver),
on torch CUDA tensors, in torch's current stream. cuda-python and torch are imported only
when a GPU is used (both are optional, and torch is slow to import).

The PTX is loaded into the device's primary context (the one torch uses); global
temporaries between kernels are torch allocations, ordered on the same stream.
"""
from __future__ import annotations

import ctypes
from functools import lru_cache
from typing import Dict, List, Optional

from ...expr.extent import evaluate_extent
from ...kernel.launch import dynamic_shared_layout, launch_dims
from ...kernel.nodes import KernelModule


def _ok(result, what: str):
    from cuda.bindings import driver    # CUDA's bindings: optional, loaded when a GPU is asked for
    err = result[0]
    if err != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"{what} failed: {err}")
    return result[1] if len(result) == 2 else result[1:]


@lru_cache(maxsize=1)
def gpu_problem() -> Optional[str]:
    """None when a CUDA driver and a GPU can be used; otherwise why not."""
    try:
        from cuda.bindings import driver    # (as _ok)
    except ImportError:
        return "cuda-python is not installed (pip install 'schedlang[cuda]')"
    try:
        (err,) = driver.cuInit(0)
    except RuntimeError as e:        # no driver library at all
        return f"no CUDA driver ({e})"
    if err != driver.CUresult.CUDA_SUCCESS:
        return f"cuInit failed ({err})"
    err, count = driver.cuDeviceGetCount()
    if err != driver.CUresult.CUDA_SUCCESS or count == 0:
        return "no CUDA device"
    return None


class GPUProgram:
    """The module's PTX loaded on the current torch device, ready to launch."""

    def __init__(self, ptx: str, kernel_ir: KernelModule):
        from cuda.bindings import driver    # (as _ok); torch: the GPU call's tensors and stream
        import torch
        device = _ok(driver.cuDeviceGet(torch.cuda.current_device()), "cuDeviceGet")
        self._context = _ok(driver.cuDevicePrimaryCtxRetain(device), "cuDevicePrimaryCtxRetain")
        _ok(driver.cuCtxSetCurrent(self._context), "cuCtxSetCurrent")
        self._module = _ok(driver.cuModuleLoadData(ptx.encode() + b"\0"), "cuModuleLoadData")
        self._kernels = kernel_ir
        self._functions = {k.name: _ok(driver.cuModuleGetFunction(self._module, k.name.encode()),
                                       f"cuModuleGetFunction({k.name})") for k in kernel_ir.kernels}
        self._dynamic_shared = {}       # kernel -> bytes of dynamic shared memory (over the static limit)
        for k in kernel_ir.kernels:
            layout = dynamic_shared_layout(k)
            if layout is not None:      # a kernel opts into more than the static limit
                self._dynamic_shared[k.name] = layout[1]
                attribute = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
                (err,) = driver.cuFuncSetAttribute(self._functions[k.name], attribute, layout[1])
                if err != driver.CUresult.CUDA_SUCCESS:
                    raise RuntimeError(f"kernel {k.name} needs {layout[1]} bytes of shared memory, more than this "
                                       f"GPU gives a block ({err}): lower CUDAOptions.max_shared_memory_per_block")

    def launch(self, pointers: List[int], sizes=None) -> None:
        """One call: pointers of the arguments in order; sizes: size variable -> value (symbolic
        shapes), which size the temporaries and grids and are passed to the kernels using them."""
        from cuda.bindings import driver    # (as __init__)
        import torch
        _ok(driver.cuCtxSetCurrent(self._context), "cuCtxSetCurrent")    # the calling thread may be new
        stream = driver.CUstream(torch.cuda.current_stream().cuda_stream)
        m = self._kernels
        address: Dict[object, int] = dict(zip(m.params, pointers))
        sizes = sizes or {}
        temps = [torch.empty(evaluate_extent(b.size, sizes) * b.dtype.bytes, dtype=torch.uint8, device="cuda")
                 for b in m.temps]
        address.update((b, t.data_ptr()) for b, t in zip(m.temps, temps))
        for k in m.kernels:
            values = [ctypes.c_void_p(address[b]) for b in k.params]
            values += [(ctypes.c_int64 if v.dtype.bits == 64 else ctypes.c_int32)(sizes[v]) for v in k.sizes]
            argv = (ctypes.c_void_p * max(1, len(values)))(*[ctypes.addressof(v) for v in values])
            grid, block = launch_dims(k, sizes)
            if 0 in grid:       # no blocks for these sizes (CUDA refuses an empty launch)
                continue
            _ok(driver.cuLaunchKernel(self._functions[k.name], *grid, *block, self._dynamic_shared.get(k.name, 0),
                                      stream, ctypes.addressof(argv), 0),
                f"cuLaunchKernel({k.name})")
        # temps go back to torch's stream-ordered allocator: reuse waits for these kernels.

