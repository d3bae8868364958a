"""The search: evolve candidates from the sketches under a learned cost model, measure
the most promising few each round (plus some random ones), log every measurement,
repeat until the trials are spent.

A round, as Ansor's evolutionary search:
1. the population starts from the fastest candidates measured so far (this search's or
   the resumed log's at the search's thread count, replayed from their decisions) and
   fresh random annotations of every sketch; the first round measures first the candidates
   that redo a hand schedule (SketchRules.seeds: the Winograd bgemm's register tile), so
   the elites start from it;
2. each generation makes children by mutation (tile sizes, annotations, compute
   locations) and crossover (same sketch), replays them through the schedule primitives
   (a ScheduleError or LoweringError prunes the child before anything is built), lowers
   them to Tile IR (a task's fixed nests once: fixed_nests.py), scores their features with
   the model and keeps the best;
3. of everything seen this round, the best scored candidates not measured yet are
   measured, with a share `epsilon` of random ones (exploration; before the model has
   data every pick is effectively random). A candidate whose steps or Kernel IR hash was
   measured before (also in the resumed log) is never measured again. Until the model is
   trained, each sketch without a measurement first gets one pick (its best scored):
   as Ansor's initial population samples every sketch, a random ranking must not leave a
   sketch (a different data layout, a cache stage) out of the data the model learns from.
   Once it is trained, one pick a round is the best scored child of the fastest candidate
   of a sketch behind the leading one (those sketches in turn): the elites' children all
   come from the leading sketch, which a lucky first draw of a slower sketch can lead.
4. the round's candidates measured within RETIME_WITHIN of the best so far are measured once
   more (a run; the worker keeps the module it built, measure.py) and count at the faster of
   their two times, in the elites and the model's data (the log keeps the first): on a loaded
   machine one call's time reads up to 1.6x a later call's, and a fast candidate read slow is
   ranked low with all it resembles.
Measurements go into the log and train the model for the next round.
"""
from __future__ import annotations

import hashlib
import json
import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Set

import numpy as np

from ..driver import lower_tile_to_kernel
from ..errors import LoweringError, ScheduleError
from ..limits import recursion_guard
from ..target.registry import get_backend
from . import records, transfer
from .cost_model import CostModel
from .features import candidate_features, tile_ir, with_profile
from .fixed_nests import FixedNests, Lowered
from .gpu_estimate import profile_summary
from .measure import Measurer
from .mutate import BLOCK_P, crossover, mutate
from .sample import sample
from .sketch import Sketch, generate_sketches, sketch_rules
from .task import SearchTask

MAX_EMPTY_ROUNDS = 3      # rounds without a new candidate before the space counts as exhausted
# A candidate measured within this factor of the best so far is timed once more. Why 1.5: GEMM
# 512 at 64 trials (AVX2, Zen 1 at load 7 on 2 cores), seed 3's three 4 x 16 block candidates
# read 1.42x its best (14.2 ms) and ran 8.1-9.3 ms timed again, faster than that best; read slow,
# the model learnt 4 x 16 is slow and the search ended at 0.80x the hand schedule.
RETIME_WITHIN = 1.5


@dataclass(frozen=True)
class SearchPolicy:
    """How the evolutionary search spends its effort per round."""

    population: int = 32          # candidates kept per generation
    generations: int = 2          # rounds of mutation/crossover (0: random sampling only)
    crossover_p: float = 0.2      # share of children made by crossover (the rest by mutation)
    epsilon: float = 0.25         # share of each round's measurements picked at random
    elites: int = 8               # fastest measured candidates seeded into the population
    local_breadth: int = 4        # children of the elites made per round, in populations (a lowering
                                  # each: far cheaper than the measurement they compete for)


@dataclass
class Candidate:
    sketch: Sketch
    decisions: Dict[str, Any]
    steps_json: str
    features: np.ndarray
    score: float = 0.0            # the cost model's prediction: higher is faster
    kernel_hash: str = ""
    lowered: Optional[tuple] = field(default=None, repr=False)   # (schedule, Tile IR) until hashed
    parents: tuple = field(default=(), repr=False)               # the candidates it was bred from

    @property
    def key(self) -> str:
        return steps_key(self.steps_json)


def steps_key(steps) -> str:
    """A canonical text of a step list (JSON text or its parsed form): equal schedules, equal keys."""
    obj = json.loads(steps) if isinstance(steps, str) else steps
    return json.dumps(obj, sort_keys=True)


def kernel_hash(task: SearchTask, s, tile=None) -> str:
    """sha256 of the generated Kernel IR: schedules that differ only in their steps (a split
    by the full extent, an unroll of a 1-loop) lower to the same kernel and count once.
    tile: the schedule's Tile IR when at hand (lowered again otherwise). A kernel the target
    cannot launch (Backend.check_launch: cuda's threads and shared memory) raises, which
    prunes the candidate before any build."""
    if tile is None:
        tile = tile_ir(s, task.args)
    with recursion_guard("lower"):
        kernel = lower_tile_to_kernel(tile, s, task.target)
        get_backend(task.target.kind).check_launch(kernel, task.target)
        text = str(kernel)
    return hashlib.sha256(text.encode()).hexdigest()


def task_kernel_hash(task: SearchTask, s) -> str:
    """The kernel hash a search of task gives schedule s (Evolver.hash_of): for a task with fixed
    nests (fixed_nests.py) their keys and the rest's Kernel IR, else kernel_hash; so a schedule
    measured outside the search (a whole-model task's default) is known to it."""
    nests = FixedNests.of(task, generate_sketches(task))
    lowered = nests.lower(s) if nests is not None else None
    return lowered.kernel_hash(task.target) if lowered is not None else kernel_hash(task, s)


def _pick_tournament(pop: List[Candidate], rng: random.Random) -> Candidate:
    a, b = rng.choice(pop), rng.choice(pop)
    return a if a.score >= b.score else b


class Evolver:
    """Proposes candidates to measure, deterministically for a seed (given the measurements)."""

    def __init__(self, task: SearchTask, rng: random.Random, model: Optional[CostModel] = None,
                 policy: SearchPolicy = SearchPolicy()):
        self.task, self.rng, self.policy = task, rng, policy
        self.model = model if model is not None else CostModel(rng.randrange(1 << 30))
        self.sketches: List[Sketch] = generate_sketches(task)
        self.by_name = {sk.name: sk for sk in self.sketches}
        self.seen_hashes: Set[str] = set()       # kernel hashes measured (or in the log)
        self.seen_steps: Set[str] = set()        # step keys measured (or in the log)
        self.measured: List[tuple] = []          # (median seconds, Candidate) of successes with decisions
        self.retimed: Set[str] = set()           # step keys of the candidates timed again (or estimated: never)
        self._rows: Dict[str, int] = {}          # step key -> its row in the model's data
        self.tried_sketches: Set[str] = set()    # names of the sketches measured (or in the log), failures too
        self.cache: Dict[str, Optional[Candidate]] = {}     # step key -> candidate (None: pruned)
        self.pruned = 0                          # children rejected by a ScheduleError / LoweringError
        self._draws = 0
        self._turn = 0                           # which sketch behind the leader's has its pick next
        self.block_p = _block_p(task)
        self.hash_times: Dict[str, float] = {}   # kernel hash -> its best time in the resumed log
        self.seeds = sketch_rules(task).seeds(task, self.sketches)   # hand-schedule draws, not made yet
        self.nests = FixedNests.of(task, self.sketches)   # the fixed nests' rows, lowered once (None: none)

    # ---- making candidates ---------------------------------------------------------------

    def make(self, sketch: Sketch, given: Optional[Dict[str, Any]] = None) -> Optional[Candidate]:
        """The candidate the sketch makes with these decisions (others drawn), None when illegal."""
        try:
            s, decisions = sample(self.task, sketch, self.rng, given)
            steps_json = s.to_json()
        except (ScheduleError, LoweringError):
            self.pruned += 1
            return None
        key = steps_key(steps_json)
        if key in self.cache:
            return self.cache[key]
        try:
            features, lowered = self.lower(s)
        except (ScheduleError, LoweringError):
            self.pruned += 1
            self.cache[key] = None
            return None
        cand = self.cache[key] = Candidate(sketch, decisions, steps_json, features, lowered=lowered)
        return cand

    def lower(self, s) -> tuple:
        """(features, lowering) of schedule s: the lowering is what hash_of needs, (s, Tile IR)
        or, for a task with fixed nests, a fixed_nests.Lowered (its fixed nests lowered once)."""
        if self.nests is not None:
            split = self.nests.lower(s)
            if split is not None:
                return split.features, split
        tile = tile_ir(s, self.task.args)
        return candidate_features(tile, self.task.target), (s, tile)

    def random_candidate(self) -> Optional[Candidate]:
        sketch = self.sketches[self._draws % len(self.sketches)]
        self._draws += 1
        return self.make(sketch)

    def _random(self, count: int) -> List[Candidate]:
        out = []
        for _ in range(count):
            c = self.random_candidate()
            if c is not None:
                out.append(c)
        return out

    def _score(self, cands: List[Candidate]) -> None:
        for c, y in zip(cands, self.model.predict([c.features for c in cands])):
            c.score = float(y)

    def _children(self, pop: List[Candidate], count: int) -> List[Candidate]:
        by_sketch: Dict[str, List[Candidate]] = {}
        for c in pop:
            by_sketch.setdefault(c.sketch.name, []).append(c)
        out = []
        for _ in range(count):
            a = _pick_tournament(pop, self.rng)
            mates = [c for c in by_sketch[a.sketch.name] if c is not a]
            parents = (a,)
            if mates and self.rng.random() < self.policy.crossover_p:
                parents = (a, _pick_tournament(mates, self.rng))
                decisions = crossover(a.decisions, parents[1].decisions, self.rng)
            else:
                decisions = mutate(a.decisions, self.rng, self.block_p)
            child = self.make(a.sketch, decisions)
            if child is not None:
                if all(child.key != q.key for q in parents):
                    child.parents = parents
                out.append(child)
        return out

    # ---- a round ---------------------------------------------------------------------------

    def _new(self, c: Candidate) -> bool:
        return c.key not in self.seen_steps

    def propose(self, count: int) -> List[Candidate]:
        """Up to count new candidates to measure (each with its kernel hash): the model's picks
        first from the children of the fastest measured candidates (a local search the model
        filters), then from the whole evolved population, then random explorers. Before the
        model is trained, one candidate of each sketch not measured yet comes first.

        A child the model scores exactly as its parent is not a local pick: the change did
        not move any feature the trees split on (a tree model cannot rank a child above the
        best it has seen, so such copies of the elites tie at the top and, picked in their
        order, filled the local share with kernels that teach the model nothing)."""
        p = self.policy
        elites = [c for _, c in sorted(self.measured, key=lambda tc: tc[0])[:p.elites]]
        fresh = self._random(max(1, p.population - len(elites)))
        pop = _unique(elites + fresh)
        seen: Dict[str, Candidate] = {c.key: c for c in pop}
        self._score(pop)
        local: List[Candidate] = []
        if elites and p.generations:
            local = [c for c in _unique(self._children(elites, p.local_breadth * p.population))
                     if c.key not in seen]
            self._score(local)
            seen.update((c.key, c) for c in local)
            local = [c for c in local if not all(_same_score(c, q) for q in c.parents)]
        n_random = int(round(p.epsilon * count)) if self.model.trained else 0
        behind = []
        if p.generations and self.model.trained:
            behind = self._behind_sketch_children(count - n_random, seen)
        for _ in range(p.generations if pop else 0):
            kids = [c for c in _unique(self._children(pop, p.population)) if c.key not in seen]
            self._score(kids)
            seen.update((c.key, c) for c in kids)
            pop = sorted(_unique(pop + kids), key=lambda c: -c.score)[:p.population]
        best_first = lambda cands: sorted((c for c in cands if self._new(c)), key=lambda c: -c.score)
        ranked = best_first(seen.values())
        chosen: List[Candidate] = []
        hashes: Set[str] = set()
        self._take(self._seed_candidates(), count, chosen, hashes)
        if not self.model.trained:
            self._cover_sketches(ranked, count, chosen, hashes)
        self._take(best_first(behind), min(1, count - n_random - len(chosen)), chosen, hashes)
        self._take(best_first(local), count - n_random - len(chosen), chosen, hashes)
        self._take(ranked, count - n_random - len(chosen), chosen, hashes)
        explore = [c for c in fresh + self._random(2 * n_random) if self._new(c)]
        self.rng.shuffle(explore)
        self._take(explore, count - len(chosen), chosen, hashes)
        if len(chosen) < count:          # the model's picks ran out: fill from the rest
            self._take(ranked, count - len(chosen), chosen, hashes)
        for c in list(seen.values()) + explore:
            c.lowered = None             # keep only features and steps of the many candidates seen
            c.parents = ()               # this round's scores only; no lineage chains kept alive
        return chosen

    def _seed_candidates(self) -> List[Candidate]:
        """The hand-schedule candidates (SketchRules.seeds), once: measured first, before the
        model's and the random picks; one whose kernel the resumed log timed already (a
        whole-model task's default schedule, measured first) joins the elites at that time."""
        out = []
        for sketch, decisions in self.seeds:
            c = self.make(sketch, decisions)
            if c is None or not self._new(c):
                continue
            try:
                c.kernel_hash = c.kernel_hash or self.hash_of(c)
            except (ScheduleError, LoweringError):
                self.pruned += 1
                continue
            if c.kernel_hash in self.hash_times:
                self.seen_steps.add(c.key)
                self.measured.append((self.hash_times[c.kernel_hash], c))
            else:
                out.append(c)
        self.seeds = []
        return out

    def hash_of(self, c: Candidate) -> str:
        """The candidate's kernel hash, from its lowering (lowered again when not at hand):
        kernel_hash, or for a task with fixed nests their keys and the rest's Kernel IR."""
        lowered = c.lowered
        if lowered is None:
            lowered = self.lower(self.task.schedule().apply_json(c.steps_json))[1]
        if isinstance(lowered, Lowered):
            return lowered.kernel_hash(self.task.target)
        return kernel_hash(self.task, *lowered)

    def _behind_sketch_children(self, room: int, seen: Dict[str, Candidate]) -> List[Candidate]:
        """Scored children of the fastest measured candidate of one sketch other than the
        leader's (the sketches in turn, round after round), for one pick of a round with room
        for two or more model picks (once the model is trained: before, the sketches are
        covered); [] when fewer than two sketches have a measurement.
        Why: the elites' children all come from the leading sketch once it leads, so a sketch
        whose first measurements were unlucky draws was never refined. GEMM 512 on AVX2 (Zen 1,
        64 trials): tile_pack's first draw packed B in 128-column panels (15.9 ms) against
        tile_cache_write's 13.5 ms, and no later round measured a tile_pack child; its 16-column
        panels (the hand schedule's) run 7.7 ms (results-tune-zen1-avx2.txt)."""
        best: Dict[str, tuple] = {}
        for t, c in self.measured:
            if c.sketch.name not in best or t < best[c.sketch.name][0]:
                best[c.sketch.name] = (t, c)
        behind = [c for _, c in sorted(best.values(), key=lambda tc: tc[0])[1:]]
        if room < 2 or not behind:
            return []
        parent = behind[self._turn % len(behind)]
        self._turn += 1
        kids = [c for c in _unique(self._children([parent], self.policy.population))
                if c.key not in seen and c.key != parent.key]
        self._score(kids)
        seen.update((c.key, c) for c in kids)
        return kids

    def _cover_sketches(self, ranked: List[Candidate], count: int, chosen: List[Candidate],
                        hashes: Set[str]) -> None:
        """Take the best ranked candidate of each sketch not measured yet (sketches in the order
        of their best), up to count in all. Why: an untrained model ranks at random, and a few
        sketches' candidates can fill a round (their children crowd the population); a sketch
        never measured is then never learned, however fast its kernels."""
        order: Dict[str, List[Candidate]] = {}
        for c in ranked:
            if c.sketch.name not in self.tried_sketches:
                order.setdefault(c.sketch.name, []).append(c)
        for pool in order.values():
            self._take(pool, min(1, count - len(chosen)), chosen, hashes)

    def _take(self, pool: List[Candidate], n: int, chosen: List[Candidate], hashes: Set[str]) -> None:
        for c in pool:
            if n <= 0:
                return
            if any(c is x for x in chosen) or not self._new(c):
                continue
            if not c.kernel_hash:
                try:
                    c.kernel_hash = self.hash_of(c)
                except (ScheduleError, LoweringError):
                    self.pruned += 1
                    self.seen_steps.add(c.key)
                    continue
            if c.kernel_hash in self.seen_hashes or c.kernel_hash in hashes:
                self.seen_steps.add(c.key)        # the same kernel as one measured: never measure it
                continue
            hashes.add(c.kernel_hash)
            chosen.append(c)
            n -= 1

    # ---- learning from measurements -------------------------------------------------------

    def record(self, cands: List[Candidate], times: List[Optional[float]], profiles=None) -> None:
        """Measurements of candidates this search proposed (time None: failed); profiles: the
        SIMT profile of each (cuda without a GPU, else None), which fills its features."""
        for i, (c, t) in enumerate(zip(cands, times)):
            if profiles is not None and profiles[i]:
                c.features = with_profile(c.features, self.task.target, _summary(profiles[i]))
            self._rows[c.key] = len(self.model.times) + i
            self.seen_steps.add(c.key)
            self.seen_hashes.add(c.kernel_hash)
            self.tried_sketches.add(c.sketch.name)
            if t is not None:
                self.measured.append((t, c))
        self.model.update([c.features for c in cands], times)

    def leaders(self, cands: List[Candidate], times: List[Optional[float]]) -> List[Candidate]:
        """Those of cands (just recorded, with their times) to time again: measured within
        RETIME_WITHIN of the best time so far and not timed again yet, fastest first."""
        best = min((t for t, _ in self.measured), default=None)
        if best is None:
            return []
        near = [(t, c) for c, t in zip(cands, times)
                if t is not None and t <= RETIME_WITHIN * best and c.key not in self.retimed]
        return [c for _, c in sorted(near, key=lambda tc: tc[0])]

    def retime(self, cands: List[Candidate], times: List[Optional[float]]) -> None:
        """Second measurements of recorded candidates (None: it failed this time, which a
        first success outweighs): each counts at the faster of its two times, in the elites'
        order and in the model's data."""
        rows: Dict[int, float] = {}
        for c, t in zip(cands, times):
            self.retimed.add(c.key)
            if t is None:
                continue
            for i, (old, m) in enumerate(self.measured):
                if m.key == c.key and t < old:
                    self.measured[i] = (t, m)
            if c.key in self._rows:
                rows[self._rows[c.key]] = t
        self.model.revise(rows)

    def resume(self, recs: List[Dict]) -> None:
        """Learn from a log's records of this task: never measure them again, train the model
        on them, and seed the population with the fastest ones that carry their decisions."""
        xs, times = [], []
        failed = {r["kernel_hash"] for r in recs if r["error"]}
        for r in recs:
            self.seen_hashes.add(r["kernel_hash"])
            self.seen_steps.add(steps_key(r["steps"]))
            if isinstance(r.get("sketch"), str):
                self.tried_sketches.add(r["sketch"])
            try:
                s = self.task.schedule()
                s.apply_json(json.dumps(r["steps"]))
                if self.nests is not None:       # (a CPU task: no profile)
                    x = self.lower(s)[0]
                else:
                    x = candidate_features(tile_ir(s, self.task.args), self.task.target, _summary(r.get("profile")))
            except (ValueError, TypeError, KeyError, LoweringError):   # ScheduleError is a ValueError
                continue
            t = None if r["kernel_hash"] in failed else r["median_s"]
            if t is not None:
                self.hash_times[r["kernel_hash"]] = min(t, self.hash_times.get(r["kernel_hash"], t))
            xs.append(x)
            times.append(t)
            sketch = self.by_name.get(r.get("sketch"))
            if t is not None and sketch is not None and isinstance(r.get("decisions"), dict):
                cand = Candidate(sketch, dict(r["decisions"]), json.dumps(r["steps"]), x,
                                 kernel_hash=r["kernel_hash"])
                self.measured.append((t, cand))
        if xs:
            self.model.update(xs, times)


def _summary(profile) -> Optional[Dict[str, float]]:
    """The pooled figures of a record's per-kernel profile (None when it has none)."""
    if not isinstance(profile, dict) or not profile:
        return None
    try:
        return profile_summary(profile)
    except (KeyError, TypeError, ValueError):     # a hand-edited or older record
        return None


def _block_p(task: SearchTask) -> float:
    """mutate.BLOCK_P where the target's backend moves register blocks (the CPU: a block's two
    sizes move together, register_tile's shapes), else 0."""
    return BLOCK_P if get_backend(task.target.kind).moves_register_blocks else 0.0


def _same_score(a: Candidate, b: Candidate) -> bool:
    return abs(a.score - b.score) <= 1e-9


def _unique(cands: List[Candidate]) -> List[Candidate]:
    out, keys = [], set()
    for c in cands:
        if c.key not in keys:
            keys.add(c.key)
            out.append(c)
    return out


def run_search(task: SearchTask, trials: int, log: str, measurer: Measurer, seed: Optional[int],
               per_round: int = 8, on_record: Optional[Callable[[Dict], None]] = None,
               policy: SearchPolicy = SearchPolicy(), model: Optional[CostModel] = None,
               timeout: Optional[float] = None, on_round: Optional[Callable[[], None]] = None,
               evolver: Optional[Evolver] = None, warm_start: bool = True) -> int:
    """Measure up to `trials` new candidates, appending a record for each to `log` as soon
    as it is measured (then on_record(record)); on_round() after each round; with `timeout`,
    start no new round after that many seconds. Returns how many were measured.
    evolver: the search state of an earlier call on this task, to continue (a task scheduler's
    rounds); it already knows the log, which is then not read again. warm_start: the cost
    model also learns from the log's records of similar tasks, of other CPUs and of other thread
    counts (transfer.py); either way the search resumes only its task's records of this thread
    count (and those of none)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    target = str(task.target)
    if evolver is None:
        evolver = Evolver(task, random.Random(seed), model if model is not None else CostModel(seed), policy)
        if warm_start:
            transfer.Pool(records.load(log)).warm_start(evolver)
        else:       # this thread count's records (and older ones of none): transfer.split's `own`
            threads = records.target_threads(task.target)
            evolver.resume([r for r in records.load(log, task.workload_key, target)
                            if not records.off_threads(r, threads)])
    done, empty = 0, 0
    while done < trials and empty < MAX_EMPTY_ROUNDS:
        if deadline is not None and time.monotonic() >= deadline:
            break
        k = min(per_round, trials - done)
        chosen = evolver.propose(k)
        if not chosen:
            empty += 1
            continue
        empty = 0
        measured, times, profiles = [], [], []
        results = measurer.measure(task.program_json, task.target, [c.steps_json for c in chosen])
        for cand, res in zip(chosen, results):
            rec = _record(task, cand, res)
            records.append(log, [rec])
            measured.append(cand)
            times.append(res.median if res.error is None else None)
            profiles.append(res.extra.get("profile"))
            if res.extra.get("estimated"):      # a model's figure (cuda without a GPU): no noise to time away
                evolver.retimed.add(cand.key)
            done += 1
            if on_record is not None:
                on_record(rec)
        evolver.record(measured, times, profiles)
        _retime(task, measurer, evolver, evolver.leaders(measured, times))
        if on_round is not None:
            on_round()
    return done


def _record(task: SearchTask, cand: Candidate, res) -> Dict:
    """The log record of a measurement of cand (a MeasureResult)."""
    return records.make_record(task.workload_key, str(task.target), json.loads(cand.steps_json), cand.kernel_hash,
                               res.times, res.error, task.flops, res.load, sketch=cand.sketch.name,
                               build_s=res.build_s, decisions=cand.decisions,
                               predicted=round(cand.score, 4), **transfer.stored(task, cand.features),
                               **res.extra)


def _retime(task: SearchTask, measurer: Measurer, evolver: Evolver, cands: List[Candidate]) -> None:
    """Measure cands a second time for the search (evolver.retime). Not logged: the log's records
    are one per candidate measured, which its readers count as trials (the final comparison,
    api.py, times the log's best again when the search ends)."""
    if not cands:
        return
    results = measurer.measure(task.program_json, task.target, [c.steps_json for c in cands])
    evolver.retime(cands, [res.median if res.error is None else None for res in results])
