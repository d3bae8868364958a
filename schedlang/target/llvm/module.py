"""The callable CPU module that build() returns."""
from __future__ import annotations

import ctypes
import time
import weakref
from typing import Dict, List, Optional, Sequence

from ...kernel.nodes import KernelModule
from ..module import BuiltModule
from ..target import Target
from . import forksafe
from .codegen import function_symbol
from .jit import CompiledModule
from .library import export_library
from .packed import raise_pending
from .profile import SYMBOL as PROFILE_SYMBOL, KernelTime, read_times
from .status import StatusRecord, raise_for_status
from .temps import release_symbol


class LLVMModule(BuiltModule):
    """A compiled program. Call it with numpy arrays or CPU torch tensors, in argument order;
    results are written into the output arrays in place (no copies).

    ir: the text of every level and stage ("tensor", "loop", "tile", "kernel", "llvm", "llvm.opt").
    """

    def __init__(self, kernel_ir: KernelModule, is_output: Sequence[bool], target: Target, texts: Dict[str, str],
                 compiled: CompiledModule, buffer_names: List[str], parallel_runtime: Optional[str],
                 not_runnable: Optional[str] = None):
        super().__init__(kernel_ir, is_output, target, texts)
        self.parallel_runtime = parallel_runtime
        self._source = self.ir["llvm"]
        self._buffer_names = buffer_names
        self._compiled = compiled
        self._not_runnable = not_runnable     # compiled for a CPU this machine is not: why
        self._bind_entry(function_symbol(self.name), "@GOMP_parallel" in self._source, len(kernel_ir.sizes))
        self.kernel_names = [k.name for k in kernel_ir.kernels]      # in call order

    def _bind_entry(self, entry: str, launches_threads: bool, num_sizes: int) -> None:
        """The entry function `i32 entry(ptr argv)`: argv holds the arguments' pointers, the size
        variables' values, then the call's status record; a non-zero result reports a failure
        in the record."""
        self._fn = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p)(self._compiled.address(entry))
        self._argv_type = ctypes.c_void_p * (len(self.params) + num_sizes + 1)
        self._launches_threads = launches_threads
        self._release_temps_when_collected(entry)

    def _release_temps_when_collected(self, entry: str) -> None:
        """Free the temporaries the entry keeps from call to call (temps.py) when this module
        is collected; the finalizer holds the compiled code until then. Not at interpreter
        exit: the process's memory goes with it. Nor for code this machine cannot run (it
        never ran: nothing is kept)."""
        if getattr(self, "_not_runnable", None):
            return
        try:
            address = self._compiled.address(release_symbol(entry))
        except (KeyError, AttributeError):       # no kept temporaries, or a library from before them
            return
        self._release_fn = ctypes.CFUNCTYPE(None)(address)
        weakref.finalize(self, _release, self._release_fn, self._compiled).atexit = False

    def release_temps(self) -> None:
        """Free the temporaries the module keeps from call to call (temps.py) now; the next
        call allocates them again. A call running meanwhile keeps its own and puts them back."""
        release = getattr(self, "_release_fn", None)
        if release is not None:
            release()

    def get_source(self, fmt: str = "ll") -> str:
        """The generated code: "ll" (LLVM IR as generated), "ll.opt" (after optimisation) or "asm"."""
        if fmt == "ll":
            return self._source
        if fmt == "ll.opt":
            return self.ir["llvm.opt"]
        if fmt in ("asm", "s"):
            return self._compiled.assembly()
        raise ValueError(f"unknown source format {fmt!r}; use 'll', 'll.opt' or 'asm'")

    def kernel_times(self, reset: bool = True) -> List[KernelTime]:
        """Each kernel call of the module (in call order): its name, the calls of the module
        it was timed in and the seconds it took in them, since the module was built or last
        reset (reset: start counting again). Needs a target with the profile option
        (Target("llvm -profile"); profile.py)."""
        if not self.target.profile:
            raise ValueError(f"{self.name} was not built to time its kernels; build it for a target with the "
                             "profile option (target='llvm -profile')")
        return read_times(self._compiled.global_address(PROFILE_SYMBOL), self.kernel_names, reset)

    def export_library(self, path: str) -> None:
        """Write the module as a shared library that sl.load_module(path) loads and calls like
        this one, with no lowering or code generation (object code linked with the system cc)."""
        export_library(self, path)

    def __call__(self, *arrays) -> None:
        self._run_once(arrays)

    def _run_once(self, arrays):
        """One checked call. Returns the argument vector and what it points to (resolved copies
        of lazily negated tensors, the call's status record): keep them alive to call again."""
        if self._not_runnable:
            raise RuntimeError(f"{self.name} cannot run here: {self._not_runnable}; get_source() and "
                               "export_library() work, or build for this machine (target='llvm')")
        arrays, pointers, sizes = self.bind_call(arrays)
        status = StatusRecord()
        argv = self._argv_type(*pointers, *sizes, ctypes.addressof(status))
        self._launch(argv, status)
        return argv, arrays, status

    def _launch(self, argv, status) -> None:
        if self._launches_threads:
            forksafe.before_parallel_call()
        failed = self._fn(argv)
        raise_pending()       # an exception of a registered function the code called
        if failed or any(status):
            raise_for_status(self.name, status, self._buffer_names)

    def prepare(self, arrays: Sequence) -> Optional["PreparedCall"]:
        """A call on arrays checked and bound once, to run again and again with some arguments
        replaced (PreparedCall.run); None for a module with size variables, whose calls are
        bound whole. Runs nothing."""
        if self._sizes is not None:
            return None
        if self._not_runnable:
            raise RuntimeError(f"{self.name} cannot run here: {self._not_runnable}; get_source() and "
                               "export_library() work, or build for this machine (target='llvm')")
        arrays, pointers, _ = self.bind_call(arrays)
        return PreparedCall(self, arrays, pointers)

    def time(self, *arrays, number: int = 10, repeat: int = 3, clock=time.perf_counter) -> float:
        """Best mean seconds per call (of clock: wall time, or time.process_time for the CPU time
        of a one-thread call, which neighbours on a shared machine do not inflate) over `repeat`
        runs of `number` calls (after one warm-up)."""
        for what, value in (("number", number), ("repeat", repeat)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"time(): {what} must be a positive integer, got {value!r}")
        argv, _arrays, _status = self._run_once(arrays)      # the warm-up, checked
        best = float("inf")
        for _ in range(repeat):
            start = clock()
            for _ in range(number):
                self._fn(argv)
            raise_pending()
            best = min(best, (clock() - start) / number)
        return best


def _release(release, compiled) -> None:
    release()          # compiled: the code release runs in, alive until this returns


class PreparedCall:
    """A call of an LLVMModule bound once (LLVMModule.prepare): its argument vector, and the
    arrays it points to, kept alive. run() calls the module on them with some arguments
    replaced, each replacement checked as a whole call checks its arguments (dtype, shape,
    layout, overlap with an output): a compiled model's forward passes new inputs and outputs
    and the same weights (107 arguments for MobileNetV2), so a call binds two, not all."""

    def __init__(self, module: LLVMModule, arrays: Sequence, pointers: Sequence[int]):
        self.module = module
        self._arrays = list(arrays)
        self._spans = module.spans(arrays, pointers)
        self._argv = module._argv_type(*pointers)      # the status record's slot set per call
        self._released = frozenset()

    def release(self, positions: Sequence[int]) -> None:
        """Let go of the arrays at positions (a call's inputs and outputs: their memory may be
        freed); every later run must replace them."""
        for i in positions:
            self._arrays[i] = None
        self._released = frozenset(positions)

    def run(self, replaced: Sequence = ()) -> None:
        """Call the module with arguments replaced: (index, array) pairs, kept alive by the caller."""
        mod = self.module
        argv = mod._argv_type.from_buffer_copy(self._argv)   # per call: concurrent calls share nothing
        if self._released and not self._released.issubset([i for i, _ in replaced]):
            raise ValueError(f"{mod.name}: a prepared call must replace the arguments it released "
                             f"({sorted(self._released)})")
        kept = None                   # resolved copies of lazily negated tensors live through the call
        if replaced:
            kept, pointers = mod.rebind(list(self._spans), replaced)
            for (i, _), ptr in zip(replaced, pointers):
                argv[i] = ptr
        status = StatusRecord()
        argv[len(self._spans)] = ctypes.addressof(status)
        mod._launch(argv, status)
        del kept
