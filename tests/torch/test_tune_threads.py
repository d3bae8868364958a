"""A model's tuning log used by a compile for another thread count, or after the default
schedules changed: records tuned at one thread (CPU time, as on a loaded machine) get a
parallel loop where they have none, and a record of the default schedule builds today's."""
import concurrent.futures as cf
import json
import os

import torch

import schedlang as sl
import schedlang.torch as st
from schedlang.autoschedule import records
from schedlang.autoschedule.search import SearchPolicy
from schedlang.torch.schedules import default_schedule
from schedlang.torch.tune import extract_tasks, tune_program

from .test_tune import Repeated

QUICK = dict(number=1, repeat=1, verbose=0, policy=SearchPolicy(population=8, generations=1), final=0)


def _target(threads):
    return sl.Target.create("llvm").with_options(num_threads=threads)


def _model():
    torch.manual_seed(0)
    model, x = Repeated().eval(), torch.randn(4, 32)
    return model, x, st.compile(model, (x,), target=_target(1))


def _serial_record(task, log, target, sketch=None, seconds=1e-9):
    """A record of the task's plain schedule with its output's first axis split by 2: no
    parallel loop, as a search draws for one thread 15 % of the time."""
    s = task.schedule()
    out = s[task.outputs[0].op]
    out.split(out.op.axis[0], factor=2)
    steps = json.loads(s.to_json())
    assert not any(d["primitive"] == "parallel" for d in steps["steps"])
    records.append(log, [records.make_record(task.workload_key, str(target), steps, "serial", [seconds], None,
                                             task.flops, sketch=sketch)])
    return steps


def _steps(outs, target, log=None):
    return json.loads(default_schedule(outs, target, log=log).to_json())["steps"]


def test_a_record_without_a_parallel_loop_gets_one_for_two_threads(tmp_path):
    model, x, cm = _model()
    twice = next(t for t in extract_tasks(cm.program, _target(1)) if t.weight == 2)
    log = str(tmp_path / "serial.jsonl")
    _serial_record(twice.task, log, _target(1))
    outs = [t for _, t in cm.program.parts[0].outputs]
    plain = _steps(outs, _target(2))
    one, two = _steps(outs, _target(1), log), _steps(outs, _target(2), log)
    # both calls of the kernel replay the record (its split by 2) at either thread count ...
    splits = {d["stage"] for d in one if d["primitive"] == "split" and d.get("factor") == 2 and d not in plain}
    assert len(splits) == 2 and splits == {d["stage"] for d in two if d["primitive"] == "split"
                                           and d.get("factor") == 2 and d not in plain}
    # ... at one thread as recorded, at two with a parallel loop on each, its outer loops fused
    assert not any(d["primitive"] == "parallel" and d["stage"] in splits for d in one)
    par = [d for d in two if d["primitive"] == "parallel" and d["stage"] in splits]
    assert {d["stage"] for d in par} == splits
    assert all(d["axis"].endswith(".fused") for d in par)      # 2 rows a tile: the row and column loops
    mine = lambda steps: [d for d in steps if d.get("stage", "").split(".")[0] in splits   # noqa: E731
                          and d["primitive"] not in ("fuse", "parallel")]
    assert mine(two) == mine(one)                # the record's own steps, as recorded
    built = st.compile(model, (x,), target=_target(2), log=log)
    with torch.no_grad():
        torch.testing.assert_close(built(x), model(x), rtol=1e-4, atol=1e-5)


def test_a_default_record_builds_todays_default_schedule(tmp_path):
    """A "default" record whose steps are not today's default schedule (the rules changed since
    the log was tuned) builds today's, however fast it was timed; a searched record is replayed."""
    model, x, cm = _model()
    tasks = extract_tasks(cm.program, _target(2))
    log = str(tmp_path / "stale.jsonl")
    for t in tasks:
        _serial_record(t.task, log, _target(2), sketch="default")
    outs = [t for _, t in cm.program.parts[0].outputs]
    assert _steps(outs, _target(2), log) == _steps(outs, _target(2))
    twice = next(t for t in tasks if t.weight == 2)
    _serial_record(twice.task, log, _target(2), sketch="tile", seconds=1e-10)     # faster than the default
    assert _steps(outs, _target(2), log) != _steps(outs, _target(2))
    built = st.compile(model, (x,), target=_target(2), log=log)
    with torch.no_grad():
        torch.testing.assert_close(built(x), model(x), rtol=1e-4, atol=1e-5)


def test_tuning_again_measures_todays_default_beside_a_stale_one(tmp_path):
    """A log whose default records are another default's (tuned before the rules changed):
    tuning again measures today's default, its time is the task's default and best (the
    stale record's 1 ns is no candidate), and the final comparison times today's."""
    model, x, cm = _model()
    log = str(tmp_path / "stale.jsonl")
    tasks = extract_tasks(cm.program, _target(1))
    for t in tasks:
        _serial_record(t.task, log, _target(1), sketch="default")
    timed = []

    def worker(program_json, steps_json, target, number, repeat):
        timed.append(json.loads(steps_json))
        return {"times": [1e-3] * 3, "build_s": 0.0, "load": list(os.getloadavg())}
    with cf.ThreadPoolExecutor(1) as ex:
        sched = tune_program(cm.program, _target(1), 0, log, executor=ex, worker_fn=worker, variants=0, **QUICK)
    assert sched.default_s == [1e-3] * len(tasks) and sched.best == [1e-3] * len(tasks)
    today = [json.loads(t.default_steps) for t in sched.tasks]
    assert timed == today
    defaults = [r for r in records.load(log) if r["sketch"] == "default"]
    assert len(defaults) == 2 * len(tasks) and sum(r["steps"] in today for r in defaults) == len(tasks)
    # the final comparison: the two fastest and today's default, never the stale default
    from schedlang.autoschedule.api import final_comparison
    from schedlang.autoschedule.measure import Measurer
    kt = sched.tasks[0]
    plain = json.loads(kt.task.schedule().to_json())          # a searched candidate, slower
    records.append(log, [records.make_record(kt.workload_key, str(kt.task.target), plain, "plain", [2e-3], None,
                                             kt.task.flops, sketch="plain")])
    timed.clear()
    with cf.ThreadPoolExecutor(1) as ex:
        measurer = Measurer(ex, 1, 1, worker_fn=worker)
        try:
            final_comparison(kt.task, log, measurer, 2, rounds=1, with_default=today[0])
        finally:
            measurer.close()
    assert timed == [today[0], plain]
