"""The backend registry: target kind -> Backend.

The built-in backends are imported when first asked for, so that `import schedlang`
does not load llvmlite (about 130 ms) or the CUDA toolchain.
"""
from __future__ import annotations

import importlib
from typing import Dict

from .backend import Backend
from .target import Target

_BACKENDS: Dict[str, Backend] = {}
_BUILTIN = {"llvm": "schedlang.target.llvm.backend", "cuda": "schedlang.target.cuda.backend"}


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
