"""conv2d NCHW vectorized over output channels: the hand NCHWc schedule of benchmarks/sl_kernels.py
and the auto-scheduler's tile_relayout sketch (weights packed with the channel vector innermost,
padding materialized) compute what torch does, on odd shapes, without out-of-bounds accesses."""
import importlib.util
import pathlib
import random

import numpy as np
import pytest

import schedlang as sl
from schedlang.autoschedule.search import Evolver, SearchPolicy
from schedlang.autoschedule.sketch import generate_sketches
from schedlang.autoschedule.task import SearchTask
from schedlang.schedule import legal
from schedlang.topi import nn

from .. import programs
from ..helpers import run

torch = pytest.importorskip("torch")

_PATH = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "sl_kernels.py"
_SPEC = importlib.util.spec_from_file_location("sl_kernels", _PATH)
sl_kernels = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(sl_kernels)


def torch_conv2d(x, w):
    return torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), padding=1).numpy()


def check_conv(s, args, seed=0):
    """Run s bounds-checked and normal (tests/helpers.run) and compare with torch."""
    feed, outputs, _ = run(s, args, seed)
    X, W = args[:2]
    (_, got), = outputs
    want = torch_conv2d(feed[X], feed[W])
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(want).max())))


# The second case (the first's shape, the padding inlined: the third case inlines it too) with -m slow.
@pytest.mark.parametrize("shape, wt, vecs, lanes, inline_pad", [
    ((1, 5, 9, 11, 20), 4, 2, 16, False),      # channels not a multiple of the lanes, a tail in w
    pytest.param((1, 5, 9, 11, 20), 8, 1, 16, True, marks=pytest.mark.slow),
    ((2, 3, 7, 6, 8), 7, 1, 16, True),         # fewer channels than lanes, a tile wider than w
    ((1, 4, 5, 13, 24), 3, 3, 8, False),       # three vectors of 8, 13 = 4 * 3 + 1
])
def test_hand_nchwc_schedule_matches_torch(shape, wt, vecs, lanes, inline_pad):
    s, args = sl_kernels.conv2d_nchwc_schedule("llvm", *shape, wt=wt, vecs=vecs, lanes=lanes, inline_pad=inline_pad)
    check_conv(s, args)


def test_hand_nchwc_inner_loop_is_broadcast_fma_without_spills():
    """The reduction's body: broadcast an input value, load the packed weights, FMA into
    vector accumulators held in registers (no stack traffic in the loop). Compiled for an AVX-512
    CPU whatever the host (the 7 x 2 zmm tile needs 32 vector registers); the code is only read."""
    target = "llvm -mcpu=skylake-avx512"
    s, args = sl_kernels.conv2d_nchwc_schedule(target, 1, 16, 14, 14, 32, wt=7, vecs=2, inline_pad=False)
    asm = sl.build(s, args, target=target).get_source("asm")
    lines = asm.splitlines()
    fmas = [i for i, line in enumerate(lines) if "vfmadd" in line and "zmm" in line]
    assert len(fmas) >= 14
    start = max(i for i in range(fmas[0]) if lines[i].startswith(".LBB"))     # the innermost loop's label
    label = lines[start].rstrip(":")
    end = next(i for i in range(start, len(lines)) if lines[i].split()[-1:] == [label])   # its back edge
    body = lines[start:end + 1]
    assert sum("vfmadd" in line for line in body) >= 14
    assert any("vbroadcastss" in line for line in body)
    assert not any("rsp" in line for line in body), "\n".join(body)


def conv_task(n, c, h, w, f):
    X, W, _, out = sl_kernels.conv2d_stages(n, c, h, w, f)
    return SearchTask(tensors=[X, W, out])


def test_relayout_sketch_rule_applies_to_conv2d_only():
    task = conv_task(1, 4, 6, 6, 8)
    s = task.schedule()
    pos, packs = legal.relayout_axis(s["conv"])
    assert s["conv"].op.axis[pos].var.name == "f" and [(t.name, d) for t, d in packs] == [("W", 0)]
    assert legal.is_guarded_copy(s["pad"])
    names = [sk.name for sk in generate_sketches(task)]
    assert "tile_relayout:conv,inline:pad" in names and "tile_relayout:conv" in names    # pad inlined or not
    # GEMM: B[k, j] reads the innermost axis contiguously; a 1x1 conv reads X[n, rc, h, w] likewise
    A, B, C = programs.gemm(8, 8, 8)
    assert legal.relayout_axis(sl.create_schedule(C.op)[C]) is None
    X, W1 = sl.placeholder((1, 4, 6, 6), name="X"), sl.placeholder((8, 4), name="W1")
    rc = sl.reduce_axis((0, 4), name="rc")
    conv1 = sl.compute((1, 8, 6, 6), lambda n, f, h, w: sl.sum(X[n, rc, h, w] * W1[f, rc], axis=rc), name="c1")
    assert legal.relayout_axis(sl.create_schedule(conv1.op)[conv1]) is None
    assert not any("relayout" in sk.name for sk in generate_sketches(SearchTask.from_outputs([conv1])))
    n = sl.size_var("n")                         # a symbolic width: no static register tile
    Xs = sl.placeholder((1, 4, 6, n + 2), name="Xs")
    rw = sl.reduce_axis((0, 3), name="rw")
    convs = sl.compute((1, 8, 6, n), lambda b, f, h, w: sl.sum(Xs[b, rc, h, w + rw] * W1[f, rc], axis=[rc, rw]),
                       name="cs")
    assert legal.has_data_reuse(sl.create_schedule(convs.op)[convs])
    assert legal.relayout_axis(sl.create_schedule(convs.op)[convs]) is None
    E = sl.compute((8, 8), lambda i, j: sl.exp(A[i, j]), name="E")
    assert not legal.is_guarded_copy(sl.create_schedule(E.op)[E])


# The first shape in the default suite; the second (a batch of 2, fewer channels than a vector) is slow.
@pytest.mark.parametrize("shape", [(1, 3, 7, 9, 20), pytest.param((2, 5, 5, 6, 7), marks=pytest.mark.slow)])
def test_relayout_candidates_match_torch_on_odd_shapes(shape):
    """Sampled tile_relayout candidates (random register tiles, tails in every loop) build
    bounds-checked and compute the convolution."""
    task = conv_task(*shape)
    evolver = Evolver(task, random.Random(3), policy=SearchPolicy(population=8, generations=0))
    sketches = [sk for sk in evolver.sketches if "relayout" in sk.name]
    # two draws per sketch (pad inlined or not): the first 4 of the 6 this drew before, same seed
    cands = [c for c in (evolver.make(sk) for sk in sketches * 2) if c is not None]
    assert len(cands) >= 4
    for seed, c in enumerate(cands):
        s = task.schedule().apply_json(c.steps_json)
        assert any(st.name.endswith(".local") for st in s.stages)
        check_conv(s, task.args, seed)


def test_relayout_samples_at_the_benchmark_size_are_legal():
    """The register tile is unrolled through splits of the cache's loops by the tile sizes (their
    full extents, 56 x 56 rows and columns, would pass unroll's limit): no draw is refused."""
    from schedlang.autoschedule.sample import sample
    task = conv_task(1, 64, 56, 56, 64)
    sketches = [sk for sk in generate_sketches(task) if "relayout" in sk.name]
    from schedlang.autoschedule.register_tile import fit_rows, tight
    for seed in range(12):
        s, decisions = sample(task, sketches[seed % 2], random.Random(seed))
        vecs, t = decisions["conv|vecs"], task.target
        limit = fit_rows(t, vecs) * vecs if tight(t, 32) else legal.register_tile_budget(t)   # AVX2: may fill 16 ymm
        assert vecs * decisions["conv|reg|w"] * decisions["conv|reg|h"] <= limit


def test_a_small_conv2d_search_finishes_and_is_correct(tmp_path):
    X, W, _, out = sl_kernels.conv2d_stages(1, 4, 8, 8, 16)
    s, args = sl.auto_schedule([out], trials=6, log=str(tmp_path / "conv.jsonl"), seed=0, per_round=6,
                               number=1, repeat=2, verbose=0, policy=SearchPolicy(population=8, generations=1))
    check_conv(s, args)


def prepacked_task(n, c, h, w, f, stride, width=8, target="llvm -mcpu=znver3"):
    """A conv2d task whose weights come packed ahead of time (nn.conv2d_nchw_prepacked)."""
    X = sl.placeholder((n, c, h, w), name="X")
    Wp = sl.placeholder((-(-f // width), c, 3, 3, width), name="Wp")
    return SearchTask(tensors=[X, Wp, nn.conv2d_nchw_prepacked(X, Wp, f, 1, stride)], target=target)


def unpack(wp, f):
    """The [F, C, R, S] weights of pack_conv_weights's blocks."""
    blocks, c, r, q, width = wp.shape
    return wp.transpose(0, 4, 1, 2, 3).reshape(blocks * width, c, r, q)[:f]


def test_pack_conv_weights_round_trips():
    w = np.random.default_rng(0).standard_normal((13, 3, 3, 3), dtype=np.float32)
    wp = nn.pack_conv_weights(w, 8)
    assert wp.shape == (2, 3, 3, 3, 8) and not wp[1, ..., 5:].any()
    assert wp[1, 2, 0, 1, 4] == w[12, 2, 0, 1]
    np.testing.assert_array_equal(unpack(wp, 13), w)
    X, Wp = sl.placeholder((1, 3, 5, 5), name="X"), sl.placeholder((2, 3, 3, 3, 8), name="Wp")
    with pytest.raises(ValueError, match="do not fill"):
        nn.conv2d_nchw_prepacked(X, Wp, 17)


# Stride 2 in the default suite; stride 1 (test_reduction_split_and_row_orders_match_torch samples
# prepacked stride-1 kernels there) is slow.
@pytest.mark.parametrize("shape, stride", [
    pytest.param((1, 5, 9, 11, 13), 1, marks=pytest.mark.slow),    # channels not multiples of 8, odd rows and columns
    ((2, 3, 7, 9, 20), 2),         # stride 2, 20 = 2 blocks of 8 and a tail of 4
])
def test_prepacked_conv_samples_match_torch(shape, stride):
    """The tile_relayout sketch reads prepacked weights as they are (no copy of them in the
    kernel, its vector the blocks' width) and computes what torch does, bounds-checked."""
    n, c, h, w, f = shape
    task = prepacked_task(n, c, h, w, f, stride)
    st = task.schedule()["conv"]
    pos, packs = legal.relayout_axis(st)
    assert st.op.axis[pos].var.name == "f" and packs == [] and legal.relayout_width(st, pos) == 8
    evolver = Evolver(task, random.Random(1), policy=SearchPolicy(population=8, generations=0))
    sketches = [sk for sk in evolver.sketches if "relayout" in sk.name]
    assert len(sketches) == 2                                      # the padding inlined or not
    cands = [c for c in (evolver.make(sk) for sk in sketches * 3) if c is not None]
    assert len(cands) >= 4
    for seed, cand in enumerate(cands):
        s = task.schedule().apply_json(cand.steps_json)
        assert not any(stg.name.startswith("Wp.") for stg in s.stages)          # no packing in the kernel
        assert all(stg.attach_type in ("root", "inline") for stg in s.stages if stg.name == "pad")
        feed, outputs, _ = run(s, task.args, seed)
        X, Wp = task.args[:2]
        (_, got), = outputs
        want = torch.nn.functional.conv2d(torch.from_numpy(feed[X]), torch.from_numpy(unpack(feed[Wp], f)),
                                          padding=1, stride=stride).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(want).max())))


@pytest.mark.parametrize("order", [{"conv|vec_outer_last": True}, {"conv|vec_outer_last": False, "conv|rows_outer": True}])
def test_reduction_split_and_row_orders_match_torch(order):
    """rows_outer puts the channel tiles between the rows and a row's column tiles (h, f, w) and
    vec_outer_last innermost (h, w, f); with either, a reduction split (rsplit) accumulates a
    row of tiles a chunk of input channels at a time (20 = 2 x 8 + 4: a tail chunk). The row
    loop the cache is computed at is fused into the parallel loop (outside it only the batch of
    one: sketch_cpu._fuse_limit)."""
    from schedlang.autoschedule.sample import sample
    task = prepacked_task(1, 20, 7, 9, 13, 1)
    sk = next(sk for sk in generate_sketches(task) if sk.name == "tile_relayout:conv")
    for seed, rsplit in enumerate((8, 16)):
        s, made = sample(task, sk, random.Random(seed), {**order, "conv|rsplit": rsplit, "conv|vecs": 1, "conv|par": 1})
        assert made["conv|rsplit"] == rsplit
        row, *loops = [a.name for a in s["conv"].leaf_iter_vars][:3]
        assert row == "n.outer.h.outer.fused" and s["conv"].annotations[s["conv"].leaf_iter_vars[0]].kind == "parallel"
        assert loops == (["f.outer", "w.outer"] if order.get("conv|rows_outer") else ["w.outer", "f.outer"])
        assert s["conv.local"].attach_ivar is s["conv"].leaf_iter_vars[0]      # a row of tiles
        feed, outputs, _ = run(s, task.args, seed)
        X, Wp = task.args[:2]
        (_, got), = outputs
        want = torch.nn.functional.conv2d(torch.from_numpy(feed[X]), torch.from_numpy(unpack(feed[Wp], 13)),
                                          padding=1).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(want).max())))
