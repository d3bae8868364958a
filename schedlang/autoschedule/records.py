"""Tuning records: one JSON object per line, readable by a person and appended as
candidates are measured (an interrupted search keeps everything measured so far).

A record holds the workload key, the target string, the schedule steps, the kernel
hash (sha256 of the generated Kernel IR, which deduplicates candidates), the measured
seconds per call, their median, the GFLOP/s, an error (null when the candidate ran),
the machine's load averages during the timed runs, and when it was measured.

A cuda record also says how its time was taken: "timing": "gpu" (CUDA events on a GPU), or
without a GPU "estimated": true, "timing": "estimate:<reference GPU>" and the SIMT
"profile" figures per kernel (autoschedule/gpu_estimate.py): the time is a model's
estimate, never to be mistaken for a GPU timing.

A CPU record also says where it was measured, "cpu": the machine's model name, LLVM's name
for it, its ISA features (avx2, avx512f, fma, ...), widest vector, "cores" (the machine's) and
"affinity" (the cores the timing process could run on: 1 under `taskset -c 1`; this_cpu, taken
in the process that timed it), and "register_file": the vector width and registers of the
target the code was built for (an AVX2 target on an AVX-512 machine: 256 bits, 16 registers).
apply_best prefers records of this CPU and says when it uses others (choose()). Older logs
without these fields still load: their records count as measured on an unknown CPU. Records
written before "affinity" existed stored the affinity as "cores" (a lower bound of the
machine's cores): same_cpu() reads them so (a record tuned under taskset is this machine's).

A CPU record also says how many threads its kernel ran on when timed, "threads" (the target's
worker threads: one thread is timed in CPU time, more by the wall clock). A schedule that wins
at one thread may lose at two (a parallel loop of one iteration, rows split where the default
splits columns), so choose() prefers, within each CPU group, the records measured at the
compile target's threads, then those of no recorded count (older logs), then the others.
A record re-timed against the default schedule for a target's threads (torch/revalidate.py)
carries "revalidated": {"threads", "record_s", "default_s", "record_hash", "rounds"}: the two
medians of that side-by-side comparison, whichever won is the record's own schedule.

A searched candidate's record also keeps what the next search learns from (transfer.py):
"features": {"id": the feature set's name hash, "values": the cost model's features,
rounded}, "family": {"key": the task's structure with sizes and names left out, "flops"}.

When a search ends, its best few candidates are timed again side by side, in alternating
rounds, and logged once more with "final": <time stamp> (api.py): those records decide the
winner (ranked()).
"""
from __future__ import annotations

import json
import math
import os
import platform
import statistics
import time
import warnings
from functools import lru_cache
from typing import Dict, Iterable, List, Optional, Tuple

from ..schedule.steps import VERSION as STEPS_VERSION, Step
from ..target.registry import get_backend
from ..target.target import Target

VERSION = 1
FIELDS = ("version", "workload", "target", "steps", "kernel_hash", "times", "median_s", "gflops", "error")


def log_path(value, caller: str, name: str = "log") -> str:
    """value as a str path, when it is a str or os.PathLike; TypeError naming caller and name else."""
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{caller}: {name} must be a file path, got {value!r}")
    return os.fspath(value)


def make_record(workload: str, target: str, steps: dict, kernel_hash: str, times: List[float],
                error: Optional[str], flops: int, load=None, **extra) -> Dict:
    median = statistics.median(times) if times else None
    rec = {"version": VERSION, "workload": workload, "target": target, "steps": steps,
           "kernel_hash": kernel_hash, "times": list(times), "median_s": median,
           "gflops": (flops / median / 1e9) if median else None, "error": error,
           "load": list(load) if load is not None else None,
           "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    rec.update(extra)
    return rec


def append(path: str, records: Iterable[Dict]) -> None:
    """Append records to the log, one line each, flushed to disk at once. A log whose last
    line was cut short (a search killed mid-write) gets a line break first, so the new
    record is a line of its own rather than the tail of the broken one."""
    with open(path, "a+b") as f:
        if f.tell() > 0:
            f.seek(-1, os.SEEK_END)
            if f.read(1) != b"\n":
                f.write(b"\n")
    with open(path, "a", encoding="utf-8") as f:
        for rec in records:
            f.write(json.dumps(rec, sort_keys=True) + "\n")
        f.flush()
        os.fsync(f.fileno())


MAX_INT = 2**31          # decisions are tile sizes, positions and steps: never near this


def _number(x) -> bool:
    """A finite JSON number (not a bool; an int too large for a float is none)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return False
    try:
        return math.isfinite(float(x))
    except OverflowError:
        return False


def _numbers(x, length: Optional[int] = None) -> bool:
    return isinstance(x, list) and (length is None or len(x) == length) and all(_number(v) for v in x)


def _decision(v) -> bool:
    """What sample.py records for one decision: a bool, a small int, or a list of small ints."""
    small = lambda x: isinstance(x, int) and -MAX_INT < x < MAX_INT     # noqa: E731 (bools are ints too)
    return small(v) or (isinstance(v, list) and len(v) <= 16 and all(small(x) for x in v))


def _profile(p) -> bool:
    return isinstance(p, dict) and all(isinstance(k, str) and isinstance(v, dict) and all(
        isinstance(f, str) and (x is None or _number(x)) for f, x in v.items()) for k, v in p.items())


def _steps_problem(steps) -> Optional[str]:
    if not isinstance(steps, dict) or steps.get("version") != STEPS_VERSION or not isinstance(steps.get("steps"), list):
        return "steps is not a schedule's step JSON"
    for i, step in enumerate(steps["steps"]):
        try:
            Step.from_json(step)
        except (ValueError, TypeError) as err:
            return f"step {i}: {err}"
    return None


# field -> (what it must be, the check); the fields every reader uses (api, search, plot).
_CHECKS = {
    "workload": ("a string", lambda v: isinstance(v, str)),
    "target": ("a string", lambda v: isinstance(v, str)),
    "kernel_hash": ("a string", lambda v: isinstance(v, str)),
    "times": ("a list of finite numbers", _numbers),
    "median_s": ("a positive finite number or null", lambda v: v is None or (_number(v) and v > 0)),
    "gflops": ("a finite number or null", lambda v: v is None or _number(v)),
    "error": ("a string or null", lambda v: v is None or isinstance(v, str)),
}
# optional fields, checked when present
_OPTIONAL = {
    "load": ("three numbers or null", lambda v: v is None or _numbers(v, 3)),
    "final": ("a time stamp (a number)", _number),
    "sketch": ("a string or null", lambda v: v is None or isinstance(v, str)),
    "decisions": ("an object of small ints, bools and lists of small ints", lambda v: v is None or (
        isinstance(v, dict) and all(isinstance(k, str) and _decision(x) for k, x in v.items()))),
    "profile": ("an object of per-kernel figures", lambda v: v is None or _profile(v)),
    "estimated": ("a bool", lambda v: isinstance(v, bool)),
    "timing": ("a string", lambda v: isinstance(v, str)),
    "cpu": ("an object with model, name, isa, vector_bits, cores (and affinity)", lambda v: _cpu(v)),
    "register_file": ("an object with vector_bits and vector_registers", lambda v: _register_file(v)),
    "features": ("an object with an id and a list of finite numbers", lambda v: isinstance(v, dict)
                 and isinstance(v.get("id"), str) and _numbers(v.get("values"))),
    "family": ("an object with a key and flops", lambda v: isinstance(v, dict) and isinstance(v.get("key"), str)
               and _number(v.get("flops")) and v["flops"] >= 0),
    "threads": ("a thread count (an int >= 1)", lambda v: _count(v)),
    "revalidated": ("an object with threads, record_s, default_s, record_hash and rounds", lambda v: _revalidated(v)),
}


def _revalidated(v) -> bool:
    return (isinstance(v, dict) and _count(v.get("threads")) and _count(v.get("rounds"))
            and all(_number(v.get(k)) and v[k] > 0 for k in ("record_s", "default_s"))
            and isinstance(v.get("record_hash"), str))


def _cpu(v) -> bool:
    return (isinstance(v, dict) and isinstance(v.get("model"), str) and isinstance(v.get("name"), str)
            and isinstance(v.get("isa"), list) and all(isinstance(f, str) for f in v["isa"])
            and _count(v.get("vector_bits")) and _count(v.get("cores"))
            and ("affinity" not in v or _count(v["affinity"])))


def _register_file(v) -> bool:
    return isinstance(v, dict) and _count(v.get("vector_bits")) and _count(v.get("vector_registers"))


def _count(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and 0 < x < MAX_INT


def problem(rec) -> Optional[str]:
    """Why rec is not a tuning record this schedlang can use, or None when it is. Every field
    a reader touches is checked here, so no reader meets a wrong type further on."""
    if not isinstance(rec, dict):
        return f"not a JSON object but {type(rec).__name__}"
    missing = [k for k in FIELDS if k not in rec]
    if missing:
        return f"missing fields {missing}"
    if rec["version"] != VERSION:
        return f"record version {rec['version']!r} (this schedlang reads {VERSION})"
    for table, required in ((_CHECKS, True), (_OPTIONAL, False)):
        for name, (what, ok) in table.items():
            if (required or name in rec) and not ok(rec[name]):
                return f"{name} must be {what}, got {_short(rec[name])}"
    if rec["error"] is None and rec["median_s"] is None:
        return "a record without error has no median_s"
    return _steps_problem(rec["steps"])


def _short(value) -> str:
    try:
        text = repr(value)
    except (RecursionError, ValueError):       # deeply nested; an int of too many digits
        return type(value).__name__
    return text if len(text) <= 60 else text[:57] + "..."


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def parse_line(line: str):
    """The JSON value of one log line; ValueError when it is not JSON (NaN and Infinity,
    which Python's json module would accept, included; nesting too deep to parse, too)."""
    try:
        return json.loads(line, parse_constant=_no_constant)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def load(path: str, workload: Optional[str] = None, target: Optional[str] = None) -> List[Dict]:
    """The records of the log (of one workload and target, when given); [] when there is no
    such file. Every reader of a log (apply_best, print_best, a resumed search, the plots)
    goes through here: a line that is not a valid record (corrupt, truncated, from another
    tool, a field of the wrong type) is skipped with one warning naming its line. Records
    are only parsed as JSON, never evaluated or unpickled."""
    if not os.path.exists(path):
        return []
    out = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rec = parse_line(line)
            except ValueError as err:
                warnings.warn(f"{path}:{lineno}: skipped a line that is not JSON ({err})", stacklevel=2)
                continue
            why = problem(rec)
            if why:
                warnings.warn(f"{path}:{lineno}: skipped a line that is not a tuning record: {why}",
                              stacklevel=2)
                continue
            if (workload is None or rec["workload"] == workload) and (target is None or rec["target"] == target):
                out.append(rec)
    return out


def ranked(records: List[Dict], final: bool = True) -> List[Dict]:
    """Records of candidates that ran, fastest first; a candidate (kernel hash) with any
    failed record (crash, timeout, wrong result) is left out.

    final: the records of the latest final comparison (the search's best candidates timed
    again side by side when it ended, marked "final": <its time stamp>) come first, in their
    order: times taken minutes apart on a shared machine drift more than the candidates
    differ. final=False ranks every record by its own median."""
    failed = {r["kernel_hash"] for r in records if r["error"]}
    ok = [r for r in records if not r["error"] and r["median_s"] is not None and r["kernel_hash"] not in failed]
    by_time = sorted(ok, key=lambda r: r["median_s"])
    stamps = [r["final"] for r in ok if isinstance(r.get("final"), (int, float))] if final else []
    if not stamps:
        return by_time
    head = [r for r in by_time if r.get("final") == max(stamps)]
    return head + [r for r in by_time if r.get("final") != max(stamps)]


# ---- which machine a record comes from -------------------------------------------------------

# Feature names that make up an ISA (x86 and AArch64 spellings); the rest of LLVM's list
# (tuning flags, slow-this, fast-that) does not decide what code runs.
ISA_PREFIXES = ("sse", "ssse", "avx", "fma", "f16c", "bmi", "amx", "gfni", "vaes", "vpclmul", "neon", "sve",
                "fp-armv8", "dotprod", "i8mm", "bf16", "fullfp16")


@lru_cache(maxsize=1)
def _model_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Model", "cpu model"):
                    return " ".join(value.split())
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def this_cpu() -> Dict:
    """The CPU this process runs on, as records carry it: {"model", "name" (LLVM's), "isa"
    (its ISA features switched on, sorted), "vector_bits" (its widest vector), "cores" (the
    machine's), "affinity" (the cores this process may run on)}. How many threads a kernel
    was timed at is the record's "threads", not any of these."""
    from ..target.llvm.cpus import vector_bits_of      # LLVM's view of the host: the llvm backend's
    from ..target.llvm.jit import host_cpu
    name, features = host_cpu()
    isa = sorted(f[1:] for f in features.split(",") if f.startswith("+") and f[1:].startswith(ISA_PREFIXES))
    cores = os.cpu_count() or 1
    try:
        affinity = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = cores
    return {"model": _model_name(), "name": name, "isa": isa, "vector_bits": vector_bits_of(features),
            "cores": max(cores, affinity), "affinity": affinity}


def register_file(target) -> Dict:
    """The "register_file" of a record built for target: its vector width and registers."""
    return {"vector_bits": int(target.vector_bits), "vector_registers": int(target.native_registers())}


def cpu_text(cpu: Optional[Dict]) -> str:
    """A CPU as a warning names it: 'AMD EPYC 7763 (znver3, 256-bit vectors, 2 cores)'."""
    if not cpu:
        return "an unknown CPU"
    return f"{cpu['model']} ({cpu['name']}, {cpu['vector_bits']}-bit vectors, {cpu['cores']} cores)"


def same_cpu(a: Optional[Dict], b: Optional[Dict]) -> bool:
    """Whether two records' CPUs are the same machine for tuning: model, ISA and the machine's
    cores, whatever affinity each was timed under. A CPU of an older record (no "affinity")
    stored its process's affinity as "cores", at most the machine's: it matches a machine of
    at least as many cores (two older ones, any: neither says its machine's)."""
    if not (a and b) or any(a[k] != b[k] for k in ("model", "name", "isa")):
        return False
    if "affinity" in a and "affinity" in b:
        return a["cores"] == b["cores"]
    if "affinity" in b:
        return a["cores"] <= b["cores"]
    return "affinity" not in a or b["cores"] <= a["cores"]


def _kind(target: str) -> str:
    return target.split(None, 1)[0] if target.strip() else ""


SAME, UNKNOWN, OTHER, WIDER = "same CPU", "unknown CPU", "another CPU", "a wider ISA"


def choose(recs: List[Dict], target, here: Optional[Dict]) -> List[Tuple[str, List[Dict]]]:
    """The records of one workload that may serve `target` (a resolved Target), in groups
    by preference, each group ranked(): SAME (measured on `here`, this CPU, for this very
    target), UNKNOWN (this target string, no CPU recorded: older logs), OTHER (measured on
    another CPU, or for another target of the same kind, with a register file this target
    has: usable, but its times are another machine's), WIDER (built for more vector bits or
    registers than this target has: an AVX-512 record on an AVX2 target, which the caller
    must re-validate or skip). Records of another target kind are left out. Each of these
    groups comes as up to three, in thread_tiers' order: measured at the target's threads,
    at no recorded count, at another count (a group's name repeats)."""
    groups: Dict[str, List[Dict]] = {SAME: [], UNKNOWN: [], OTHER: [], WIDER: []}
    for rec in recs:
        group = cpu_group(rec, target, here)
        if group is not None:
            groups[group].append(rec)
    want = target_threads(target)
    return [(name, ranked(tier)) for name, group in groups.items() for tier in thread_tiers(group, want) if tier]


def target_threads(target) -> Optional[int]:
    """The threads a CPU target's parallel loops run on (its num_threads, else this process's
    cores), as a record's "threads" counts them; None for a target that is not a CPU. target:
    a Target or a target string ("llvm -num-cores=2")."""
    target = Target.parse(target)
    backend = get_backend(target.kind)
    return backend.worker_threads(target) if backend.torch_device == "cpu" else None


def thread_tiers(recs: List[Dict], threads: Optional[int]) -> Tuple[List[Dict], List[Dict], List[Dict]]:
    """recs split by the threads they were timed at: (at `threads`, no count recorded, another
    count). For threads None (not a CPU target) every record is in the middle tier."""
    at, unknown, other = [], [], []
    for rec in recs:
        (other if off_threads(rec, threads) else unknown if rec.get("threads") is None or threads is None
         else at).append(rec)
    return at, unknown, other


def other_threads(rec: Dict, target) -> bool:
    """Whether rec was timed at a thread count other than target's (False when unrecorded)."""
    return off_threads(rec, target_threads(target))


def off_threads(rec: Dict, threads: Optional[int]) -> bool:
    """Whether rec was timed at a thread count other than `threads` (False when either is
    unknown: an older record, a target that is not a CPU)."""
    n = rec.get("threads")
    return n is not None and threads is not None and n != threads


def cpu_group(rec: Dict, target, here: Optional[Dict]) -> Optional[str]:
    """Which of choose()'s groups rec falls in for `target` measured `here` (SAME, UNKNOWN,
    OTHER or WIDER); None: another target kind, or no CPU recorded and another target."""
    if _kind(rec["target"]) != target.kind:
        return None
    cpu = rec.get("cpu")
    if cpu is None:
        return UNKNOWN if rec["target"] == str(target) else None
    if rec["target"] == str(target) and same_cpu(cpu, here):
        return SAME
    mine = register_file(target)
    theirs = rec.get("register_file") or {"vector_bits": cpu["vector_bits"], "vector_registers": 0}
    wider = theirs["vector_bits"] > mine["vector_bits"] or theirs["vector_registers"] > mine["vector_registers"]
    return WIDER if wider else OTHER
