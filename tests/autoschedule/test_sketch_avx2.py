"""The CPU sketch's unroll depths and vector-split widths follow the target (issue 18, item 2):
drawn for an AVX2 target (16 ymm, 8 float32 lanes) on any host, sampled schedules keep the
AVX2 budget and compute what the reference evaluator does. (Register-tile sizes: see
test_register_file.py.)"""
import math
import random

import pytest

import schedlang as sl
from schedlang.autoschedule.sample import sample
from schedlang.autoschedule.sketch import generate_sketches
from schedlang.autoschedule.sketch_cpu import register_block, register_fits, unrolled_tile_fits, vector_splits
from schedlang.autoschedule.task import SearchTask
from schedlang.errors import LoweringError, ScheduleError
from schedlang.schedule.annotate import MAX_UNROLL, UNROLL
from tests import programs
from tests.cpu_targets import runs_here

AVX2, AVX512 = "llvm -mcpu=haswell", "llvm -mcpu=znver4"


def _samples(task, seeds):
    """(sketch, schedule, decisions) of the legal samples of every sketch for these seeds."""
    for sketch in generate_sketches(task):
        for seed in seeds:
            try:
                s, made = sample(task, sketch, random.Random(seed))
            except (ScheduleError, LoweringError):
                continue
            yield sketch, s, made


def test_vector_split_widths_are_native_vectors_of_the_target():
    avx2, avx512 = sl.Target.create(AVX2), sl.Target.create(AVX512)
    assert vector_splits(avx2, 32) == (0, 4, 8, 16, 32)
    assert vector_splits(avx512, 32) == (0, 8, 16, 32, 64)
    assert vector_splits(avx2, 64) == (0, 2, 4, 8, 16)


def test_unrolled_cache_tiles_fit_the_register_file():
    avx2, avx512 = sl.Target.create(AVX2), sl.Target.create(AVX512)
    assert unrolled_tile_fits(12, 8, avx2, 32) and not unrolled_tile_fits(8, 16, avx2, 32)   # 16 ymm: spills
    assert unrolled_tile_fits(8, 16, avx512, 32) and unrolled_tile_fits(14, 32, avx512, 32)
    assert not unrolled_tile_fits(17, 16, avx512, 32)          # MAX_UNROLLED_ROWS still bounds the code size


def test_avx2_samples_split_rows_by_its_vectors_and_compute_right():
    task = SearchTask(tensors=list(programs.silu_and_mul(6, 200)), target=AVX2)
    widths = vector_splits(task.target, 32)
    drawn, checked = set(), 0
    for _, s, made in _samples(task, range(60)):
        drawn |= {v for k, v in made.items() if k.endswith("|vsplit")}
        if checked < 3 and any(k.endswith("|vsplit") and v for k, v in made.items()):
            assert sl.autoschedule.check_against_reference(task, s) is None, s.to_python()
            checked += 1
    assert drawn and drawn <= set(widths) and drawn & {4, 32}, drawn     # widths AVX-512 would not draw
    assert checked == 3


def _cache_tiles(made, axes):
    """(rows, cols) of the cache tile a tile_cache_write/tile_pack sample computes at its output
    stage's tiles, from its decisions (the sizes inside the cache_at level), or None."""
    at = made.get("C|cache_at")
    sizes = [made.get(f"C|tile|{a}") for a in axes]
    if at is None or not all(sizes):
        return None
    tile = [math.prod(sz[at + 1:]) for sz in sizes]
    return math.prod(tile[:-1]), tile[-1]


@pytest.mark.parametrize("target", [AVX2, AVX512])
def test_unrolled_gemm_cache_tiles_keep_the_targets_register_budget(target):
    A, B, C = programs.gemm(96, 80, 32)
    task = SearchTask(tensors=[A, B, C], target=target)
    lanes, budget = register_block(task.target, 32)
    axes = [a.var.name for a in C.op.axis]
    unrolled, checked = [], 0
    for sketch, s, made in _samples(task, range(40)):
        block = _cache_tiles(made, axes)
        if block is None or not made.get("C.local|unroll_tile"):
            continue
        assert register_fits(*block, lanes, budget), (sketch.name, block, made)
        unrolled.append(block)
        if checked < 3 and runs_here(target):      # numbers checked where the ISA runs
            assert sl.autoschedule.check_against_reference(task, s) is None, s.to_python()
            checked += 1
    assert unrolled and checked == (3 if runs_here(target) else 0)
    if target == AVX2:
        # a cache tile of 16 rows of one vector (or 8 of two) is unrolled on AVX-512 only
        assert all(register_fits(*b, 8, 12) for b in unrolled)


@pytest.mark.parametrize("target, unrolled", [(AVX2, False), (AVX512, True)])
def test_a_cache_tile_beyond_the_registers_is_not_unrolled(target, unrolled):
    """A parent's decisions computing the cache at the middle tiles (16 x 16 accumulators: 32 ymm,
    16 zmm): unrolled on AVX-512, left rolled on AVX2, where unrolled it would spill."""
    A, B, C = programs.gemm(96, 80, 32)
    task = SearchTask(tensors=[A, B, C], target=target)
    sketch = next(sk for sk in generate_sketches(task) if sk.name == "tile_cache_write:C")
    given = {"C|tile|i": [6, 4, 4], "C|tile|j": [5, 2, 8], "C|cache_at": 0, "C.local|unroll_tile": True}
    s, made = sample(task, sketch, random.Random(0), given)
    assert made["C|cache_at"] == 0 and made["C|tile|i"] == [6, 4, 4] and made["C|tile|j"] == [5, 2, 8]
    assert ("C.local|unroll_tile" in made) == unrolled
    if runs_here(target):
        assert sl.autoschedule.check_against_reference(task, s) is None, s.to_python()


@pytest.mark.parametrize("target, always", [(AVX2, True), (AVX512, False)])
def test_avx2_cache_tiles_are_always_vectorized_and_unrolled_where_they_fit(target, always):
    """GEMM 512 (tune.py's 64-trial workload): on AVX2 every tile_cache_write/tile_pack sample
    vectorizes its cache tile and unrolls its rows where they fit the registers (a draw that left
    the block rolled or scalar ran 1.5-100x slower on a Zen 1, and as tile_pack's first
    measurement kept the search off B packing); AVX-512's draws, not tight, still vary both."""
    A, B, C = programs.gemm(512, 512, 512)
    task = SearchTask(tensors=[A, B, C], target=target)
    vec, unroll = [], []
    for sketch, _, made in _samples(task, range(40)):
        if sketch.name in ("tile_cache_write:C", "tile_pack:C"):
            vec += [made["C.local|vec_tile"]] if "C.local|vec_tile" in made else []
            unroll += [made["C.local|unroll_tile"]] if "C.local|unroll_tile" in made else []
    assert len(vec) >= 60 and len(unroll) >= 40
    assert (all(vec) and all(unroll)) == always
    # a parent's decision is still replayed as given (a resumed log, a mutation keeping it)
    sketch = next(sk for sk in generate_sketches(task) if sk.name == "tile_pack:C")
    _, made = sample(task, sketch, random.Random(0), {"C|tile|i": [128, 1, 4], "C|tile|j": [16, 2, 16],
                                                      "C.local|vec_tile": False, "C.local|unroll_tile": False})
    assert made["C.local|vec_tile"] is False and made["C.local|unroll_tile"] is False


def test_cache_rows_beyond_the_unroll_limit_are_split_by_their_tile():
    """conv2d NCHW, 32 filters on 40 x 40 (batch x channels x rows = 1280 over the full extents,
    past MAX_UNROLL): tile_cache_write's unrolled cache rows are split by their tile sizes (only
    the inner parts unrolled), so its samples are legal and compute the reference's result;
    before, unroll() refused every AVX2 sample of that sketch (always unrolled there)."""
    X, W, _, out = programs.conv2d(1, 16, 40, 40, 32, 3)
    task = SearchTask(tensors=[X, W, out], target=AVX2)
    sketch = next(sk for sk in generate_sketches(task) if sk.name.startswith("tile_cache_write"))
    made_some = 0
    for seed in range(4):
        s, made = sample(task, sketch, random.Random(seed))
        cache = next(st for st in s.stages if st.name.endswith(".local"))
        unrolled = [a for a, ann in cache.annotations.items() if ann.kind == UNROLL]
        assert unrolled and math.prod(cache.static_extents()[a] for a in unrolled) <= MAX_UNROLL
        made_some += 1
        if seed == 0 and runs_here(AVX2):
            assert sl.autoschedule.check_against_reference(task, s) is None, s.to_python()
    assert made_some == 4
