"""Variants of the default NCHWc convolution schedule (torch/conv_variants.py) and their
tuning (torch/tune.py measures them beside the default): the default's choice first, every
variant fits the register file, each one's kernel (bounds-checked) computes what the
default's does, and a tuned record of a variant replays from the log into a model that
matches eager torch."""
from __future__ import annotations

import concurrent.futures as cf
import json

import numpy as np
import pytest
import torch
from torch import nn

import schedlang as sl
import schedlang.torch as st
from schedlang.autoschedule import records
from schedlang.autoschedule.search import SearchPolicy
from schedlang.torch.conv_variants import program_variants, variant_schedule
from schedlang.torch.schedules import default_schedule
from schedlang.torch.tune import VARIANT, _variant_steps, extract_tasks, tune_program

from .test_conv_tiles import AVX2, PointwiseBlock, TwoConvs

ONE_THREAD = sl.Target.create("llvm -mcpu=haswell -num-cores=1")     # (a whole-plane task wants 2 a thread)

QUICK = dict(number=1, repeat=1, verbose=0, policy=SearchPolicy(population=8, generations=1), final=0)


@pytest.fixture(autouse=True)
def direct_convs(monkeypatch):
    """The variants are of the direct NCHWc kernels: the 3x3 stride-1 layers of 64 channels
    here would run as Winograd on AVX2 (ops/conv_winograd.py)."""
    from schedlang.torch.ops import conv_winograd
    monkeypatch.setattr(conv_winograd, "ENABLED", False)


def _conv_tasks(model, x, target):
    """(the lowered program, its tasks of NCHWc convolution kernels: those with variants)."""
    program = st.lower_graph(st.capture(model, (x,)), target)
    tasks = [kt for kt in extract_tasks(program, target)
             if kt.kind == "conv" and program_variants(kt.task.outputs, target)]
    return program, tasks


def test_variants_start_with_the_default_and_fit_the_register_file():
    torch.manual_seed(0)
    _, tasks = _conv_tasks(TwoConvs(5, 32, 3, 1), torch.randn(1, 5, 9, 14), AVX2)
    assert len(tasks) >= 2
    for kt in tasks:
        choices = program_variants(kt.task.outputs, AVX2, limit=16)
        assert len(choices) > 1 and all(c not in choices[:k] for k, c in enumerate(choices))
        steps = variant_schedule(kt.task.outputs, AVX2, choices[0]).to_json()
        assert steps == default_schedule(kt.task.outputs, AVX2).to_json()      # the default's choice first
        for c in choices:
            assert c.vecs * c.wt * c.rt + c.vecs + 1 <= AVX2.native_registers(), c


def _short_rows(c: int = 64):
    """3x3 convolutions over rows of 7 (conv_schedules._short_odd_rows: a whole-plane task,
    the tile's channel blocks outer), padded and unpadded, between 1x1 ones."""
    return nn.Sequential(nn.Conv2d(4, c, 1), nn.ReLU(), nn.Conv2d(c, c, 3, 1, 1), nn.ReLU(),
                         nn.Conv2d(c, c, 3, 1, 1), nn.ReLU(), nn.Conv2d(c, 8, 1)).eval()


def _grouped():
    """A grouped 3x3 of 16 channels a group (2 blocks of AVX2's 8: conv_schedules.tile_blocks) between 1x1s."""
    return nn.Sequential(nn.Conv2d(3, 32, 1), nn.ReLU(), nn.Conv2d(32, 32, 3, 2, 1, groups=2), nn.ReLU(),
                         nn.Conv2d(32, 8, 1)).eval()


VARIANT_MODELS = {
    "3x3": (lambda: TwoConvs(3, 24, 3, 2), (1, 3, 11, 9)),                # stride 2, odd rows, padded kernels
    "grouped": (_grouped, (1, 3, 11, 9)),
    "1x1-chunks": (lambda: PointwiseBlock(3, 40, 144, 24, 1), (1, 3, 5, 9)),      # 1x1 reductions in chunks
    "short-rows": (_short_rows, (1, 4, 7, 7)),
}


# Every variant of the 3x3 model's kernels is built in the default suite; the 1x1-chunks and short-row
# models' (a dozen bounds-checked builds each) with -m slow.
@pytest.mark.parametrize("name", [n if n in ("3x3", "grouped") else pytest.param(n, marks=pytest.mark.slow)
                                  for n in sorted(VARIANT_MODELS)])
def test_every_variant_computes_what_the_default_does(name):
    """Each variant's kernel, bounds-checked, on random inputs: equal to the default's."""
    torch.manual_seed(0)
    model, shape = VARIANT_MODELS[name]
    checked = ONE_THREAD.with_options(bounds_check=True)
    _, tasks = _conv_tasks(model(), torch.randn(*shape), ONE_THREAD)
    assert tasks
    rng = np.random.default_rng(0)
    for kt in tasks:
        args, outs = kt.task.args, kt.task.outputs
        arrays = [rng.standard_normal(t.shape).astype(np.float32) for t in args]
        results = []
        for choice in program_variants(outs, ONE_THREAD, limit=16):
            a = [x.copy() for x in arrays]
            sl.build(variant_schedule(outs, ONE_THREAD, choice), args, target=checked)(*a)
            results.append(a[-len(outs):])
        for got in results[1:]:
            for g, w in zip(got, results[0]):
                np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", sorted(VARIANT_MODELS))
def test_no_two_variants_build_one_kernel(name):
    """A variant that changes a field its kernel does not read (rows outer under a whole-plane
    task or 1x1 chunks, a plane without the input channels outside) would measure the kernel of
    another: every variant's schedule differs."""
    torch.manual_seed(0)
    model, shape = VARIANT_MODELS[name]
    _, tasks = _conv_tasks(model(), torch.randn(*shape), ONE_THREAD)
    assert tasks
    for kt in tasks:
        steps = [variant_schedule(kt.task.outputs, ONE_THREAD, c).to_json()
                 for c in program_variants(kt.task.outputs, ONE_THREAD, limit=16)]
        assert len(set(steps)) == len(steps) > 1


def test_short_row_variants_keep_the_plane_and_the_blocks_outer():
    """A short-row kernel's default (conv_schedules._short_odd_rows: 4 x 3 tiles, a whole plane a
    task, the tile's channel blocks outer) keeps both in its variants with the input channels
    outside (other tiles, rows outer), one variant flipping each."""
    torch.manual_seed(0)
    _, tasks = _conv_tasks(_short_rows(), torch.randn(1, 4, 7, 7), ONE_THREAD)
    short = [program_variants(kt.task.outputs, ONE_THREAD, limit=16) for kt in tasks]
    short = [v for v in short if v[0].blocks_outer]
    assert len(short) == 2          # the padded 3x3 and the unpadded one
    for default, *variants in short:
        assert default.plane and default.channels_outside and (default.vecs, default.wt) == (4, 3)
        outside = [c for c in variants if c.channels_outside]
        assert len({(c.vecs, c.wt, c.rt) for c in outside}) > 2, outside       # other tiles too
        assert [c.plane for c in outside].count(False) == 1, outside
        assert [c.blocks_outer for c in outside].count(False) == 1, outside
        assert not any(c.plane or c.blocks_outer for c in variants if not c.channels_outside)


_WINNERS: set = set()     # steps (JSON) _fake_times gives the best time


def _fake_times(program_json, steps_json, target, number, repeat):
    """1 ms for a candidate in _WINNERS, 2 ms for any other (no build)."""
    return {"times": [1e-3 if steps_json in _WINNERS else 2e-3], "build_s": 0.0, "load": None}


def test_a_tuned_variant_replays_from_the_log_and_matches_eager(tmp_path):
    """Tuning measures and logs each conv kernel's variants (their tile choices in the
    record); where a variant wins, compiling with the log builds it, and the model still
    matches eager torch."""
    torch.manual_seed(0)
    model, x = TwoConvs(5, 16, 3, 1), torch.randn(1, 5, 9, 15)
    program, tasks = _conv_tasks(model, x, AVX2)
    _WINNERS.clear()
    for kt in tasks:
        _WINNERS.add(_variant_steps(kt, 4)[-1][1])       # the last of 4 variants wins, as timed
    log = str(tmp_path / "variants.jsonl")
    with cf.ThreadPoolExecutor(1) as ex:
        tune_program(program, AVX2, 0, log, executor=ex, worker_fn=_fake_times, variants=4, **QUICK)
    for kt in tasks:
        recs = records.load(log, kt.workload_key, str(AVX2))
        variants = [r for r in recs if r.get("sketch") == VARIANT]
        assert 1 <= len(variants) <= 4 and all(set(r["choice"]) >= {"vecs", "wt", "rt"} for r in variants)
        best = records.ranked(recs, final=False)[0]
        assert best["sketch"] == VARIANT and json.dumps(best["steps"], sort_keys=True) in \
            {json.dumps(json.loads(w), sort_keys=True) for w in _WINNERS}
    (part,) = program.parts
    outs = [t for _, t in part.outputs]
    assert default_schedule(outs, AVX2, log=log).to_json() != default_schedule(outs, AVX2).to_json()
    built = st.compile(model, (x,), target=AVX2, log=log)
    with torch.no_grad():
        torch.testing.assert_close(built(x), model(x), rtol=1e-4, atol=1e-4)
