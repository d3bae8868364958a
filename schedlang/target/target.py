"""Target descriptions: explicit, frozen configuration passed down through lowering.

A Target is a kind ("llvm" for the CPU, "cuda", "c") and a frozen options object of that
kind (LLVMOptions, CUDAOptions, COptions) that checks its fields when built. Passes read the
options; none compares kind strings. This module is a leaf: it imports no backend.
What depends on the machine or on LLVM (the host CPU, which CPU names exist) is the
backend's job: Target.create() asks the backend registry to resolve a target.

Targets are written as TVM writes them: "llvm -mcpu=skylake-avx512 -mattr=+avx2,-avx512f",
"cuda -arch=sm_80".
"""
from __future__ import annotations

import platform
import re
import typing
from dataclasses import dataclass, fields, replace
from functools import lru_cache
from typing import ClassVar, Dict, Optional, Union

_FEATURE = re.compile(r"[+-][A-Za-z0-9_.-]+$")
CACHE_LINE_BYTES = 64   # a cache line of the CPUs the llvm and c targets compile for (x86-64, AArch64's common cores)



def _check_host_options(opts) -> None:
    """The checks LLVMOptions and COptions share: threading, num_threads, vector_bits, cpu."""
    if opts.threading not in ("openmp", "serial"):
        raise ValueError(f"unknown threading {opts.threading!r}; use 'openmp' or 'serial'")
    if opts.num_threads < 0:
        raise ValueError(f"num_threads must be >= 0 (0: the OpenMP default), got {opts.num_threads}")
    if opts.vector_bits is not None and (isinstance(opts.vector_bits, bool)
                                         or opts.vector_bits not in opts.VECTOR_BITS):
        raise ValueError(f"vector_bits must be one of {', '.join(map(str, opts.VECTOR_BITS))}, "
                         f"got {opts.vector_bits!r}")
    if opts.cpu and not re.fullmatch(r"[A-Za-z0-9_.-]+", opts.cpu):
        raise ValueError(f"malformed CPU name {opts.cpu!r}")
    regs = opts.vector_registers
    if regs is not None and (isinstance(regs, bool) or not isinstance(regs, int) or not 1 <= regs <= 256):
        raise ValueError(f"vector_registers must be a register count from 1 to 256, got {regs!r}")


def vector_registers_for(vector_bits: int, machine: Optional[str] = None) -> int:
    """Vector registers a CPU of this vector width has: on x86-64, 32 zmm with AVX-512 and 16
    (ymm or xmm) below it; 32 on AArch64 (NEON/SVE) and on other architectures (RISC-V V,
    POWER VSX's 64 counted as their 32 vector-only ones). machine: platform.machine() of the
    code's host (the default: the llvm and c targets compile for the host only)."""
    machine = (machine or platform.machine()).lower()
    if machine in ("x86_64", "amd64", "i386", "i686", "x86"):
        return 32 if vector_bits >= 512 else 16
    return 32


def _check_type(cls_name: str, name: str, value, kinds) -> None:
    # bool is an int in Python; a flag must not pass as a count, nor a count as a flag.
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        want = " or ".join(k.__name__ for k in kinds)
        raise TypeError(f"{cls_name}.{name} must be {want}, got {value!r}")


@dataclass(frozen=True)
class LLVMOptions:
    """Options of the CPU target.

    cpu: the LLVM CPU name ("haswell", "znver4"); "" means the host CPU.
    features: LLVM feature switches ("+avx2,-avx512f"). With cpu="" they change the host's
    features; with a cpu they change that CPU's defaults.
    vector_bits: the widest native vector register (512 with AVX-512, 256 with AVX2);
    None until the target is resolved, which derives it from the CPU's features.
    vector_registers: how many vector registers the CPU has (32 zmm with AVX-512, 16 ymm/xmm
    on x86-64 below it, 32 on AArch64); None: derived from vector_bits (native_registers()).
    The auto-scheduler sizes register tiles by it.
    num_threads: worker threads for parallel loops (0: the OpenMP default, OMP_NUM_THREADS or all cores).
    threading: "openmp" runs parallel loops through libgomp (serially when it cannot be
    found); "serial" always runs them on the calling thread.
    bounds_check: check every load and store against its buffer (slow; for debugging):
    an access outside a buffer raises IndexError after the call instead of corrupting memory.
    fast_math: let LLVM reassociate and contract (fma) all float arithmetic. Off, floating point
    is IEEE: only a declared reduction's accumulation is reordered (and its a*b + acc fused).
    streaming_stores: store the large outputs a module only writes with non-temporal stores
    where aligned (target/llvm/streaming.py: outputs at least the size of the last-level cache,
    x86-64); off, every store goes through the caches.
    triple: TVM's -mtriple; accepted when it names the host's architecture and OS (the
    code is always for the host's triple: no cross-compilation).
    profile: time each kernel of every call, as TVM's debug executor times each operator of a
    graph: the module's kernel_times() reads the times (the clock read before and after each
    kernel: tens of nanoseconds a kernel; "llvm -profile").
    """

    cpu: str = ""
    features: str = ""
    vector_bits: Optional[int] = None
    vector_registers: Optional[int] = None
    num_threads: int = 0
    threading: str = "openmp"
    bounds_check: bool = False
    fast_math: bool = False
    triple: str = ""
    streaming_stores: bool = True
    profile: bool = False

    # TVM's spelling of some options in a target string ("llvm -mcpu=... -num-cores=4").
    FLAGS: ClassVar[Dict[str, str]] = {"mcpu": "cpu", "mattr": "features", "num-cores": "num_threads",
                                       "mtriple": "triple"}
    VECTOR_BITS: ClassVar[tuple] = (128, 256, 512)

    def __post_init__(self):
        for name in ("cpu", "features", "threading", "triple"):
            _check_type("LLVMOptions", name, getattr(self, name), (str,))
        for name in ("bounds_check", "fast_math", "streaming_stores", "profile"):
            _check_type("LLVMOptions", name, getattr(self, name), (bool,))
        _check_type("LLVMOptions", "num_threads", self.num_threads, (int,))
        _check_host_options(self)
        for f in self.features.split(",") if self.features else ():
            if not _FEATURE.match(f):
                raise ValueError(f"malformed CPU feature {f!r} in {self.features!r}; write +name or -name, "
                                 "e.g. -mattr=+avx2,-avx512f")

    def flags(self) -> str:
        """The options as target-string flags (for printing)."""
        out = [f"-mcpu={self.cpu}"] if self.cpu else []
        if self.vector_registers is not None:       # set by the user: measurement workers need it too
            out.append(f"-vector-registers={self.vector_registers}")
        return " ".join(out)


@dataclass(frozen=True)
class CUDAOptions:
    """Options of the CUDA target: the GPU architecture and its limits."""

    arch: str = "sm_90"
    warp_size: int = 32
    max_threads_per_block: int = 1024
    max_shared_memory_per_block: int = 48 * 1024
    vector_bits: int = 128        # the widest CUDA load/store is 16 bytes (float4)

    FLAGS: ClassVar[Dict[str, str]] = {"thread_warp_size": "warp_size"}
    VECTOR_BITS: ClassVar[tuple] = (32, 64, 128)

    def __post_init__(self):
        _check_type("CUDAOptions", "arch", self.arch, (str,))
        if not re.fullmatch(r"sm_\d{2,3}[af]?", self.arch):
            raise ValueError(f"malformed CUDA architecture {self.arch!r}; write sm_<major><minor>, e.g. 'sm_90'")
        for name in ("warp_size", "max_threads_per_block", "max_shared_memory_per_block", "vector_bits"):
            _check_type("CUDAOptions", name, getattr(self, name), (int,))
            if getattr(self, name) <= 0:
                raise ValueError(f"CUDAOptions.{name} must be positive, got {getattr(self, name)}")
        if self.warp_size & (self.warp_size - 1):
            raise ValueError(f"warp_size must be a power of two, got {self.warp_size}")
        if self.max_threads_per_block % self.warp_size:
            raise ValueError(f"max_threads_per_block ({self.max_threads_per_block}) must be a multiple of the "
                             f"warp size ({self.warp_size})")
        if self.vector_bits not in self.VECTOR_BITS:
            raise ValueError(f"vector_bits must be one of {', '.join(map(str, self.VECTOR_BITS))}, "
                             f"got {self.vector_bits}")

    def flags(self) -> str:
        return f"-arch={self.arch}"


@dataclass(frozen=True)
class COptions:
    """Options of the c target: portable C99 compiled by the system C compiler (TVM's "c").

    cpu: the compiler's -march ("" means -march=native, this machine's CPU).
    vector_bits: the widest native vector register; None until resolved (from the host's CPU flags).
    vector_registers: as LLVMOptions.vector_registers (None: derived from vector_bits).
    num_threads: threads of a parallel loop (0: the OpenMP default, OMP_NUM_THREADS or all cores).
    threading: "openmp" compiles parallel loops as `#pragma omp parallel for`; "serial" leaves them serial.
    """

    cpu: str = ""
    vector_bits: Optional[int] = None
    vector_registers: Optional[int] = None
    num_threads: int = 0
    threading: str = "openmp"

    FLAGS: ClassVar[Dict[str, str]] = {"mcpu": "cpu", "num-cores": "num_threads"}
    VECTOR_BITS: ClassVar[tuple] = (128, 256, 512)

    def __post_init__(self):
        for name in ("cpu", "threading"):
            _check_type("COptions", name, getattr(self, name), (str,))
        _check_type("COptions", "num_threads", self.num_threads, (int,))
        _check_host_options(self)

    def flags(self) -> str:
        out = [f"-mcpu={self.cpu}"] if self.cpu else []
        if self.vector_registers is not None:
            out.append(f"-vector-registers={self.vector_registers}")
        return " ".join(out)


Options = Union[LLVMOptions, CUDAOptions, COptions]
OPTIONS: Dict[str, type] = {"llvm": LLVMOptions, "cuda": CUDAOptions, "c": COptions}


@dataclass(frozen=True, init=False)
class Target:
    """Where code runs: a kind and that kind's options.

    Target("llvm"), Target(bounds_check=True) (the kind defaults to "llvm"),
    Target("llvm -mcpu=haswell"), Target("cuda", CUDAOptions(arch="sm_80")). The kind's
    option fields read through the target as well (target.vector_bits is
    target.options.vector_bits).
    """

    kind: str
    options: Options

    def __init__(self, kind: str = "llvm", options: Optional[Options] = None, **option_fields):
        if not isinstance(kind, str):
            raise TypeError(f"target kind must be a string such as 'llvm' or 'cuda', got {kind!r}")
        kind, parsed = _parse(kind)
        cls = OPTIONS[kind]
        if options is None:
            options = cls()
        elif not isinstance(options, cls):
            raise TypeError(f"the {kind} target takes {cls.__name__}, got {type(options).__name__}")
        changes = {**parsed, **option_fields}
        if changes:
            options = _replace(kind, options, changes)
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "options", options)

    def __getattr__(self, name: str):
        # Only reached when normal lookup fails. __dict__ is read directly so that copying
        # and unpickling (which look up hooks before the fields exist) do not recurse.
        options = self.__dict__.get("options")
        if name.startswith("__") or options is None:
            raise AttributeError(name)
        if name in _field_names(type(options)):
            return getattr(options, name)
        raise AttributeError(f"the {self.kind} target has no option {name!r}; its options are "
                             f"{', '.join(_field_names(type(options)))}")

    def with_options(self, **changes) -> "Target":
        """A copy with some options changed, e.g. host.with_options(threading="serial")."""
        return Target(self.kind, _replace(self.kind, self.options, changes))

    def native_lanes(self, bits: int) -> int:
        """Lanes of one native vector register for elements of `bits` bits."""
        if self.options.vector_bits is None:
            raise ValueError(f"target {self} is not resolved (its vector width is unknown); "
                             "use Target.create(...) or pass it to lower()/build()")
        return max(1, self.options.vector_bits // max(bits, 8))

    def native_registers(self) -> int:
        """Vector registers of the target's register file: the vector_registers option when
        set, else what the vector width implies (vector_registers_for)."""
        regs = getattr(self.options, "vector_registers", None)
        if regs is not None:
            return regs
        if self.options.vector_bits is None:
            raise ValueError(f"target {self} is not resolved (its register file is unknown); "
                             "use Target.create(...) or pass it to lower()/build()")
        return vector_registers_for(self.options.vector_bits)

    def __str__(self) -> str:
        flags = self.options.flags()
        return f"{self.kind} {flags}" if flags else self.kind

    def worker_string(self) -> str:
        """The target string a measurement worker rebuilds this target from: str(self) (the
        records' key, which leaves the thread count out) with -num-cores when num_threads is
        set, so that a one-thread target's candidates are built for one thread and timed in
        CPU time there, not built for every core and timed by the wall clock."""
        threads = getattr(self.options, "num_threads", 0)
        return f"{self} -num-cores={threads}" if threads else str(self)

    @staticmethod
    def parse(spec: Union[str, "Target"]) -> "Target":
        """The Target a string names, without consulting the machine or a backend."""
        if isinstance(spec, Target):
            return spec
        if not isinstance(spec, str):
            raise TypeError(f"target must be a string such as 'llvm' or 'cuda', or a Target, got {spec!r}")
        return Target(spec)

    @staticmethod
    def create(spec: Union[str, "Target"]) -> "Target":
        """The resolved Target for a string or Target: "llvm" is the host CPU with all its
        features; "llvm -mcpu=NAME" is checked against LLVM's CPUs and gets its vector width."""
        # Resolving needs the backend (LLVM knows the host and the CPU names); the registry
        # imports this module, so it is imported here, at call time.
        from .registry import resolve_target
        return resolve_target(Target.parse(spec))


def _field_names(cls) -> tuple:
    return tuple(f.name for f in fields(cls))


def _replace(kind: str, options: Options, changes: Dict[str, object]) -> Options:
    unknown = [k for k in changes if k not in _field_names(type(options))]
    if unknown:
        raise TypeError(f"the {kind} target has no option {unknown[0]!r}; its options are "
                        f"{', '.join(_field_names(type(options)))}")
    return replace(options, **changes)


@lru_cache(maxsize=None)
def _type_hints(cls) -> Dict[str, object]:
    """The option class's field types. Cached: typing.get_type_hints evaluates every
    annotation each time (~0.5 ms, and every Target(...) and with_options parses its kind)."""
    return typing.get_type_hints(cls)


def _parse(spec: str):
    """(kind, {field: value}) of a TVM-style target string "kind -flag=value -flag ..."."""
    words = spec.split()
    if not words or words[0] not in OPTIONS:
        raise ValueError(f"unknown target {spec!r}; use 'llvm' (the CPU), 'cuda' or 'c' (C99 for the CPU)")
    cls = OPTIONS[words[0]]
    hints = _type_hints(cls)
    values: Dict[str, object] = {}
    for word in words[1:]:
        m = re.fullmatch(r"--?([A-Za-z][A-Za-z0-9_-]*)(?:=(.*))?", word)
        if not m:
            raise ValueError(f"malformed option {word!r} in target {spec!r}; write -name=value, e.g. -mcpu=haswell")
        flag, text = m.group(1), m.group(2)
        name = cls.FLAGS.get(flag, flag.replace("-", "_"))
        if name not in _field_names(cls):
            known = sorted(set(cls.FLAGS) | {n.replace("_", "-") for n in _field_names(cls)})
            raise ValueError(f"unknown option -{flag} in target {spec!r}; the {words[0]} target takes "
                             f"{', '.join('-' + k for k in known)}")
        values[name] = _convert(hints[name], text, word, spec)
    return words[0], values


def _convert(hint, text: Optional[str], word: str, spec: str):
    kinds = [a for a in typing.get_args(hint) if a is not type(None)] or [hint]
    kind = kinds[0]
    if kind is bool:
        if text is None or text.lower() in ("1", "true", "on"):
            return True
        if text.lower() in ("0", "false", "off"):
            return False
    elif text is None or text == "":
        pass
    elif kind is int:
        try:
            return int(text)
        except ValueError:
            pass
    else:
        return text
    raise ValueError(f"malformed option {word!r} in target {spec!r}: expected a {kind.__name__} value")
