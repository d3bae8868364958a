"""ModuleGroup: several lowered functions built at once, as tvm.build([f1, f2]) builds one
module holding both; mod["name"] is the callable module of one function."""
from __future__ import annotations

from typing import Dict, List


class ModuleGroup:
    """The modules of functions built together, by function name (the name given to
    sl.lower(..., name=...))."""

    def __init__(self, modules: Dict[str, object]):
        self._modules = dict(modules)

    def __getitem__(self, name: str):
        if name not in self._modules:
            raise KeyError(f"no function {name!r} in this module; it has {', '.join(map(repr, self._modules))}")
        return self._modules[name]

    def __contains__(self, name: str) -> bool:
        return name in self._modules

    @property
    def names(self) -> List[str]:
        return list(self._modules)

    def __repr__(self) -> str:
        return f"<schedlang module group {', '.join(self._modules)}>"
