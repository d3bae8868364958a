"""The callable CPU module that build() returns."""
from __future__ import annotations

import ctypes
import time
from typing import Dict, List, Sequence

import numpy as np

from ...kernel.nodes import KernelModule
from ..target import Target
from .codegen import render_llvm, symbol
from .jit import CompiledModule, triple_and_layout
from .packed import raise_pending
from .runtime import openmp_library


def _describe(x) -> str:
    return type(x).__module__ + "." + type(x).__name__


class LLVMModule:
    """A compiled program. Call it with numpy arrays or CPU torch tensors, in argument order;
    results are written into the output arrays in place (no copies).

    ir: the text of every level ("tensor", "loop", "tile", "kernel", "llvm").
    """

    def __init__(self, kernel_ir: KernelModule, is_output: Sequence[bool], target: Target, texts: Dict[str, str]):
        self.target = target
        self.name = kernel_ir.name
        self.params = list(kernel_ir.params)
        self._is_output = list(is_output)
        self.parallel_runtime = openmp_library() if target.threading == "openmp" else None
        triple, layout = triple_and_layout(target.cpu, target.features)
        self._source, self._buffer_names = render_llvm(kernel_ir, target, triple, layout,
                                                       self.parallel_runtime is not None)
        self.ir = dict(texts)
        self.ir["llvm"] = self._source
        self._compiled = CompiledModule(self._source, target.cpu, target.features)
        self._fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(self._compiled.address(symbol(self.name)))
        self._argv_type = ctypes.c_void_p * max(1, len(self.params))

    def get_source(self, fmt: str = "ll") -> str:
        """The generated code: "ll" (LLVM IR as generated), "ll.opt" (after optimisation) or "asm"."""
        if fmt == "ll":
            return self._source
        if fmt == "ll.opt":
            return self._compiled.optimized_ir
        if fmt in ("asm", "s"):
            return self._compiled.assembly()
        raise ValueError(f"unknown source format {fmt!r}; use 'll', 'll.opt' or 'asm'")

    def _pointers(self, arrays: Sequence) -> List[int]:
        if len(arrays) != len(self.params):
            names = ", ".join(b.name for b in self.params)
            raise TypeError(f"{self.name} takes {len(self.params)} arrays ({names}), got {len(arrays)}")
        ptrs, spans = [], []
        for b, x, is_out in zip(self.params, arrays, self._is_output):
            ptr, nbytes = _pointer(b, x, is_out)
            ptrs.append(ptr)
            spans.append((ptr, ptr + nbytes, b.name, is_out))
        for i, (lo, hi, name, out) in enumerate(spans):
            for lo2, hi2, name2, out2 in spans[i + 1:]:
                if (out or out2) and lo < hi2 and lo2 < hi:
                    raise ValueError(f"arrays for '{name}' and '{name2}' overlap in memory; "
                                     "an output must not share memory with another argument")
        return ptrs

    def __call__(self, *arrays) -> None:
        argv = self._argv_type(*self._pointers(arrays))
        self._fn(argv)
        raise_pending()       # an exception of a registered function the code called
        if self.target.bounds_check:
            self._raise_out_of_bounds()

    def _raise_out_of_bounds(self) -> None:
        count = ctypes.c_int64.from_address(self._compiled.global_address("sl.oob.count"))
        if count.value:
            where = (ctypes.c_int64 * 2).from_address(self._compiled.global_address("sl.oob.where"))
            n, buffer, index = count.value, self._buffer_names[where[0]], where[1]
            count.value = 0
            raise IndexError(f"{self.name}: {n} out-of-bounds access(es); the first touched {buffer}[{index}] "
                             "(a bug in schedlang's lowering if the program reads only inside its tensors)")

    def time(self, *arrays, number: int = 10, repeat: int = 3) -> float:
        """Best mean seconds per call over `repeat` runs of `number` calls (after one warm-up)."""
        argv = self._argv_type(*self._pointers(arrays))
        self._fn(argv)
        raise_pending()
        best = float("inf")
        for _ in range(repeat):
            start = time.perf_counter()
            for _ in range(number):
                self._fn(argv)
            raise_pending()
            best = min(best, (time.perf_counter() - start) / number)
        return best

    def __repr__(self) -> str:
        args = ", ".join(f"{b.name}: {b.dtype}{list(b.shape)}" for b in self.params)
        return f"<schedlang module {self.name}({args}) target={self.target.kind}>"


def _pointer(b, x, is_out: bool):
    want = str(b.dtype)
    shape = tuple(b.shape)
    if isinstance(x, np.ndarray):
        got, xshape = str(x.dtype), tuple(x.shape)
        contiguous = x.flags.c_contiguous
        writable = x.flags.writeable
        ptr = x.ctypes.data
        nbytes = x.nbytes
    elif _describe(x).startswith("torch."):
        if x.device.type != "cpu":
            raise ValueError(f"argument '{b.name}' is a torch tensor on {x.device}; the llvm target needs CPU tensors")
        if x.requires_grad and is_out:
            raise ValueError(f"output '{b.name}' requires grad; pass a tensor detached from autograd")
        got, xshape = str(x.dtype).replace("torch.", ""), tuple(x.shape)
        contiguous = x.is_contiguous()
        writable = True
        ptr = x.data_ptr()
        nbytes = x.numel() * x.element_size()
    else:
        raise TypeError(f"argument '{b.name}' must be a numpy array or a CPU torch tensor, got {_describe(x)}")
    if got != want:
        raise TypeError(f"argument '{b.name}' must have dtype {want}, got {got}")
    if xshape != shape:
        raise ValueError(f"argument '{b.name}' must have shape {shape}, got {xshape}")
    if not contiguous:
        raise ValueError(f"argument '{b.name}' is not C-contiguous; pass np.ascontiguousarray(x) / x.contiguous()")
    if is_out and not writable:
        raise ValueError(f"output '{b.name}' is read-only")
    return ptr, nbytes
