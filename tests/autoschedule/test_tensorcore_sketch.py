"""The tensor-core sketch rule (autoschedule/sketch_tensorcore.py): where it applies (float16 /
bfloat16 matmul and batch matmul of whole m16n8k16 tiles on sm_80+) and where it does not; its
sampled and mutated decisions stay within the block's limits; a few sampled candidates build
with NVRTC for sm_80 without spills and match numpy on the SIMT engine; the estimate counts
mma.sync at the tensor cores' rate, so a short search without a GPU picks a tensor-core
schedule for a float16 GEMM."""
import concurrent.futures as cf
import json
import random
import subprocess
import sys

import numpy as np
import pytest

import schedlang as sl
from schedlang import topi
from schedlang.autoschedule import gpu_estimate, records, sketch_tensorcore
from schedlang.autoschedule.features import feature_dict, features
from schedlang.autoschedule.mutate import mutate
from schedlang.autoschedule.sample import sample
from schedlang.autoschedule.search import SearchPolicy, kernel_hash
from schedlang.autoschedule.sketch import generate_sketches
from schedlang.autoschedule.task import SearchTask
from schedlang.errors import ScheduleError
from schedlang.topi import cuda_tensorcore as tc

SM80 = "cuda -arch=sm_80"
BOTH = ["gpu_tensor_core:C", "gpu_tile:C"]


def sketch_names(tensors, target=SM80):
    return [sk.name for sk in generate_sketches(SearchTask(tensors=list(tensors), target=target))]


def operands(A, B, layout="kn", seed=0):
    """Inputs of A's and B's dtypes and the float64 reference of the (batch) matmul."""
    rng = np.random.default_rng(seed)
    a, b = (rng.uniform(-1, 1, t.shape).astype(sl.dtype(str(t.dtype)).numpy) for t in (A, B))
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    return a, b, a64 @ (b64 if layout == "kn" else np.swapaxes(b64, -1, -2))


# ---- where the rule applies --------------------------------------------------------------------

@pytest.mark.parametrize("shape, kw", [((64, 64, 64), {}), ((32, 48, 96), dict(element="bfloat16")),
                                       ((16, 8, 16), dict(layout="nk")), ((32, 16, 32), dict(batch=3)),
                                       ((48, 24, 32), dict(acc="float16", batch=2, layout="nk"))],
                         ids=["f16", "bf16", "nk", "batch", "f16acc-batch-nk"])
def test_the_rule_applies_to_half_precision_matmul_and_batch_matmul(shape, kw):
    A, B, C = tc.program(*shape, **kw)
    g = tc.match_gemm(C)
    assert (g.M, g.N, g.K, g.layout, g.batch) == (*shape, kw.get("layout", "kn"),
                                                  (kw["batch"],) if "batch" in kw else ())
    assert sketch_names([A, B, C]) == BOTH


def test_the_rule_leaves_other_gemms_to_gpu_tile():
    f32 = topi.nn.matmul(sl.placeholder((64, 64), name="A"), sl.placeholder((64, 64), name="B"))
    assert tc.match_gemm(f32) is None and sketch_names([f32]) == ["gpu_tile:C"]
    for shape in [(60, 64, 64), (64, 36, 64), (64, 64, 40)]:        # not whole m16n8k16 tiles
        A, B, C = tc.program(*shape)
        assert tc.match_gemm(C) is not None and not tc.match_gemm(C).whole_fragments
        assert sketch_names([A, B, C]) == ["gpu_tile:C"], shape
    # bfloat16 accumulates only in float32 on the tensor cores
    A, B, C = tc.program(64, 64, 64, element="bfloat16", acc="float16")
    assert tc.match_gemm(C) is None and sketch_names([A, B, C]) == ["gpu_tile:C"]
    # A read as [k, i]: not the intrinsic's row-major A
    A = sl.placeholder((64, 64), "float16", name="A")
    B = sl.placeholder((64, 64), "float16", name="B")
    k = sl.reduce_axis((0, 64), name="k")
    C = sl.compute((64, 64), lambda i, j: sl.sum(A[k, i].astype("float32") * B[k, j].astype("float32"), axis=k),
                   name="C")
    assert tc.match_gemm(C) is None
    # an architecture without mma.sync m16n8k16 and cp.async
    assert sketch_names(tc.program(64, 64, 64), "cuda -arch=sm_75") == ["gpu_tile:C"]
    assert sketch_names(tc.program(64, 64, 64), "cuda") == BOTH          # sm_90, the default


def test_an_epilogue_stage_keeps_its_own_rule():
    A, B, C = tc.program(32, 32, 32)
    D = sl.compute(C.shape, lambda i, j: sl.max(C[i, j], 0.0).astype("float16"), name="D")
    assert sketch_names([A, B, D]) == ["gpu_simple:D,gpu_tensor_core:C", "gpu_simple:D,gpu_tile:C"]


# ---- decisions -------------------------------------------------------------------------------------

def _check_decisions(d, g, target):
    bi, wi, fi = d["C|tile|i"]
    bj, wj, fj = d["C|tile|j"]
    ko, kf = d["C|tile|k"]
    assert bi * wi * fi * 16 == g.M and bj * wj * fj * 8 == g.N and ko * kf * 16 == g.K
    assert 32 * wi * wj <= target.max_threads_per_block and fi * fj <= sketch_tensorcore.MAX_FRAGMENTS
    BM, BN, BK = 16 * fi * wi, 8 * fj * wj, 16 * kf
    stages = d["C|tc|stages"]
    assert 1 <= stages <= ko and d["C|tc|pad"] in (0, 8) and isinstance(d["C|tc|async"], bool)
    assert sketch_tensorcore.shared_bytes(g, BM, BN, BK, d["C|tc|pad"], stages) <= target.max_shared_memory_per_block


def test_sampled_and_mutated_decisions_stay_within_the_limits():
    """Tiles are exact factorizations, threads, accumulator fragments and shared memory within
    the limits, for fresh samples and for the replays of mutated ones (tile keys are the
    factorizations mutate.py moves prime factors between)."""
    A, B, C = tc.program(256, 128, 512, batch=2)
    task = SearchTask(tensors=[A, B, C], target=sl.Target("cuda", arch="sm_80", max_shared_memory_per_block=16384))
    g = tc.match_gemm(C)
    sketch = generate_sketches(task)[0]
    assert sketch.name == "gpu_tensor_core:C"
    rng = random.Random(3)
    for i in range(12):
        s, d = sample(task, sketch, rng)
        _check_decisions(d, g, task.target)
        child = mutate(d, rng)
        s2, d2 = sample(task, sketch, rng, child)
        _check_decisions(d2, g, task.target)
        # what a replay keeps: a mutated tile that is still a legal factorization
        for key in ("C|tile|i", "C|tile|j", "C|tile|k"):
            if child[key] != d[key] and d2[key] == child[key]:
                assert np.prod(d2[key]) == np.prod(d[key])
    kernel_hash(task, s2)        # within the launch limits


@pytest.mark.parametrize("shape, kw, seed", [((64, 64, 64), {}, 0),
                                             ((32, 48, 96), dict(element="bfloat16", layout="nk"), 1),
                                             ((32, 16, 32), dict(batch=3), 2)],
                         ids=["f16", "bf16-nk", "batch"])
def test_sampled_candidates_build_without_spills_and_match_numpy(shape, kw, seed):
    """One sampled candidate a program (NVRTC is slow: a few, not many): ptxas for sm_80 without
    spills, the SIMT engine's result the numpy product's."""
    A, B, C = tc.program(*shape, **kw)
    task = SearchTask(tensors=[A, B, C], target=SM80)
    s, d = sample(task, generate_sketches(task)[0], random.Random(seed))
    mod = sl.build(s, task.args, target=SM80)
    ptx = mod.get_source("ptx")
    assert "mma.sync.aligned.m16n8k16.row.col.f32" in ptx and "ldmatrix.sync.aligned" in ptx
    if d["C|tc|async"]:
        assert "cp.async" in ptx
    if mod.ptxas_info is not None:
        assert mod.ptxas_info["C_kernel"].spill_bytes == 0, d
    a, b, ref = operands(A, B, kw.get("layout", "kn"), seed)
    c = np.zeros(C.shape, np.float32)
    mod.emulate(a, b, c, engine="simt")
    np.testing.assert_allclose(c, ref, rtol=1e-4, atol=1e-3, err_msg=str(d))


# ---- the estimate and the search -----------------------------------------------------------------

def test_the_estimate_counts_mma_at_the_tensor_rate():
    """A compute-bound kernel: the same flops in mma.sync take the tensor rate (times
    MMA_SYNC_SHARE), on CUDA cores the FP32 rate; the features count mma.sync before any
    profile."""
    flops = 2 * 4096 ** 3
    base = dict(blocks=132 * 4, threads=256, blocks_per_sm=2, load_requests=1, load_sectors=1, store_requests=1,
                store_sectors=1, shared_requests=1, shared_wavefronts=1, barriers=0, arg_bytes=1)
    gpu = gpu_estimate.REFERENCE
    cores = gpu_estimate.estimate_seconds({"k": dict(base, mma=0)}, flops)
    tensor = gpu_estimate.estimate_seconds({"k": dict(base, mma=flops // gpu_estimate.MMA_FLOPS)}, flops)
    expect = gpu.tensor_flops * gpu_estimate.MMA_SYNC_SHARE / gpu.fp32_flops
    assert cores / tensor == pytest.approx(expect, rel=0.01)
    s, args = tc.gemm(64, 64, 96)
    task = SearchTask(tensors=args, target=SM80)
    assert feature_dict(features(task, s), task.target)["mma"] == pytest.approx(np.log2(1 + 64 * 64 * 96 / 2048))


def test_the_estimate_ranks_tensor_cores_ahead_of_cuda_cores():
    """A float16 GEMM: the pipelined tensor-core schedule is estimated faster than tutorial 10's
    register-tiled CUDA-core schedule, and the profile counts its mma.sync exactly."""
    n = 64
    A, B, C = tc.program(n, n, n)
    a, b, _ = operands(A, B)
    times = {}
    for name, s in {"tensor": tc.schedule_matmul(sl.create_schedule(C.op), C, pad=8, async_copy=True, stages=2),
                    "cuda": topi.cuda.schedule_matmul_register_tiled(sl.create_schedule(C.op), C, tile=64, threads=8,
                                                                     vthreads=2, k_tile=8, unroll_k=True)}.items():
        mod = sl.build(s, [A, B, C], target=SM80)
        prof = gpu_estimate.sampled_profile(mod, [a, b, np.zeros((n, n), np.float32)])
        assert prof["C_kernel"]["mma"] == (n ** 3 // 2048 if name == "tensor" else 0)
        times[name] = gpu_estimate.estimate_seconds(prof, 2 * n ** 3)
    assert 0 < times["tensor"] < times["cuda"] / 2


def test_a_short_search_finds_a_tensor_core_schedule(tmp_path):
    """Three trials without a GPU (estimates from the SIMT profile): the best is a tensor-core
    candidate, its emulated result the numpy product's; a fresh process replays it from the log
    (the task declares the rule's intrinsics, which the steps name by key)."""
    A, B, C = tc.program(32, 32, 32)
    log = str(tmp_path / "tc.jsonl")
    with cf.ThreadPoolExecutor(1) as ex:
        s, args = sl.auto_schedule([C], target=SM80, trials=3, log=log, seed=0, verbose=0, executor=ex,
                                   policy=SearchPolicy(population=6, generations=1, elites=2), number=1, repeat=1)
    recs = records.load(log)
    assert all(r["error"] is None for r in recs) and {r["sketch"] for r in recs} == set(BOTH)
    assert records.ranked(recs)[0]["sketch"] == "gpu_tensor_core:C"
    mod = sl.build(s, args, target=SM80)
    assert "sl_mma_m16n8k16_f32_f16(" in mod.get_source("cuda")
    a, b, ref = operands(A, B)
    c = np.zeros((32, 32), np.float32)
    mod.emulate(a, b, c, engine="simt")
    np.testing.assert_allclose(c, ref, rtol=1e-4, atol=1e-3)
    code = ("import warnings, schedlang as sl; from schedlang.topi import cuda_tensorcore as tc; "
            "warnings.simplefilter('error'); A, B, C = tc.program(32, 32, 32); "
            f"print(sl.apply_best({log!r}, [C], target={SM80!r})[0].to_json())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == json.loads(s.to_json())


def test_a_draw_that_does_not_fit_is_a_schedule_error():
    """Shared memory too small for any tile: the sample is pruned (ScheduleError), never built."""
    A, B, C = tc.program(64, 64, 64)
    task = SearchTask(tensors=[A, B, C], target=sl.Target("cuda", arch="sm_80", max_shared_memory_per_block=256))
    with pytest.raises(ScheduleError, match="shared memory"):
        sample(task, generate_sketches(task)[0], random.Random(0))
