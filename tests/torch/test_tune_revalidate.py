"""Records chosen at the compile target's threads (issue 18): a record says how many threads
it was timed at; apply_best and the per-kernel replay prefer records of the target's threads
and say when they use others; a record's parallel loop too narrow for the target's threads
is drawn again; revalidate re-times each task's chosen record against today's default at
the target's threads and logs the winner."""
import concurrent.futures as cf
import json
import warnings

import pytest
import torch

import schedlang as sl
import schedlang.torch as st
from schedlang.autoschedule import records
from schedlang.autoschedule.api import OtherCPUWarning, OtherThreadsWarning
from schedlang.autoschedule.search import steps_key
from schedlang.autoschedule.sketch_cpu import PAR_PER_THREAD
from schedlang.autoschedule.task import SearchTask
from schedlang.schedule import create_schedule
from schedlang.schedule.legal import is_parallel
from schedlang.torch.fuse import fuse
from schedlang.torch.kernel_tasks import RecordIndex, replay_best
from schedlang.torch.revalidate import revalidate
from schedlang.torch.schedules import default_schedule
from schedlang.torch.tune import DEFAULT, extract_tasks
from tests import programs

from ..autoschedule.test_records_cpu import _split_steps
from .modules import ReluMLP
from .test_tune_threads import _target


def _rec(task, steps, median, threads=None, sketch="tile:t0", **extra):
    if threads is not None:
        extra["threads"] = threads
    return records.make_record(task.workload_key, str(task.target), steps, f"h{median}-{threads}", [median], None,
                               task.flops, sketch=sketch, **extra)


def test_choose_prefers_the_records_of_the_targets_threads(tmp_path):
    """Per thread count, apply_best takes that count's record even when another is faster; a
    count with none takes a record of no recorded count (older logs) silently, and failing that
    another count's, with a one-line warning."""
    gemm = list(programs.gemm(64, 64, 64))
    task = SearchTask(tensors=gemm, target=_target(2))
    one, two, old = _split_steps(task, 4), _split_steps(task, 8), _split_steps(task, 16)
    log = str(tmp_path / "threads.jsonl")
    records.append(log, [_rec(task, one, 1e-6, threads=1), _rec(task, two, 3e-6, threads=2),
                         _rec(task, old, 2e-6)])
    for threads, want in ((2, two), (1, one), (4, old)):
        t = SearchTask(tensors=gemm, target=_target(threads))
        groups = records.choose(records.load(log), t.target, records.this_cpu())
        assert [r["threads"] if "threads" in r else None for _, recs in groups for r in recs][0] == \
            {2: 2, 1: 1, 4: None}[threads]
        with warnings.catch_warnings():
            warnings.simplefilter("error", OtherCPUWarning)
            s, _ = sl.apply_best(log, t)
        assert steps_key(s.to_json()) == steps_key(want)
    only = str(tmp_path / "one_thread.jsonl")
    records.append(only, [_rec(task, one, 1e-6, threads=1)])
    with pytest.warns(OtherThreadsWarning) as got:
        s, _ = sl.apply_best(only, task)
    assert steps_key(s.to_json()) == steps_key(one)
    assert "timed at 1 thread(s), not at the target's 2" in str(got[0].message)
    assert "--revalidate" in str(got[0].message) and "\n" not in str(got[0].message)


def _mlp():
    torch.manual_seed(0)
    model, x = ReluMLP(64, 64, 64).eval(), torch.randn(32, 64)
    cm = st.compile(model, (x,), target=_target(2))
    task = next(t for t in extract_tasks(cm.program, cm.target) if t.kind == "matmul")
    return model, x, cm, task


def _narrow_record(kt):
    """The task's plain schedule with its output's rows split in one part, that loop parallel:
    a parallel loop of ONE iteration (a one-thread draw may make such)."""
    s = kt.task.schedule()
    out = s[kt.task.outputs[0].op]
    o, _ = out.split(out.op.axis[0], nparts=1)
    out.parallel(o)
    return json.loads(s.to_json())


def _parallel_extents(s):
    return [ext[a] for st_ in s.stages if st_.attach_type == "root" for ext in [st_.static_extents()]
            for a in st_.leaf_iter_vars if is_parallel(st_, a)]


def _replayed(kt, log, target):
    s = create_schedule([t.op for t in kt.task.outputs])
    got = [replay_best(s, g, target, RecordIndex(log)) for g in fuse(s)]
    return s, next(r for r in got if r.record is not None)


def test_a_parallel_loop_too_narrow_for_the_targets_threads_is_drawn_again(tmp_path):
    """At two threads the record's one-iteration parallel loop would run the kernel on one
    core: it is replayed without it and gets the loop a two-thread draw gives (PAR_PER_THREAD
    iterations a thread where the loops allow); at one thread the record replays as it is.
    The model built with it matches eager torch."""
    model, x, cm, kt = _mlp()
    log = str(tmp_path / "narrow.jsonl")
    records.append(log, [_rec(kt.task, _narrow_record(kt), 1e-9)])
    s, got = _replayed(kt, log, _target(2))
    assert got.replayed and got.parallel_widened == 1
    assert _parallel_extents(s) and min(_parallel_extents(s)) >= PAR_PER_THREAD * 2
    s1, got1 = _replayed(kt, log, _target(1))
    assert got1.replayed and got1.parallel_widened == 0 and 1 in _parallel_extents(s1)
    built = st.compile(model, (x,), target=_target(2), log=log)
    with torch.no_grad():
        torch.testing.assert_close(built(x), model(x), rtol=1e-4, atol=1e-5)


def test_the_kernel_replay_prefers_records_of_the_targets_threads(tmp_path):
    """A log without thread counts (before revalidation existed) still replays; a record timed
    at the target's threads comes before it; only records of another count: used, one warning."""
    model, x, cm, kt = _mlp()
    # Odd factors no default schedule draws (the other kernels' defaults split by register rows
    # and vector widths, 8 among them on an AVX-512 host): the factor set names the record used.
    five, seven = _split_steps(kt.task, 5), _split_steps(kt.task, 7)
    (part,) = cm.program.parts
    outs = [t for _, t in part.outputs]

    def splits(log, target):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            steps = json.loads(default_schedule(outs, target, log=log).to_json())["steps"]
        return ({p["factor"] for p in steps if p["primitive"] == "split" and p["factor"] in (5, 7)},
                [w for w in caught if issubclass(w.category, OtherThreadsWarning)])
    assert splits(None, _target(2)) == (set(), [])
    old = str(tmp_path / "old.jsonl")
    records.append(old, [_rec(kt.task, five, 1e-9)])
    assert splits(old, _target(2)) == ({5}, [])
    records.append(old, [_rec(kt.task, seven, 1e-3, threads=2)])        # slower, but timed at 2 threads
    assert splits(old, _target(2)) == ({7}, [])
    assert splits(old, _target(1)) == ({5}, [])
    other = str(tmp_path / "other.jsonl")
    records.append(other, [_rec(kt.task, seven, 1e-9, threads=1)])
    got, warned = splits(other, _target(2))
    assert got == {7} and len(warned) == 1


class FixedTimes(cf.Executor):
    """Measures nothing: each submit's result is the next of `seconds` in turn (revalidate
    measures the record, then the default, each round)."""

    def __init__(self, seconds):
        self.seconds, self.calls = seconds, 0

    def submit(self, fn, *args, **kwargs):
        f = cf.Future()
        f.set_result({"times": [self.seconds[self.calls % len(self.seconds)]], "threads": 2})
        self.calls += 1
        return f


@pytest.mark.parametrize("record_s, winner", [(2e-3, DEFAULT), (0.5e-3, "tile:t0")])
def test_revalidation_logs_the_winner_at_the_targets_threads(tmp_path, record_s, winner):
    """A searched record losing to today's default at the target's threads is displaced by a
    default record marked revalidated (a compile then builds the default schedule); one that
    wins is logged again with its own steps. Both times are in the mark; a second run times
    nothing."""
    model, x, cm, kt = _mlp()
    log = str(tmp_path / "stale.jsonl")
    stale = _split_steps(kt.task, 4)
    records.append(log, [_rec(kt.task, stale, 1e-9, threads=1)])
    fake = FixedTimes([record_s, 1e-3])
    got = revalidate(cm.program, cm.target, log, rounds=2, executor=fake, verbose=0)
    timed = [r for r in got if r.record_s is not None]
    assert len(timed) == 1 and fake.calls == 4
    assert timed[0].outcome == ("default" if winner == DEFAULT else "record")
    new = records.load(log)[-1]
    assert new["sketch"] == winner and new["threads"] == 2
    assert new["revalidated"] == {"threads": 2, "record_s": record_s, "default_s": 1e-3,
                                  "record_hash": "h1e-09-1", "rounds": 2}
    (part,) = cm.program.parts
    outs = [t for _, t in part.outputs]
    with warnings.catch_warnings():
        warnings.simplefilter("error", OtherThreadsWarning)
        built = json.loads(default_schedule(outs, cm.target, log=log).to_json())
    untuned = json.loads(default_schedule(outs, cm.target).to_json())
    assert (built == untuned) == (winner == DEFAULT)
    again = revalidate(cm.program, cm.target, log, rounds=2, executor=fake, verbose=0)
    assert fake.calls == 4 and {r.outcome for r in again} <= {"no record", "default record", "revalidated already"}


@pytest.mark.slow
def test_revalidation_times_the_kernels_for_real(tmp_path):
    """The measuring worker times a plain-loops record and the default at one thread (CPU time):
    the default wins by far and is logged, revalidated, as the kernel's record."""
    model, x, cm1, _ = _mlp()
    cm = st.compile(model, (x,), target=_target(1))
    kt = next(t for t in extract_tasks(cm.program, cm.target) if t.kind == "matmul")
    log = str(tmp_path / "real.jsonl")
    plain = json.loads(kt.task.schedule().to_json())
    records.append(log, [_rec(kt.task, plain, 1e-9)])
    (res,) = [r for r in revalidate(cm.program, cm.target, log, rounds=2, number=2, repeat=2, verbose=0)
              if r.record_s is not None]
    assert res.outcome == "default" and res.record_s > 2 * res.default_s
    assert records.load(log)[-1]["revalidated"]["threads"] == 1
