"""Register tiles follow the target's register file (issue 18, item 2): the Target knows its
vector registers and width, and the CPU sketch rules draw register blocks (rows x vectors of
accumulators) that fit them, also after mutation; an AVX-512 target may use more."""
import random

import pytest

import schedlang as sl
from schedlang.autoschedule.mutate import mutate
from schedlang.autoschedule.register_tile import fit_rows, tight
from schedlang.autoschedule.sample import sample
from schedlang.autoschedule.sketch import generate_sketches
from schedlang.autoschedule.sketch_cpu import register_block, register_fits
from schedlang.autoschedule.task import SearchTask
from schedlang.errors import LoweringError, ScheduleError
from tests import programs

AVX2, AVX512 = "llvm -mcpu=znver3", "llvm -mcpu=znver4"


def test_target_knows_its_register_file():
    avx2, avx512 = sl.Target.create(AVX2), sl.Target.create(AVX512)
    assert (avx2.vector_bits, avx2.native_registers(), avx2.native_lanes(32)) == (256, 16, 8)
    assert (avx512.vector_bits, avx512.native_registers(), avx512.native_lanes(32)) == (512, 32, 16)
    fewer = sl.Target.create("llvm -mcpu=znver4 -vector-registers=8")
    assert fewer.native_registers() == 8
    assert str(fewer) == "llvm -mcpu=znver4 -vector-registers=8"          # a measurement worker gets it too
    assert sl.Target.create(str(fewer)) == fewer
    assert sl.Target.create("c").native_registers() in (16, 32)
    with pytest.raises(ValueError, match="vector_registers"):
        sl.Target("llvm", vector_registers=0)
    with pytest.raises(ValueError, match="not resolved"):
        sl.Target("llvm").native_registers()


def _tasks(target):
    A, B, C = programs.gemm(512, 512, 512)
    X, Wt, _, conv = programs.conv2d(1, 64, 56, 56, 64, 3)
    return [SearchTask(tensors=[A, B, C], target=target), SearchTask(tensors=[X, Wt, conv], target=target)]


def _blocks(task, decisions):
    """The register blocks (rows, cols) a sample's decisions make: the innermost tile level of
    each tiled stage (rows: the product over the non-vector axes, cols: the last axis), and a
    relayout tile (its vectors times the other axes' sizes, cols = vecs * lanes; on a tight
    register file it may fill it: rows within register_tile.fit_rows, counted here as within
    the budget)."""
    lanes, budget = register_block(task.target, 32)
    out = []
    for stage in {k.split("|")[0] for k in decisions}:
        axes = [a.name for a in task.outputs[0].op.axis]
        tiles = [decisions.get(f"{stage}|tile|{a}") for a in axes]
        if all(tiles):
            rows = 1
            for t in tiles[:-1]:
                rows *= t[-1]
            out.append((rows, tiles[-1][-1]))
        if f"{stage}|vecs" in decisions:
            rows = 1
            for k, v in decisions.items():
                if k.startswith(f"{stage}|reg|"):
                    rows *= v
            vecs = decisions[f"{stage}|vecs"]
            if tight(task.target, 32):      # accumulators + vecs weight vectors + a broadcast within the file
                assert rows <= fit_rows(task.target, vecs), (rows, vecs)
                rows = min(rows, budget // vecs)
            out.append((rows, vecs * lanes))
    return out


def _samples(task, n, mutations=0):
    rng = random.Random(0)
    for sketch in generate_sketches(task):
        for seed in range(n):
            try:
                _, d = sample(task, sketch, random.Random(seed))
                for _ in range(mutations):        # a mutated child replayed: what the search measures
                    _, d = sample(task, sketch, random.Random(seed), mutate(d, rng))
            except (ScheduleError, LoweringError):
                continue
            yield d


@pytest.mark.parametrize("mutations", [0, 3])
def test_avx2_register_blocks_fit_its_16_registers(mutations):
    for task in _tasks(AVX2):
        lanes, budget = register_block(task.target, 32)
        assert (lanes, budget) == (8, 12)
        blocks = [b for d in _samples(task, 12, mutations) for b in _blocks(task, d)]
        assert blocks
        too_big = [b for b in blocks if not register_fits(*b, lanes, budget)]
        assert not too_big, f"register blocks beyond AVX2's registers: {too_big[:5]}"


def test_avx512_register_blocks_may_use_more():
    """On AVX-512 the same search draws blocks of more accumulators than AVX2 has registers
    (e.g. 16 rows x 16 lanes), all within its own 32."""
    task = _tasks(AVX512)[0]
    lanes, budget = register_block(task.target, 32)
    assert (lanes, budget) == (16, 28)
    blocks = [b for d in _samples(task, 30) for b in _blocks(task, d)]
    assert all(register_fits(*b, lanes, budget) for b in blocks)
    assert any(not register_fits(*b, 8, 12) for b in blocks)


def test_register_fits():
    assert register_fits(4, 16, 8, 12)          # 8 ymm accumulators
    assert not register_fits(8, 16, 8, 12)      # 16 ymm: spills on AVX2
    assert register_fits(8, 16, 16, 28)         # 8 zmm
    assert register_fits(12, 9, 8, 24) and not register_fits(12, 9, 8, 23)    # a tail vector counts
