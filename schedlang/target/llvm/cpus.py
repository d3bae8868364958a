"""Which CPUs and features LLVM knows, and the vector width a CPU gives.

LLVM aborts the process (rather than raising) when asked to generate code for a CPU
name it does not know ("64-bit code requested on a subtarget that doesn't support
it"), and only warns about unknown features. So a CPU or feature set other than the
host's is first tried in a child process: it prints LLVM's own catalogue (a target
machine for the CPU "help" lists every CPU and feature) and compiles a small probe,
whose registers say the widest vector (zmm: 512 bits, ymm: 256, xmm: 128). A name
LLVM does not know, or a combination it cannot compile, becomes a ValueError here.
"""
from __future__ import annotations

import difflib
import subprocess
import sys
from dataclasses import dataclass
from functools import lru_cache
from typing import Dict, FrozenSet, Optional, Tuple

from ..host import switched_on, vector_bits_of

_CATALOGUE_END = "<<schedlang: end of catalogue>>"

# The child: print the catalogue on stderr, then compile the probe for (cpu, features).
# The probe exercises float, double and integer vectors and a scalar float return, so a
# feature set that breaks code generation (say -sse2 on x86-64) fails here, not in a build.
_CHILD = r'''
import sys
import llvmlite.binding as llvm
llvm.initialize_native_target(); llvm.initialize_native_asmprinter(); llvm.initialize_native_asmparser()
target = llvm.Target.from_default_triple()
target.create_target_machine(cpu="help")
sys.stderr.write("\n%s\n" % sys.argv[3]); sys.stderr.flush()
tm = target.create_target_machine(cpu=sys.argv[1], features=sys.argv[2], opt=2)
probe = """
define float @probe(ptr %p, ptr %q, ptr %r) #0 {
  %a = load <16 x float>, ptr %p, align 64
  %b = fmul <16 x float> %a, %a
  store <16 x float> %b, ptr %p, align 64
  %c = load <8 x double>, ptr %q, align 64
  %d = fadd <8 x double> %c, %c
  store <8 x double> %d, ptr %q, align 64
  %e = load <16 x i32>, ptr %r, align 64
  %f = mul <16 x i32> %e, %e
  store <16 x i32> %f, ptr %r, align 64
  %s = extractelement <16 x float> %b, i32 0
  ret float %s
}
attributes #0 = { nounwind "prefer-vector-width"="512" }
"""
asm = tm.emit_assembly(llvm.parse_assembly(probe))
print(512 if "zmm" in asm else 256 if "ymm" in asm else 128)
'''


@dataclass(frozen=True)
class Catalogue:
    cpus: FrozenSet[str]
    features: FrozenSet[str]


def _parse_catalogue(text: str) -> Catalogue:
    sections: Dict[str, set] = {"cpus": set(), "features": set()}
    current = None
    for line in text.split(_CATALOGUE_END)[0].splitlines():
        if line.startswith("Available CPUs"):
            current = "cpus"
        elif line.startswith("Available features"):
            current = "features"
        elif current and line.startswith("  ") and " - " in line:
            sections[current].add(line.split()[0])
    return Catalogue(frozenset(sections["cpus"]), frozenset(sections["features"]))


@lru_cache(maxsize=32)
def _try(cpu: str, features: str) -> Tuple[Catalogue, int, str]:
    """(LLVM's catalogue, the probe's exit status, its stdout or last error line)."""
    done = subprocess.run([sys.executable, "-c", _CHILD, cpu, features, _CATALOGUE_END],
                          capture_output=True, text=True, timeout=120)
    catalogue = _parse_catalogue(done.stderr)
    if not catalogue.cpus:
        raise RuntimeError(f"could not read LLVM's CPU list from llvmlite: {done.stderr.strip()[-500:]}")
    tail = done.stderr.split(_CATALOGUE_END)[-1].strip().splitlines()
    message = done.stdout.strip() if done.returncode == 0 else (tail[-1] if tail else f"exit status {done.returncode}")
    return catalogue, done.returncode, message


def _unknown(kind: str, name: str, known) -> ValueError:
    close = difflib.get_close_matches(name, sorted(known), n=4, cutoff=0.6)
    hint = (f"; did you mean {', '.join(close)}?" if close
            else f"; LLVM knows {len(known)} {kind}s for this machine's architecture")
    return ValueError(f"unknown {kind} {name!r} for the llvm target{hint}")


def check_cpu(cpu: str, features: str, user_features: str) -> int:
    """Check a CPU name and the user's feature switches against LLVM's catalogue, compile a
    probe for them, and return the widest vector in bits. Raises ValueError naming what is wrong."""
    catalogue, status, message = _try(cpu, features)
    if cpu not in catalogue.cpus:
        raise _unknown("CPU", cpu, catalogue.cpus)
    for switch in user_features.split(",") if user_features else ():
        if switch[1:] not in catalogue.features:
            raise _unknown("CPU feature", switch[1:], catalogue.features)
    if status != 0:
        raise ValueError(f"LLVM cannot generate code for -mcpu={cpu} -mattr={features}: {message}")
    return int(message)


def why_not_runnable(cpu: str, features: str, host_name: str, host_features: str) -> Optional[str]:
    """Why machine code for (cpu, features) may not run on the host (an illegal instruction
    would kill the process), or None. Known: features switched on explicitly, and a named
    CPU's vector width; a named CPU's other implied features are not visible from llvmlite."""
    if (cpu, features) == (host_name, host_features):
        return None
    missing = sorted(switched_on(features) - switched_on(host_features))
    if not missing and cpu != host_name:
        bits = check_cpu(cpu, features, "")
        if bits > vector_bits_of(host_features):
            missing = [f"{bits}-bit vectors"]
    if not missing:
        return None
    return (f"code for CPU {cpu!r} uses what this machine ({host_name}) lacks: {', '.join(missing)}")


def merge_features(base: str, changes: str) -> str:
    """The feature string `base` with the switches in `changes` applied. The changes come
    last, in the user's order, because LLVM applies switches in order and each one carries
    its implications: -avx512f placed before +avx512vl would be undone by it."""
    changed = {c[1:] for c in changes.split(",")} if changes else set()
    kept = [f for f in base.split(",") if f and f[1:] not in changed] if base else []
    return ",".join(kept + ([changes] if changes else []))


# Cores with two 512-bit FMA pipes (Intel Xeon since Skylake-SP; conv_schedules._sums_score)
TWO_ZMM_FMA_CPUS = frozenset({"skylake-avx512", "cascadelake", "cooperlake", "icelake-server",
                              "sapphirerapids", "emeraldrapids", "graniterapids"})

# L2 bytes per core of the x86 server CPUs whose schedules size a working set by it
# (conv_schedules._l2_blocks); vendors' figures. Others read as DEFAULT_L2_BYTES: Zen 4's 1 MB,
# on which those budgets were first measured.
L2_BYTES = {"skylake-avx512": 1 << 20, "cascadelake": 1 << 20, "cooperlake": 1 << 20,
            "icelake-server": 1280 << 10, "sapphirerapids": 2 << 20, "emeraldrapids": 2 << 20,
            "graniterapids": 2 << 20, "znver4": 1 << 20, "znver5": 1 << 20}
DEFAULT_L2_BYTES = 1 << 20


def l2_bytes(cpu: str) -> int:
    """The L2 cache per core of the LLVM CPU name cpu (L2_BYTES; DEFAULT_L2_BYTES where not
    listed). From the name, not the host, so that a target's code is the same on every host."""
    return L2_BYTES.get(cpu, DEFAULT_L2_BYTES)
