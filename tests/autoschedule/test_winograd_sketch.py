"""The auto-scheduler on a Winograd F(4x4, 3x3) program (topi.winograd, issue 18): the CPU
sketch rule "transform" gives the transform stages topi.winograd's hand schedules (the input
transform never inlined into the bgemm, which would compute it again for every output channel;
the inverse's select chains folded per unrolled 4 x 4 output tile), the bgemm takes the tiling
rules, and a sample builds (bounds-checked), replays from its steps and matches a float64
numpy convolution at Winograd's float32 tolerance (tests/topi/test_winograd.py)."""
import random

import numpy as np
import pytest

import schedlang as sl
from schedlang.autoschedule.sample import sample
from schedlang.autoschedule.sketch import generate_sketches
from schedlang.autoschedule.task import SearchTask
from schedlang.topi import winograd as wg
from tests.cpu_targets import runs_here
from tests.helpers import run

AVX2 = "llvm -mcpu=haswell -num-cores=1"
ERR = 2e-5        # |error| / (sum |w| * max |x|): test_winograd.py's bound for F(4x4)


def _program(n=1, ic=8, oc=16, h=9, w=10):
    """X [n, ic/8, h, w, 8] (9 x 10: partial tiles, 9 tiles padded to the register tile's rows),
    U [36, oc/16, ic, 16]; (X, U, out)."""
    X = sl.placeholder((n, ic // 8, h, w, 8), name="X")
    U = sl.placeholder((36, -(-oc // 16), ic, 16), name="U")
    return X, U, wg.conv2d_winograd_nchwc(X, U, oc, 4, 1)


def test_transform_stages_take_the_transform_rule_and_the_bgemm_is_tiled():
    X, U, out = _program()
    sketches = generate_sketches(SearchTask(tensors=[X, U, out], target=AVX2))
    assert sketches
    for sk in sketches:
        rules = dict(sk.rule_names)
        assert all(rules[f"wino_{k}"] == "transform" for k in "DTVY"), sk.name
        assert rules["wino_M"] in ("tile", "tile_cache_write", "tile_pack", "tile_relayout"), sk.name
    assert {dict(sk.rule_names)["wino_M"] for sk in sketches} >= {"tile", "tile_cache_write"}


def test_the_56x56_layer_samples_the_cache_sketch_with_the_bgemm_at_the_root():
    """conv2d 64 -> 64 at 56 x 56 (tune.py's): tile_cache_write's cache rows (positions 36 x
    tiles 198 over their full extents) are split by their tile before they are unrolled, so the
    sketch makes candidates (it made none: unroll refused them); the bgemm is never computed
    inside the inverse transform's loops, and no transform stage draws an unroll pragma."""
    task = SearchTask(tensors=list(_program(ic=64, oc=64, h=56, w=56)), target=AVX2)
    sketch = next(sk for sk in generate_sketches(task) if dict(sk.rule_names)["wino_M"] == "tile_cache_write")
    for seed in range(3):
        s, made = sample(task, sketch, random.Random(seed))
        st = {stage.op.name: stage for stage in s.stages}
        assert st["wino_M"].attach_type == "root" and "wino_M|at" not in made
        assert st["wino_M.local"].attach_stage is st["wino_M"]
        assert not [k for k in made if k.endswith("|unroll") and k.split("|")[0] in ("wino_D", "wino_T", "wino_V",
                                                                                    "wino_Y")]


@pytest.mark.skipif(not runs_here(AVX2), reason="the host cannot run AVX2 code")
def test_a_sample_builds_replays_and_matches_numpy():
    X, U, out = _program()
    task = SearchTask(tensors=[X, U, out], target=AVX2)
    sketch = next(sk for sk in generate_sketches(task) if dict(sk.rule_names)["wino_M"] == "tile_cache_write")
    s, _ = sample(task, sketch, random.Random(0))
    st = {stage.op.name: stage for stage in s.stages}
    assert st["wino_T"].attach_stage is st["wino_V"] and st["wino_D"].attach_stage is st["wino_V"]
    assert st["wino_Y"].attach_stage is st["wino"]          # not inlined: computed per output tile
    assert st["wino_V"].attach_type == "root"              # not inlined into the bgemm
    replayed = task.schedule().apply_json(s.to_json())     # a tuning record's steps rebuild it
    assert replayed.to_json() == s.to_json()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 8, 9, 10)).astype(np.float32)
    wt = rng.standard_normal((16, 8, 3, 3)).astype(np.float32)
    u = wg.transform_weight(wt, 4, 16)
    xb = np.ascontiguousarray(x.reshape(1, 1, 8, 9, 10).transpose(0, 1, 3, 4, 2))
    _, ((_, got),), _ = run(replayed, task.args, feed={X: xb, U: u})
    got = got.transpose(0, 1, 4, 2, 3).reshape(1, 16, 9, 10)
    scale = np.abs(wt).sum(axis=(1, 2, 3)).max() * np.abs(x).max()
    np.testing.assert_allclose(got, wg.reference(x, wt, 1), rtol=0, atol=ERR * scale)


@pytest.mark.slow
@pytest.mark.skipif(not runs_here(AVX2), reason="the host cannot run AVX2 code")
def test_every_sketch_samples_and_matches_the_reference():
    """Breadth: a few seeds of every sketch, each checked against the reference evaluator."""
    X, U, out = _program(oc=32, h=8, w=8)
    task = SearchTask(tensors=[X, U, out], target=AVX2)
    checked = 0
    for sk in generate_sketches(task):
        for seed in range(2):
            s, _ = sample(task, sk, random.Random(seed))
            assert sl.autoschedule.check_against_reference(task, s) is None, s.to_python()
            checked += 1
    assert checked >= 4
