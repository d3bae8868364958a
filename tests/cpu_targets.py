"""The targets that run on this machine's CPU, for the tests that check every one of them
(numerics, defined behaviour, the schedule fuzz, the TVM ports): llvm, and c where a C
compiler is found (skipped with the reason otherwise)."""
import pytest

from schedlang.target.c.compile import find_compiler

NO_CC = "the c target needs a C compiler (cc, gcc or clang on PATH, or $CC); none was found"
needs_cc = pytest.mark.skipif(find_compiler() is None, reason=NO_CC)
HAS_CC = find_compiler() is not None

def foreign_cpu_target():
    """(an llvm target for x86-64 plus a feature this machine lacks, so its code must not run
    here; that feature); skips the test where the host has every feature asked for."""
    from schedlang.target.llvm.jit import host_cpu
    rare = ("avx512fp16", "amx-tile", "avx10.2", "avx512vp2intersect")
    lacking = [f[1:] for f in host_cpu()[1].split(",") if f.startswith("-") and f[1:] in rare]
    if not lacking:
        pytest.skip("the host has every feature this test would ask for")
    return f"llvm -mcpu=x86-64 -mattr=+{lacking[0]}", lacking[0]


# for @pytest.mark.parametrize("target", CPU_TARGETS)
CPU_TARGETS = ("llvm", pytest.param("c", marks=needs_cc))


def runs_here(target) -> bool:
    """Whether code built for target can run on this CPU (no wider vectors than the host's):
    tests that sample or build for a foreign ISA check its numbers only where it runs."""
    import schedlang as sl
    return sl.Target.create(target).native_lanes(32) <= sl.Target.create("llvm").native_lanes(32)
