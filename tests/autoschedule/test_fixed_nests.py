"""The fixed loop nests of a Winograd program (fixed_nests.py): a candidate lowered without its
transform nests (kept from an earlier whole lowering) has the features of a whole lowering,
exactly, for samples of every sketch; and the search's hand-schedule draw (sketch_cpu.hand_seeds)
tiles the bgemm as topi.winograd.schedule_bgemm does and is the first candidate measured."""
import random

import numpy as np

import schedlang as sl
from schedlang.autoschedule.features import candidate_features, tile_ir
from schedlang.autoschedule.fixed_nests import FixedNests
from schedlang.autoschedule.sample import sample
from schedlang.autoschedule.search import Evolver, task_kernel_hash
from schedlang.autoschedule.sketch import generate_sketches
from schedlang.autoschedule.task import SearchTask
from schedlang.errors import LoweringError, ScheduleError
from schedlang.topi import winograd as wg

AVX2 = "llvm -mcpu=haswell -num-cores=1"


def _task(tiles_hw=(9, 10), ic=8, oc=16):
    X = sl.placeholder((1, ic // 8, *tiles_hw, 8), name="X")
    U = sl.placeholder((36, -(-oc // 16), ic, 16), name="U")
    return SearchTask(tensors=[X, U, wg.conv2d_winograd_nchwc(X, U, oc, 4, 1)], target=AVX2)


def test_split_features_equal_the_whole_lowering():
    """8 x 8 pixels, 4 tiles of 4 x 4: no tile padded (fixed_nests.py: padded tiles are counted)."""
    task = _task((8, 8), ic=16, oc=32)
    sketches = generate_sketches(task)
    nests = FixedNests.of(task, sketches)
    assert nests is not None and nests.fixed == {"wino_D", "wino_T", "wino_V", "wino_Y"}
    rng = random.Random(0)
    split = 0
    for k in range(24):
        try:
            s, _ = sample(task, sketches[k % len(sketches)], rng)
            want = candidate_features(tile_ir(s, task.args), task.target)
        except (ScheduleError, LoweringError):
            continue
        got = nests.lower(s)
        if got is None:
            continue
        split += 1
        np.testing.assert_array_equal(got.features, want)
    assert split >= 16
    assert nests.whole <= 7             # the transform nests lowered once; the epilogue's per unroll pragma


def test_split_kernel_hash_tells_kernels_apart():
    task = _task()
    ev = Evolver(task, random.Random(1))
    cands = [c for c in (ev.random_candidate() for _ in range(8)) if c is not None]
    hashes = {ev.hash_of(c) for c in cands}
    assert len(hashes) == len({c.key for c in cands})
    c = cands[0]
    c.lowered = None                    # lowered again: the same hash
    assert ev.hash_of(c) in hashes


def test_hand_seed_is_the_hand_bgemm_tile_and_is_measured_first():
    task = _task((12, 12))                # 9 tiles, padded to 12 = 2 x 6
    ev = Evolver(task, random.Random(0))
    ((sketch, decisions),) = ev.seeds
    assert dict(sketch.rule_names)["wino_M"] == "tile_cache_write"
    assert decisions["wino_M|tile|p"][-1] == 6 and decisions["wino_M|tile|o"][-1] == 16   # AVX2: 6 x 2 ymm
    assert decisions["wino_M|at"] == -1
    first = ev.propose(4)
    assert first[0].sketch is sketch and first[0].decisions["wino_M|tile|p"] == decisions["wino_M|tile|p"]
    s = task.schedule().apply_json(first[0].steps_json)
    st = {stage.name: stage for stage in s.stages}
    assert st["wino_M"].attach_type == "root" and st["wino_M.local"].attach_stage is st["wino_M"]
    assert ev.propose(4)[0].key != first[0].key          # once


def test_a_seed_whose_kernel_the_log_timed_joins_the_elites():
    task = _task((12, 12))
    ev = Evolver(task, random.Random(0))
    ((sketch, decisions),) = ev.seeds
    c = ev.make(sketch, decisions)
    ev.hash_times[ev.hash_of(c)] = 1e-3         # as resume() finds a default record of that kernel
    ev.cache.clear()
    chosen = ev.propose(4)
    assert all(x.key != c.key for x in chosen)
    assert [t for t, m in ev.measured if m.key == c.key] == [1e-3]


def test_a_schedule_hashed_outside_the_search_has_the_searchs_hash():
    """torch/tune.py hashes a task's default schedule so (task_kernel_hash): the search knows it."""
    task = _task((12, 12))
    ev = Evolver(task, random.Random(0))
    ((sketch, decisions),) = ev.seeds
    c = ev.make(sketch, decisions)
    s = task.schedule().apply_json(c.steps_json)
    assert task_kernel_hash(task, s) == ev.hash_of(c)
    hand = wg.schedule_conv2d_winograd(task.schedule(), task.outputs[0], AVX2)
    assert task_kernel_hash(task, hand) != ev.hash_of(c)      # (another kernel: its loops differ)
