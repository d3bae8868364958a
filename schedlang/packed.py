"""The packed-function registry: Python functions that extern stages call by name
(TVM's tvm.register_func / tvm.get_global_func)."""
from __future__ import annotations

import threading
from typing import Callable, Dict, Optional

_FUNCS: Dict[str, Callable] = {}
_LOCK = threading.Lock()


def register_func(name, f: Optional[Callable] = None, override: bool = False):
    """Register f under name; without f, a decorator (@register_func("name") or
    @register_func, which uses the function's own name)."""
    if callable(name) and f is None:
        return register_func(name.__name__, name, override)
    if not isinstance(name, str) or not name:
        raise TypeError(f"register_func: the name must be a non-empty string, got {name!r}")

    def register(func: Callable) -> Callable:
        if not callable(func):
            raise TypeError(f"register_func('{name}'): expected a callable, got {func!r}")
        with _LOCK:
            if name in _FUNCS and not override:
                raise ValueError(f"register_func: '{name}' is already registered; pass override=True to replace it")
            _FUNCS[name] = func
        return func

    return register(f) if f is not None else register


def get_global_func(name: str, allow_missing: bool = False) -> Optional[Callable]:
    """The function registered under name (None if missing and allow_missing)."""
    func = _FUNCS.get(name)
    if func is None and not allow_missing:
        known = ", ".join(sorted(_FUNCS)) or "(none)"
        raise ValueError(f"no function is registered under '{name}' (registered: {known}); "
                         "register one with sl.register_func")
    return func


def remove_global_func(name: str) -> None:
    """Unregister name (for tests)."""
    with _LOCK:
        _FUNCS.pop(name, None)
