"""sl.auto_schedule, sl.apply_best, sl.print_best."""
from __future__ import annotations

import concurrent.futures as cf
import json
import sys
import time
import warnings
from typing import List, Optional, Tuple

import numpy as np

from ..schedule import Schedule
from ..tensor.reference import evaluate
from . import records
from .measure import BUILD_TIMEOUT_S, RUN_TIMEOUT_S, Measurer, random_inputs
from .search import SearchPolicy, run_search
from .task import SearchTask

CHECK_RTOL = 1e-3         # float results of a reordered reduction differ in rounding only
# ... by more for the narrow floats (a few units in their last place).
NARROW_RTOL = {"float16": 1e-2, "bfloat16": 5e-2}


def _task(outputs, target) -> SearchTask:
    if isinstance(outputs, SearchTask):
        return outputs
    return SearchTask.from_outputs(outputs, target)


def _schedule_of(task: SearchTask, rec) -> Schedule:
    from ..schedule.steps import Step
    s = task.schedule()
    s.apply_steps([Step.from_json(d) for d in rec["steps"]["steps"]])
    return s


def check_against_reference(task: SearchTask, s: Schedule, seed: int = 0) -> Optional[str]:
    """Build s, run it on random inputs and compare with the reference evaluator; None when
    the results agree, else what differs."""
    from ..driver import build
    inputs = random_inputs(task.inputs, seed)
    want = evaluate(task.outputs, dict(zip(task.inputs, inputs)))
    outs = [np.zeros(t.shape, np.dtype(t.dtype_obj.numpy)) for t in task.outputs]
    mod = build(s, task.args, target=task.target)
    if task.target.kind == "cuda":     # the CUDA C itself, run on the CPU (as on a GPU, without one)
        mod.emulate(*inputs, *outs, engine="shim")
    else:
        mod(*inputs, *outs)
    for t, got, ref in zip(task.outputs, outs, want):
        exact = not t.dtype_obj.is_float     # bfloat16's numpy kind is "V", not "f"
        scale = max(1.0, float(np.max(np.abs(ref)))) if ref.size else 1.0
        tol = 0.0 if exact else NARROW_RTOL.get(str(t.dtype_obj), CHECK_RTOL) * scale
        bad = np.abs(got.astype(np.float64) - ref.astype(np.float64)) > tol
        if bad.any():
            return f"{t.name}: {int(bad.sum())} of {ref.size} elements differ from the reference"
    return None


def auto_schedule(outputs, target="llvm", trials: int = 64, log: str = "records.jsonl",
                  executor: Optional[cf.Executor] = None, seed: Optional[int] = None, *,
                  per_round: int = 8, number: int = 5, repeat: int = 3,
                  build_timeout: float = BUILD_TIMEOUT_S, run_timeout: float = RUN_TIMEOUT_S,
                  verbose: int = 1, policy: Optional[SearchPolicy] = None,
                  timeout: Optional[float] = None, final: int = 4) -> Tuple[Schedule, List]:
    """Search schedules of the program computing outputs (tensors, or a SearchTask) and
    return (schedule, args) of the fastest one that matches the reference evaluator.

    trials new candidates are measured (fewer when the search space runs out), each
    logged to `log` (JSON lines) as soon as it is measured; a log that already holds
    records of this workload and target is resumed: its candidates are never measured
    again and count for the best. Measurements run in one spawned worker process with a
    build and a run timeout, or through `executor` (any concurrent.futures.Executor).
    Candidates come from an evolutionary search ranked by a learned cost model on Tile IR
    features (search.py; `policy` sets its population, generations and exploration).
    seed makes the candidates and their order reproducible (given the same measurements).
    timeout (seconds) ends the search early: no new round of candidates starts after it.
    verbose=1 shows a progress bar with the best GFLOP/s on a terminal (tqdm); 0 is silent.
    final: when the search ends, its `final` fastest candidates are timed again side by side
    (final_comparison) and that comparison picks the winner; 0 skips it."""
    if not isinstance(trials, int) or trials < 0:
        raise ValueError(f"auto_schedule: trials must be a non-negative integer, got {trials!r}")
    if timeout is not None and not (isinstance(timeout, (int, float)) and timeout > 0):
        raise ValueError(f"auto_schedule: timeout must be a positive number of seconds, got {timeout!r}")
    task = _task(outputs, target)
    measurer = Measurer(executor, number, repeat, build_timeout, run_timeout)
    bar = progress_bar(trials, verbose)
    try:
        run_search(task, trials, log, measurer, seed, per_round, on_record=bar.update if bar else None,
                   policy=policy or SearchPolicy(), timeout=timeout)
    except KeyboardInterrupt:
        measurer.close(interrupted=True)
        print(f"auto_schedule: interrupted; the measured candidates are in {log}", file=sys.stderr)
        raise
    finally:
        if bar is not None:
            bar.close()
    if not isinstance(final, int) or final < 0:
        raise ValueError(f"auto_schedule: final must be a non-negative integer, got {final!r}")
    try:
        if trials and final:
            final_comparison(task, log, measurer, final)
    finally:
        measurer.close()
    return _best_checked(task, log)


FINAL_ROUNDS = 3         # alternating rounds of the final comparison


def final_comparison(task: SearchTask, log: str, measurer: Measurer, count: int,
                     rounds: int = FINAL_ROUNDS) -> None:
    """Time the log's `count` fastest distinct candidates again, side by side in `rounds`
    alternating rounds, and log each once more with all its new times and "final": a time
    stamp (records.ranked puts the latest such comparison first). On a shared machine the
    search's times, taken minutes apart, drift more than the best candidates differ; times
    taken together compare them fairly. Estimated (cuda, no GPU) records are left alone."""
    target = str(task.target)
    best, seen = [], set()
    for rec in records.ranked(records.load(log, task.workload_key, target), final=False):
        if rec.get("estimated") or rec["kernel_hash"] in seen:
            continue
        seen.add(rec["kernel_hash"])
        best.append(rec)
        if len(best) == count:
            break
    if len(best) < 2:
        return
    steps = [json.dumps(r["steps"], sort_keys=True) for r in best]
    times = [[] for _ in best]
    errors = [None for _ in best]
    loads = [None for _ in best]
    for _ in range(rounds):
        for i, res in enumerate(measurer.measure(task.program_json, target, steps)):
            if res.error is not None:
                errors[i] = errors[i] or res.error
            else:
                times[i] += list(res.times)
                loads[i] = res.load
    stamp = time.time()
    records.append(log, [records.make_record(task.workload_key, target, rec["steps"], rec["kernel_hash"],
                                             [] if err else t, err, task.flops, load, final=stamp,
                                             sketch=rec.get("sketch"), decisions=rec.get("decisions"))
                         for rec, t, err, load in zip(best, times, errors, loads)])


class _Progress:
    """A tqdm bar over the trials with the best GFLOP/s so far."""

    def __init__(self, tqdm, trials: int):
        self.bar, self.best = tqdm(total=trials, desc="auto_schedule", unit="trial", file=sys.stderr), None

    def update(self, rec) -> None:
        if rec.get("gflops") and (self.best is None or rec["gflops"] > self.best):
            self.best = rec["gflops"]
            self.bar.set_postfix_str(f"best {self.best:.3g} GFLOP/s")
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()


def progress_bar(trials: int, verbose: int) -> Optional[_Progress]:
    """The progress bar, or None when verbose is 0, stderr is not a terminal, or tqdm is
    not installed."""
    if not verbose or not sys.stderr.isatty():
        return None
    try:
        from tqdm import tqdm
    except ImportError:       # pragma: no cover - depends on the environment
        return None
    return _Progress(tqdm, trials)


def _replayable(task: SearchTask, recs):
    """(record, schedule) of the records whose steps replay on the program, in order; a
    record whose steps do not (edited by hand, another schedlang) is skipped with a warning."""
    for rec in recs:
        try:
            yield rec, _schedule_of(task, rec)
        except (ValueError, TypeError, KeyError) as err:      # ScheduleError is a ValueError
            warnings.warn(f"skipped a record whose steps do not replay: {type(err).__name__}: {err}", stacklevel=3)


def _best_checked(task: SearchTask, log: str) -> Tuple[Schedule, List]:
    target = str(task.target)
    for rec, s in _replayable(task, records.ranked(records.load(log, task.workload_key, target))):
        problem = check_against_reference(task, s)
        if problem is None:
            return s, task.args
        warnings.warn(f"auto_schedule: the fastest candidate computes a wrong result ({problem}); "
                      "it is marked failed in the log and the next one is checked", stacklevel=3)
        records.append(log, [records.make_record(task.workload_key, target, rec["steps"], rec["kernel_hash"],
                                                 [], f"WrongResult: {problem}", task.flops)])
    warnings.warn("auto_schedule: no candidate ran successfully; returning the default schedule", stacklevel=3)
    return task.schedule(), task.args


def _best_record(log: str, task: SearchTask):
    """(record, schedule) of the fastest successful record of the task in the log."""
    recs = records.ranked(records.load(log, task.workload_key, str(task.target)))
    for rec, s in _replayable(task, recs):
        return rec, s
    raise ValueError(f"{log}: no successful record of this workload (key {task.workload_key[:12]}...) "
                     f"for target '{task.target}'")


def apply_best(log: str, outputs, target="llvm") -> Tuple[Schedule, List]:
    """(schedule, args) of the fastest successful record of this program in the log."""
    task = _task(outputs, target)
    return _best_record(log, task)[1], task.args


def print_best(log: str, outputs, target="llvm", file=None) -> str:
    """Print the best record's schedule as Python that rebuilds it on
    `s = sl.create_schedule(...)`; returns the text."""
    task = _task(outputs, target)
    rec, s = _best_record(log, task)
    gf = f", {rec['gflops']:.3g} GFLOP/s" if rec.get("gflops") else ""
    if rec.get("estimated"):
        gf += f" ESTIMATED ({rec.get('timing', 'estimate')}: a model of the SIMT profile, not a GPU timing)"
    text = (f"# best of {log}: {rec['median_s'] * 1e6:.4g} us per call{gf} on {rec['target']}\n"
            f"s = sl.create_schedule([{', '.join(t.name + '.op' for t in task.outputs)}])\n"
            f"{s.to_python()}")
    print(text, file=file)
    return text
