"""sl.auto_schedule, sl.apply_best, sl.print_best."""
from __future__ import annotations

import concurrent.futures as cf
import json
import os
import random
import statistics
import sys
import time
import warnings
from typing import List, Optional, Tuple, Union

import numpy as np

from ..driver import build
from ..schedule import Schedule
from ..schedule.steps import Step
from ..target.registry import get_backend
from ..tensor.reference import evaluate
from . import records
from .measure import BUILD_TIMEOUT_S, RUN_TIMEOUT_S, Measurer, random_inputs
from .progress import Progress, format_seconds
from .sample import sample
from .search import SearchPolicy, run_search, steps_key
from .sketch import generate_sketches
from .task import SearchTask, as_task

CHECK_RTOL = 1e-3         # float results of a reordered reduction differ in rounding only
# ... by more for the narrow floats (a few units in their last place).
NARROW_RTOL = {"float16": 1e-2, "bfloat16": 5e-2}


def check_count(name: str, value, caller: str, least: int = 0) -> int:
    """value, when it is an int >= least (a bool is not a count); TypeError/ValueError else."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{caller}: {name} must be an integer, got {value!r}")
    if value < least:
        raise ValueError(f"{caller}: {name} must be an integer >= {least}, got {value!r}")
    return value


def _check_writable(log: str) -> None:
    """Refuse a log the search could not append to, before any work is done."""
    log = records.log_path(log, "auto_schedule")
    folder = os.path.dirname(os.path.abspath(log))
    if os.path.isdir(log):
        raise IsADirectoryError(f"auto_schedule: the log {log!r} is a directory; give a file path")
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"auto_schedule: cannot write the log {log!r}: no directory {folder!r}")
    if not os.access(log if os.path.exists(log) else folder, os.W_OK):
        raise PermissionError(f"auto_schedule: cannot write the log {log!r}: permission denied")


def existing_log(log, caller: str) -> str:
    """The path of the tuning log log, which must exist (FileNotFoundError names the caller)."""
    log = records.log_path(log, caller)
    if not os.path.isfile(log):
        raise FileNotFoundError(f"{caller}: no tuning log {log!r}")
    return log


def _schedule_of(task: SearchTask, rec) -> Schedule:
    s = task.schedule()
    s.apply_steps([Step.from_json(d) for d in rec["steps"]["steps"]])
    return s


def check_against_reference(task: SearchTask, s: Schedule, seed: int = 0) -> Optional[str]:
    """Build s, run it on random inputs and compare with the reference evaluator; None when
    the results agree, else what differs."""
    inputs = random_inputs(task.inputs, seed)
    want = evaluate(task.outputs, dict(zip(task.inputs, inputs)))
    outs = [np.zeros(t.shape, np.dtype(t.dtype_obj.numpy)) for t in task.outputs]
    mod = build(s, task.args, target=task.target)
    get_backend(task.target.kind).run_on_host(mod, [*inputs, *outs])
    for t, got, ref in zip(task.outputs, outs, want):
        exact = not t.dtype_obj.is_float     # bfloat16's numpy kind is "V", not "f"
        scale = max(1.0, float(np.max(np.abs(ref)))) if ref.size else 1.0
        tol = 0.0 if exact else NARROW_RTOL.get(str(t.dtype_obj), CHECK_RTOL) * scale
        bad = np.abs(got.astype(np.float64) - ref.astype(np.float64)) > tol
        if bad.any():
            return f"{t.name}: {int(bad.sum())} of {ref.size} elements differ from the reference"
    return None


def auto_schedule(outputs, target=None, trials: int = 64, log: str = "records.jsonl",
                  executor: Optional[cf.Executor] = None, seed: Optional[int] = None, *,
                  per_round: int = 8, number: int = 5, repeat: int = 3,
                  build_timeout: float = BUILD_TIMEOUT_S, run_timeout: float = RUN_TIMEOUT_S,
                  verbose: int = 1, policy: Optional[SearchPolicy] = None,
                  timeout: Optional[float] = None, final: int = 4) -> Tuple[Schedule, List]:
    """Search schedules of the program computing outputs (tensors, or a SearchTask) and
    return (schedule, args) of the fastest one that matches the reference evaluator.

    target: "llvm" by default, or a SearchTask's own (a different one is an error).
    trials new candidates are measured (fewer when the search space runs out), each
    logged to `log` (JSON lines) as soon as it is measured; a log that already holds
    records of this workload and target is resumed: its candidates are never measured
    again and count for the best (trials=0 only reads it). Measurements run in one
    worker process with a build and a run timeout, or through `executor` (any
    concurrent.futures.Executor).
    Candidates come from an evolutionary search ranked by a learned cost model on Tile IR
    features (search.py; `policy` sets its population, generations and exploration).
    seed makes the candidates and their order reproducible (given the same measurements).
    timeout (seconds) ends the search early: no new round of candidates starts after it.
    verbose=1 shows progress on stderr (progress.py: a tqdm bar on a terminal, a line per
    round elsewhere) and warns when the machine was loaded beyond its cores; 0 is silent.
    final: when the search ends, its `final` fastest candidates are timed again side by side
    (final_comparison) and that comparison picks the winner; 0 skips it.

    TVM: auto_scheduler.SearchTask(...).tune(TuningOptions(...)) (tvm_names.py) calls this."""
    who = "auto_schedule"
    check_count("trials", trials, who)
    for name, value, least in (("per_round", per_round, 1), ("number", number, 1), ("repeat", repeat, 1),
                               ("final", final, 0), ("verbose", verbose, 0)):
        check_count(name, value, who, least)
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                or not timeout > 0):
        raise ValueError(f"auto_schedule: timeout must be a positive number of seconds, got {timeout!r}")
    if executor is not None and not callable(getattr(executor, "submit", None)):
        raise TypeError(f"auto_schedule: executor must be a concurrent.futures.Executor or a Dask client, "
                        f"got {executor!r}")
    if policy is not None and not isinstance(policy, SearchPolicy):
        raise TypeError(f"auto_schedule: policy must be a SearchPolicy, got {policy!r}")
    task = as_task(outputs, target, who)
    _check_writable(log)
    log = os.fspath(log)
    measurer = Measurer(executor, number, repeat, build_timeout, run_timeout)
    progress = Progress(trials, verbose, check_load=not measurer.dask)
    try:
        run_search(task, trials, log, measurer, seed, per_round, on_record=progress.update,
                   policy=policy or SearchPolicy(), timeout=timeout, on_round=progress.round)
        progress.close()
        if trials and final:
            final_comparison(task, log, measurer, final, progress)
    except KeyboardInterrupt:
        progress.close()
        measurer.close(interrupted=True)
        print(f"auto_schedule: interrupted; the measured candidates are in {log}", file=sys.stderr)
        raise
    finally:
        progress.close()
        measurer.close()
    return _best_checked(task, log, warn_none=trials > 0)


FINAL_ROUNDS = 3         # alternating rounds of the final comparison


def final_comparison(task: SearchTask, log: str, measurer: Measurer, count: int,
                     progress: Optional[Progress] = None, rounds: int = FINAL_ROUNDS,
                     with_default: Union[bool, dict] = False) -> None:
    """Time the log's `count` fastest distinct candidates again, side by side in `rounds`
    alternating rounds, and log each once more with all its new times and "final": a time
    stamp (records.ranked puts the latest such comparison first). On a shared machine the
    search's times, taken minutes apart, drift more than the best candidates differ; times
    taken together compare them fairly. Estimated (cuda, no GPU) records are left alone.
    with_default: the task's default schedule (its record of sketch "default") is timed with
    them whatever its first time was, so a tuned choice is never one that lost to the default
    side by side (the default's first time may have been taken under another load); with_default
    may be the default's steps (a dict), then only a default record of those steps is (a log
    may hold older defaults' records, tuned before the default rules changed)."""
    target = str(task.target)
    best, seen = [], set()
    ranked = records.ranked([r for r in records.load(log, task.workload_key, target)      # this thread count's
                             if not records.other_threads(r, task.target)], final=False)
    stale = lambda r: isinstance(with_default, dict) and r.get("sketch") == "default" \
        and r["steps"] != with_default                                   # noqa: E731
    for rec in ranked:
        if rec.get("estimated") or rec["kernel_hash"] in seen or stale(rec):
            continue
        seen.add(rec["kernel_hash"])
        best.append(rec)
        if len(best) == count:
            break
    default = None
    if with_default:
        default = next((r for r in ranked if r.get("sketch") == "default" and not r.get("estimated")
                        and not stale(r)), None)
    if default is not None and default["kernel_hash"] not in seen:
        best.append(default)
    if len(best) < 2:
        return
    if progress is not None:
        progress.say(f"timing the {len(best)} fastest candidates again side by side ({rounds} alternating "
                     "rounds): times taken minutes apart drift, so this comparison picks the winner")
    steps = [json.dumps(r["steps"], sort_keys=True) for r in best]
    times = [[] for _ in best]
    errors = [None for _ in best]
    loads = [None for _ in best]
    extras = [{} for _ in best]       # where it was timed (cpu, register_file, threads)
    for _ in range(rounds):
        for i, res in enumerate(measurer.measure(task.program_json, task.target, steps)):
            if res.error is not None:
                errors[i] = errors[i] or res.error
            else:
                times[i] += list(res.times)
                loads[i] = res.load
                extras[i] = {k: v for k, v in res.extra.items() if k in ("cpu", "register_file", "threads")}
    stamp = time.time()
    if progress is not None:
        done = [(statistics.median(ts), r) for r, ts in zip(best, times) if ts]
        if done:
            t, r = min(done, key=lambda tr: tr[0])
            progress.say(f"final comparison: the winner takes {format_seconds(t)} per call "
                         f"(first measured at {format_seconds(r['median_s'])})")
    records.append(log, [records.make_record(task.workload_key, target, rec["steps"], rec["kernel_hash"],
                                             [] if err else t, err, task.flops, load, final=stamp,
                                             sketch=rec.get("sketch"), decisions=rec.get("decisions"), **extra)
                         for rec, t, err, load, extra in zip(best, times, errors, loads, extras)])


def _replayable(task: SearchTask, recs):
    """(record, schedule) of the records whose steps replay on the program, in order; a
    record whose steps do not (edited by hand, another schedlang) is skipped with a warning."""
    for rec in recs:
        try:
            yield rec, _schedule_of(task, rec)
        except (ValueError, TypeError, KeyError) as err:      # ScheduleError is a ValueError
            warnings.warn(f"skipped a record whose steps do not replay: {type(err).__name__}: {err}", stacklevel=3)


def _best_checked(task: SearchTask, log: str, warn_none: bool = True) -> Tuple[Schedule, List]:
    target = str(task.target)
    # this target's records, this CPU's first (a shared log may hold another machine's too)
    groups = records.choose(records.load(log, task.workload_key, target), task.target, records.this_cpu())
    ordered = [rec for name, recs in groups if name != records.WIDER for rec in recs]
    for rec, s in _replayable(task, ordered):
        problem = check_against_reference(task, s)
        if problem is None:
            return s, task.args
        warnings.warn(f"auto_schedule: the fastest candidate computes a wrong result ({problem}); "
                      "it is marked failed in the log and the next one is checked", stacklevel=3)
        records.append(log, [records.make_record(task.workload_key, target, rec["steps"], rec["kernel_hash"],
                                                 [], f"WrongResult: {problem}", task.flops)])
    if warn_none:       # trials=0 on an empty log measured nothing: nothing failed either
        warnings.warn("auto_schedule: no candidate ran successfully; returning the default schedule", stacklevel=3)
    return task.schedule(), task.args


class OtherCPUWarning(UserWarning):
    """apply_best (or the torch frontend) uses a record measured on another CPU, or skips one
    built for an ISA this target lacks."""


def _best_record(log: str, task: SearchTask, caller: str):
    """(record, schedule, the records of its group) of the fastest successful record of the
    task, preferring this CPU's (records.choose): a record of another CPU is used with a
    one-line OtherCPUWarning; one built for a wider ISA than the target's (an AVX-512 record
    for an AVX2 target) only when its decisions replay within this target's register file
    (fits_target), else it is skipped, with a warning saying so."""
    log = existing_log(log, caller)
    recs = records.load(log, task.workload_key)
    here = records.this_cpu()
    skipped = []
    for group, ranked in records.choose(recs, task.target, here):
        for rec, s in _replayable(task, ranked):
            if group == records.WIDER and not fits_target(task, rec):
                skipped.append(rec)
                continue
            if skipped:
                _warn_skipped(caller, task, skipped)
            if group in (records.OTHER, records.WIDER):
                warnings.warn(_elsewhere(caller, rec, here, task.target), OtherCPUWarning, stacklevel=3)
            elif records.other_threads(rec, task.target):
                warnings.warn(other_threads_text(caller, [rec], task.target), OtherThreadsWarning, stacklevel=3)
            return rec, s, ranked
    if skipped:
        _warn_skipped(caller, task, skipped)
    raise NoRecordError(f"{log}: no successful record of this workload (key {task.workload_key[:12]}...) "
                        f"for target '{task.target}'")


def _elsewhere(caller: str, rec, here, target) -> str:
    """The one line saying that a record of another CPU (or another target) is used."""
    if records.same_cpu(rec.get("cpu"), here):
        return (f"{caller}: using a record tuned on this CPU for target '{rec['target']}', not for '{target}'; "
                f"tune for '{target}' for its best schedule")
    return (f"{caller}: using a record measured on {records.cpu_text(rec.get('cpu'))}, not on this machine "
            f"({records.cpu_text(here)}); tune here for this CPU's best schedule")


class OtherThreadsWarning(OtherCPUWarning):
    """A record timed at another thread count than the target's is used (no record of the
    target's threads): a schedule that won at one thread may lose at two."""


def other_threads_text(caller: str, recs, target) -> str:
    """The one line saying that records timed at other thread counts are used for target."""
    counts = sorted({r["threads"] for r in recs})
    want = records.target_threads(target)
    return (f"{caller}: using {len(recs)} record(s) timed at {'/'.join(map(str, counts))} thread(s), not at the "
            f"target's {want}; re-time them for it (schedlang tune --revalidate LOG --threads {want}, or "
            f"schedlang.torch.revalidate) or tune with --threads {want}")


def tuned_schedule_or_none(log, outputs, target) -> Optional[Schedule]:
    """apply_best's schedule, or None when the log (a missing file too) holds no record of this
    program usable for target (the torch frontend falls back to its default schedules)."""
    task = as_task(outputs, target, "apply_best")
    if not os.path.isfile(records.log_path(log, "apply_best")):
        return None
    try:
        return _best_record(log, task, "apply_best")[1]
    except NoRecordError:
        return None


class NoRecordError(ValueError):
    """The log holds no successful record usable for the task."""


def _warn_skipped(caller: str, task: SearchTask, skipped) -> None:
    rf = skipped[0].get("register_file") or {}
    warnings.warn(f"{caller}: skipped {len(skipped)} record(s) built for a wider ISA "
                  f"({rf.get('vector_bits', '?')}-bit vectors, {rf.get('vector_registers', '?')} registers, measured on "
                  f"{records.cpu_text(skipped[0].get('cpu'))}) whose register tiles do not fit target '{task.target}' "
                  f"({task.target.vector_bits}-bit vectors, {task.target.native_registers()} registers)",
                  OtherCPUWarning, stacklevel=4)


def fits_target(task: SearchTask, rec) -> bool:
    """Whether a record's schedule, made for another register file, is one this target's
    search could draw: its sketch's decisions replayed on the task (whose register-block
    checks redraw what does not fit) give the record's very steps. A record without its
    sketch and decisions cannot be re-validated: False."""
    if not rec.get("sketch") or not rec.get("decisions"):
        return False
    sketch = next((sk for sk in generate_sketches(task) if sk.name == rec["sketch"]), None)
    if sketch is None:
        return False
    try:
        s, _ = sample(task, sketch, random.Random(0), rec["decisions"])
    except (ValueError, TypeError, KeyError):     # ScheduleError is a ValueError
        return False
    return steps_key(s.to_json()) == steps_key(rec["steps"])


def apply_best(log: str, outputs, target=None) -> Tuple[Schedule, List]:
    """(schedule, args) of the fastest successful record of this program in the log
    (FileNotFoundError without the file; ValueError without such a record). Records
    measured on this CPU for this target come first; else another CPU's (or another target's
    of the same kind, e.g. a log tuned for "llvm -mcpu=znver3" on a Zen 4) with a one-line
    OtherCPUWarning; a record built for a wider ISA than the target's only when it fits the
    target's register file (_best_record).
    TVM: SearchTask.apply_best(log) (tvm_names.py)."""
    task = as_task(outputs, target, "apply_best")
    return _best_record(log, task, "apply_best")[1], task.args


def print_best(log: str, outputs, target=None, file=None) -> str:
    """Print the best record's schedule as Python that rebuilds it on
    `s = sl.create_schedule(...)`; returns the text. Its comment says where the time comes
    from when the final side-by-side comparison and the search's first measurement differ."""
    text = best_python(log, outputs, target, "print_best")
    print(text, file=file)
    return text


def best_python(log: str, outputs, target, caller: str) -> str:
    """The text print_best prints."""
    task = as_task(outputs, target, caller)
    rec, s, recs = _best_record(log, task, caller)
    gf = f", {rec['gflops']:.3g} GFLOP/s" if rec.get("gflops") else ""
    if rec.get("estimated"):
        gf += f" ESTIMATED ({rec.get('timing', 'estimate')}: a model of the SIMT profile, not a GPU timing)"
    return (f"# best of {log}: {format_seconds(rec['median_s'])} per call{gf} on {rec['target']}\n"
            + "".join(f"# {line}\n" for line in _time_notes(rec, recs))
            + f"s = sl.create_schedule([{', '.join(t.name + '.op' for t in task.outputs)}])\n"
            f"{s.to_python()}")


def _time_notes(best, recs) -> List[str]:
    """Why the best record's time is not the search's first measurement of it, or why the
    fastest first measurement did not win (both when the final comparison decided)."""
    if "final" not in best:
        return []
    searched = [r for r in recs if "final" not in r and r["error"] is None and r["median_s"]]
    first = next((r for r in searched if r["kernel_hash"] == best["kernel_hash"]), None)
    notes = []
    if first is not None and abs(first["median_s"] - best["median_s"]) > 0.01 * best["median_s"]:
        notes.append(f"this time is from the final comparison (the best candidates timed again side by side "
                     f"when the search ended); the search first measured it at {format_seconds(first['median_s'])}")
    fastest = min(searched, key=lambda r: r["median_s"], default=None)
    if fastest is not None and fastest["kernel_hash"] != best["kernel_hash"]:
        notes.append(f"the search's fastest first measurement ({format_seconds(fastest['median_s'])}) was another "
                     "candidate's, slower when timed side by side: times taken minutes apart drift on a "
                     "shared machine, so the final comparison picks the winner")
    return notes
