"""Target descriptions: explicit, frozen configuration passed down through lowering."""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Union


@dataclass(frozen=True)
class Target:
    """Where code runs. kind is "llvm" (the host CPU) or "cuda".

    vector_bits: the widest native vector register (512 with AVX-512, 256 with AVX2).
    num_threads: worker threads for parallel loops (0: the OpenMP default, OMP_NUM_THREADS or all cores).
    threading: "openmp" runs parallel loops through libgomp (serially when it cannot be
    found); "serial" always runs them on the calling thread.
    bounds_check: check every load and store against its buffer (slow; for debugging):
    an access outside a buffer raises IndexError after the call instead of corrupting memory.
    fast_math: let LLVM reassociate and contract (fma) all float arithmetic. Off, floating point
    is IEEE: only a declared reduction's accumulation is reordered (and its a*b + acc fused).
    """

    kind: str
    cpu: str = ""
    features: str = ""
    vector_bits: int = 128
    num_threads: int = 0
    threading: str = "openmp"
    bounds_check: bool = False
    fast_math: bool = False

    def __post_init__(self):
        if self.kind not in ("llvm", "cuda"):
            raise ValueError(f"unknown target {self.kind!r}; use 'llvm' (the CPU) or 'cuda'")
        if self.threading not in ("openmp", "serial"):
            raise ValueError(f"unknown threading {self.threading!r}; use 'openmp' or 'serial'")
        if self.num_threads < 0 or self.vector_bits not in (128, 256, 512):
            raise ValueError("num_threads must be >= 0 and vector_bits one of 128, 256, 512")

    def with_options(self, **changes) -> "Target":
        """A copy with some fields changed, e.g. host.with_options(threading="serial")."""
        from dataclasses import replace
        return replace(self, **changes)

    def native_lanes(self, bits: int) -> int:
        """Lanes of one native vector register for elements of `bits` bits."""
        return max(1, self.vector_bits // max(bits, 8))

    def __str__(self) -> str:
        return self.kind if not self.cpu else f"{self.kind} -mcpu={self.cpu}"

    @staticmethod
    def create(spec: Union[str, "Target"]) -> "Target":
        if isinstance(spec, Target):
            if spec.kind == "llvm" and not spec.cpu:     # a partial CPU target: fill in the host
                host = host_target()
                return spec.with_options(cpu=host.cpu, features=host.features)
            return spec
        if not isinstance(spec, str):
            raise TypeError(f"target must be 'llvm', 'cuda' or a Target, got {spec!r}")
        kind = spec.split()[0] if spec.strip() else spec
        if kind == "llvm":
            return host_target()
        if kind == "cuda":
            return Target("cuda", vector_bits=128)
        raise ValueError(f"unknown target {spec!r}; use 'llvm' (the CPU) or 'cuda'")


@lru_cache(maxsize=1)
def host_target() -> Target:
    """The CPU this process runs on, with its full feature set."""
    from .llvm.jit import host_cpu
    name, features = host_cpu()
    bits = 512 if "+avx512f" in features.split(",") else 256 if "+avx2" in features.split(",") or "+avx" in features.split(",") else 128
    return Target("llvm", name, features, bits)
