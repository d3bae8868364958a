"""Timing, machine description and tables for the side-by-side benchmarks.

Every contender is one callable with its arguments bound and its output preallocated
(or a note saying it allocates). `measure` times all contenders of one workload in
interleaved rounds, so that load from other processes on a shared machine falls on
all of them alike, and keeps each contender's best mean time per call.
"""
from __future__ import annotations

import math
import os
import platform
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np


# ---------------------------------------------------------------- contenders

@dataclass
class Contender:
    """One implementation of a workload.

    fn: one call, arguments bound, writing into a preallocated output.
    check: runs fn and compares its output with an independent reference; raises on a mismatch.
    variants: alternative fns (e.g. vector widths); the fastest, by a short pre-measurement,
    becomes fn and is named in the note.
    """

    name: str
    fn: Optional[Callable[[], object]] = None
    note: str = ""
    check: Optional[Callable[[], None]] = None
    is_schedlang: bool = False
    skipped: str = ""                       # non-empty: not timed, the reason is shown instead
    variants: Dict[str, Callable[[], object]] = field(default_factory=dict)
    variant_checks: Dict[str, Callable[[], None]] = field(default_factory=dict)


def skipped(name: str, reason: str, is_schedlang: bool = False) -> Contender:
    return Contender(name, skipped=reason, is_schedlang=is_schedlang)


@dataclass
class Row:
    name: str
    shape: str
    best_s: float = math.nan
    median_s: float = math.nan
    rate: float = math.nan                  # GFLOP/s or GB/s
    note: str = ""
    is_schedlang: bool = False
    skipped: str = ""


@dataclass(frozen=True)
class Timing:
    """How long to measure: `repeat` timed rounds of at least `min_round_s` each, after warm-up.

    clock: "wall" (time.perf_counter, the default) or "cpu" (time.process_time: the CPU time of
    all this process's threads, which time slices given to other processes do not inflate;
    meaningful with one thread, where no runtime spins while waiting).
    pause_s: a sleep before each contender's turn in a round, so that the previous contender's
    thread pool (ONNX Runtime's and OpenMP's spin while they wait for work) has gone to sleep
    before the next one is timed."""

    repeat: int = 10
    min_round_s: float = 0.1
    warmup_s: float = 0.2
    clock: str = "wall"
    pause_s: float = 0.05

    @staticmethod
    def quick(clock: str = "wall") -> "Timing":
        return Timing(repeat=5, min_round_s=0.03, warmup_s=0.05, clock=clock)

    def now(self) -> float:
        return time.process_time() if self.clock == "cpu" else time.perf_counter()


# ---------------------------------------------------------------- timing

def _warm_up(fn: Callable[[], object], seconds: float) -> float:
    """Call fn for about `seconds` (at least twice); returns the last call's duration."""
    fn()
    start = time.perf_counter()
    last = 0.0
    calls = 0
    while calls < 1 or time.perf_counter() - start < seconds:
        t0 = time.perf_counter()
        fn()
        last = time.perf_counter() - t0
        calls += 1
    return last


def measure(fns: Sequence[Callable[[], object]], timing: Timing, rounds: Optional[int] = None) -> List[tuple]:
    """(best mean, median mean) seconds per call for each fn, timed in interleaved rounds.

    Each round gives every fn a turn: a pause (timing.pause_s), one untimed call (to refill
    caches) and then `number` timed calls; the order rotates from round to round. Without the
    pause, the previous contender's spinning threads took a core: ResNet-18 on 2 threads timed
    23.7 ms for schedlang right after ONNX Runtime, 11.3 ms with it (Zen 5, December 2 2026).
    """
    rounds = rounds or timing.repeat
    numbers = []
    for fn in fns:
        t = _warm_up(fn, timing.warmup_s)
        numbers.append(max(1, math.ceil(timing.min_round_s / max(t, 1e-7))))
    samples: List[List[float]] = [[] for _ in fns]
    for r in range(rounds):
        for idx in [(r + i) % len(fns) for i in range(len(fns))]:
            fn, n = fns[idx], numbers[idx]
            time.sleep(timing.pause_s)
            fn()
            t0 = timing.now()
            for _ in range(n):
                fn()
            samples[idx].append((timing.now() - t0) / n)
    return [(min(s), float(np.median(s))) for s in samples]


def pick_variant(c: Contender, timing: Timing) -> None:
    """Check every variant, time them briefly side by side, and keep the fastest as c.fn."""
    if not c.variants:
        return
    for key, chk in c.variant_checks.items():
        chk()
    keys = list(c.variants)
    results = measure([c.variants[k] for k in keys], timing, rounds=3)
    best = min(range(len(keys)), key=lambda i: results[i][0])
    c.fn = c.variants[keys[best]]
    c.check = c.variant_checks.get(keys[best], c.check)
    tried = ", ".join(f"{k}: {results[i][0] * 1e3:.2f}" for i, k in enumerate(keys))
    c.note = (c.note + "; " if c.note else "") + f"best {keys[best]} (tried, ms: {tried})"


def run_workload(shape: str, contenders: Sequence[Contender], work: float, timing: Timing,
                 log: Callable[[str], None]) -> List[Row]:
    """Check, then time, every contender that is not skipped; `work` is FLOP or bytes per call."""
    live = []
    for c in contenders:
        if c.skipped:
            continue
        log(f"  checking {c.name} ...")
        pick_variant(c, timing)
        if c.check is not None:
            c.check()
        live.append(c)
    log(f"  timing {len(live)} contenders, {timing.repeat} interleaved rounds ...")
    results = dict(zip((id(c) for c in live), measure([c.fn for c in live], timing)))
    rows = []
    for c in contenders:
        if c.skipped:
            rows.append(Row(c.name, shape, note=c.note, is_schedlang=c.is_schedlang, skipped=c.skipped))
            continue
        best, med = results[id(c)]
        rows.append(Row(c.name, shape, best, med, work / best / 1e9, c.note, c.is_schedlang))
    return rows


# ---------------------------------------------------------------- checks

def expect_close(name: str, got, want, rtol: float, atol: float) -> None:
    """Raise AssertionError naming the contender when got differs from want."""
    got = np.asarray(got)
    want = np.asarray(want)
    if got.shape != want.shape:
        raise AssertionError(f"{name}: result has shape {got.shape}, expected {want.shape}")
    if not np.allclose(got, want, rtol=rtol, atol=atol):
        bad = ~np.isclose(got, want, rtol=rtol, atol=atol)
        idx = np.unravel_index(np.argmax(bad), bad.shape)
        raise AssertionError(
            f"{name}: WRONG RESULT, {int(bad.sum())} of {bad.size} elements differ beyond rtol={rtol}, "
            f"atol={atol}; first at {tuple(int(i) for i in idx)}: got {got[idx]!r}, expected {want[idx]!r}")


# ---------------------------------------------------------------- machine

def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def core_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def vector_isa(target) -> str:
    feats = set(target.features.split(","))
    if "+avx512f" in feats:
        return "AVX-512"
    if "+avx2" in feats:
        return "AVX2"
    if "+avx" in feats:
        return "AVX"
    return "SSE/none"


def load_average() -> str:
    try:
        return "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg())
    except OSError:
        return "?"


def _cpu_busy_s() -> float:
    """Seconds of CPU time all processes have used since boot (from /proc/stat), or NaN."""
    try:
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
    except (OSError, ValueError):
        return math.nan
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)        # idle + iowait
    busy = sum(fields[:8]) - idle                                     # guest time is already in user
    return busy / os.sysconf("SC_CLK_TCK")


class ForeignLoad:
    """How many cores other processes kept busy between start() and stop(), on average:
    the machine's busy CPU time (from /proc/stat) minus this process's own."""

    def start(self) -> "ForeignLoad":
        self._wall, self._busy, self._own = time.perf_counter(), _cpu_busy_s(), _own_cpu_s()
        return self

    def stop(self) -> float:
        wall = time.perf_counter() - self._wall
        foreign = (_cpu_busy_s() - self._busy) - (_own_cpu_s() - self._own)
        return max(0.0, foreign / wall) if wall > 0 else math.nan


def _own_cpu_s() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def wait_until_idle(max_wait_s: float, cores: int, log: Callable[[str], None], busy_limit: float = 0.25) -> float:
    """Wait (up to max_wait_s) for a 2-second window in which other processes use less than
    busy_limit cores; returns the foreign load of the last window."""
    start = time.perf_counter()
    windows = 0
    while True:
        mon = ForeignLoad().start()
        time.sleep(2.0)
        load = mon.stop()
        waited = time.perf_counter() - start
        if load < busy_limit or waited >= max_wait_s:
            if windows:
                log(f"  waited {waited:.0f} s; other processes now use {load:.1f} of {cores} cores")
            return load
        if windows % 10 == 0:
            log(f"  machine busy: other processes use {load:.1f} of {cores} cores; waiting "
                f"(up to {max_wait_s:.0f} s) ...")
        windows += 1


def copy_bandwidth(nbytes: int, timing: Timing) -> Dict[str, float]:
    """STREAM-like copy, GB/s counting bytes read + written: numpy np.copyto (one thread), and
    torch's copy_ (all threads) when torch is importable."""
    src = np.ones(nbytes // 4, np.float32)
    dst = np.empty_like(src)
    fns = {"numpy np.copyto (1 thread)": lambda: np.copyto(dst, src)}
    try:
        import torch
        tsrc, tdst = torch.from_numpy(src), torch.from_numpy(dst)
        n = torch.get_num_threads()
        fns[f"torch copy_ ({n} thread{'s' if n > 1 else ''})"] = lambda: tdst.copy_(tsrc)
    except ImportError:
        pass
    res = measure(list(fns.values()), timing)
    return {k: 2 * nbytes / r[0] / 1e9 for k, r in zip(fns, res)}


# ---------------------------------------------------------------- tables

def format_table(title: str, unit: str, rows: Sequence[Row]) -> str:
    """A text table: name, shape, best and median ms, rate, % of the best peer, notes."""
    peers = [r.rate for r in rows if not r.is_schedlang and not r.skipped]
    best_peer = max(peers) if peers else math.nan
    header = ["name", "shape", "best ms", "median ms", unit, "% best peer", "notes"]
    body = []
    for r in rows:
        if r.skipped:
            mark = "* " if r.is_schedlang else "  "
            body.append([mark + r.name, r.shape, "-", "-", "-", "-", "SKIPPED: " + r.skipped])
            continue
        pct = 100.0 * r.rate / best_peer if best_peer == best_peer else math.nan
        body.append([("* " if r.is_schedlang else "  ") + r.name, r.shape, f"{r.best_s * 1e3:.2f}",
                     f"{r.median_s * 1e3:.2f}", f"{r.rate:.1f}", f"{pct:.0f}%", r.note])
    widths = [max(len(str(x[i])) for x in [header] + body) for i in range(len(header) - 1)]
    lines = [title]
    fmt_row = lambda cells: "  ".join(  # noqa: E731
        [str(c).ljust(w) if i in (0, 1) else str(c).rjust(w) for i, (c, w) in enumerate(zip(cells, widths))]
        + [cells[-1]])
    lines.append(fmt_row(header))
    lines.append("-" * (sum(widths) + 2 * len(widths) + 5))
    lines += [fmt_row(b) for b in body]
    return "\n".join(lines)
