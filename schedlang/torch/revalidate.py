"""Re-timing a model's tuned records for the target it is compiled for, before a compile
trusts them (TVM users re-measure the best records of a log on the deployment target; here
the records may also come from another thread count).

A log tuned at one thread (CPU time, so a loaded machine can tune) holds schedules that
won there: at two threads one may lose to the default schedule (a parallel loop of one
iteration; rows split across the threads where the default splits the columns, so each
thread streams all of B), and a record that beat an older default still wins after the
default rules improved. `revalidate` takes each task of the model (tune.extract_tasks for
the target), finds the record a compile for that target takes (kernel_tasks.replay_best,
with its parallel loops as the compile gives them), and times that kernel beside today's
default schedule for the target, at the target's threads, in alternating rounds. The
winner is appended to the log as a new record timed at those threads, marked "revalidated"
with both medians (records.py); records.choose and the per-kernel replay prefer records of
the target's threads, so the next compile for it takes the winner: the default (a record of
sketch "default" builds today's default) or the record. Tasks whose chosen record is a
default one, or one revalidated at these threads already, are not timed.

    schedlang tune model.py --model M --shape 1,128 --revalidate --log LOG --threads 2
"""
from __future__ import annotations

import json
import statistics
import time
import warnings
from typing import List, NamedTuple, Optional

from ..autoschedule import records
from ..autoschedule.api import check_count, existing_log
from ..autoschedule.measure import Measurer
from .fuse import fuse
from .kernel_tasks import RecordIndex, replay_best
from .schedules import schedule_group
from .tune import DEFAULT, KernelTask, extract_tasks, steps_hash


class Revalidation(NamedTuple):
    """One task's outcome: its KernelTask, the record a compile took before (None: none or a
    default one), the two medians (seconds; None when not timed) and the winner ("record",
    "default", or why nothing was timed: "no record", "default record", "revalidated already",
    "failed: ...")."""

    task: KernelTask
    record: Optional[dict]
    record_s: Optional[float]
    default_s: Optional[float]
    outcome: str


def compiled_schedule(task, target, index: RecordIndex):
    """(schedule, Replayed) of the task's program as a compile for target with index's log
    builds it: its kernel from the record replay_best decides (parallel loops widened or
    added for target's threads), or today's default schedule."""
    s = task.schedule()
    decided = None
    for group in fuse(s):
        got = replay_best(s, group, target, index)
        if got.record is not None:
            decided = got
        if not got.replayed:
            schedule_group(s, group, target)
    return s, decided


def revalidate(program, target, log: str, rounds: int = 3, number: int = 5, repeat: int = 3,
               executor=None, verbose: int = 1) -> List[Revalidation]:
    """Re-time, for each task of program (a LoweredProgram) compiled for target, the record a
    compile takes against today's default schedule, at target's threads, `rounds` alternating
    rounds of `repeat` x `number` calls each (measure.Measurer: a worker process, or executor);
    append the winner to log (module docstring). Returns one Revalidation per task."""
    log = existing_log(log, "revalidate")
    for name, value in (("rounds", rounds), ("number", number), ("repeat", repeat)):
        check_count(name, value, "revalidate", 1)
    threads = records.target_threads(target)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tasks = extract_tasks(program, target)
    index = RecordIndex(log)
    measurer = Measurer(executor, number, repeat)
    out = []
    try:
        for i, kt in enumerate(tasks):
            out.append(_revalidate_task(kt, target, index, measurer, rounds, threads, log))
            if verbose:
                print(f"revalidate: task {i} {kt.kind} {kt.name} (x{kt.weight}): {_line(out[-1])}", flush=True)
    finally:
        measurer.close()
    return out


def _revalidate_task(kt: KernelTask, target, index: RecordIndex, measurer, rounds: int, threads, log: str):
    with warnings.catch_warnings():          # a record of other threads: the point of this
        warnings.simplefilter("ignore")
        try:
            s, decided = compiled_schedule(kt.task, target, index)
        except (ValueError, TypeError, KeyError) as err:      # ScheduleError is a ValueError
            return Revalidation(kt, None, None, None, f"failed: {type(err).__name__}: {err}")
    rec = decided.record if decided is not None else None
    if rec is None:
        return Revalidation(kt, None, None, None, "no record")
    if rec.get("sketch") == DEFAULT:
        return Revalidation(kt, rec, None, None, "default record")
    if (rec.get("revalidated") or {}).get("threads") == threads:
        return Revalidation(kt, rec, rec["revalidated"]["record_s"], rec["revalidated"]["default_s"],
                            "revalidated already")
    jobs = [s.to_json(), kt.default_steps]
    times: List[List[float]] = [[], []]
    last = [None, None]
    for _ in range(rounds):
        for k, res in enumerate(measurer.measure(kt.task.program_json, kt.task.target, jobs)):
            if res.error is not None:
                return Revalidation(kt, rec, None, None, f"failed: {res.error}")
            times[k] += res.times
            last[k] = res
    rec_s, def_s = (statistics.median(t) for t in times)
    won = 0 if rec_s < def_s else 1
    res = last[won]
    steps, sketch, khash = ((rec["steps"], rec.get("sketch"), rec["kernel_hash"]) if won == 0
                            else (json.loads(kt.default_steps), DEFAULT, steps_hash(kt)))
    mark = {"threads": threads or 1, "record_s": rec_s, "default_s": def_s, "record_hash": rec["kernel_hash"],
            "rounds": rounds}
    extra = {k: v for k, v in res.extra.items() if k in ("cpu", "register_file", "threads")}
    records.append(log, [records.make_record(kt.workload_key, str(kt.task.target), steps, khash, times[won], None,
                                             kt.task.flops, res.load, sketch=sketch, final=time.time(),
                                             revalidated=mark, **extra)])
    return Revalidation(kt, rec, rec_s, def_s, "record" if won == 0 else "default")


def _line(r: Revalidation) -> str:
    if r.record_s is None:
        return r.outcome
    return (f"record {r.record_s * 1e3:.4g} ms, default {r.default_s * 1e3:.4g} ms "
            f"({r.record_s / r.default_s:.3f}x): {r.outcome}")


def revalidation_table(results: List[Revalidation]) -> str:
    """A line per task that had a record to time, and the weighted sums: what the model's
    kernels take with the records as they were and with the winners."""
    lines = [f"{'task':<40} {'weight':>6} {'record ms':>10} {'default ms':>10} {'ratio':>6}  winner"]
    before = after = 0.0
    for r in results:
        if r.record_s is None:
            continue
        lines.append(f"{(r.task.kind + ' ' + r.task.name)[:40]:<40} {r.task.weight:>6} {r.record_s * 1e3:>10.4g} "
                     f"{r.default_s * 1e3:>10.4g} {r.record_s / r.default_s:>6.3f}  {r.outcome}")
        before += r.task.weight * r.record_s
        after += r.task.weight * min(r.record_s, r.default_s)
    lines.append(f"weighted (sum of weight x time over these tasks): {before * 1e3:.4g} ms with the records as "
                 f"chosen before, {after * 1e3:.4g} ms with the winners")
    return "\n".join(lines)
