"""Register blocks that keep the FMA units busy (issue 18, item 2): on AVX2 (16 ymm) the CPU
sketch draws most GEMM register blocks as shapes with few loads per FMA (4 rows x 2 vectors,
2 x 4, as the hand schedule's 4 x 16), not 8 x 1 (nine loads for eight FMAs: ~0.89 of the peak
at best), and a search of 64 trials finds a block as good as the hand schedule's on the
synthetic register-tile worker (workers.register_tile_cost: deterministic, nothing built). The conv2d
NCHWc blocks (tile_relayout) on AVX2 fit 16 ymm and may fill them (1 x 14, as the hand kernel)."""
import concurrent.futures as cf
import random

import pytest

import schedlang as sl
from schedlang.autoschedule import records
from schedlang.autoschedule.measure import Measurer
from schedlang.autoschedule.register_tile import block_shapes, draw_block, tight
from schedlang.autoschedule.sample import sample
from schedlang.autoschedule.search import run_search
from schedlang.autoschedule.sketch import generate_sketches
from schedlang.autoschedule.task import SearchTask
from schedlang.errors import LoweringError, ScheduleError
from tests import programs

from . import workers

AVX2, AVX512 = "llvm -mcpu=znver3", "llvm -mcpu=znver4"


def _weight(shapes, rows, vecs):
    return next(w for r, v, w in shapes if (r, v) == (rows, vecs))


def test_block_shapes_fit_the_register_file_and_prefer_few_loads():
    shapes = block_shapes(16, 12)
    assert all(r * v <= 12 and 2 * r * v >= 12 and r * v + v + 1 <= 16 for r, v, _ in shapes)
    assert {(4, 2), (6, 2), (4, 3), (8, 1), (2, 4)} <= {(r, v) for r, v, _ in shapes}
    assert (4, 4) not in {(r, v) for r, v, _ in shapes}          # 16 accumulators: spills on AVX2
    assert _weight(shapes, 4, 3) > _weight(shapes, 6, 2) > _weight(shapes, 4, 2) > 1.5 * _weight(shapes, 8, 1)
    assert (4, 4) in {(r, v) for r, v, _ in block_shapes(32, 28)}  # AVX-512's 32 zmm hold it


def test_drawn_blocks_divide_their_loops_or_are_not_drawn():
    avx2 = sl.Target.create(AVX2)
    drawn = [draw_block(random.Random(seed), avx2, 32, [512], 512) for seed in range(200)]
    blocks = [(tuple(b[0]), b[1]) for b in drawn if b is not None]
    assert 0.6 < len(blocks) / len(drawn) < 0.9            # the rest: sizes drawn one by one
    assert all(rows * vecs <= 12 and rows * vecs + vecs + 1 <= 16 for (rows,), vecs in blocks)
    assert {((4,), 2), ((2,), 4), ((8,), 1)} <= set(blocks)
    # no shape fits a loop of 3 rows by 4 columns exactly: drawn one by one, or a block with tails
    assert all(b is None or b[0][0] <= 3 for b in (draw_block(random.Random(s), avx2, 32, [3], 4)
                                                    for s in range(50)))


def test_avx512_gemm_blocks_are_whole_vectors_within_its_registers():
    """AVX-512 draws shapes too (its per-axis draws made 16 x 1 blocks as readily as whole
    vectors: 0.33x the hand schedule in 64 trials for one seed on an Intel Xeon): most tile_pack
    blocks are whole zmm columns of at least half its 28 accumulators, none over 32 registers.
    tight (16 x 16 float32 spills AVX2's 12 accumulators, not AVX-512's 28; float64 on AVX-512
    is tight) still gates the conv2d NCHWc shapes and the cache tile's forced vectorization."""
    avx2, avx512 = sl.Target.create(AVX2), sl.Target.create(AVX512)
    assert tight(avx2, 32) and not tight(avx512, 32) and tight(avx512, 64)
    drawn = [draw_block(random.Random(seed), avx512, 32, [512], 512) for seed in range(200)]
    assert 0.6 < sum(b is not None for b in drawn) / len(drawn) < 0.9
    assert all(14 <= rows * vecs <= 28 and rows * vecs + vecs + 1 <= 32 for (rows,), vecs in filter(None, drawn))
    blocks = _gemm_blocks(AVX512, range(100))
    whole = [(r, c) for r, c in blocks if c % 16 == 0 and r * (c // 16) >= 14]
    assert len(whole) >= 0.6 * len(blocks), blocks
    assert all(r * -(-c // 16) <= 28 for r, c in blocks)


def _gemm_blocks(target, seeds):
    task = SearchTask(tensors=list(programs.gemm(512, 512, 512)), target=target)
    sketch = next(sk for sk in generate_sketches(task) if sk.name == "tile_pack:C")
    out = []
    for seed in seeds:
        try:
            _, made = sample(task, sketch, random.Random(seed))
        except (ScheduleError, LoweringError):
            continue
        out.append((made["C|tile|i"][-1], made["C|tile|j"][-1]))
    return out


def test_avx2_gemm_blocks_are_mostly_load_efficient():
    """Most tile_pack register blocks on AVX2 take at most 3 loads per 4 FMAs (4 x 16, 2 x 32,
    4 x 24 ...); the per-axis draw alone made such a block about one time in ten."""
    blocks = _gemm_blocks(AVX2, range(100))
    efficient = [(r, c) for r, c in blocks if r * (c // 8) >= 8 and 4 * (r + c // 8) <= 3 * r * (c // 8)]
    assert len(efficient) >= 0.45 * len(blocks), blocks
    assert all(r * -(-c // 8) <= 12 for r, c in blocks)


def _search(log, seed, trials=64, n=256):
    task = SearchTask.from_outputs([programs.gemm(n, n, n)[-1]], target=AVX2 + " -num-cores=2")
    with cf.ThreadPoolExecutor(1) as ex:
        assert run_search(task, trials, log, Measurer(ex, worker_fn=workers.register_tile), seed,
                          warm_start=False) == trials
    return min(r["median_s"] for r in records.load(log) if r["median_s"])


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4))
def test_24_trials_reach_the_hand_register_tile_on_the_formula(seed, tmp_path):
    """On the register-tile formula the hand schedule's 4 x 16 block is 1 ms and 8 x 8 is 1.125 ms
    (0.89x): 24 trials find a block within 0.9x of the hand one for every seed (GEMM 512 before
    the block shapes: the first such block at trial 54, 38 and 2 of seeds 0-2; after: 6, 2, 10)."""
    assert 1e-3 / _search(str(tmp_path / "log.jsonl"), seed, trials=24) >= 0.9


def test_avx2_conv2d_relayout_blocks_fit_and_compute_right():
    """tile_relayout samples (NCHWc) on AVX2 with odd sizes: blocks of rows x vectors within 12
    accumulators and 16 registers, and each sample computes what the reference evaluator does."""
    X, Wt, _, conv = programs.conv2d(1, 5, 9, 7, 24, 3)
    task = SearchTask(tensors=[X, Wt, conv], target=AVX2)
    sketch = next(sk for sk in generate_sketches(task) if sk.name.startswith("tile_relayout"))
    checked, shapes = 0, set()
    for seed in range(12):
        try:
            s, made = sample(task, sketch, random.Random(seed))
        except (ScheduleError, LoweringError):
            continue
        vecs = made["conv|vecs"]
        rows = 1
        for k, v in made.items():
            if k.startswith("conv|reg|"):
                rows *= v
        assert rows * vecs <= 12, made
        shapes.add((rows, vecs))
        if checked < 4:
            assert sl.autoschedule.check_against_reference(task, s) is None, s.to_python()
            checked += 1
    assert checked == 4 and len(shapes) > 1


# ---- conv2d NCHWc (tile_relayout) on AVX2 --------------------------------------------------

def _conv_task(target, c=64, hw=56, f=64):
    X, Wt, _, conv = programs.conv2d(1, c, hw, hw, f, 3)
    return SearchTask(tensors=[X, Wt, conv], target=target)


def _relayout_draws(target, seeds):
    """(vecs, rows of h, columns of w, loop order) of the tile_relayout:conv samples: the order
    of the outer tiles, channel tiles (f) outermost, inside the rows (hfw) or innermost (hwf)."""
    task = _conv_task(target)
    sketch = next(sk for sk in generate_sketches(task) if sk.name == "tile_relayout:conv")
    out = []
    for seed in seeds:
        _, made = sample(task, sketch, random.Random(seed))
        order = "hwf" if made["conv|vec_outer_last"] else "hfw" if made.get("conv|rows_outer") else "fhw"
        out.append((made["conv|vecs"], made["conv|reg|h"], made["conv|reg|w"], order))
    return out


@pytest.mark.parametrize("given, order", [
    ({"conv|vec_outer_last": True}, "hwf"),
    ({"conv|vec_outer_last": False, "conv|rows_outer": True}, "hfw"),
    ({"conv|vec_outer_last": False, "conv|rows_outer": False}, "fhw"),
])
def test_each_relayout_order_decision_gives_its_loop_order(given, order):
    """The tile loops of a tile_relayout:conv sample (no parallel fuse, so their names stay
    apart) run in the order its decisions name: rows_outer puts the channel tiles between the
    rows and a row's column tiles (h, f, w; it gave h, w, f: list.insert took its index before
    the pop of its argument), vec_outer_last innermost (h, w, f), neither outermost (f, h, w)."""
    task = _conv_task(AVX2, c=16, hw=14, f=32)
    sketch = next(sk for sk in generate_sketches(task) if sk.name == "tile_relayout:conv")
    s, made = sample(task, sketch, random.Random(0), {**given, "conv|par": 0, "conv|vecs": 1, "conv|reg|w": 7})
    assert made["conv|par"] == 0 and all(made[k] == v for k, v in given.items())
    tiles = [a.name[0] for a in s["conv"].leaf_iter_vars if a.name in ("f.outer", "h.outer", "w.outer")]
    assert "".join(tiles) == order


def test_avx2_conv2d_blocks_fill_16_ymm_as_the_hand_tile():
    """The conv2d 64->64 56x56 NCHWc register blocks on AVX2: every one fits 16 ymm (columns x vecs
    accumulators, the vecs weight vectors, the broadcast input), most divide their loops with at
    least 7 accumulators, and the hand schedule's 1 x 14 (conv_schedules.nchwc_tile: 16 registers
    live) is drawn as well as 2 x 4 (the old draws held at most 12 accumulators: never 1 x 14);
    the channel tiles go inside the rows (the hand kernel's order) in some draws."""
    draws = _relayout_draws(AVX2, range(100))
    blocks = [(vecs, h * w) for vecs, h, w, _ in draws]
    assert all(vecs * rows + vecs + 1 <= 16 for vecs, rows in blocks), blocks
    exact = [(v, h, w) for v, h, w, _ in draws if 64 % (8 * v) == 0 and 56 % h == 0 and 56 % w == 0 and v * h * w >= 7]
    assert len(exact) >= 0.85 * len(draws)
    assert blocks.count((1, 14)) >= 8 and blocks.count((2, 4)) >= 20, blocks
    assert {order for *_, order in draws} == {"fhw", "hfw", "hwf"}


def test_avx512_conv2d_relayout_draws_keep_their_budget_and_orders():
    """AVX-512 float32 keeps its draws (test_sketch_rules pins its samples): no rows_outer decision,
    blocks within its 28 accumulators."""
    draws = _relayout_draws(AVX512, range(20))
    assert {order for *_, order in draws} <= {"fhw", "hwf"}
    assert all(vecs * h * w <= 28 for vecs, h, w, _ in draws)


@pytest.mark.parametrize("wt, vecs, want", [(4, 2, 1.0), (2, 4, 1.0), (14, 1, 15 / 14), (8, 1, 9 / 8),
                                            (7, 2, 2.0), (4, 1, 2.0)])
def test_register_tile_worker_counts_a_conv_blocks_loads(wt, vecs, want):
    """workers.register_tile_cost on the hand NCHWc schedule (topi.cpu.schedule_conv2d_nchwc):
    per reduction step, wt broadcasts of the input and vecs weight vectors for wt * vecs FMAs;
    2 x 7 needs 17 registers (spills: half speed), 1 x 4 waits on the FMA latency."""
    from schedlang.topi import cpu
    task = _conv_task(AVX2 + " -num-cores=2", c=8, hw=56, f=64)
    out = task.args[-1]
    s = cpu.schedule_conv2d_nchwc(sl.create_schedule(out.op), out, task.target, wt, vecs)
    assert workers.register_tile_cost(task, s) == pytest.approx(want * 1e-3)


def test_a_reduction_split_keeps_the_row_loop_parallel_on_the_formula():
    """A 2 x 4 hfw block with the input channels split by 16 outside a row of tiles (rsplit: the
    cache is computed at the row loop, only the batch of one outside it) scores as the unsplit
    block on the 2-core formula, 1 ms: the row loop joins the parallel loop (sketch_cpu._fuse_limit;
    outside it, the batch alone, the samples ran on one core and read 2 ms). The formula counts
    the same FMAs and loads a step: the split changes which input rows stay in L1, not the work."""
    task = SearchTask.from_outputs([programs.conv2d(1, 64, 56, 56, 64, 3)[-1]], target=AVX2 + " -num-cores=2")
    sketch = next(sk for sk in generate_sketches(task) if sk.name == "tile_relayout:conv")
    block = {"conv|vecs": 2, "conv|reg|h": 1, "conv|reg|w": 4, "conv|vec_outer_last": False,
             "conv|rows_outer": True, "conv|par": 1}
    costs = []
    for rsplit in (0, 16):
        s, made = sample(task, sketch, random.Random(0), {**block, "conv|rsplit": rsplit})
        assert made["conv|rsplit"] == rsplit and s["conv"].leaf_iter_vars[0].name == "n.outer.h.outer.fused"
        costs.append(workers.register_tile_cost(task, s))
    assert costs == [pytest.approx(1e-3)] * 2


def _conv_search(log, seed, trials):
    task = SearchTask.from_outputs([programs.conv2d(1, 64, 56, 56, 64, 3)[-1]], target=AVX2 + " -num-cores=2")
    with cf.ThreadPoolExecutor(1) as ex:
        assert run_search(task, trials, log, Measurer(ex, worker_fn=workers.register_tile), seed,
                          warm_start=False) == trials
    times = [r["median_s"] for r in records.load(log) if "final" not in r]
    return next((i for i, t in enumerate(times) if t and t <= 1e-3 / 0.9 * (1 + 1e-9)), None)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4))
def test_8_trials_find_a_good_conv2d_block_on_the_formula(seed, tmp_path):
    """The conv2d 64->64 56x56 search on the register-tile formula (2 x 4 at 1 ms, 1 x 14 at 1.07 ms):
    its first round of 8 candidates holds a block within 0.9x of the best for seeds 0-3 (first such
    candidate at trial 0, 3, 3, 3). The round takes one sample of each sketch first (search.py:
    the model is untrained); seeds 1 and 2 had drawn tile:conv samples only (best 8 ms)."""
    assert _conv_search(str(tmp_path / "log.jsonl"), seed, trials=8) is not None
