"""Tuning a model whose 3x3 layer runs as Winograd F(4x4, 3x3) (ops/conv_winograd.py): its three
kernels (the input transform with its input tiles and row pass, the bgemm, the epilogue with
the inverse's row pass) are tasks; the searched candidates (timed by a stand-in worker, so
nothing is built while tuning) replay on the compiled model, whose result matches eager torch."""
import concurrent.futures as cf
import os

import pytest
import torch

import schedlang as sl
import schedlang.torch as st
from schedlang.autoschedule import records
from schedlang.autoschedule.search import SearchPolicy
from schedlang.autoschedule.task import default_args
from schedlang.schedule import create_schedule
from schedlang.tensor.graph import post_order
from schedlang.tensor.serialize import workload_key
from schedlang.topi import winograd as wg
from schedlang.torch import kernel_tasks
from schedlang.torch.fuse import fuse
from schedlang.torch.tune import extract_tasks

from ..cpu_targets import runs_here

AVX2 = "llvm -mcpu=znver1 -num-cores=1"     # the register file the Winograd rule was measured on


class ConvRelu(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(64, 64, 3, padding=1)

    def forward(self, x):
        return torch.relu(self.conv(x))


def _worker(seen):
    """A measurement stand-in: a program's first candidate (its default schedule, measured
    first) 1 ms, every later one (searched) 0.5 ms, so the searched records win."""
    def worker(program_json, steps_json, target, number, repeat):
        t = 0.5e-3 if program_json in seen else 1e-3
        seen.add(program_json)
        return {"times": [t] * 3, "build_s": 0.0, "load": list(os.getloadavg())}
    return worker


def _tags(program) -> set:
    return {getattr(op, "tag", "") for op in post_order([t.op for t in program])}


def test_winograd_kernels_are_tasks_with_the_stages_placed_inside_them():
    """Three tasks (no builds): the input transform with its input tiles and row pass, the
    bgemm, and the epilogue with the inverse's row pass; D, T, Y are no tasks of their own."""
    target = sl.Target.create(AVX2)
    with torch.no_grad():
        program = st.lower_graph(st.capture(ConvRelu().eval(), (torch.randn(1, 64, 8, 8),)), target)
    tasks = extract_tasks(program, target)
    assert sorted(t.task.outputs[0].op.tag for t in tasks) == ["", wg.TAG_M, wg.TAG_V]
    by_tag = {t.task.outputs[0].op.tag: _tags(t.task.outputs) for t in tasks}
    assert {wg.TAG_D, wg.TAG_T, wg.TAG_V} <= by_tag[wg.TAG_V]
    assert wg.TAG_Y in by_tag[""] and wg.TAG_M not in by_tag[""]      # M: an input of the epilogue
    assert by_tag[wg.TAG_M] & set(wg.TAGS) == {wg.TAG_M}


@pytest.mark.slow
@pytest.mark.skipif(not runs_here(AVX2), reason="the host cannot run AVX2 code")
def test_winograd_kernels_are_tuned_and_their_records_replay(tmp_path):
    torch.manual_seed(0)
    model, x = ConvRelu().eval(), torch.randn(1, 64, 8, 8)
    log = str(tmp_path / "wino.jsonl")
    quick = dict(number=1, repeat=1, verbose=0, policy=SearchPolicy(population=8, generations=1), final=0,
                 variants=0)
    with cf.ThreadPoolExecutor(1) as ex:
        cm = st.compile(model, (x,), AVX2, tune=6, log=log, seed=0, executor=ex, per_round=2,
                        worker_fn=_worker(set()), strategy="round-robin", in_model=0, **quick)   # stand-in times
    searched = {r["workload"]: r["sketch"] for r in records.load(log) if r.get("sketch") != "default"}
    tag = {t.workload_key: t.task.outputs[0].op.tag for t in cm.tuning.tasks}
    # the bgemm's search tiles it; the epilogue's places Y by the transform rule; the input
    # transform's only sketch is its hand schedule (no decision but unroll pragmas: none new)
    assert {tag[k] for k in searched} == {wg.TAG_M, ""}, searched
    assert all("transform:" in sk for k, sk in searched.items() if tag[k] == "")
    # each kernel of the compiled part replays its task's best record (a searched one: 0.5 ms)
    index = kernel_tasks.RecordIndex(log)
    for part in cm.program.parts:
        s = create_schedule([t.op for _, t in part.outputs])
        for group in fuse(s):
            prog = kernel_tasks.group_program(s, group)
            if prog is None:
                continue
            key = workload_key(default_args(prog.outputs))
            best = index.ranked(key, str(cm.target))[0]
            assert best["median_s"] == (0.5e-3 if key in searched else 1e-3)
            kernel_tasks._replay(s, prog, kernel_tasks.rename_steps(best["steps"]["steps"], prog.names))
    with torch.no_grad():
        torch.testing.assert_close(cm(x), model(x), rtol=1e-4, atol=1e-4)
