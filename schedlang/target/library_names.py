"""The C library's function names: those generated code calls and those a compiler emits calls
to (memcpy for a copy loop, exp for a double-precision exp, fmod for a float remainder). A
function of ours defined under one of them takes the library's calls: a torch model whose
output op is `exp` built an entry function named exp, and LLVM's calls to exp for its float64
lanes called it (a crash). Both CPU targets give such a module or kernel another symbol."""
from __future__ import annotations

from .cexpr import MATH

_MEMORY_AND_RUNTIME = """malloc calloc realloc free aligned_alloc posix_memalign memcpy memmove memset memcmp
abort exit atexit main printf puts clock_gettime sincos sincosf exp10 exp10f frexp frexpf lgamma lgammaf tgamma
tgammaf cbrt cbrtf expm1 expm1f erfc erfcf fmin fminf fmax fmaxf rint rintf round roundf lround lroundf llround
llroundf fabs sqrt""".split()

LIBRARY_FUNCTIONS = frozenset(set(MATH.values()) | {fn[:-1] for fn in MATH.values()} | set(_MEMORY_AND_RUNTIME))
_PREFIXES = ("__", "GOMP_", "omp_", "kmp_", "sl_")


def is_library_name(name: str) -> bool:
    """Whether a symbol named name could be (or shadow) a C library or runtime function."""
    return name in LIBRARY_FUNCTIONS or name.startswith(_PREFIXES)
