"""An in-memory cache of built modules, so that building the same schedule of the same
program for the same target again returns the module already compiled (LLVM is 80 % of
build time).

The key is everything that determines the code:
- the program's canonical JSON (tensor/serialize.py: id-free, with names),
- the schedule's steps as JSON (steps name stages and axes by their unique names, so the
  same steps on the same program are the same schedule),
- the stage name of each argument, in the caller's order (the module's parameters follow
  args, so a different order is a different module),
- the target (a frozen, comparable object, every option included) and the module name.

A built module is found while it is alive anywhere (the cache refers to it weakly), and the
cache itself keeps the MAX_MODULES most recently used alive. A dropped module's LLVM code
costs most of a megabyte, so that bound is what stays of modules the program no longer
holds (schedlang.torch.compile builds each part through this cache: compiling and dropping
many models must not keep a module per part). A miss is looked up in the on-disk cache
(kernel_cache.py) before compiling, and what is compiled is stored there. Turn both off for one build with
``sl.build(..., cache=False)`` or for the process with ``schedlang.build_cache.ENABLED = False``.
"""
from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable, Hashable, Optional, Sequence

from . import kernel_cache
from .build_key import build_key

ENABLED = True
MAX_MODULES = 8


@dataclass
class CacheStats:
    """hits: builds answered from the cache; misses: builds that compiled and were stored
    (a build loaded from the disk cache is neither: kernel_cache.stats.loads counts it)."""

    hits: int = 0
    misses: int = 0


stats = CacheStats()
_modules: "OrderedDict[Hashable, object]" = OrderedDict()     # kept alive, least recently used first
_alive: "weakref.WeakValueDictionary[Hashable, object]" = weakref.WeakValueDictionary()
_lock = threading.Lock()


def clear() -> None:
    """Forget every cached module and reset the counters."""
    with _lock:
        _modules.clear()
        _alive.clear()
        stats.hits = stats.misses = 0


def size() -> int:
    """Modules the cache keeps alive now (at most MAX_MODULES; live modules beyond are found too)."""
    return len(_modules)


def cached_build(s, args: Sequence, target, name: Optional[str], enabled: Optional[bool],
                 build: Callable[[], object]):
    """build()'s module, or the cached one built from an equal key."""
    use = ENABLED if enabled is None else enabled
    key = build_key(s, args, target, name) if use else None
    if key is None:
        return build()
    with _lock:
        module = _modules.get(key)
        if module is None:
            module = _alive.get(key)
        if module is not None:
            _keep(key, module)
            stats.hits += 1
            return module
    module = kernel_cache.load(key, target)
    compiled = module is None
    if compiled:
        module = build()
        kernel_cache.store(key, target, module)
    with _lock:
        try:
            _alive[key] = module
        except TypeError:      # a registered backend's module with no weak reference (a tuple): the LRU only
            pass
        _keep(key, module)
        stats.misses += compiled
    return module


def _keep(key: Hashable, module) -> None:
    """module is the most recently used; the least recently used beyond MAX_MODULES are let go."""
    _modules[key] = module
    _modules.move_to_end(key)
    while len(_modules) > MAX_MODULES:
        _modules.popitem(last=False)
