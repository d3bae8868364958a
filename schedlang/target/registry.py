"""The backend registry: target kind -> Backend.

The built-in backends are imported when first asked for, so that `import schedlang`
does not load llvmlite (about 130 ms) or the CUDA toolchain.
"""
from __future__ import annotations

import importlib
import json
import os
import re
from typing import Dict

from .backend import Backend
from .elf import check_library, read_symbol
from .target import Target

_BACKENDS: Dict[str, Backend] = {}
_BUILTIN = {"llvm": "schedlang.target.llvm.backend", "cuda": "schedlang.target.cuda.backend",
            "c": "schedlang.target.c.backend"}


def register_backend(kind: str, backend: Backend) -> None:
    """Make `backend` build targets of `kind` (replacing any backend registered before)."""
    if not isinstance(backend, Backend):
        raise TypeError(f"a backend must be a schedlang.target.Backend, got {type(backend).__name__}")
    _BACKENDS[kind] = backend


def get_backend(kind: str) -> Backend:
    """The backend for a target kind."""
    if kind not in _BACKENDS and kind in _BUILTIN:
        register_backend(kind, importlib.import_module(_BUILTIN[kind]).BACKEND)
    if kind not in _BACKENDS:
        known = sorted(set(_BACKENDS) | set(_BUILTIN))
        raise ValueError(f"no backend for target kind {kind!r}; registered: {', '.join(known)}")
    return _BACKENDS[kind]


def resolve_target(spec) -> Target:
    """Target.create: parse a target string (or take a Target) and let its backend resolve it."""
    target = Target.parse(spec)
    return get_backend(target.kind).resolve_target(target)


def library_kind(path: str) -> str:
    """The target kind whose export_library wrote the file at path: its module record (the constant
    schedlang_module_info) has the format "schedlang-<kind>-module". Anything else is "llvm", whose
    loader says what is wrong with the file."""
    try:
        with open(path, "rb") as f:
            data = f.read()
        check_library(data, path)
        raw = read_symbol(data, "schedlang_module_info", path)
        found = re.fullmatch(r"schedlang-(\w+)-module", json.loads(raw.rstrip(b"\0").decode())["format"])
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return "llvm"
    return found.group(1) if found and (found.group(1) in _BACKENDS or found.group(1) in _BUILTIN) else "llvm"


def load_library_module(path: str):
    """sl.load_module: a module that mod.export_library(path) wrote, loaded by its backend."""
    return get_backend(library_kind(path) if os.path.isfile(path) else "llvm").load_module(path)
