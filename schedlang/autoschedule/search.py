"""The search: propose candidates from the sketches, rank them, measure the best few,
log every measurement, repeat until the trials are spent.

Each round samples a pool of candidates (random annotation of every sketch in turn),
prunes the illegal ones (ScheduleError, before anything is built) and those whose
Kernel IR was already measured (in this search or in the log it resumes), ranks the rest
with the cost model and measures its top ones. The cost model and the proposal are the
two places a learned model (features from Tile IR) and evolutionary mutation of the
best records plug in.
"""
from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Set

from ..driver import lower
from ..errors import LoweringError, ScheduleError
from . import records
from .measure import Measurer
from .sample import sample, work_per_thread
from .sketch import Sketch, generate_sketches
from .task import SearchTask

POOL_PER_MEASURED = 4     # candidates proposed per candidate measured
MAX_EMPTY_ROUNDS = 3      # rounds without a new candidate before the space counts as exhausted


@dataclass
class Candidate:
    sketch: str
    steps_json: str
    kernel_hash: str
    score: float          # the cost model's prediction: lower is better


def kernel_hash(task: SearchTask, s) -> str:
    """sha256 of the generated Kernel IR: schedules that differ only in their steps (a split
    by the full extent, an unroll of a 1-loop) lower to the same kernel and count once."""
    text = lower(s, task.args, level="kernel", target=task.target)
    return hashlib.sha256(str(text).encode()).hexdigest()


class AnalyticModel:
    """Ranks candidates by work per parallel iteration (sample.work_per_thread).
    A learned model replaces it with the same two methods."""

    def predict(self, task: SearchTask, schedules: List) -> List[float]:
        return [work_per_thread(s) for s in schedules]

    def update(self, task: SearchTask, measured: List[Dict]) -> None:
        """Learn from new records (the analytic model does not learn)."""


class Proposer:
    """Draws legal, not yet seen candidates from the sketches, deterministically for a seed."""

    def __init__(self, task: SearchTask, rng: random.Random, seen: Set[str], model=None):
        self.task, self.rng, self.seen = task, rng, seen
        self.sketches: List[Sketch] = generate_sketches(task)
        self.model = model or AnalyticModel()
        self.pruned = 0        # draws rejected by a ScheduleError

    def propose(self, count: int) -> List[Candidate]:
        """Up to count new candidates, best predicted first."""
        drawn, schedules, hashes = [], [], set()
        for i in range(count):
            sketch = self.sketches[i % len(self.sketches)]
            try:
                s = sample(self.task, sketch, self.rng)
                h = kernel_hash(self.task, s)
            except (ScheduleError, LoweringError):
                self.pruned += 1
                continue
            if h in self.seen or h in hashes:
                continue
            hashes.add(h)
            drawn.append((sketch, s, h))
            schedules.append(s)
        scores = self.model.predict(self.task, schedules)
        cands = [Candidate(sk.name, s.to_json(), h, score) for (sk, s, h), score in zip(drawn, scores)]
        return sorted(cands, key=lambda c: c.score)     # stable: ties keep the draw order


def run_search(task: SearchTask, trials: int, log: str, measurer: Measurer, seed: Optional[int],
               per_round: int = 8, on_record: Optional[Callable[[Dict], None]] = None) -> int:
    """Measure up to `trials` new candidates, appending a record for each to `log` as soon
    as it is measured. Returns how many were measured."""
    target = str(task.target)
    seen = {r["kernel_hash"] for r in records.load(log, task.workload_key, target)}
    proposer = Proposer(task, random.Random(seed), seen)
    done, empty = 0, 0
    while done < trials and empty < MAX_EMPTY_ROUNDS:
        k = min(per_round, trials - done)
        chosen = proposer.propose(POOL_PER_MEASURED * k)[:k]
        if not chosen:
            empty += 1
            continue
        empty = 0
        new = []
        results = measurer.measure(task.program_json, target, [c.steps_json for c in chosen])
        for cand, res in zip(chosen, results):
            rec = records.make_record(task.workload_key, target, json.loads(cand.steps_json), cand.kernel_hash,
                                      res.times, res.error, task.flops, res.load, sketch=cand.sketch,
                                      build_s=res.build_s)
            records.append(log, [rec])
            seen.add(cand.kernel_hash)
            new.append(rec)
            done += 1
            if on_record is not None:
                on_record(rec)
        proposer.model.update(task, new)
    return done
