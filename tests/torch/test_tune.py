"""Tuning a PyTorch model's kernels: schedlang.torch.compile(model, inputs, tune=N, log=...)."""
import concurrent.futures as cf
import json

import pytest
import torch

import schedlang.torch as st
from schedlang.autoschedule import records
from schedlang.autoschedule.search import SearchPolicy
from schedlang.torch.schedules import default_schedule, tuned_schedule
from schedlang.torch.kernel_tasks import group_program, kind_of, rename_steps
from schedlang.torch.tune import canonical_program, extract_tasks, task_table

from .modules import ReluMLP, reverse

QUICK = dict(number=1, repeat=1, verbose=0, policy=SearchPolicy(population=8, generations=1), final=0)


class TwoKernelMLP(torch.nn.Module):
    """linear + relu, an op that runs in torch, then linear + softmax: two kernels of unequal weight."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(16, 32)
        self.b = torch.nn.Linear(32, 8)

    def forward(self, x):
        h = reverse(torch.relu(self.a(x)))
        return torch.softmax(self.b(h), -1)


class Repeated(torch.nn.Module):
    """A Linear, then another one with a ReLU applied twice (the same kernel: the ReLU is its
    epilogue), then a third with a softmax: five kernels, four distinct ones."""

    def __init__(self):
        super().__init__()
        self.c, self.a, self.b = torch.nn.Linear(32, 32), torch.nn.Linear(32, 32), torch.nn.Linear(32, 8)

    def forward(self, x):
        x = self.c(x)
        for _ in range(2):
            x = torch.relu(self.a(x))
        return torch.softmax(self.b(x), -1)


def _kernels(cm):
    """(anchor name, kind) of every kernel of the compiled module's parts."""
    from schedlang.schedule import create_schedule
    from schedlang.torch.fuse import fuse
    out = []
    for part in cm.program.parts:
        s = create_schedule([t.op for _, t in part.outputs])
        out += [(g.anchor.name, kind_of(g)) for g in fuse(s)]
    return out


def test_tasks_are_kernels_weighted_by_how_often_they_run():
    torch.manual_seed(0)
    cm = st.compile(Repeated().eval(), (torch.randn(4, 32),))
    tasks = extract_tasks(cm.program, cm.target)
    kernels = _kernels(cm)
    assert len(cm.program.parts) == 1 and len(kernels) == 5
    assert sum(t.weight for t in tasks) == 5 and sorted(t.weight for t in tasks) == [1, 1, 1, 2]
    assert sorted(t.kind for t in tasks) == ["matmul", "matmul", "matmul", "rows"]
    assert len({t.workload_key for t in tasks}) == 4
    for t in tasks:                     # canonical names: the same kernel in any model
        assert all(x.name.startswith("in") for x in t.task.inputs)
        assert (t.tag == "") == (t.kind == "rows") and t.default_steps
    other = st.compile(Block(Repeated()).eval(), (torch.randn(4, 32),))     # other names, same kernels
    assert {t.workload_key: t.weight for t in extract_tasks(other.program, other.target)} == \
        {t.workload_key: t.weight for t in tasks}


def test_rename_steps_maps_every_name_token():
    steps = [{"primitive": "split", "stage": "t2", "axis": "v3.outer", "factor": 4, "nparts": None},
             {"primitive": "fuse", "stage": "t2.local", "axes": ["v3.outer.inner", "v4"]},
             {"primitive": "compute_at", "stage": "t1", "target": "t2", "axis": "v3.outer2"},
             {"primitive": "cache_read", "tensor": "in0", "scope": "local", "readers": ["t2"]}]
    names = {"t2": "linear", "t1": "mm", "v3": "i", "v4": "j", "in0": "x"}
    got = rename_steps(steps, names)
    assert got[0]["stage"] == "linear" and got[0]["axis"] == "i.outer" and got[0]["factor"] == 4
    assert got[1] == {"primitive": "fuse", "stage": "linear.local", "axes": ["i.outer.inner", "j"]}
    assert got[2]["target"] == "linear" and got[2]["axis"] == "i.outer2" and got[2]["stage"] == "mm"
    assert got[3]["tensor"] == "x" and got[3]["readers"] == ["linear"]
    assert steps[0]["stage"] == "t2"      # the input is left alone


def _hand_record(task, log, target, seconds=1e-9):
    """A record of the task's plain schedule with its first output's first axis split by 2."""
    import json
    s = task.schedule()
    out = s[task.outputs[0].op]
    out.split(out.op.axis[0], factor=2)
    records.append(log, [records.make_record(task.workload_key, str(target), json.loads(s.to_json()),
                                             "hand", [seconds], None, task.flops)])


def test_each_kernel_is_built_with_its_own_record(tmp_path):
    """A record of one kernel's canonical program replays on that kernel of the whole part,
    under the kernel's real stage and axis names; the other kernels keep their defaults."""
    torch.manual_seed(0)
    model, x = Repeated().eval(), torch.randn(4, 32)
    cm = st.compile(model, (x,))
    tasks = extract_tasks(cm.program, cm.target)
    twice = next(t for t in tasks if t.weight == 2)
    log = str(tmp_path / "hand.jsonl")
    _hand_record(twice.task, log, cm.target)
    (part,) = cm.program.parts
    outs = [t for _, t in part.outputs]
    plain = json.loads(default_schedule(outs, cm.target).to_json())["steps"]
    tuned = json.loads(default_schedule(outs, cm.target, log=log).to_json())["steps"]
    assert tuned != plain
    # (the record's splits; a default schedule may split by 2 too: the in-place Linear's tile)
    splits = [st_ for st_ in tuned if st_["primitive"] == "split" and st_["factor"] == 2 and st_ not in plain]
    assert len(splits) == 2                      # both calls of that kernel, by their own names
    from schedlang.schedule import create_schedule
    from schedlang.torch.fuse import fuse
    s = create_schedule([t.op for t in outs])
    groups = {g.anchor.name: g for g in fuse(s)}
    assert {st_["stage"] for st_ in splits} <= set(groups)
    members = {op.name for a in {st_["stage"] for st_ in splits} for op in group_program(s, groups[a]).members}
    others = [st_ for st_ in plain if st_.get("stage", st_.get("tensor")).split(".")[0] not in members]
    assert others and all(st_ in tuned for st_ in others)          # the other kernels: their default steps
    built = st.compile(model, (x,), log=log)
    with torch.no_grad():
        torch.testing.assert_close(built(x), model(x), rtol=1e-4, atol=1e-5)


def test_a_record_that_does_not_replay_leaves_the_default(tmp_path):
    import json as json_
    torch.manual_seed(0)
    cm = st.compile(Repeated().eval(), (torch.randn(4, 32),))
    task = extract_tasks(cm.program, cm.target)[0].task
    log = str(tmp_path / "bad.jsonl")
    bad = {"version": 1, "steps": [{"primitive": "split", "stage": "t0", "axis": "nonexistent", "factor": 2,
                                    "nparts": None}]}
    records.append(log, [records.make_record(task.workload_key, str(cm.target), bad, "bad", [1e-9], None, 1)])
    outs = [t for _, t in cm.program.parts[0].outputs]
    assert json_.loads(default_schedule(outs, cm.target, log=log).to_json()) == \
        json_.loads(default_schedule(outs, cm.target).to_json())


def test_compile_tunes_the_kernels_and_builds_with_the_records(tmp_path):
    torch.manual_seed(0)
    model, x = Repeated().eval(), torch.randn(4, 32)
    log = str(tmp_path / "model.jsonl")
    rounds = []
    with cf.ThreadPoolExecutor(1) as ex:
        cm = st.compile(model, (x,), tune=8, log=log, seed=0, executor=ex, per_round=2, strategy="round-robin",
                        callback=rounds.append, in_model=0, **QUICK)      # the log holds the search's records only
    sched = cm.tuning
    tasks = sched.tasks
    assert sched.order[:4] == [0, 1, 2, 3] and [r.task for r in rounds] == sched.order
    assert [t.weight for t in tasks] == sched.weights and sum(sched.trials) == 8
    recs = records.load(log)
    assert {r["workload"] for r in recs} == {t.workload_key for t in tasks}
    for t in tasks:                   # its default schedule, then its searched candidates
        mine = [r for r in recs if r["workload"] == t.workload_key]
        assert mine[0]["sketch"] == "default" and len(mine) == 1 + sched.trials[tasks.index(t)]
    assert all(records.same_cpu(r.get("cpu"), records.this_cpu()) for r in recs)    # where each was timed
    assert all(d is not None for d in sched.default_s)
    assert rounds[-1].estimate_s == pytest.approx(sum(w * b for w, b in zip(sched.weights, sched.best)), rel=0.5)
    with torch.no_grad():
        want = model(x)
        torch.testing.assert_close(cm(x), want, rtol=1e-4, atol=1e-5)
        y = torch.randn(4, 32)
        torch.testing.assert_close(cm(y), model(y), rtol=1e-4, atol=1e-5)
    again = st.compile(model, (x,), log=log)           # a log alone is read: no new trials
    assert len(records.load(log)) == len(recs)
    with torch.no_grad():
        torch.testing.assert_close(again(x), want, rtol=1e-4, atol=1e-5)
    with cf.ThreadPoolExecutor(1) as ex:                # tuning again resumes the log: no warm-up round
        more = st.compile(model, (x,), tune=2, log=log, seed=1, executor=ex, per_round=2, in_model=0,
                          **QUICK).tuning
    assert more.resumed == sched.trials and sum(more.trials) == 2 and len(more.order) == 1
    assert len([r for r in records.load(log) if r.get("sketch") == "default"]) == len(tasks)   # measured once


def test_the_timeout_counts_the_defaults_measured(tmp_path, monkeypatch):
    """timeout= bounds the whole tuning: when measuring the defaults (and variants) has used it
    up, no search round starts, and the defaults are still logged."""
    import time
    from schedlang.torch import tune
    measure = tune.KernelSearches.measure_defaults

    def slow(self):
        measure(self)
        time.sleep(0.5)
    monkeypatch.setattr(tune.KernelSearches, "measure_defaults", slow)
    model, x = TwoKernelMLP().eval(), torch.randn(4, 16)
    log = str(tmp_path / "timeout.jsonl")
    with cf.ThreadPoolExecutor(1) as ex:
        sched = st.compile(model, (x,), tune=8, log=log, seed=0, executor=ex, timeout=0.4, **QUICK).tuning
    assert sum(sched.trials) == 0 and sched.order == []
    assert [r["sketch"] for r in records.load(log)] == ["default"] * len(sched.tasks)


def test_a_search_far_behind_the_default_is_retired(tmp_path, monkeypatch):
    """give_up=(trials, ratio): a task with variants (here: said to have them) whose searched
    candidates all time ratio x slower than its default schedule gets no more rounds after
    that many trials; give_up=None, or a task without variants: it does."""
    import os
    from schedlang.torch import tune
    searching, varied = [], []
    measure = tune.KernelSearches.measure_defaults

    def defaults_then_search(self):
        measure(self)
        self.varied = [bool(varied)] * len(self.tasks)
        searching.append(True)
    monkeypatch.setattr(tune.KernelSearches, "measure_defaults", defaults_then_search)

    def worker(program_json, steps_json, target, number, repeat):    # defaults 1 ms, candidates 5 ms
        t = 5e-3 if searching else 1e-3
        return {"times": [t] * 3, "build_s": 0.0, "load": list(os.getloadavg())}
    model, x = TwoKernelMLP().eval(), torch.randn(4, 16)
    # A small search (the proposals' lowering for features was ~90 % of this test's time);
    # retiring reads only the measured times.
    quick = dict(QUICK, policy=SearchPolicy(population=4, generations=1, elites=2, local_breadth=1))
    for give_up, with_variants in (((8, 1.3), True), (None, True), ((8, 1.3), False)):
        searching.clear()
        varied[:] = [True] if with_variants else []
        with cf.ThreadPoolExecutor(1) as ex:
            # 36 trials: three rounds of 4 for each of the 3 tasks, one more than retiring needs
            sched = st.compile(model, (x,), tune=36, log=str(tmp_path / f"{give_up}{with_variants}.jsonl"), seed=0,
                               executor=ex, per_round=4, give_up=give_up, worker_fn=worker, strategy="round-robin",
                               **quick).tuning
        n = len(sched.tasks)
        if give_up and with_variants:     # each task retired after its second round
            assert sched.trials == [8] * n and sched.dead == set(range(n))
        else:
            assert sum(sched.trials) == 36 and min(sched.trials) > 8 and not sched.dead
    with pytest.raises(ValueError, match="give_up"):
        st.compile(model, (x,), tune=4, log=str(tmp_path / "bad.jsonl"), give_up=(8, 0.5), **QUICK)


def test_the_estimate_is_what_the_final_comparison_chose(tmp_path, monkeypatch):
    """A searched candidate first timed faster than the default (0.5 vs 1 ms: a quiet spell)
    that loses the final side-by-side comparison (2 vs 1 ms) is not built: the task's best
    latency, the model estimate and the speedup over the default are the chosen default's
    (1 ms, 1.00x), not the least time any record read."""
    import os
    from schedlang.autoschedule import api
    phase, defaults = ["defaults"], []
    compare = api.final_comparison

    def final_comparison(*args, **kwargs):
        phase[0] = "final"
        return compare(*args, **kwargs)
    monkeypatch.setattr(api, "final_comparison", final_comparison)

    def worker(program_json, steps_json, target, number, repeat):
        steps = json.loads(steps_json)
        if phase[0] == "defaults":
            defaults.append(steps)
        if phase[0] == "final":
            t = 1e-3 if steps in defaults else 2e-3
        else:
            t = 1e-3 if steps in defaults else 0.5e-3
        return {"times": [t] * 3, "build_s": 0.0, "load": list(os.getloadavg())}
    from schedlang.torch import tune
    measure = tune.KernelSearches.measure_defaults

    def defaults_then_search(self):
        measure(self)
        phase[0] = "search"
    monkeypatch.setattr(tune.KernelSearches, "measure_defaults", defaults_then_search)
    model, x = TwoKernelMLP().eval(), torch.randn(4, 16)
    log = str(tmp_path / "final.jsonl")
    with cf.ThreadPoolExecutor(1) as ex:
        sched = st.compile(model, (x,), tune=8, log=log, seed=0, executor=ex, per_round=4, worker_fn=worker,
                           strategy="round-robin", **dict(QUICK, final=2)).tuning
    assert all(n > 0 for n in sched.trials)
    assert any(r["median_s"] == 0.5e-3 for r in records.load(log))       # the search's first times
    assert sched.best == [1e-3] * len(sched.tasks) and sched.default_s == [1e-3] * len(sched.tasks)
    assert sched.known_estimate() == pytest.approx(1e-3 * sum(sched.weights))
    table = task_table(sched)
    assert "1.00x" in table and "2.00x" not in table


def test_tune_needs_a_log():
    model, x = TwoKernelMLP(), torch.randn(4, 16)
    with pytest.raises(ValueError, match="tune= needs log="):
        st.compile(model, (x,), tune=4)
    with pytest.raises(TypeError, match="only apply with tune="):
        st.compile(model, (x,), log="x.jsonl", seed=3)


class Scale(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x * 2.0 + 1.0)


def test_a_symbolic_part_keeps_its_default_schedule(tmp_path):
    log = str(tmp_path / "dyn.jsonl")
    x = torch.randn(3, 8)
    with pytest.warns(UserWarning, match="symbolic shape"):
        cm = st.compile(Scale(), (x,), dynamic_shapes={"x": {0: torch.export.Dim("batch")}}, tune=2, log=log,
                        verbose=0)
    assert records.load(log) == []
    y = torch.randn(5, 8)
    torch.testing.assert_close(cm(y), Scale()(y))


class Block(torch.nn.Module):
    """The same MLP inside another module: its parameters are named block.a.weight ..."""

    def __init__(self, inner):
        super().__init__()
        self.block = inner

    def forward(self, x):
        return self.block(x)


def test_a_record_is_found_by_any_model_with_the_same_workload(tmp_path, monkeypatch):
    """A record made for one model's part is used by another model computing the same thing
    under other names (the records are keyed by the canonical copy's workload)."""
    import json
    from schedlang.autoschedule.task import SearchTask
    from schedlang.torch import schedules
    torch.manual_seed(0)
    inner, x = ReluMLP(16, 24, 8).eval(), torch.randn(4, 16)
    first = st.compile(inner, (x,))
    (part,) = first.program.parts
    ins, outs = canonical_program([t for _, t in part.inputs], [t for _, t in part.outputs])
    assert [t.name for t in ins] == [f"in{k}" for k in range(len(ins))]
    task = SearchTask.from_outputs(outs, first.target)
    plain = task.schedule()                   # a recognisable record: no step at all
    log = str(tmp_path / "records.jsonl")
    records.append(log, [records.make_record(task.workload_key, str(first.target), json.loads(plain.to_json()),
                                             "plain", [1e-3], None, task.flops)])
    found = []
    real = schedules.tuned_schedule

    def spy(outputs, target, log):
        s = real(outputs, target, log)
        found.append(s is not None)
        return s
    monkeypatch.setattr(schedules, "tuned_schedule", spy)
    wrapped = Block(inner).eval()
    other = st.compile(wrapped, (x,), log=log)
    assert "block_a_weight" in str(other.graph) and found == [True]
    assert "in0" in other.modules[0].ir["loop"]           # built from the record's program
    with torch.no_grad():
        torch.testing.assert_close(other(x), inner(x), rtol=1e-4, atol=1e-5)
    (wpart,) = other.program.parts
    assert SearchTask.from_outputs(canonical_program([t for _, t in wpart.inputs],
                                                     [t for _, t in wpart.outputs])[1],
                                   first.target).workload_key == task.workload_key
    assert SearchTask.from_outputs([t for _, t in wpart.outputs], first.target).workload_key != \
        SearchTask.from_outputs([t for _, t in part.outputs], first.target).workload_key   # names differ


def test_torch_compile_reads_a_tuning_log(tmp_path, monkeypatch):
    """torch.compile(model, backend="schedlang", options={"log": ...}) builds each kernel from
    its best record, as schedlang.torch.compile(..., log=...) does: the same kernels."""
    from schedlang.torch import dynamo
    torch.manual_seed(0)
    model, x = Repeated().eval(), torch.randn(4, 32)
    cm = st.compile(model, (x,))
    twice = next(t for t in extract_tasks(cm.program, cm.target) if t.weight == 2)
    log = str(tmp_path / "hand.jsonl")
    _hand_record(twice.task, log, cm.target)
    tuned = st.compile(model, (x,), log=log)
    assert tuned.ir("kernel") != cm.ir("kernel")
    seen = []
    real = dynamo.compile_frozen
    monkeypatch.setattr(dynamo, "compile_frozen", lambda *a, **k: seen.append(real(*a, **k)) or seen[-1])
    torch._dynamo.reset()
    try:
        with torch.no_grad():
            got = torch.compile(model, backend="schedlang", dynamic=False, options={"log": log})(x)
            torch.testing.assert_close(got, model(x), rtol=1e-4, atol=1e-5)
        (frozen,) = seen
        assert frozen.compiled.ir("kernel") == tuned.ir("kernel")
        torch._dynamo.reset()
        with pytest.raises(Exception, match="no tuning log"), torch.no_grad():
            torch.compile(model, backend="schedlang", options={"log": str(tmp_path / "typo.jsonl")})(x)
    finally:
        torch._dynamo.reset()
