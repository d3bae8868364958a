"""Fewer trials: what one search learned warm-starts the next (issue 18 item 4).

A log is the memory. Each searched candidate's record keeps its cost-model features and
its task's family and FLOPs (stored()); a search that starts with a log (run_search, the task
scheduler's KernelSearches) trains its cost model before its first round on

- its own task's records measured on this CPU (or on an unknown one, older logs) at the
  search's thread count (or at no recorded count, older logs): as before, the search resumes
  them (never measured again, the fastest seed the population);
- its own task's records of this CPU timed at another thread count (weight
  OTHER_THREADS_WEIGHT): not resumed, since resuming mixes their times into the model's data
  and the elites on one scale (a one-thread CPU time beside a two-thread wall time: about 2x
  apart, the ranking of parallel loops different), and marks their kernels measured when
  nothing was measured at this count; as prior rows normalised within their own count, only
  their ratios transfer, and they are measured again here when the search picks them;
- its own task's records of another CPU with a register file this target has (weight
  OTHER_CPU_WEIGHT; their times order candidates on that machine, not here, so they are
  measured again here when the search picks them); records built for a wider ISA are
  skipped (their vector widths and register blocks do not exist here);
- records of similar tasks: the same family (the program with its sizes and names left
  out, dtypes kept: a GEMM of any size, a conv2d of any channels and image) within a factor
  2**MAX_FLOPS_LOG2 of this task's FLOPs, weighted SHAPE_DECAY per doubling apart (times
  the CPU weight, and OTHER_THREADS_WEIGHT when timed at another thread count).

Each source's times become targets normalised within its own task, CPU and thread count
(cost_model's log2(best / time)), so ratios, not absolute times, transfer; the model's prior
(CostModel.set_prior) holds them with their weights and this task's own measurements
(weight 1) take over as they accumulate. Ansor, too, trains one model over all tasks.

Why retrain from the log's records rather than save the trained model beside the log: a
saved booster cannot be re-weighed for the CPU that reads it nor restricted to the tasks
that resemble the next one, goes stale silently when a feature changes (the records'
features carry the feature set's id: a mismatch is skipped), and would be an opaque file
beside a log people read and merge with `cat`. Retraining costs one LightGBM fit on at
most PRIOR_MAX rows (a fraction of a second). Features are stored, not recomputed: the log
holds no other task's program, and replaying thousands of schedules would take minutes.
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Dict, Iterable, List, Optional, Tuple

import numpy as np

from . import records
from .cost_model import targets
from .features import feature_names
from ..target import HostCPUBackend
from ..target.registry import get_backend
from .task import SearchTask

SHAPE_DECAY = 0.7          # a similar task's weight per doubling of FLOPs away from this one
MAX_FLOPS_LOG2 = 6         # similar tasks are within 64x of this task's FLOPs
OTHER_CPU_WEIGHT = 0.3     # records measured on another CPU (a register file this target has)
OTHER_THREADS_WEIGHT = 0.5  # records timed at another thread count than the search's
PRIOR_MAX = 2048           # rows of prior data at most (the most alike first)
DONORS = 8                 # similar tasks' best candidates replayed as this task's first elites
DIGITS = 4                 # decimals kept of a stored feature (log2 values: ample)


@lru_cache(maxsize=8)
def _features_id(names: Tuple[str, ...]) -> str:
    return hashlib.sha256(",".join(names).encode()).hexdigest()[:12]


def features_id(target) -> str:
    """A name for the feature set of target's candidates: stored features of another set
    (features.py changed, another target kind) are never mixed with these."""
    return _features_id(tuple(feature_names(target)))


def _strip(node):
    """The serialized program without what varies between similar tasks: names, shapes, loop
    extents and integer constants (a packed weight's block, a stride: sizes in the indices);
    dtypes, operators, the structure of the indices and float constants stay."""
    if isinstance(node, dict):
        if node.get("kind") == "const" and str(node.get("dtype", "")).startswith(("int", "uint")):
            return {"kind": "const", "dtype": node["dtype"]}
        return {k: (len(v) if k == "shape" and isinstance(v, list) else _strip(v))
                for k, v in node.items() if k not in ("name", "extent")}
    if isinstance(node, list):
        return [_strip(x) for x in node]
    return node


@lru_cache(maxsize=256)
def _family(program_json: str) -> str:
    data = _strip(json.loads(program_json))
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def family(task: SearchTask) -> str:
    """The task's family: equal for programs that differ only in sizes and names (a GEMM of
    any size, the same conv2d with other channels or images), so their sketches are the same."""
    return _family(task.program_json)


def stored(task: SearchTask, features: np.ndarray) -> Dict:
    """The fields a searched candidate's record keeps for later searches ({} when the
    features are not all finite: a cuda candidate before its SIMT profile)."""
    values = np.asarray(features, dtype=np.float64)
    if not np.isfinite(values).all():
        return {}
    return {"features": {"id": features_id(task.target), "values": [round(float(v), DIGITS) for v in values]},
            "family": {"key": family(task), "flops": task.flops}}


def _cpu_weight(group: Optional[str]) -> float:
    return {records.SAME: 1.0, records.UNKNOWN: 1.0, records.OTHER: OTHER_CPU_WEIGHT}.get(group, 0.0)


def _source(rec: Dict) -> str:
    """Whose times a record's can be compared with: the same task on the same CPU (whatever
    the timing process's affinity) and target, at the same thread count."""
    cpu = {k: v for k, v in (rec.get("cpu") or {}).items() if k != "affinity"}
    return json.dumps([rec["workload"], rec["target"], cpu, rec.get("threads")], sort_keys=True)


@dataclass(frozen=True)
class Split:
    """What a log teaches a search of one task: `own` (its records on this CPU at its thread
    count, to resume), `prior` (xs, targets, weights: the cost model's rows from elsewhere)
    and `donors` (records of similar tasks, of other CPUs and of other thread counts that ran
    and carry their decisions, the best first)."""

    own: List[Dict]
    prior: Tuple[np.ndarray, np.ndarray, np.ndarray]
    donors: List[Dict]


def split(recs: Iterable[Dict], task: SearchTask, here: Optional[Dict]) -> Split:
    """The Split of a log's records for a search of task measured on `here`
    (records.this_cpu(); None: cpu unknown)."""
    own: List[Dict] = []
    fid, fam, target = features_id(task.target), family(task), str(task.target)
    threads = records.target_threads(task.target)
    by_source: Dict[str, List[Tuple[Dict, float]]] = {}
    for rec in recs:
        group = records.cpu_group(rec, task.target, here)
        mine = rec["workload"] == task.workload_key
        elsewhere = records.off_threads(rec, threads)
        if mine and rec["target"] == target and group in (records.SAME, records.UNKNOWN) and not elsewhere:
            own.append(rec)
            continue
        w = (_cpu_weight(group) * (1.0 if mine else _shape_weight(rec, task, fam))
             * (OTHER_THREADS_WEIGHT if elsewhere else 1.0))
        feats = rec.get("features")
        if w > 0 and isinstance(feats, dict) and feats["id"] == fid and "final" not in rec:
            by_source.setdefault(_source(rec), []).append((rec, w))
    rows: List[Tuple[float, int, Dict, float]] = []
    for src in sorted(by_source):
        group = by_source[src]
        ys = targets([None if r["error"] else r["median_s"] for r, _ in group])
        rows.extend((w, len(rows) + k, r, float(y)) for k, ((r, w), y) in enumerate(zip(group, ys)))
    rows.sort(key=lambda row: (-row[0], row[1]))       # the most alike first, then log order
    rows = rows[:PRIOR_MAX]
    n = len(feature_names(task.target))
    xs = np.stack([row[2]["features"]["values"] for row in rows]) if rows else np.zeros((0, n))
    # the fastest of their own task first, a doubling of slowness worth log2(1/weight) of alikeness
    ran = [row for row in rows if not row[2]["error"] and isinstance(row[2].get("decisions"), dict)]
    donors = [row[2] for row in sorted(ran, key=lambda row: (-row[3] - math.log2(row[0]), row[1]))]
    return Split(own, (xs, np.array([row[3] for row in rows]), np.array([row[0] for row in rows])), donors)


def _shape_weight(rec: Dict, task: SearchTask, fam: str) -> float:
    """SHAPE_DECAY per doubling of FLOPs between rec's task and task; 0 for another family."""
    theirs = rec.get("family")
    if not theirs or theirs["key"] != fam or not theirs["flops"] or not task.flops:
        return 0.0
    apart = abs(math.log2(theirs["flops"] / task.flops))
    return 0.0 if apart > MAX_FLOPS_LOG2 else SHAPE_DECAY ** apart


def here_cpu(task: SearchTask) -> Optional[Dict]:
    """The CPU a search of task measures on, as records carry it (None for a GPU target)."""
    return records.this_cpu() if isinstance(get_backend(task.target.kind), HostCPUBackend) else None


class Pool:
    """A log's records indexed for warm starts: by workload and by family, so that a task
    scheduler's every round (KernelSearches) reads only the records that concern its task.
    add() the records measured meanwhile (of every task) to keep it current."""

    def __init__(self, recs: Iterable[Dict] = ()):
        self.by_workload: Dict[str, List[Dict]] = {}
        self.by_family: Dict[str, List[Dict]] = {}
        for rec in recs:
            self.add(rec)

    def add(self, rec: Dict) -> None:
        self.by_workload.setdefault(rec["workload"], []).append(rec)
        fam = rec.get("family")
        if fam and rec.get("features"):
            self.by_family.setdefault(fam["key"], []).append(rec)

    def split(self, task: SearchTask) -> Split:
        """split() of the records that concern task: its own, and its family's."""
        mine = self.by_workload.get(task.workload_key, [])
        others = [r for r in self.by_family.get(family(task), []) if r["workload"] != task.workload_key]
        return split(mine + others, task, here_cpu(task))

    def warm_start(self, evolver) -> None:
        """Start a search (search.Evolver) of a task from what the log knows: its cost model
        gets the prior, the task's own records are resumed, and the best DONORS donors'
        decisions (those that fit this task's sizes; sample() redraws the rest) join the
        population as elites, until the task's own measurements outnumber them; the model
        is then trained, before the first round, when the data suffices."""
        task = evolver.task
        found = self.split(task)
        evolver.model.set_prior(*found.prior)
        evolver.resume(found.own)
        seed_elites(evolver, found.donors)
        if not evolver.model.trained:
            evolver.model.fit()


def seed_elites(evolver, donors: List[Dict], count: int = DONORS) -> None:
    """Candidates of evolver's task made from the donors' sketches and decisions, entered as
    measured at an unknown (infinite) time: the search's elites are its fastest measured
    candidates, so these are elites while it has measured fewer than its policy's elites,
    and their children are what the model ranks first; they are measured only when picked."""
    keys = set()
    for rec in donors:
        if len(keys) >= count:
            return
        sketch = evolver.by_name.get(rec.get("sketch"))
        cand = evolver.make(sketch, dict(rec["decisions"])) if sketch is not None else None
        if cand is not None and cand.key not in keys and cand.key not in evolver.seen_steps:
            keys.add(cand.key)
            evolver.measured.append((math.inf, cand))
