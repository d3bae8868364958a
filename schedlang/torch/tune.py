"""Tuning a PyTorch model's kernels as Ansor tunes a network: every kernel of every lowered
part (a fuse.Group: a conv with its epilogue, a matmul, a row softmax ...) is a task of its
own (kernel_tasks.py), equal kernels are one task whose weight is how often it runs per
forward, and a task scheduler (autoschedule/task_scheduler.py: Ansor's gradient strategy, or
round-robin) gives the trial budget, a round at a time, to the task where the model's
estimated latency, sum of weight x best latency, drops most. Records go to one log;
default_schedule(..., log=log) gives each kernel of a part its task's best record.

Records are kept for each kernel's canonical copy (canonical_program): the same program with
its tensors and axes named by position, so that a kernel recurs under the same workload key
in any model that contains it, whatever the module and graph call its parameters and ops
(`fc1.weight` in one model, `block.mlp.fc1.weight` in another).

Each task's default schedule is measured first and logged (sketch "default"): it is the
latency tuning starts from, the baseline of the speedups reported, and a record, so the
built kernel is never one the search found slower than the default. A kernel of NCHWc
convolutions also gets a few variants of its default schedule measured and logged then
(sketch "default-variant", the tile choices in the record's "choice"; conv_variants.py):
the default's rules pick one register tile and loop order for every layer, the best one
differs by layer and CPU, and the sketches' search rarely comes near the default there."""
from __future__ import annotations

import json
import random
import sys
import time
import warnings
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple

from ..autoschedule.task import SearchTask
from ..target.registry import get_backend
from ..texts import name_table
from ..tensor.op import PlaceholderOp
from .lower import LoweredProgram


def canonical_program(inputs: List, outputs: List) -> Tuple[List, List]:
    """(inputs, outputs) of a copy of the program computing outputs from inputs (its
    placeholders, every one the program reads) whose names say only where things are: the
    inputs in0, in1 ... in the given order, the other operations t0, t1 ... and the variables
    v0, v1 ... in the canonical walk's order (tensor/serialize.py). Names are part of a
    workload key (a schedule's steps name stages and axes), so this is the key under which
    the same computation is found in every model."""
    from ..tensor.graph import post_order
    from ..tensor.serialize import from_json
    data, _ = _canonical_data(inputs, outputs)
    outs = from_json(data)
    found = {op.name: op.output(0) for op in post_order([t.op for t in outs]) if isinstance(op, PlaceholderOp)}
    return [found[f"in{k}"] for k in range(len(inputs))], outs


def canonical_names(inputs: List, outputs: List) -> Dict[str, str]:
    """canonical name -> the program's own name, for every operation and variable that
    canonical_program renames (a record of the copy replays on the program with it)."""
    return _canonical_data(inputs, outputs)[1]


def _canonical_data(inputs: List, outputs: List):
    from ..tensor.serialize import to_data
    data = to_data(outputs)
    position = {t.op.name: k for k, t in enumerate(inputs)}
    names: Dict[str, str] = {}
    computed = 0
    for op in data["ops"]:
        if op["kind"] == "placeholder" and op["name"] in position:
            new = f"in{position[op['name']]}"
        else:
            new, computed = f"t{computed}", computed + 1
        names[new], op["name"] = op["name"], new
    for k, var in enumerate(data["vars"]):
        names[f"v{k}"], var["name"] = var["name"], f"v{k}"
    return data, names




@dataclass
class KernelTask:
    """One tuning task: a kernel's canonical program, how often it runs per forward, its
    kind and the name of its anchor stage where it first occurs (for people)."""

    task: SearchTask
    weight: int
    kind: str
    name: str
    tag: str
    default_steps: str = field(repr=False, default="")   # its default schedule's steps (JSON)
    # where it runs: (part index, the names of the stages its kernel computes) per occurrence
    sites: List[Tuple[int, Tuple[str, ...]]] = field(repr=False, default_factory=list)

    @property
    def workload_key(self) -> str:
        return self.task.workload_key


def extract_tasks(program: LoweredProgram, target) -> List[KernelTask]:
    """The tasks of every kernel of every part, equal kernels counted as one task's weight.
    Kept at their default schedule, untuned: attention kernels (one hand-made fused kernel,
    outside the search's sketches), kernels whose default schedule tensorizes where the
    target's sketches draw no tensor intrinsic (Backend.sketches_tensorize: a bfloat16 Linear's
    vdpbf16ps tile on the CPU, which every candidate would be slower than) and kernels of
    symbolic shape (warned)."""
    from ..schedule import create_schedule
    from .fuse import fuse
    from .kernel_tasks import group_program, kind_of, similarity_tag
    from .schedules import default_schedule
    tasks: Dict[str, KernelTask] = {}
    kept: set = set()                 # workloads kept at their tensorized default
    for part in program.parts:
        outs = [t for _, t in part.outputs]
        if not all(isinstance(e, int) for t in outs for e in t.shape):
            warnings.warn(f"tune: part {part.index} has a symbolic shape and keeps its default schedule "
                          "(the search tunes static shapes)", stacklevel=3)
            continue
        s = create_schedule([t.op for t in outs])
        for group in fuse(s):
            kind = kind_of(group)
            prog = None if kind == "attention" else group_program(s, group)
            if prog is None or all(isinstance(t.op, PlaceholderOp) for t in prog.outputs):
                continue
            try:
                task = SearchTask.from_outputs(prog.outputs, target)
            except (TypeError, ValueError) as err:
                warnings.warn(f"tune: kernel '{group.anchor.name}' is not tuned ({err})", stacklevel=3)
                continue
            site = (part.index, tuple(st.name for st in [group.anchor, *group.attached, group.pad] if st is not None))
            known = tasks.get(task.workload_key)
            if known is not None:
                known.weight += 1
                known.sites.append(site)
                continue
            if task.workload_key in kept:
                continue
            with warnings.catch_warnings():       # a kernel the rules leave plain: warned at build
                warnings.simplefilter("ignore")
                default = default_schedule(prog.outputs, task.target)
            if any(getattr(st, "tensorize_at", None) for st in default.stages) \
                    and not get_backend(task.target.kind).sketches_tensorize:
                kept.add(task.workload_key)
                continue
            steps = default.to_json()
            tasks[task.workload_key] = KernelTask(task, 1, kind, group.anchor.name,
                                                  similarity_tag(kind, task.flops), steps, [site])
    return list(tasks.values())


def _best_s(recs) -> Optional[float]:
    from ..autoschedule import records
    ranked = records.ranked(recs, final=False)
    return ranked[0]["median_s"] if ranked else None


def steps_hash(kt: KernelTask, steps: Optional[str] = None) -> str:
    """The kernel hash of the task's schedule of steps (JSON; its default schedule's by
    default), so the search never measures that kernel again."""
    from ..autoschedule.search import task_kernel_hash
    from ..errors import LoweringError
    try:
        return task_kernel_hash(kt.task, kt.task.schedule().apply_json(steps or kt.default_steps))
    except (ValueError, TypeError, LoweringError):      # ScheduleError is a ValueError
        return "default:" + kt.workload_key[:16]


DEFAULT = "default"              # the sketch name of a default schedule's records
VARIANT = "default-variant"      # the sketch name of a default schedule's variant's records
GIVE_UP = (32, 1.3)    # a conv task's search retired after 32 trials still 1.3x slower than its default or variants


def _variant_steps(kt: KernelTask, count: int) -> List[Tuple[dict, str]]:
    """(tile choices, schedule steps as JSON) of up to count variants of the task's default
    schedule (conv_variants.py: NCHWc convolution kernels on a CPU; none for other kernels);
    a variant the schedule rules reject is left out."""
    from ..errors import LoweringError
    from .conv_variants import program_variants, variant_schedule
    if kt.kind != "conv" or count < 1:
        return []
    out = []
    for choice in program_variants(kt.task.outputs, kt.task.target, count + 1)[1:]:    # [0]: the default
        try:
            steps = variant_schedule(kt.task.outputs, kt.task.target, choice).to_json()
        except (ValueError, LoweringError):          # ScheduleError is a ValueError
            continue
        if steps != kt.default_steps:
            out.append((choice._asdict(), steps))
    return out


class KernelSearches:
    """Runs the rounds the task scheduler picks: the evolutionary search of each task, its
    state kept from round to round (search.run_search's evolver), measuring through one
    Measurer and logging to `log`."""

    def __init__(self, tasks: List[KernelTask], log: str, measurer, seed: Optional[int], policy,
                 on_record: Optional[Callable[[dict], None]] = None, variants: int = 0):
        self.tasks, self.log, self.measurer, self.seed, self.policy = tasks, log, measurer, seed, policy
        self.on_record = on_record
        self.variants = variants   # default-schedule variants measured per conv task (_variant_steps)
        self.evolvers: Dict[int, object] = {}
        self.best: List[Optional[float]] = [None] * len(tasks)
        self.default_s: List[Optional[float]] = [None] * len(tasks)
        self.resumed: List[int] = [0] * len(tasks)        # searched candidates the log held already
        self.varied: List[bool] = [False] * len(tasks)    # the log holds variants of its default
        self.pool = None           # the log's records for warm starts (transfer.Pool), read at the first round
        self.start_best: List[Optional[float]] = [None] * len(tasks)   # the default's and variants' best
        self.search_best: List[Optional[float]] = [None] * len(tasks)  # this run's searched candidates' best
        self.search_trials: List[int] = [0] * len(tasks)               # and how many it measured

    def measure_defaults(self) -> None:
        """Time (or find in the log) each task's default schedule and its variants
        (_variant_steps); their records are candidates."""
        from ..autoschedule import records
        for i, kt in enumerate(self.tasks):
            target = str(kt.task.target)
            recs = _same_threads(records.load(self.log, kt.workload_key, target), kt.task.target)
            # today's default's records: a log tuned before the rules changed holds another
            # default's, which a compile no longer builds (kernel_tasks.apply_group_record)
            steps = json.loads(kt.default_steps)
            recs = [r for r in recs if r.get("sketch") != DEFAULT or r["steps"] == steps]
            default = [r for r in recs if r.get("sketch") == DEFAULT]
            if not default:
                default = self._measure(kt, [({}, kt.default_steps)], DEFAULT)
                recs += default
            if self.variants and not any(r.get("sketch") == VARIANT for r in recs):
                recs += self._measure(kt, _variant_steps(kt, self.variants), VARIANT)
            self.varied[i] = any(r.get("sketch") == VARIANT for r in recs)
            self.default_s[i] = _best_s(default)
            self.best[i] = _best_s(recs)
            self.resumed[i] = sum(r.get("sketch") not in ("default", VARIANT) and "final" not in r for r in recs)
        self.start_best = list(self.best)

    def hopeless(self, i: int, give_up: Tuple[int, float]) -> bool:
        """Whether task i, a kernel with variants of its default schedule (NCHWc convolutions),
        has a search that after give_up[0] trials of this run is still more than give_up[1]
        times slower than the default or its variants: there the sketches' best stays 1.2-2.4x
        behind the default after 50-260 trials (ResNet-50, benchmarks/results-models-zen3-avx2.txt),
        so further rounds are spent for nothing. Other kernels are never judged so: BERT's
        matmul searches start 1.5-2x behind and overtake the default after 50-100 trials."""
        trials, ratio = give_up
        start, found = self.start_best[i], self.search_best[i]
        if not self.varied[i] or start is None or self.search_trials[i] < trials:
            return False
        return found is None or found > ratio * start

    def _measure(self, kt: KernelTask, candidates: List[Tuple[dict, str]], sketch: str) -> List[dict]:
        """Time the task's candidates ((tile choices, steps JSON)) and log them as records of
        sketch (the choices, where given, in the record's "choice")."""
        from ..autoschedule import records
        if not candidates:
            return []
        target = str(kt.task.target)
        results = self.measurer.measure(kt.task.program_json, kt.task.target, [steps for _, steps in candidates])
        recs = [records.make_record(kt.workload_key, target, json.loads(steps), steps_hash(kt, steps), res.times,
                                    res.error, kt.task.flops, res.load, sketch=sketch,
                                    **({"choice": choice} if choice else {}), **res.extra)
                for (choice, steps), res in zip(candidates, results)]
        records.append(self.log, recs)
        return recs

    def round(self, i: int, count: int) -> Tuple[int, Optional[float]]:
        """One round of task i: up to count new candidates measured; (measured, its best)."""
        from ..autoschedule import records
        from ..autoschedule.cost_model import CostModel
        from ..autoschedule.search import Evolver, run_search
        from ..autoschedule.transfer import Pool
        kt = self.tasks[i]
        seed = None if self.seed is None else self.seed * 1000003 + i
        self.pool = self.pool or Pool(records.load(self.log))
        if i not in self.evolvers:
            ev = Evolver(kt.task, random.Random(seed), CostModel(seed), self.policy)
            self.pool.warm_start(ev)          # resumes its records; similar tasks' teach its model
            self.evolvers[i] = ev
        else:       # what similar tasks measured since: taught at the next fit
            self.evolvers[i].model.set_prior(*self.pool.split(kt.task).prior)

        def seen(rec):
            self.pool.add(rec)
            t = rec.get("median_s")
            if rec.get("error") is None and t and (self.best[i] is None or t < self.best[i]):
                self.best[i] = t
            if rec.get("error") is None and t and (self.search_best[i] is None or t < self.search_best[i]):
                self.search_best[i] = t
            if self.on_record is not None:
                self.on_record(rec)
        done = run_search(kt.task, count, self.log, self.measurer, seed, per_round=count, on_record=seen,
                          policy=self.policy, evolver=self.evolvers[i])
        self.search_trials[i] += done
        return done, self.best[i]


def tune_program(program: LoweredProgram, target, trials: int, log: str, executor=None, seed=None, *,
                 strategy: str = "gradient", timeout: Optional[float] = None, per_round: int = 8,
                 number: int = 5, repeat: int = 3, verbose: int = 1, policy=None, final: int = 2,
                 early_stopping: Optional[int] = None, callback=None, worker_fn=None, variants: int = 15,
                 give_up: Optional[Tuple[int, float]] = GIVE_UP, **scheduler_options):
    """Tune the kernels of program for target with `trials` measurements in all (plus one of
    each task's default schedule and of its variants), appending to `log`; returns the TaskScheduler (its tasks'
    weights, trials, best latencies -- a tuned task's: its chosen record's -- and round order)
    with `.tasks` (the KernelTasks) and `.default_s` (each task's default schedule's latency; a
    tuned task's as its final comparison timed it). strategy: "gradient" or "round-robin";
    timeout: seconds from the call (the defaults and variants measured included) after which no
    new search round starts; per_round: measurements per round; number, repeat: timed runs per
    measurement; policy: the search's SearchPolicy; final: the fastest few of each tuned task
    timed again side by side at the end with the task's default schedule, in 3 alternating
    rounds (9 runs per task for the default 2, where sl.auto_schedule's 4 would cost a model
    of 30 tasks 360; 0: not);
    early_stopping: trials without a gain after which a task counts as converged; give_up
    (trials, ratio): a task with variants whose search has measured that many candidates in
    this run and is still more than ratio times slower than its default schedule or variants
    gets no more rounds (KernelSearches.hopeless; None: never);
    callback(RoundInfo) after each round; verbose=1 prints a line per round; worker_fn: what
    measures a candidate (measure.run_candidate by default; benchmarks/transfer.py's quick
    mode passes a formula); variants: the most variants of a conv kernel's default schedule
    measured with it (conv_variants.py; 0: none). A log that holds records of similar tasks
    warm-starts each task's cost model (autoschedule/transfer.py).
    scheduler_options (alpha, beta, backward_window_size) go to TaskScheduler. Returns None
    when the program has no kernel to tune."""
    from ..autoschedule.api import final_comparison
    from ..autoschedule.measure import Measurer
    from ..autoschedule.search import SearchPolicy
    from ..autoschedule.task_scheduler import TaskScheduler
    for name, value, least in (("trials", trials, 0), ("per_round", per_round, 1), ("number", number, 1),
                               ("repeat", repeat, 1), ("final", final, 0), ("verbose", verbose, 0),
                               ("variants", variants, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(f"tune: {name} must be an integer >= {least}, got {value!r}")
    if give_up is not None and (not isinstance(give_up, tuple) or len(give_up) != 2 or give_up[0] < 1
                                or not give_up[1] >= 1):
        raise ValueError(f"tune: give_up must be (trials >= 1, ratio >= 1) or None, got {give_up!r}")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                or not timeout > 0):
        raise ValueError(f"tune: timeout must be a positive number of seconds, got {timeout!r}")
    with open(log, "a", encoding="utf-8"):       # an unwritable log fails here, before any work
        pass
    begin = time.monotonic()      # the timeout covers the defaults and variants too, not only the search
    tasks = extract_tasks(program, target)
    if not tasks:
        if verbose:
            print("tune: no kernel to tune (each keeps its default schedule: attention, tensorized or "
                  "symbolic-shape kernels only)", file=sys.stderr, flush=True)
        return None
    measurer = Measurer(executor, number, repeat, **({"worker_fn": worker_fn} if worker_fn else {}))
    searches = KernelSearches(tasks, log, measurer, seed, policy or SearchPolicy(), variants=variants)
    try:
        if verbose:
            print(f"tune: {len(tasks)} tasks ({sum(t.weight for t in tasks)} kernels), {trials} trials, "
                  f"strategy {strategy}; measuring each task's default schedule first", file=sys.stderr, flush=True)
        searches.measure_defaults()
        sched = TaskScheduler([t.weight for t in tasks], [t.task.flops for t in tasks], [t.tag for t in tasks],
                              strategy=strategy, early_stopping=early_stopping, initial_s=searches.best,
                              initial_trials=searches.resumed,
                              seed=seed, callback=callback, verbose=verbose, **scheduler_options)
        start = time.monotonic()
        left = None if timeout is None else timeout - (start - begin)

        def tune_round(i: int, count: int) -> Tuple[int, Optional[float]]:
            done, best = searches.round(i, count)
            if give_up is not None and searches.hopeless(i, give_up):
                sched.retire(i)
                if verbose:
                    print(f"tune: task {i}'s search retired: {searches.search_trials[i]} trials, its best "
                          f"{_ms(searches.search_best[i])} against {_ms(searches.start_best[i])} (default or variant)",
                          file=sys.stderr, flush=True)
            return done, best
        sched.tune(trials, tune_round, per_round=per_round, timeout=left)
        tuned = [bool(n) or varied for n, varied in zip(sched.trials, searches.varied)]
        for i, kt in enumerate(tasks):
            if tuned[i] and final:
                final_comparison(kt.task, log, measurer, final, with_default=json.loads(kt.default_steps))
        _check_best(tasks, log, measurer, sched, tuned, searches.default_s)
        if verbose:
            est = sched.known_estimate()
            print(f"tune: done, {sum(sched.trials)} trials in {time.monotonic() - start:.0f} s; model estimate "
                  f"{'-' if est is None else f'{est * 1e3:.4g} ms'}", file=sys.stderr, flush=True)
    finally:
        measurer.close()
    sched.tasks, sched.default_s = tasks, searches.default_s
    return sched


def _same_threads(recs: List[dict], target) -> List[dict]:
    """recs less those timed at another thread count than target's (records.off_threads):
    a log tuned at one thread and tuned again at two has its own defaults and best there."""
    from ..autoschedule import records
    threads = records.target_threads(target)     # once, not per record
    return [r for r in recs if not records.off_threads(r, threads)]


def _ms(t: Optional[float]) -> str:
    return "-" if t is None else f"{t * 1e3:.4g} ms"


def _check_best(tasks: List[KernelTask], log: str, measurer, sched, tuned: List[bool],
                default_s: List[Optional[float]]) -> None:
    """Each tuned task's best record checked against the reference evaluator (auto_schedule
    with no trials: a wrong one is marked failed in the log and the next is checked); then its
    best latency is the time of the record a compile takes (records.ranked: the final side-by-
    side comparison's winner), not the least time any record read, and its default's latency
    the default's time in that same comparison, so the estimate and the speedups are those of
    what is built, timed together (a first time read in a quiet spell is no gain)."""
    from ..autoschedule import auto_schedule
    from ..autoschedule import records
    for i, kt in enumerate(tasks):
        if tuned[i]:
            auto_schedule(kt.task, trials=0, log=log, executor=measurer.executor, verbose=0, final=0)
            ranked = records.ranked(_same_threads(records.load(log, kt.workload_key, str(kt.task.target)),
                                                  kt.task.target))
            if ranked:
                sched.best[i] = ranked[0]["median_s"]
                final = ranked[0].get("final")
                default = [r for r in ranked if r.get("sketch") == "default" and final is not None
                           and r.get("final") == final]
                if default:
                    default_s[i] = default[0]["median_s"]


def task_table(sched) -> str:
    """The per-task table of a tuning run (tune_program's result): id, kernel kind and name,
    weight, trials, best latency (a tuned task's: the record a compile takes, as the final
    comparison timed it), weight x best, and speedup over the default schedule (timed in that
    same comparison); then the model's estimated latency (sum of weight x best) tuned and with
    default schedules."""
    rows = [("id", "kernel", "weight", "trials", "best ms", "weighted ms", "vs default")]
    for i, kt in enumerate(sched.tasks):
        best, default = sched.best[i], sched.default_s[i]
        known = best is not None and best < 1e9
        rows.append((str(i), f"{kt.kind} {kt.name}", str(kt.weight), str(sched.trials[i]),
                     f"{best * 1e3:.4g}" if known else "-", f"{kt.weight * best * 1e3:.4g}" if known else "-",
                     f"{default / best:.2f}x" if known and default else "-"))
    lines = name_table(rows)
    est = sched.known_estimate()
    base = sum(kt.weight * d for kt, d in zip(sched.tasks, sched.default_s)) \
        if all(d is not None for d in sched.default_s) else None
    lines.append(f"estimated model latency (sum of weight x best): "
                 f"{'-' if est is None else f'{est * 1e3:.4g} ms'} tuned, "
                 f"{'-' if base is None else f'{base * 1e3:.4g} ms'} with default schedules; "
                 f"{sum(sched.trials)} trials")
    return "\n".join(lines)


def time_call(*fns: Callable[[], object], rounds: int = 7, min_s: float = 0.05) -> List[float]:
    """Median seconds per call of each fn, timed in alternation (round k times every fn once
    in turn, each over enough calls to take min_s), so that a shared machine's drift falls on
    all of them alike; one warm-up call each first."""
    for fn in fns:
        fn()
    counts = []
    for fn in fns:
        start = time.perf_counter()
        fn()
        counts.append(max(1, int(min_s / max(time.perf_counter() - start, 1e-9))))
    times: List[List[float]] = [[] for _ in fns]
    for _ in range(rounds):
        for fn, n, out in zip(fns, counts, times):
            start = time.perf_counter()
            for _ in range(n):
                fn()
            out.append((time.perf_counter() - start) / n)
    return [sorted(t)[len(t) // 2] for t in times]
