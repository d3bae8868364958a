"""load_module: a shared library written by export_library, callable like the built module.

Every check is made on the file's bytes before the dynamic loader sees them (target/elf.py:
a whole ELF library for this machine, its checksum, the module record read without
loading), and what is loaded is exactly those bytes, from a private copy
(target/sharedlib.py): a file re-exported to the same path runs its new code."""
from __future__ import annotations

import ctypes
import json
import os
from typing import Optional

from ...dtypes import dtype
from ...expr.extent import extent_from_json
from ...expr.nodes import Buffer, Var
from ..elf import check_library, checksum, read_symbol
from ..shapes import SizeBinder
from ..sharedlib import load_bytes
from ..target import LLVMOptions, Target
from .cpus import why_not_runnable
from . import forksafe
from .forksafe import SERIAL_FLAG
from .jit import host_cpu
from . import packed
from .library import FORMAT, INFO_SYMBOL, PACKED_HOOK, VERSION
from .module import LLVMModule
from .runtime import openmp_library


class _Library:
    """The loaded library's symbols, as the module's call path asks for them."""

    def __init__(self, lib: ctypes.CDLL):
        self.lib = lib

    def address(self, name: str) -> int:
        return ctypes.cast(getattr(self.lib, name), ctypes.c_void_p).value

    def global_address(self, name: str) -> int:
        return ctypes.addressof(ctypes.c_char.in_dll(self.lib, name))


class LoadedModule(LLVMModule):
    """A module from sl.load_module(path): the same call, argument checks and timing as the
    module that was exported, without lowering or LLVM code generation."""

    def __init__(self, path: str, data: Optional[bytes] = None):
        info, lib = _open(path, data)
        self.path = path
        self.target = Target("llvm", LLVMOptions(**info["options"]))
        self.name = info["name"]
        variables = [Var(v["name"], dtype(v["dtype"]), nonnegative=v["nonnegative"])
                     for v in info.get("size_vars", [])]
        self.params = [Buffer(p["name"], tuple(extent_from_json(n, variables) for n in p["shape"]), dtype(p["dtype"]))
                       for p in info["params"]]
        self._is_output = [bool(p["output"]) for p in info["params"]]
        self.parallel_runtime = openmp_library() if info["openmp"] else None
        self.ir = {}
        self._source = None
        self._buffer_names = list(info["buffer_names"])
        self._compiled = _Library(lib)
        sizes = info.get("sizes")
        self._sizes = SizeBinder.from_json(sizes, self.params, variables) if sizes else None
        self._bind_entry(info["entry"], bool(info["openmp"]), len(self._sizes.sizes) if self._sizes else 0)
        self._packed_hook = _HOOKS.get(lib._handle)
        self._not_runnable = None
        self.kernel_names = list(info.get("kernels", []))

    def get_source(self, fmt: str = "ll") -> str:
        raise ValueError("a module loaded from a shared library keeps no source; "
                         "get_source() works on the module that sl.build returned")

    def export_library(self, path: str) -> None:
        raise ValueError("a loaded module cannot be exported again; copy its file instead")


_HOOKS: dict = {}     # library handle -> its extern-call callback (kept as long as the library)


def _bind_packed_calls(lib: ctypes.CDLL, calls) -> None:
    """Point the library's extern-call hook at a callback that calls, by name, the functions
    registered in this process (sl.register_func)."""
    if not calls:
        return
    table = {int(call_id): (func, [tuple(spec) for spec in specs]) for call_id, (func, specs) in calls.items()}

    def call(call_id: int, argv: int) -> None:
        if call_id not in table:
            packed.record_error(RuntimeError(f"extern call id {call_id} is not in the library's table"))
            return
        packed.call_descriptor(*table[call_id], argv)

    _HOOKS[lib._handle] = packed.CALLBACK(call)
    ctypes.c_void_p.in_dll(lib, PACKED_HOOK).value = ctypes.cast(_HOOKS[lib._handle], ctypes.c_void_p).value


def _first_load(info: dict):
    """What a library needs once, when its contents are loaded for the first time (loading
    equal contents again shares the library: sharedlib.load_bytes)."""
    def setup(lib: ctypes.CDLL) -> None:
        _bind_packed_calls(lib, info.get("packed"))
        if info["openmp"]:
            try:
                forksafe.add_library_flag(ctypes.addressof(ctypes.c_char.in_dll(lib, SERIAL_FLAG)))
            except ValueError:     # no parallel launch in this library, so no flag either
                pass
    return setup


def _read(path: str) -> bytes:
    if os.path.isdir(path):
        raise ValueError(f"{path!r} is a directory, not a module file; load the .so that export_library wrote")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no module file {path!r}")
    with open(path, "rb") as f:
        return f.read()


def _info(data: bytes, path: str) -> dict:
    """The module record stored in the library, read from its bytes (no dlopen)."""
    check_library(data, path)
    raw = read_symbol(data, INFO_SYMBOL, path)
    if raw is None:
        raise ValueError(f"{path} is not a schedlang module (it has no {INFO_SYMBOL}); "
                         "write one with mod.export_library(path)")
    try:
        info = json.loads(raw.rstrip(b"\0").decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise ValueError(f"{path} cannot be loaded: its {INFO_SYMBOL} is not a JSON record (the file is corrupt)") \
            from None
    if not isinstance(info, dict) or info.get("format") != FORMAT or info.get("version") not in (1, 2, VERSION):
        got = (f"format {info.get('format')!r} version {info.get('version')!r}" if isinstance(info, dict)
               else "no format")
        raise ValueError(f"{path} holds a schedlang module of {got}; this schedlang reads {FORMAT!r} "
                         f"versions 1 to {VERSION}")
    if info["version"] >= 3 and checksum(data) is None:      # a mismatch was refused by check_library
        raise ValueError(f"{path} cannot be loaded: the file is truncated or corrupt (its checksum is missing)")
    return info


def _open(path: str, data: Optional[bytes] = None):
    """(module record, library), checked before anything of the file is loaded; data, when
    given, is the file's contents already read (path then only names it in messages)."""
    data = _read(path) if data is None else data
    info = _info(data, path)
    _check_host_runs(path, info["options"])
    # Load the JIT's libgomp first, so that a module with parallel loops shares it with
    # modules built in this process (two OpenMP runtimes would each start their threads).
    openmp_library()
    return info, load_bytes(data, _first_load(info))


def _check_host_runs(path: str, options: dict) -> None:
    """Refuse a library compiled for what this machine lacks (calling it would kill the
    process with an illegal instruction)."""
    why = why_not_runnable(options["cpu"], options["features"], *host_cpu())
    if why:
        raise ValueError(f"{path} cannot run here: {why}; build it again on this machine, or export it "
                         "for a CPU both machines have (target='llvm -mcpu=...')")


def load_module(path: str) -> LoadedModule:
    """A module that mod.export_library(path) wrote, ready to call."""
    return LoadedModule(path)
