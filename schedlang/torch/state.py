"""The parameters, buffers and tensor constants of a compiled module, read from the module
at every call, as eager PyTorch reads them.

A compiled module keeps its nn.Module and looks each state tensor up by its name there
(`lin.weight`, `scale`) on each call, so `m.scale = torch.full(...)`,
`m.lin.weight = nn.Parameter(...)`, `m.lin.weight.data = ...` and in-place writes are all
seen. A state tensor the module does not have as an attribute (a constant torch.export
lifted out of forward) keeps the value captured at compile time. A replacement of another
shape or dtype than the one compiled for is refused (ValueError): the kernels were built
for that shape.

What is copied is kept per source tensor and made again when the source changes as torch
sees it: the tensor object, its storage (`data_ptr`) or its `_version` (every in-place write
through the tensor or a view of it). Copies are the device copy of a CPU module called with
target "cuda" (or the CPU copy emulate() reads) and the packed weights of prepack.py; a write
into the storage through `.data` (`w.data.copy_(x)`) bumps no version, so those copies do
not see it, as autograd does not.

A call first asks whether anything changed since the last one (same_as_last): each step of
the attribute paths read again from the dict it was found in, and each tensor's identity,
storage, version, shape, dtype and strides compared, in passes over flat lists (about 0.2 ms
for MobileNetV2's 314 tensors, where resolving and checking them took 1-2 ms). When nothing
did, the compiled module runs the kernel calls it bound last time (runtime._Prepared).
"""
from __future__ import annotations

from operator import attrgetter, eq, is_
from typing import Dict, List, Optional, Tuple

import torch

from ..target.arrays import is_on
from .dtypes import to_torch
from .torch_ir import TorchInput

_MISSING = object()


class ModuleState:
    """The state tensors of one compiled module (graph.state_inputs), current at each call."""

    def __init__(self, inputs: List[TorchInput], module: Optional[torch.nn.Module] = None):
        self.inputs = list(inputs)
        self.module = module
        self._copies: Dict[Tuple[str, str], Tuple[Version, torch.Tensor]] = {}
        self._expected: Optional[List[tuple]] = None
        self._plan: Optional[_PathPlan] = None
        self._last: Optional[_Snapshot] = None

    def current(self, given: Optional[Dict[str, torch.Tensor]] = None, remember: bool = False) -> Dict[str, torch.Tensor]:
        """name -> the module's tensor for each state input now (the captured one where the
        module has no such attribute; the one in given, by name, where the caller passes it:
        the Dynamo backend's parameters), checked against the compiled shape and dtype.
        remember: keep what same_as_last compares with."""
        out = {}
        if self._expected is None:       # what each input was compiled for, converted once
            self._expected = [(tuple(i.shape), to_torch(i.dtype), tuple(i.target.split(".")) if i.target else ())
                              for i in self.inputs]
            self._plan = _PathPlan([path for _, _, path in self._expected]) if self.module is not None else None
        self._last = None
        objs = self._plan.resolve_all(self.module) if self._plan is not None else None
        found = self._plan.leaves(objs) if objs is not None else None
        for k, (i, (shape, dtype, path)) in enumerate(zip(self.inputs, self._expected)):
            if given is not None and i.name in given:
                t = given[i.name]
            else:
                t = found[k] if found is not None and path else _MISSING
            if t is _MISSING:
                t = i.value
            elif not isinstance(t, torch.Tensor):
                raise TypeError(f"the module's {i.kind} {i.target} is now a {type(t).__name__}; the module was "
                                f"compiled with a tensor there")
            elif t.shape != shape or t.dtype != dtype:
                raise ValueError(f"the module's {i.kind} {i.target} is now {t.dtype} {tuple(t.shape)}; the module "
                                 f"was compiled for {to_torch(i.dtype)} {tuple(i.shape)}: compile it again")
            out[i.name] = t
        self._last = _Snapshot.of(out, given, self._plan, objs) if remember else None
        return out

    def same_as_last(self, given: Optional[Dict[str, torch.Tensor]] = None) -> Optional[Dict[str, torch.Tensor]]:
        """What the last current(remember=True) returned if it would return the same now (each tensor the
        same object, with the same storage, _version, shape, strides and dtype, found along the
        same attributes), else None: what was made from those tensors then (packed weights, a
        bound call) still holds."""
        last = self._last
        return last.current if last is not None and last.holds(given) else None

    def on_device(self, current: Dict[str, torch.Tensor], device: str) -> Dict[str, torch.Tensor]:
        """name -> the tensor of current (what current() returned), detached, on device (a
        copy kept until its source changes)."""
        out = {}
        for name, t in current.items():
            if is_on(t, device):
                out[name] = t.detach() if t.requires_grad else t
                continue
            hit = self._copies.get((name, device))
            if hit is None or hit[0].changed(t):
                hit = self._copies[(name, device)] = (Version(t), t.detach().to(device))
            out[name] = hit[1]
        return out

    def requiring_grad(self, tensors: Dict[str, torch.Tensor]) -> Optional[str]:
        """The name in the module of the first state tensor that requires grad, or None."""
        for i in self.inputs:
            if tensors[i.name].requires_grad:
                return i.target or i.name
        return None


class Version:
    """What a copy of the tensor t was made from: its storage, layout and `_version`."""

    def __init__(self, t: torch.Tensor):
        self.key = key_of(t)
        # Holding the storage keeps its address from being reused by a replacement tensor
        # (`w.data = torch.randn(...)` would otherwise often get the freed block back).
        self._pin = t.detach()

    def changed(self, t: torch.Tensor) -> bool:
        return key_of(t) != self.key


def key_of(t: torch.Tensor) -> tuple:
    """What a copy made from t depends on: its storage address, version, shape, strides,
    dtype and device (Version.changed compares it)."""
    try:                      # (cheaper than asking is_inference() first; t.shape is a tuple already)
        version = t._version
    except RuntimeError:      # inference tensors keep no version counter
        version = None
    return (t.data_ptr(), version, t.shape, t.stride(), t.dtype, t.device)


class _PathPlan:
    """The attribute paths of a module's state inputs as one tree of their distinct prefixes,
    parents first, so that a call looks each submodule up once by index (no tuple slicing or
    memo per step: MobileNetV2's 314 paths, 0.5 ms a call before)."""

    def __init__(self, paths: List[tuple]):
        index: Dict[tuple, int] = {(): 0}
        self.steps: List[Tuple[int, str]] = []      # (the parent's slot, the attribute name)
        self.slots: List[int] = []                  # each path's slot (0: the module itself)
        for path in paths:
            for d in range(1, len(path) + 1):
                if path[:d] not in index:
                    index[path[:d]] = len(index)
                    self.steps.append((index[path[:d - 1]], path[d - 1]))
            self.slots.append(index[path])

    def resolve(self, module) -> List[object]:
        """The object at each path (_MISSING where a step of it is missing), in paths' order."""
        return self.leaves(self.resolve_all(module))

    def resolve_all(self, module) -> List[object]:
        """The object at each slot: the module, then each step's (_MISSING where missing)."""
        objs = [module]
        for parent, name in self.steps:
            obj = objs[parent]
            objs.append(_MISSING if obj is _MISSING else _attribute(obj, name))
        return objs

    def leaves(self, objs: List[object]) -> List[object]:
        """The paths' objects among resolve_all's."""
        return [objs[k] for k in self.slots]


_META = attrgetter("_version", "shape", "dtype")
_data_ptr = torch.Tensor.data_ptr
_stride = torch.Tensor.stride


class _Snapshot:
    """What current() returned and where it found it, in flat lists that holds() checks at C
    speed (map over builtins): each step of the attribute paths as (the dict it was read from,
    the name, the object read), and each tensor's storage, version, shape, dtype and strides."""

    def __init__(self, current, given, tables, names, objs, missing, tensors):
        self.current = current
        self._given = frozenset(given) if given else frozenset()
        self._tables, self._names, self._objs, self._missing = tables, names, objs, missing
        self._tensors = tensors
        self._key = _tensor_key(tensors)

    @classmethod
    def of(cls, current: Dict[str, torch.Tensor], given, plan: Optional["_PathPlan"], objs) -> Optional["_Snapshot"]:
        """The snapshot of current(); None where a step is not a plain read of an nn.Module's
        tables or __dict__ (a property, a class attribute: such state is resolved at each call)."""
        tables, names, seen, missing = [], [], [], []
        for k, (parent, name) in enumerate(plan.steps if plan is not None else ()):
            obj, child = objs[parent], objs[k + 1]
            if obj is _MISSING:
                continue
            if child is _MISSING:                       # checked as current() checks it
                missing.append((obj, name))
                continue
            table = _table_of(obj, name, child)
            if table is None:
                return None
            tables.append(table)
            names.append(name)
            seen.append(child)
        tensors = list(current.values())
        if not all(isinstance(t, torch.Tensor) for t in tensors):
            return None
        return cls(current, given, tables, names, seen, missing, tensors)

    def holds(self, given) -> bool:
        if (given.keys() if given else frozenset()) != self._given:
            return False
        if not all(map(is_, map(dict.get, self._tables, self._names), self._objs)):
            return False
        if any(_attribute(obj, name) is not _MISSING for obj, name in self._missing):
            return False
        tensors = self._tensors
        if given:                # Dynamo's parameters: the same tensor objects as last time
            names = list(self.current)
            if not all(given[n] is t for n, t in zip(names, tensors) if n in given):
                return False
        ptrs, meta, strides = self._key
        try:                     # element by element, nothing kept: no list (nor garbage collection) per call
            return (all(map(eq, map(_data_ptr, tensors), ptrs)) and all(map(eq, map(_META, tensors), meta))
                    and all(map(eq, map(_stride, tensors), strides)))
        except RuntimeError:     # an inference tensor keeps no version counter
            return _tensor_key(tensors) == self._key


def _tensor_key(tensors: List[torch.Tensor]) -> tuple:
    """Storage, version, shape, dtype and strides of each tensor, in three passes."""
    try:
        meta = list(map(_META, tensors))
    except RuntimeError:      # an inference tensor keeps no version counter
        meta = [key_of(t)[1:3] + (t.dtype,) for t in tensors]
    return list(map(_data_ptr, tensors)), meta, list(map(_stride, tensors))


def _table_of(obj, name: str, child) -> Optional[dict]:
    """The dict of the nn.Module obj that obj.name reads child from (its __dict__, _parameters,
    _buffers or _modules, as _attribute looks), or None for another lookup (a class attribute)."""
    cls = type(obj)
    if not isinstance(obj, torch.nn.Module) or cls.__getattr__ is not torch.nn.Module.__getattr__ \
            or name in _class_names(cls):
        return None
    own = obj.__dict__
    if name in own:
        return own if own[name] is child else None
    for table in ("_parameters", "_buffers", "_modules"):
        found = own.get(table)
        if found is not None and name in found:
            return found if found[name] is child else None
    return None


_CLASS_NAMES: Dict[type, frozenset] = {}


def _attribute(obj, name: str):
    """getattr(obj, name, _MISSING); for a registered parameter, buffer or submodule of an
    nn.Module read from its tables as nn.Module.__getattr__ reads them, without the failed
    normal lookup before it (a few microseconds a step: MobileNetV2's 314 state tensors
    took 1.5 ms a call), unless a class attribute or the instance's own one comes first."""
    cls = type(obj)
    if isinstance(obj, torch.nn.Module) and cls.__getattr__ is torch.nn.Module.__getattr__:
        own = obj.__dict__
        if name not in own and name not in _class_names(cls):
            for table in ("_parameters", "_buffers", "_modules"):
                found = own[table].get(name, _MISSING) if table in own else _MISSING
                if found is not _MISSING:
                    return found
    return getattr(obj, name, _MISSING)


def _class_names(cls: type) -> frozenset:
    """The names cls and its bases define (kept per class)."""
    names = _CLASS_NAMES.get(cls)
    if names is None:
        names = _CLASS_NAMES[cls] = frozenset(k for c in cls.__mro__ for k in vars(c))
    return names
