"""run_module: every kernel of a CUDA module's Kernel IR, in order, on numpy arrays (outputs
written in place); with profile=True, the KernelProfile of each kernel."""
from __future__ import annotations

from typing import Dict, Optional, Sequence

import numpy as np

from ...expr.extent import evaluate_extent
from ...expr.nodes import Buffer, Var
from ...kernel.launch import shared_bytes
from ...kernel.nodes import KernelModule
from .geometry import Geometry
from .interpret import Machine
from .memory import Memory
from .occupancy import occupancy
from .profile import Counters, KernelProfile
from .races import GlobalWrites, RaceChecker


def run_module(module: KernelModule, arrays: Sequence[np.ndarray], arch: str = "sm_90",
               ptxas_info: Optional[dict] = None, profile: bool = False,
               sizes: Optional[Dict[Var, int]] = None) -> Optional[Dict[str, KernelProfile]]:
    """arrays: flat, writable numpy views of the module's parameters, in order (already checked);
    sizes: the size variables' values, with symbolic shapes."""
    sizes = sizes or {}
    missing = [v.name for v in module.sizes if v not in sizes]
    if missing:
        raise ValueError(f"{module.name}: no value for the size variable(s) {', '.join(missing)}")
    globals_: Dict[Buffer, np.ndarray] = dict(zip(module.params, arrays))
    for t in module.temps:
        globals_[t] = np.zeros(evaluate_extent(t.size, sizes), dtype=t.dtype.numpy)
    out = {}
    with np.errstate(all="ignore"):      # integer wrapping and float inf/nan are the defined results
        for k in module.kernels:
            g = Geometry(k, sizes)
            counters = Counters() if profile else None
            writes = GlobalWrites(g)
            for chunk in g.chunks():
                races = RaceChecker(chunk, k.name)
                Machine(k, chunk, Memory(chunk, globals_, races, writes, counters), races, counters, sizes).run()
            if profile:
                info = (ptxas_info or {}).get(k.name)
                regs = info.registers if info is not None else None
                smem = shared_bytes(k)
                out[k.name] = KernelProfile(k.name, g.blocks, g.threads, counters.load_requests,
                                            counters.load_sectors, counters.store_requests,
                                            counters.store_sectors, counters.shared_requests,
                                            counters.shared_wavefronts, counters.shared_ideal_wavefronts,
                                            counters.barriers, smem, regs,
                                            occupancy(arch, g.threads, smem, regs),
                                            {name: tuple(c) for name, c in counters.conflicts.items()})
    return out if profile else None
