"""The tuned kernels checked inside the model (torch/in_model.py): every kernel a profiled
model runs is found as its task's by name; each tuned task's record and default are logged as
a final comparison of their in-model times, so a record that lost inside the model is no
longer built; compile(tune=..., in_model=N) does it after the search."""
import collections
import concurrent.futures as cf
import os

import pytest
import torch

import schedlang as sl
import schedlang.torch as st
from schedlang.autoschedule import records
from schedlang.autoschedule.search import SearchPolicy
from schedlang.torch import zoo
from schedlang.torch.in_model import compare_in_model, row_task, site_index, task_of
from schedlang.torch.kernel_tasks import RecordIndex
from schedlang.torch.profile import KernelRow, ModelProfile
from schedlang.torch.tune import extract_tasks

from .test_tune import TwoKernelMLP

QUICK = dict(number=1, repeat=1, verbose=0, policy=SearchPolicy(population=8, generations=1), final=0)


def _searched_win(seen):
    """A measurement stand-in: a program's first candidate (its default, measured first) 1 ms,
    every later one 0.5 ms, so each task's searched record wins alone."""
    def worker(program_json, steps_json, target, number, repeat):
        t = 0.5e-3 if program_json in seen else 1e-3
        seen.add(program_json)
        return {"times": [t] * 3, "build_s": 0.0, "load": list(os.getloadavg())}
    return worker


def test_kernel_names_follow_stage_names():
    pairs = sorted([("relu_4", 0), ("bn", 1), ("bn_3", 2)], key=lambda p: -len(p[0]))
    assert task_of(pairs, "relu_4") == 0 and task_of(pairs, "bn_3") == 2
    assert task_of(pairs, "relu_41") is None            # another stage's name
    assert task_of(pairs, "bn_3_wino_V") == 2 and task_of(pairs, "bn_wino_M") == 1
    assert task_of(pairs, "bn_12_wino_V") is None       # bn_12's, not bn's


@pytest.mark.parametrize("name", ["resnet18", "bert"])
def test_every_kernel_of_a_profiled_model_is_its_tasks(name):
    model, inputs = zoo.build(name, "tiny")
    target = sl.Target.create("llvm -profile")
    with torch.no_grad():
        compiled = st.compile(model, inputs, target=target)
    tasks = extract_tasks(compiled.program, target)
    sites = site_index(tasks, compiled.program)
    found, lost = collections.Counter(), []
    for row in compiled.profile(*inputs, number=1).rows:
        i = row_task(sites, row.part, row.name)
        if i is None:
            lost.append(row.name)
        else:
            found[i] += 1
    assert set(lost) <= {"scaled_dot_product_attention"}      # attention: no task (its hand-made kernel)
    assert all(found[i] >= kt.weight for i, kt in enumerate(tasks))


class _Profiled:
    """A stand-in for a model built for the profile target: profile() gives rows of fixed times."""

    def __init__(self, rows):
        self.rows = rows

    def profile(self, *inputs, number):
        return ModelProfile(list(self.rows), sum(r.ms for r in self.rows), number)


def _tuned(log: str, in_model: int):
    """TwoKernelMLP tuned with 4 stand-in trials into log (each task's searched record wins alone)."""
    torch.manual_seed(0)
    model, x = TwoKernelMLP().eval(), torch.randn(4, 16)
    with cf.ThreadPoolExecutor(1) as ex:
        cm = st.compile(model, (x,), tune=4, log=log, seed=0, executor=ex, per_round=2, worker_fn=_searched_win(set()),
                        strategy="round-robin", in_model=in_model, **QUICK)
    return model, x, cm


def test_the_faster_inside_the_model_is_logged_as_the_choice(tmp_path):
    log = str(tmp_path / "in_model.jsonl")
    model, x, cm = _tuned(log, in_model=0)
    tasks, target = cm.tuning.tasks, cm.target
    index = RecordIndex(log)
    assert all(index.ranked(kt.workload_key, target)[0]["sketch"] != "default" for kt in tasks)   # won alone
    with torch.no_grad():
        real = st.compile(model, (x,), target=target.with_options(profile=True))
        rows = real.profile(x, number=1).rows
    sites = site_index(tasks, real.program)
    owner = [row_task(sites, r.part, r.name) for r in rows]
    assert sorted(set(owner)) == list(range(len(tasks)))
    # inside the model, task 0's record is twice its default's time and the others' half
    tuned = [KernelRow(r.part, r.name, 2.0 if i == 0 else 0.5) for r, i in zip(rows, owner)]
    default = [KernelRow(r.part, r.name, 1.0) for r in rows]
    built = []

    def build(with_log):
        built.append(with_log)
        return _Profiled(tuned if with_log else default)
    result = compare_in_model(build, (x,), tasks, log, target, real.program, rounds=3, number=2, verbose=0)
    assert built == [None, log]
    assert [(r.task, r.kept) for r in result] == [(0, "default")] + [(i, "record") for i in range(1, len(tasks))]
    assert result[0].default_ms == pytest.approx(1.0) and result[0].tuned_ms == pytest.approx(2.0)
    index = RecordIndex(log)
    for i, kt in enumerate(tasks):
        best = index.ranked(kt.workload_key, target)[0]
        assert best["in_model"] and best["sketch"] == ("default" if i == 0 else best["sketch"])
        assert (best["sketch"] == "default") == (i == 0)
        assert len(best["times"]) == 3             # where they were timed: here, at the target's threads
        assert best["threads"] == records.target_threads(target) and records.same_cpu(best["cpu"], records.this_cpu())
    with torch.no_grad():                                # the log now builds task 0's default
        again = st.compile(model, (x,), log=log)
        torch.testing.assert_close(again(x), model(x), rtol=1e-4, atol=1e-5)


def test_compile_checks_the_tuned_tasks_inside_the_model(tmp_path):
    log = str(tmp_path / "checked.jsonl")
    model, x, cm = _tuned(log, in_model=2)
    rows = cm.tuning.in_model
    assert sorted(r.task for r in rows) == list(range(len(cm.tuning.tasks)))
    assert all(r.kept in ("record", "default") and r.default_ms > 0 and r.tuned_ms > 0 for r in rows)
    logged = [r for r in records.load(log) if r.get("in_model")]
    assert len(logged) == 2 * len(rows) and len({r["final"] for r in logged}) == 1
    index = RecordIndex(log)
    for r in rows:                                      # the winner inside the model is what builds
        best = index.ranked(cm.tuning.tasks[r.task].workload_key, cm.target)[0]
        assert (best["sketch"] == "default") == (r.kept == "default")
    with torch.no_grad():
        torch.testing.assert_close(cm(x), model(x), rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="in_model must be"):
        st.compile(model, (x,), tune=1, log=log, in_model=-1)
