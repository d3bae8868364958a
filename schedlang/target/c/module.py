"""The callable module of the c target, and the one load_module makes of its exported library.

The library's entry is `int32_t <name>(void **args, int64_t *failed)` (codegen.py); the library
also holds `schedlang_module_info`, the JSON record a loader needs to check a call as the built
module does (parameters, size variables, target options).
"""
from __future__ import annotations

import ctypes
import json
import os
import time
from typing import Dict, Sequence

from ...dtypes import dtype
from ...expr.extent import extent_from_json, extent_to_json
from ...expr.nodes import Buffer, Var
from ...disk import write_atomically
from ...kernel.nodes import KernelModule
from ..elf import check_library, checksum, read_symbol
from ..module import BuiltModule, size_binder
from ..shapes import SizeBinder
from ..sharedlib import load_bytes
from ..target import COptions, Target
from .codegen import INFO_SYMBOL, SERIAL_FLAG, entry_name

FORMAT = "schedlang-c-module"
VERSION = 1
_ENTRY = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int64))
_forked = False       # this process is a fork: libgomp's pool of the parent may be there, without its threads


def _after_fork_in_child() -> None:
    global _forked
    _forked = True


os.register_at_fork(after_in_child=_after_fork_in_child)


def module_info(kernel_ir: KernelModule, is_output: Sequence[bool], target: Target) -> Dict:
    """The record stored in the library: what load_module needs to check and make calls."""
    var_ids: Dict[Var, int] = {}
    binder = size_binder(kernel_ir)
    sizes = binder.to_json(var_ids) if binder is not None else None
    params = [{"name": b.name, "shape": [extent_to_json(n, var_ids) for n in b.shape], "dtype": str(b.dtype),
               "output": bool(out)} for b, out in zip(kernel_ir.params, is_output)]
    return {"format": FORMAT, "version": VERSION, "name": kernel_ir.name, "entry": entry_name(kernel_ir.name),
            "params": params, "options": {"cpu": target.cpu, "num_threads": target.num_threads,
                                          "threading": target.threading, "vector_bits": target.vector_bits},
            "size_vars": [{"name": v.name, "dtype": str(v.dtype), "nonnegative": v.nonnegative} for v in var_ids],
            "sizes": sizes}


class CModule(BuiltModule):
    """A program compiled to C. Call it with numpy arrays or CPU torch tensors, in argument order;
    results are written into the output arrays in place.

    ir: the text of every level and stage ("tensor", "loop", "tile", "kernel", "c").
    """

    def __init__(self, kernel_ir: KernelModule, is_output: Sequence[bool], target: Target, texts: Dict[str, str],
                 library: bytes):
        super().__init__(kernel_ir, is_output, target, texts)
        self._bind_library(library, entry_name(self.name))

    def _bind_library(self, library: bytes, entry: str) -> None:
        self._library = library
        lib = load_bytes(library)
        self._fn = _ENTRY(ctypes.cast(getattr(lib, entry), ctypes.c_void_p).value)
        self._lib = lib           # the entry lives as long as the library

    def get_source(self, fmt: str = "c") -> str:
        """The generated C99 source."""
        if fmt == "c":
            return self.ir["c"]
        raise ValueError(f"unknown source format {fmt!r}; the c target keeps 'c'")

    def export_library(self, path: str) -> None:
        """Write the module as a shared library that sl.load_module(path) loads and calls like this one."""
        write_atomically(path, self._library)

    def _arguments(self, arrays):
        """(the argument vector of a call, the arrays it points into): keep both alive while it runs."""
        arrays, pointers, sizes = self.bind_call(arrays)
        return (ctypes.c_void_p * max(1, len(pointers) + len(sizes)))(*pointers, *sizes), arrays

    def _run(self, argv) -> None:
        if _forked:      # parallel loops on the calling thread (codegen.SERIAL_FLAG)
            ctypes.c_int32.in_dll(self._lib, SERIAL_FLAG).value = 1
        failed = ctypes.c_int64(0)
        if self._fn(argv, ctypes.byref(failed)):
            raise MemoryError(f"{self.name}: could not allocate {failed.value} bytes for a temporary buffer")

    def __call__(self, *arrays) -> None:
        argv, _alive = self._arguments(arrays)
        self._run(argv)

    def time(self, *arrays, number: int = 10, repeat: int = 3, clock=time.perf_counter) -> float:
        """Best mean seconds per call (of clock: wall time, or time.process_time for the CPU time
        of a one-thread call, which neighbours on a shared machine do not inflate) over `repeat`
        runs of `number` calls (after one checked warm-up)."""
        for what, value in (("number", number), ("repeat", repeat)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"time(): {what} must be a positive integer, got {value!r}")
        argv, _alive = self._arguments(arrays)
        self._run(argv)
        best = float("inf")
        for _ in range(repeat):
            start = clock()
            for _ in range(number):
                self._run(argv)
            best = min(best, (clock() - start) / number)
        return best


class LoadedCModule(CModule):
    """A module from sl.load_module(path) of a library the c target exported: the same call and
    argument checks as the module that was exported, with no lowering or compiling."""

    def __init__(self, path: str, data: bytes, info: Dict):
        self.path = path
        options = info["options"]
        self.target = Target("c", COptions(**options))
        self.name = info["name"]
        variables = [Var(v["name"], dtype(v["dtype"]), nonnegative=v["nonnegative"]) for v in info["size_vars"]]
        self.params = [Buffer(p["name"], tuple(extent_from_json(n, variables) for n in p["shape"]), dtype(p["dtype"]))
                       for p in info["params"]]
        self._is_output = [bool(p["output"]) for p in info["params"]]
        self.ir = {}
        self._sizes = SizeBinder.from_json(info["sizes"], self.params, variables) if info["sizes"] else None
        self._bind_library(data, info["entry"])

    def get_source(self, fmt: str = "c") -> str:
        raise ValueError("a module loaded from a shared library keeps no source; "
                         "get_source() works on the module that sl.build returned")


def read_info(data: bytes, path: str) -> Dict:
    """The module record of a library's bytes (checked as an ELF library of this machine; no dlopen)."""
    check_library(data, path)
    if checksum(data) is None:      # (a mismatch was refused by check_library)
        raise ValueError(f"{path} cannot be loaded: the file is truncated or corrupt (its checksum is missing)")
    raw = read_symbol(data, INFO_SYMBOL, path)
    if raw is None:
        raise ValueError(f"{path} is not a schedlang module (it has no {INFO_SYMBOL}); "
                         "write one with mod.export_library(path)")
    try:
        return json.loads(raw.rstrip(b"\0").decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise ValueError(f"{path} cannot be loaded: its {INFO_SYMBOL} is not a JSON record (the file is corrupt)") \
            from None


def load_module(path: str) -> LoadedCModule:
    """A module that CModule.export_library(path) wrote."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no module file {path!r}")
    with open(path, "rb") as f:
        data = f.read()
    info = read_info(data, path)
    if info.get("format") != FORMAT or info.get("version") != VERSION:
        raise ValueError(f"{path} holds a schedlang module of format {info.get('format')!r} version "
                         f"{info.get('version')!r}; the c target reads {FORMAT!r} version {VERSION}")
    return LoadedCModule(path, data, info)
