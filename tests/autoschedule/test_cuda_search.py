"""The auto-scheduler for target="cuda": sketches bind every stage to the GPU, every sampled
candidate replays and builds with NVRTC, a small search returns a schedule whose result
(run on the CPU by the SIMT interpreter) matches numpy, records say the time is an
estimate (no GPU here) and print_best prints replayable Python."""
import concurrent.futures as cf
import io
import json
import random

import numpy as np
import pytest

import schedlang as sl
from schedlang.topi import nn
from tests import programs
from schedlang.autoschedule import gpu_estimate, records
from schedlang.autoschedule.features import feature_dict, feature_names, features
from schedlang.autoschedule.sample import sample
from schedlang.autoschedule.search import SearchPolicy, kernel_hash
from schedlang.autoschedule.sketch import generate_sketches
from schedlang.autoschedule.task import SearchTask
from schedlang.errors import LoweringError, ScheduleError
from schedlang.schedule import legal
from schedlang.target.cuda.gpu import gpu_problem

TINY = SearchPolicy(population=6, generations=1, elites=2)


def gemm(n=64):
    return list(programs.gemm(n, n, n)), lambda a, b: a @ b


def elementwise(n=1000):
    A = sl.placeholder((n,), name="A")
    B = sl.compute((n,), lambda i: sl.exp(A[i]) * 2.0, name="B")
    return [A, B], lambda a: np.exp(a) * 2.0


def row_sum(rows=40, cols=100):
    X = sl.placeholder((rows, cols), name="X")
    return [X, nn.row_reduce(X)], lambda x: x.sum(axis=1)


def softmax(rows=6, cols=70):
    X = sl.placeholder((rows, cols), name="X")
    Y = nn.softmax(X, name="Y")

    def ref(x):
        e = np.exp(x - x.max(1, keepdims=True))
        return e / e.sum(1, keepdims=True)
    return [X, Y], ref


def batch_matmul(b=2, n=8, m=12, k=8):
    return list(programs.batch_matmul(b, n, m, k)), lambda a, bb: a @ bb


def task_of(program):
    args, _ = program
    return SearchTask(tensors=args, target="cuda")


def emulated(s, args, inputs):
    """The outputs of s built for cuda and run by the SIMT interpreter (every access checked)."""
    mod = sl.build(s, args, target="cuda")
    outs = [np.zeros(t.shape, np.float32) for t in args[len(inputs):]]
    mod.emulate(*inputs, *outs, engine="simt")
    return outs


# ---- sketches and samples -------------------------------------------------------------------

def test_cuda_sketches_follow_the_tensor_ir():
    assert [sk.name for sk in generate_sketches(task_of(gemm(16)))] == ["gpu_tile:C"]
    assert [sk.name for sk in generate_sketches(task_of(elementwise()))] == ["gpu_simple:B"]
    assert [sk.name for sk in generate_sketches(task_of(row_sum()))] == ["gpu_cross_thread:Y", "gpu_thread_row:Y"]
    names = [sk.name for sk in generate_sketches(task_of(softmax()))]
    assert all("inline:expval" in n and "gpu_simple:Y" in n for n in names) and len(names) == 4
    # the CPU sketches are unchanged
    assert [sk.name for sk in generate_sketches(SearchTask(tensors=gemm(16)[0]))] == [
        "tile:C", "tile_cache_write:C", "tile_pack:C"]


@pytest.mark.parametrize("program", [gemm(16), row_sum(), softmax(), batch_matmul()],
                         ids=["gemm", "row_sum", "softmax", "batch_matmul"])
def test_every_sampled_cuda_candidate_replays_builds_and_computes_the_result(program):
    """Samples that pass the checks before a build (the search's pruning) replay from their
    step JSON, build with NVRTC and compute the reference result; the rest fail with a
    ScheduleError or LoweringError, never another error."""
    args, ref = program
    task = task_of(program)
    rng = random.Random(1)
    inputs = [np.random.default_rng(0).uniform(-1, 1, t.shape).astype(np.float32) for t in task.inputs]
    want = ref(*inputs)
    built = 0
    sketches = generate_sketches(task)
    for i, sketch in enumerate(sketches * (3 - min(2, len(sketches)))):
        try:
            s, decisions = sample(task, sketch, rng)
            kernel_hash(task, s)
        except (ScheduleError, LoweringError):
            continue
        again = task.schedule().apply_json(s.to_json())
        assert again.to_json() == s.to_json()
        mod = sl.build(again, task.args, target="cuda")
        assert "threadIdx.x" in mod.get_source() and mod.ptxas_info is not None
        if i < 2:
            (got,) = emulated(again, task.args, inputs)
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
        built += 1
    assert built >= 2


def test_cuda_samples_respect_the_launch_limits():
    """A candidate with more than 1024 threads a block or shared memory over the target's limit
    is pruned before any build (kernel_hash raises LoweringError, as build() would); random
    samples that pass are within both limits."""
    from schedlang.driver import lower_tile_to_kernel
    from schedlang.autoschedule.features import tile_ir
    from schedlang.kernel.launch import shared_bytes
    from schedlang.kernel.launch import threads_per_block
    task = SearchTask(tensors=gemm(256)[0], target=sl.Target("cuda", max_shared_memory_per_block=4096))
    sketch = generate_sketches(task)[0]
    rng = random.Random(0)
    tiles = lambda ti, tj, ti_in, tj_in, k: {"C|tile|i": [0, 1, ti, ti_in], "C|tile|j": [0, 1, tj, tj_in],  # noqa
                                             "C.local|tile|k": [0, k], "C.local|shared": True,
                                             "C.local|unroll": 0}
    for given, problem in [(tiles(64, 32, 1, 1, 4), "threads a block"), (tiles(16, 16, 4, 4, 64), "shared memory"),
                           (tiles(8, 8, 1, 1, 4), None)]:
        s, decisions = sample(task, sketch, rng, given)
        assert decisions == {k: [256 // (v[2] * v[3]), 1, v[2], v[3]] if "|tile|i" in k or "|tile|j" in k
                             else ([256 // v[1], v[1]] if "tile" in k else v) for k, v in given.items()}
        if problem is None:
            kernel_hash(task, s)
        else:
            with pytest.raises(LoweringError, match=problem):
                kernel_hash(task, s)
    for _ in range(6):
        s, _ = sample(task, sketch, rng)
        kernels = lower_tile_to_kernel(tile_ir(s, task.args), s, task.target).kernels
        over = any(threads_per_block(k) > 1024 or shared_bytes(k) > 4096 for k in kernels)
        try:
            kernel_hash(task, s)
            assert not over
        except LoweringError:
            assert over


def test_cross_thread_counts_are_the_ones_the_lowering_accepts():
    target = sl.Target.create("cuda")
    assert legal.cross_thread_counts(target, 100) == [2, 4, 8, 16, 32, 64]
    assert all(legal.is_cross_thread_extent(n) for n in legal.cross_thread_counts(target, 4096))
    assert not legal.is_cross_thread_extent(24) and not legal.is_cross_thread_extent(48)
    assert legal.thread_counts(target) == [32, 64, 128, 256, 512, 1024]
    assert legal.thread_counts(sl.Target("cuda", max_threads_per_block=256)) == [32, 64, 128, 256]


# ---- features and the estimate -----------------------------------------------------------------

def test_cuda_features_add_the_launch_and_profile_figures():
    task = task_of(gemm(32))
    s, _ = sample(task, generate_sketches(task)[0], random.Random(0))
    vec = features(task, s)
    names = feature_names(task.target)
    assert vec.shape == (len(names),)
    f = feature_dict(vec, task.target)
    assert f["max_threads_per_block"] > 0 and f["blocks"] > 0
    assert np.isnan(f["profile_sectors_per_request"])       # not measured yet: missing
    mod = sl.build(s, task.args, target="cuda")
    arrays = [np.ones(t.shape, np.float32) for t in task.args]
    prof = gpu_estimate.sampled_profile(mod, arrays)
    simt = mod.emulate(*arrays, engine="simt", profile=True)
    for name, p in prof.items():     # the whole grid is small: the figures are the profile's own
        assert p["sampled_blocks"] == p["blocks"] == simt[name].blocks
        assert p["load_sectors"] == simt[name].load_sectors and p["barriers"] == simt[name].barriers
    from schedlang.autoschedule.features import with_profile
    filled = feature_dict(with_profile(vec, task.target, gpu_estimate.profile_summary(prof)), task.target)
    assert np.isfinite(list(filled.values())).all()


def test_the_estimate_prefers_coalesced_shared_tiles_to_a_naive_kernel():
    """The model's direction on two known schedules of one GEMM: TVM's shared-memory tiling
    beats one thread per element reading A and B from global memory."""
    from tests.target.cuda import schedules
    times = {}
    for name, (s, args) in {"naive": schedules.tiled_gemm(256, 256, 256),
                            "shared": schedules.shared_gemm(256, 256, 256)}.items():
        mod = sl.build(s, args, target="cuda")
        arrays, _ = schedules.arrays_for(s, args)
        flops = 2 * 256 ** 3
        prof = gpu_estimate.sampled_profile(mod, arrays, max_lanes=2048)      # 16 of the 512 blocks
        times[name] = gpu_estimate.estimate_seconds(prof, flops)
    assert 0 < times["shared"] < times["naive"]


def test_sampled_profile_scales_the_counters_of_a_big_grid():
    A = sl.placeholder((1 << 14,), name="A")
    B = sl.compute((1 << 14,), lambda i: A[i] + 1.0, name="B")
    s = sl.create_schedule(B.op)
    bo, bi = s[B].split(B.op.axis[0], factor=64)
    s[B].bind(bo, sl.thread_axis("blockIdx.x"))
    s[B].bind(bi, sl.thread_axis("threadIdx.x"))
    mod = sl.build(s, [A, B], target="cuda")
    arrays = [np.zeros(1 << 14, np.float32), np.zeros(1 << 14, np.float32)]
    full = gpu_estimate.sampled_profile(mod, arrays)["B_kernel"]
    part = gpu_estimate.sampled_profile(mod, arrays, max_lanes=1024)["B_kernel"]
    assert part["sampled_blocks"] == 16 and full["sampled_blocks"] == 256
    for k in ("load_requests", "load_sectors", "store_sectors"):
        assert part[k] == full[k]


# ---- the search ---------------------------------------------------------------------------------

@pytest.mark.parametrize("program,trials", [(elementwise(), 3), (gemm(64), 4), (row_sum(), 3)],
                         ids=["elementwise", "gemm64", "row_sum"])
def test_a_small_cuda_search_returns_a_correct_schedule(tmp_path, program, trials):
    args, ref = program
    log = str(tmp_path / "cuda.jsonl")
    with cf.ThreadPoolExecutor(1) as ex:
        s, got_args = sl.auto_schedule([args[-1]], target="cuda", trials=trials, log=log, seed=0, verbose=0,
                                       executor=ex, policy=TINY, number=1, repeat=1)
    assert got_args == args
    inputs = [np.random.default_rng(3).uniform(-1, 1, t.shape).astype(np.float32) for t in args[:-1]]
    (out,) = emulated(s, args, inputs)
    np.testing.assert_allclose(out, ref(*inputs), rtol=1e-4, atol=1e-4)
    recs = records.load(log, target="cuda -arch=sm_90")
    assert len(recs) == trials and all(r["error"] is None for r in recs)
    no_gpu = gpu_problem() is not None
    for r in recs:       # without a GPU every time is the model's estimate, and says so
        assert r["estimated"] is no_gpu and r["median_s"] > 0
        assert r["timing"].startswith("estimate:") if no_gpu else r["timing"] == "gpu"
        if no_gpu:
            assert r["profile"] and all("load_sectors" in p for p in r["profile"].values())
    best = records.ranked(recs)[0]
    assert s.to_json() == sl.apply_best(log, [args[-1]], target="cuda")[0].to_json()
    assert json.loads(s.to_json()) == best["steps"]
    if trials == 4:      # the GEMM: print_best's Python rebuilds the schedule
        text = sl.print_best(log, [args[-1]], target="cuda", file=io.StringIO())
        assert ("ESTIMATED" in text) is no_gpu and "sl.thread_axis('threadIdx.x')" in text and ".bind(" in text
        A, B, C = args
        scope = {"sl": sl, "A": A, "B": B, "C": C}
        exec(text, scope)
        assert scope["s"].to_json() == s.to_json()


def test_bad_targets_and_shapes_are_clear_errors(tmp_path):
    args, _ = elementwise()
    with pytest.raises(ValueError, match="unknown target 'opencl'"):
        sl.auto_schedule([args[-1]], target="opencl", trials=1, log=str(tmp_path / "x.jsonl"), verbose=0)
    n = sl.var("n")
    A = sl.placeholder((n,), name="A")
    B = sl.compute((n,), lambda i: A[i] + 1.0, name="B")
    with pytest.raises(ValueError, match="static shapes"):
        sl.auto_schedule([B], target="cuda", trials=1, log=str(tmp_path / "y.jsonl"), verbose=0)


def test_the_cost_model_trains_on_profiled_cuda_features_and_ranks_unprofiled_ones():
    """Measured candidates carry the profile figures, candidates not measured yet have them
    missing (NaN): the model trains on the first and still ranks the second, by the figures
    they share (here the block size, which the fake times follow)."""
    pytest.importorskip("lightgbm")
    from schedlang.autoschedule.cost_model import CostModel
    from schedlang.autoschedule.features import with_profile
    task = task_of(elementwise(4096))
    sketch = generate_sketches(task)[0]
    xs, times, threads = [], [], []
    for i, n in enumerate([32, 64, 128, 256, 512, 1024] * 2):
        s, d = sample(task, sketch, random.Random(i), {"B|threads": n, "B|vec": bool(i % 2)})
        x = features(task, s)
        prof = {"global_requests": 100.0 + n, "occupancy": 1.0}
        xs.append((with_profile(x, task.target, prof), x))
        times.append(1e-6 * (1 + abs(np.log2(n) - 7)))      # 128 threads is the fastest
        threads.append(n)
    model = CostModel(seed=0)
    model.update([p for p, _ in xs], times)
    assert model.trained
    scores = model.predict([x for _, x in xs])      # without the profile figures
    assert np.isfinite(scores).all()
    assert threads[int(np.argmax(scores))] in (64, 128, 256)
