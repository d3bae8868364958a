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

When a search ends, its best few candidates are timed again side by side, in alternating
rounds, and logged once more with "final": <time stamp> (api.py): those records decide the
winner (ranked()).
"""
from __future__ import annotations

import json
import os
import statistics
import time
import warnings
from typing import Dict, Iterable, List, Optional

VERSION = 1
FIELDS = ("version", "workload", "target", "steps", "kernel_hash", "times", "median_s", "gflops", "error")


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


def _problem(rec) -> Optional[str]:
    if not isinstance(rec, dict):
        return f"not a JSON object but {type(rec).__name__}"
    missing = [k for k in FIELDS if k not in rec]
    if missing:
        return f"missing fields {missing}"
    if rec["version"] != VERSION:
        return f"record version {rec['version']!r} (this schedlang reads {VERSION})"
    if not isinstance(rec["steps"], dict) or not isinstance(rec["steps"].get("steps"), list):
        return "steps is not a schedule's step JSON"
    if not isinstance(rec["times"], list) or not all(isinstance(x, (int, float)) for x in rec["times"]):
        return "times is not a list of numbers"
    if rec["error"] is None and not isinstance(rec["median_s"], (int, float)):
        return "a record without error has no median_s"
    return None


def load(path: str, workload: Optional[str] = None, target: Optional[str] = None) -> List[Dict]:
    """The records of the log (of one workload and target, when given). A line that is not
    a record (corrupt, truncated, from another tool) is skipped with a warning."""
    if not os.path.exists(path):
        return []
    out = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except ValueError as err:
                warnings.warn(f"{path}:{lineno}: skipped a line that is not JSON ({err})", stacklevel=2)
                continue
            problem = _problem(rec)
            if problem:
                warnings.warn(f"{path}:{lineno}: skipped a line that is not a tuning record: {problem}",
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
