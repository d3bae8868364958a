"""The targets that run on this machine's CPU, for the tests that check every one of them
(numerics, defined behaviour, the schedule fuzz, the TVM ports): llvm, and c where a C
compiler is found (skipped with the reason otherwise)."""
import pytest

from schedlang.target.c.compile import find_compiler

NO_CC = "the c target needs a C compiler (cc, gcc or clang on PATH, or $CC); none was found"
needs_cc = pytest.mark.skipif(find_compiler() is None, reason=NO_CC)
HAS_CC = find_compiler() is not None

# for @pytest.mark.parametrize("target", CPU_TARGETS)
CPU_TARGETS = ("llvm", pytest.param("c", marks=needs_cc))
