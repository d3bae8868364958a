"""The search on a noisy machine (issue 18, item 2): a candidate measured near the best is timed
again and counts at its faster time, so one slow reading of a fast kernel does not teach the
model that its kind is slow; and a mutation reshapes a register block (8 x 1 -> 4 x 2 vectors)
in one step, so a search settled on one block shape can leave it. GEMM 512 at 64 trials on a
loaded Zen 1 (tune6, seed 3): its 4 x 16 candidates read 14 ms (1.42x its best, 9-10 ms when
timed again) and it ended on 8 x 1 blocks at 0.80x the hand schedule."""
import concurrent.futures as cf
import random
import threading
import zlib

import pytest

from schedlang.autoschedule import records
from schedlang.autoschedule.measure import Measurer
from schedlang.autoschedule.mutate import BLOCK_P, block_pairs, mutate, mutate_block
from schedlang.autoschedule.sample import sample
from schedlang.autoschedule.search import RETIME_WITHIN, Evolver, SearchPolicy, run_search
from schedlang.autoschedule.sketch import generate_sketches
from schedlang.autoschedule.task import SearchTask
from tests import programs

from . import workers

AVX2 = "llvm -mcpu=znver3 -num-cores=2"


def _gemm(n):
    return SearchTask.from_outputs([programs.gemm(n, n, n)[-1]], target=AVX2)


# ---- the register block mutation ---------------------------------------------------------

def test_a_block_mutation_moves_a_factor_between_two_inner_tiles():
    """8 x 1 vectors (i inner 8, j inner 8 lanes) -> 4 x 2: each loop's next level takes the
    change back, so the cache tile (the two inner levels' product) keeps its size."""
    a, b = mutate_block([16, 4, 8], [16, 4, 8], random.Random(0))
    assert (a, b) == ([16, 8, 4], [16, 2, 16])
    a, b = mutate_block([64, 1, 8], [64, 1, 8], random.Random(0))   # no level of b to shrink: the
    assert (a, b) == ([64, 2, 4], [64, 1, 16])                       # outermost is recomputed on replay
    assert mutate_block([512, 1], [16, 32], random.Random(0)) == ([512, 1], [16, 32])


def test_block_pairs_are_the_loops_of_one_stage_tiled_alike():
    """tile:C tiles its reduction k in two levels beside i and j in four: k pairs with nothing;
    the cache stage's k is another stage."""
    d = {"C|tile|i": [2, 32, 1, 8], "C|tile|j": [16, 1, 4, 8], "C|tile|k": [16, 32], "C|par": 1,
         "C.local|tile|k": [512, 1]}
    assert sorted(block_pairs(d)) == [("C|tile|i", "C|tile|j"), ("C|tile|j", "C|tile|i")]


def test_one_mutation_turns_an_8x1_gemm_block_into_the_hand_4x2():
    """From the tile_pack 8 x 1 elite of tune6's seed 3, some of 64 children have the hand
    schedule's 4 x 16 block (4 rows, two ymm), legal and replayed; a one-size mutation changes
    one loop's tiles, never both."""
    task = _gemm(512)
    sketch = next(sk for sk in generate_sketches(task) if sk.name == "tile_pack:C")
    _, parent = sample(task, sketch, random.Random(0), {"C|tile|i": [16, 4, 8], "C|tile|j": [16, 4, 8]})
    assert (parent["C|tile|i"], parent["C|tile|j"]) == ([16, 4, 8], [16, 4, 8])
    rng = random.Random(1)
    blocks = set()
    for _ in range(64):
        child = mutate(parent, rng, BLOCK_P)
        if child.get("C|tile|i") != parent["C|tile|i"] and child.get("C|tile|j") != parent["C|tile|j"]:
            _, made = sample(task, sketch, rng, child)
            blocks.add((made["C|tile|i"][-1], made["C|tile|j"][-1]))
    assert (4, 16) in blocks, blocks
    assert Evolver(task, random.Random(0)).block_p == BLOCK_P          # AVX2: on
    assert Evolver(SearchTask.from_outputs([programs.gemm(16, 16, 16)[-1]], target="llvm -mcpu=znver4"),
                   random.Random(0)).block_p == BLOCK_P                # AVX-512 too
    assert Evolver(SearchTask.from_outputs([programs.gemm(16, 16, 16)[-1]], target="cuda"),
                   random.Random(0)).block_p == 0                      # the GPU's blocks are thread tiles


# ---- timing the leaders again ------------------------------------------------------------

class Noisy:
    """A measure function (called in this process) over workers.register_tile_cost: the first
    call of some candidates reads `slow` times its cost, later calls read the cost; counts the
    calls per candidate. Which: those whose steps hash odd, or with fastest=True those of the
    fastest class (cost 1 ms, the hand 4 x 16 block), as seed 3's 4 x 16 readings."""

    def __init__(self, slow=1.45, fastest=False):
        self.slow, self.fastest, self.calls, self.lock = slow, fastest, {}, threading.Lock()

    def __call__(self, program_json, steps_json, target, number, repeat):
        out = workers.register_tile(program_json, steps_json, target, number, repeat)
        with self.lock:
            n = self.calls[steps_json] = self.calls.get(steps_json, 0) + 1
        hit = out["times"][0] <= 1e-3 * (1 + 1e-9) if self.fastest else zlib.crc32(steps_json.encode()) % 2
        if n == 1 and hit:
            out["times"] = [t * self.slow for t in out["times"]]
        return out


def _noisy_search(log, seed, trials, noisy, n=256):
    task = _gemm(n)
    ev = Evolver(task, random.Random(seed), policy=SearchPolicy())
    with cf.ThreadPoolExecutor(1) as ex:
        assert run_search(task, trials, log, Measurer(ex, worker_fn=noisy), seed, evolver=ev) == trials
    return task, ev


def test_candidates_near_the_best_are_timed_again_at_their_faster_time(tmp_path):
    """After 16 trials every candidate measured within RETIME_WITHIN of the best of its round was
    timed twice and counts (elites, model data) at its true cost; the log keeps one record per
    candidate, with its first time."""
    noisy = Noisy()
    log = str(tmp_path / "log.jsonl")
    task, ev = _noisy_search(log, 0, 16, noisy)
    recs = records.load(log)
    assert len(recs) == 16 and len({r["kernel_hash"] for r in recs}) == 16
    twice = {sj for sj, n in noisy.calls.items() if n == 2}
    assert twice and set(noisy.calls.values()) <= {1, 2}
    assert {c.steps_json for c in (c for _, c in ev.measured) if c.key in ev.retimed} == twice
    best = min(t for t, _ in ev.measured)
    for t, c in ev.measured:
        true = workers.register_tile_cost(task, task.schedule().apply_json(c.steps_json))
        if c.key in ev.retimed:
            assert t == pytest.approx(true)
            assert ev.model.times[ev._rows[c.key]] == pytest.approx(true)
        else:
            assert t > RETIME_WITHIN * best * (1 - 1e-9) or t == pytest.approx(true)


@pytest.mark.slow       # four 24-trial searches on the formula
@pytest.mark.parametrize("seed", range(4))
def test_a_slow_first_reading_of_the_best_blocks_does_not_hide_them(seed, tmp_path):
    """On the register-tile formula (hand 4 x 16 block: 1 ms, 8 x 8: 1.125 ms, 0.89x) with every
    1 ms candidate read 1.45x slow at its first call, the search's fastest candidate (after the
    second timings) truly runs within 0.9x of the hand block in 24 trials, seeds 0-3 (as without
    noise, test_register_blocks). Timed once, seed 2 picks an 8 x 8 block (0.89x); seeds 0, 1 and
    3 pick a 1 ms block read at 1.45 ms, the best reading of their 24."""
    task, ev = _noisy_search(str(tmp_path / "log.jsonl"), seed, 24, Noisy(fastest=True))
    _, best = min(ev.measured, key=lambda tc: tc[0])
    assert 1e-3 / workers.register_tile_cost(task, task.schedule().apply_json(best.steps_json)) >= 0.9


def test_a_worker_times_a_module_it_built_last_without_building_it_again():
    """The second timing of a candidate costs runs, not a build (the worker's RECENT_MODULES)."""
    from schedlang.autoschedule import measure
    task = SearchTask.from_outputs([programs.gemm(16, 16, 16)[-1]], target="llvm")   # built and run here
    steps = task.schedule().to_json()
    first = measure.run_candidate(task.program_json, steps, str(task.target), 1, 1)
    built = dict(measure._recent)
    again = measure.run_candidate(task.program_json, steps, str(task.target), 1, 1)
    assert first["times"] and again["times"] and measure._recent.keys() == built.keys()
    assert all(measure._recent[k] is built[k] for k in built)
