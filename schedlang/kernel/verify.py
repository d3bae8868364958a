"""verify_kernel_module: the invariants of Kernel IR after split_kernels.

Besides the statement invariants of loop/verify.py (with flat accesses): kernel names are
unique; a kernel's parameters are module buffers (arguments or temporaries) and its body
touches no other buffer; launch axes have distinct tags and variables and positive
extents, and no loop inside the kernel binds a launch variable again; loops are serial or
parallel (unrolled and vectorized loops are gone, bound ones lifted into the launch).
"""
from __future__ import annotations

from ..errors import InternalError
from ..loop.nodes import PARALLEL, SERIAL, UNROLLED
from ..loop.verify import verify_stmt
from .nodes import KernelModule


def verify_kernel_module(module: KernelModule, where: str = "Kernel IR") -> KernelModule:
    """Raise InternalError on a broken invariant; returns module."""
    def fail(problem: str):
        raise InternalError(f"{where} of '{module.name}': {problem}")

    module_buffers = {id(b) for b in module.params + module.temps}
    if len(module_buffers) != len(module.params) + len(module.temps):
        fail("a buffer is listed twice among the module's arguments and temporaries")
    names = [k.name for k in module.kernels]
    if len(set(names)) != len(names):
        fail(f"kernel names repeat: {names}")
    for k in module.kernels:
        for b in k.params:
            if id(b) not in module_buffers:
                fail(f"kernel '{k.name}' takes buffer '{b.name}', which is neither an argument nor a temporary")
        tags = [a.tag for a in k.launch]
        if len(set(tags)) != len(tags):
            fail(f"kernel '{k.name}' launches over repeated axes {tags}")
        if len({id(a.var) for a in k.launch}) != len(k.launch):
            fail(f"kernel '{k.name}': two launch axes share one variable")
        for a in k.launch:
            if isinstance(a.extent, int) and a.extent <= 0:
                fail(f"kernel '{k.name}': launch axis {a.tag} has extent {a.extent}")
        verify_stmt(k.body, k.params, [a.var for a in k.launch] + list(k.sizes), flat=True, where=f"{where}, kernel '{k.name}'",
                    loop_kinds=(SERIAL, PARALLEL, UNROLLED))   # a backend may leave unrolling to its compiler
    return module
