"""Tuning a PyTorch model's kernels: schedlang.torch.compile(model, inputs, tune=N, log=...)."""
import concurrent.futures as cf

import pytest
import torch

import schedlang.torch as st
from schedlang.autoschedule import records
from schedlang.autoschedule.search import SearchPolicy
from schedlang.torch.schedules import default_schedule, tuned_schedule
from schedlang.torch.tune import canonical_program, extract_tasks, split_trials

QUICK = dict(number=1, repeat=1, verbose=0, policy=SearchPolicy(population=8, generations=1), final=0)


class TwoKernelMLP(torch.nn.Module):
    """linear + relu, a cumsum that runs in torch, then linear + softmax: two kernels of unequal weight."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(16, 32)
        self.b = torch.nn.Linear(32, 8)

    def forward(self, x):
        h = torch.relu(self.a(x)).cumsum(-1)
        return torch.softmax(self.b(h), -1)


def test_split_trials_follows_the_weights():
    assert split_trials([3.0, 1.0], 8) == [6, 2]
    assert split_trials([1000.0, 1.0], 4) == [3, 1]      # each part at least one while there are enough
    assert split_trials([1.0, 1.0, 1.0], 2) == [1, 1, 0]
    assert split_trials([5.0, 3.0], 0) == [0, 0] and split_trials([], 5) == []
    assert sum(split_trials([0.3, 2.0, 7.5], 17)) == 17


@pytest.mark.filterwarnings("ignore::schedlang.torch.lower.FallbackWarning")   # cumsum in torch: two parts
def test_compile_tunes_each_kernel_and_builds_with_the_records(tmp_path):
    torch.manual_seed(0)
    model, x = TwoKernelMLP().eval(), torch.randn(4, 16)
    log = str(tmp_path / "mlp.jsonl")
    with cf.ThreadPoolExecutor(1) as ex:
        cm = st.compile(model, (x,), tune=6, log=log, seed=0, executor=ex, per_round=4, **QUICK)
    tasks = extract_tasks(cm.program, cm.target)
    assert len(tasks) == 2 == len(cm.program.parts)
    by_key = {}
    for r in records.load(log):
        by_key.setdefault(r["workload"], []).append(r)
    assert set(by_key) == {t.workload_key for _, t, _ in tasks}
    counts = [len(by_key[t.workload_key]) for _, t, _ in tasks]
    assert counts == split_trials([w for _, _, w in tasks], 6) and sum(counts) == 6    # split by weight
    heavy = max(range(2), key=lambda i: tasks[i][2])
    assert counts[heavy] > counts[1 - heavy], (counts, [w for _, _, w in tasks])
    for part in cm.program.parts:       # records are made on each part's canonical copy
        outs = canonical_program([t for _, t in part.inputs], [t for _, t in part.outputs])[1]
        tuned = tuned_schedule(outs, cm.target, log)
        assert tuned is not None
        assert default_schedule(outs, cm.target, log=log).to_json() == tuned.to_json()
    with torch.no_grad():
        want = model(x)
    torch.testing.assert_close(cm(x), want, rtol=1e-4, atol=1e-5)
    y = torch.randn(4, 16)
    torch.testing.assert_close(cm(y), model(y).detach(), rtol=1e-4, atol=1e-5)
    again = st.compile(model, (x,), log=log)           # a log alone is read: no new trials
    assert len(records.load(log)) == 6
    torch.testing.assert_close(again(x), want, rtol=1e-4, atol=1e-5)


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


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(16, 24), torch.nn.Linear(24, 8)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def test_a_record_is_found_by_any_model_with_the_same_workload(tmp_path, monkeypatch):
    """A record made for one model's part is used by another model computing the same thing
    under other names (the records are keyed by the canonical copy's workload)."""
    import json
    from schedlang.autoschedule.task import SearchTask
    from schedlang.torch import schedules
    torch.manual_seed(0)
    inner, x = MLP().eval(), torch.randn(4, 16)
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
