"""Default schedules (schedlang/torch/schedules.py) on programs shaped like the frontend's:
each checked against the reference evaluator (bounds-checked and normal builds), with the
structure that makes it fast asserted on its IR."""
import functools
import json
import re
import warnings

import numpy as np
import pytest

import schedlang as sl
from schedlang.torch.fuse import fuse
from schedlang.torch.schedules import default_schedule, k_run, nt_tile
from tests.helpers import CHECKED, assert_close, assert_matches_reference, random_input
from tests.torch import frontend_like as P

HOST = sl.Target.create("llvm")
F32 = HOST.native_lanes(32)


def scheduled(program, *a, target=HOST, **kw):
    args, outs = program(*a, **kw)
    s = default_schedule(outs, target)
    return s, args, outs


def fused(outs):
    """A schedule of outs with fuse's inlining applied (no kernel scheduled yet)."""
    s = sl.create_schedule([t.op for t in outs])
    fuse(s)
    return s


def tile_text(s, args):
    return str(sl.lower(s, args))


# ---- pointwise -------------------------------------------------------------------------

def test_silu_and_mul_is_one_parallel_vectorized_nest_without_buffers():
    s, args, _ = scheduled(P.silu_and_mul, 32, 64)
    assert_matches_reference(s, args)
    mod = sl.build(s, args)
    loop, tile = mod.ir["loop"], tile_text(s, args)
    assert "alloc" not in tile, "an intermediate of SiluAndMul was materialized"
    assert len(re.findall(r"^\s*(?:for|parallel)\b", str(loop), re.M)) == 3, "not one loop nest"
    assert tile.count("parallel") == 1
    assert f"vectorized k.inner in 0..{2 * F32}:" in tile, tile
    kernel = str(mod.ir["kernel"])
    assert f"f32x{2 * F32}" in kernel, "the stores are not native-width vectors"


def test_pointwise_lanes_follow_the_target():
    avx2 = sl.Target.create("llvm -mcpu=haswell")
    s, args, _ = scheduled(P.silu_and_mul, 4, 64, target=avx2)
    assert avx2.native_lanes(32) == 8
    assert "vectorized k.inner in 0..16:" in tile_text(s, args)
    s, args, _ = scheduled(P.silu_and_mul, 4, 64, target=sl.Target.create("llvm -mcpu=skylake-avx512"))
    assert "vectorized k.inner in 0..32:" in tile_text(s, args)


@pytest.mark.parametrize("shape", [(1, 1, 1), (1, 7, 13), (3, 5, 31)])
def test_residual_add_with_broadcast_odd_shapes(shape):
    s, args, _ = scheduled(P.residual_add, *shape)
    assert_matches_reference(s, args)
    assert "alloc" not in tile_text(s, args)


def test_few_rows_run_the_vector_chunks_in_parallel():
    s, args, _ = scheduled(P.silu_and_mul, 1, 1000)
    assert_matches_reference(s, args)
    tile = tile_text(s, args)
    assert re.search(r"parallel i\.j\.k\.outer\.fused", tile), tile


# ---- rows: softmax, norms, reductions ------------------------------------------------------

@pytest.mark.parametrize("shape", [(2, 5, 64), (1, 1), (3, 97)])
def test_softmax_reductions_computed_per_row(shape):
    s, args, _ = scheduled(P.softmax, shape)
    assert_matches_reference(s, args)
    tile = tile_text(s, args)
    assert tile.count("parallel") == 1, "the reductions are not in the row loop"
    for red in ("softmax_amax", "softmax_sum"):
        assert re.search(rf"alloc {red}: f32\[1(, 1)*\] local", tile), tile


def test_softmax_reductions_use_vector_partials_along_the_row():
    s, args, _ = scheduled(P.softmax, (4, 64))
    tile = tile_text(s, args)
    assert re.search(rf"alloc softmax_amax\.rf: f32\[1, 1, {F32}\] local", tile), tile
    assert f"vectorized k.inner in 0..{F32}:" in tile


@pytest.mark.parametrize("shape", [(4, 64), (3, 97), (2, 3, 200)])
def test_softmax_numerators_computed_once_a_row(shape):
    """exp(x - max), read by the sum and by the output, is computed into a row buffer at the
    row loop (vectorized), not once in each loop."""
    s, args, _ = scheduled(P.softmax, shape)
    assert_matches_reference(s, args)
    tile = tile_text(s, args)
    assert tile.count("exp(") == 1, tile
    assert re.search(rf"alloc softmax_exp: f32\[1(, 1)*, {shape[-1]}\] local", tile), tile
    assert tile.count("parallel") == 1, tile
    assert re.search(r"vectorized [\w.]+ in 0\.\.\d+:\n(\s*if [^\n]*\n)?\s*softmax_exp\[", tile), tile


def test_one_long_row_is_split_over_the_cores():
    s, args, _ = scheduled(P.softmax, (1, 5000))
    assert_matches_reference(s, args)
    tile = tile_text(s, args)
    assert "parallel k.outer in 0.." in tile and "parallel k2.outer in 0.." in tile, tile
    assert re.search(r"parallel i0\.i1\.outer\.fused", tile)


def test_layer_norm_one_kernel():
    s, args, _ = scheduled(P.layer_norm, 6, 32)
    assert_matches_reference(s, args)
    tile = tile_text(s, args)
    assert tile.count("parallel") == 1 and "global" not in tile, tile


def test_rms_norm_one_kernel():
    s, args, _ = scheduled(P.rms_norm, 5, 48)
    assert_matches_reference(s, args)
    assert tile_text(s, args).count("parallel") == 1


def test_argmax_and_row_sum():
    s, args, _ = scheduled(P.argmax, 7, 13)
    assert_matches_reference(s, args)
    s, args, _ = scheduled(P.row_sum, 1, 5000)          # one long row: split over the cores
    assert_matches_reference(s, args)
    tile = tile_text(s, args)
    assert "parallel k.outer" in tile and "sum.rf" in tile, tile
    s, args, _ = scheduled(P.row_sum, 9, 64)            # many rows: parallel rows, vector partials
    assert_matches_reference(s, args)
    assert "parallel i" in tile_text(s, args)


@pytest.mark.parametrize("program, shape", [(P.row_sum, (1, 99_991)), (P.row_sum, (1, 8192)),
                                            (P.sum_two_axes, (1, 37, 1000)), (P.argmax, (1, 5003))])
def test_a_long_reduction_runs_in_parallel_chunks_on_vector_partials(program, shape):
    """Few outputs, a long reduction: parallel chunks of whole vectors (a prime length masks
    only the last one's tail), each reduced on vector partials, not one scalar at a time
    (17x slower on a million floats); TVM's argmax, whose ties follow the loop's order (not
    commutative), keeps scalar chunks."""
    s, args, outs = scheduled(program, *shape)
    assert_matches_reference(s, args)                    # (bounds-checked too)
    tile = tile_text(s, args)
    assert re.search(r"parallel [\w.]+ in 0\.\.", tile), tile
    assert ("vectorized" in tile) == (len(outs) == 1), tile


def test_column_sum_vectorizes_the_outputs_and_a_two_axis_sum_its_last_axis():
    s, args, _ = scheduled(P.column_sum, 50, 40)
    assert_matches_reference(s, args)
    tile = tile_text(s, args)
    assert re.search(r"for k in 0..50:\n\s+vectorized j.inner in 0..", tile), tile
    s, args, _ = scheduled(P.sum_two_axes, 4, 6, 40)
    assert_matches_reference(s, args)
    assert "vectorized k2.inner" in tile_text(s, args)


def test_bad_arguments():
    with pytest.raises(ValueError, match="no output tensors"):
        default_schedule([], HOST)
    with pytest.raises(ValueError, match="unknown target"):
        default_schedule(P.row_sum()[1], "tpu")


# ---- matmul ----------------------------------------------------------------------------

@pytest.mark.parametrize("act", [None, "relu", "gelu"])
def test_linear_epilogue_fused_into_the_register_tile(act):
    s, args, _ = scheduled(P.linear, 37, 45, 32, act=act)
    assert_matches_reference(s, args)
    tile = tile_text(s, args)
    assert tile.count("parallel") == 1, "the epilogue is a kernel of its own"
    mr, nr, _ = nt_tile(HOST)             # 4 x 4 with 32 vector registers, 4 x 2 with 16
    assert re.search(rf"alloc mm\.rf: f32\[{mr}, {nr}, {F32}\] local", tile), tile
    assert f"vectorized k.inner in 0..{F32}:" in tile and "unrolled" in tile


def test_matmul_nn_register_tile():
    s, args, _ = scheduled(P.matmul_nn, 37, 45, 29)
    assert_matches_reference(s, args)
    tile = tile_text(s, args)
    rows, cols = (8, 32) if F32 >= 16 else (4, 16)      # register_rows x panel_width
    assert re.search(rf"alloc mm\.global: f32\[{rows}, {cols}\]", tile), tile
    assert f"vectorized j.c.inner in 0..{cols}:" in tile


@pytest.mark.parametrize("shape", [(3, 7, 8, 17), (2, 13, 5, 40), (4, 1, 16, 3)])
def test_matmul_reading_merged_heads_splits_k_at_the_runs(shape):
    """A read through a head merge ([H, M, D] as [M, H * D]): k split at D, so that A's index
    is affine in the inner k loop; bounds-checked and plain builds match the reference."""
    h, m, d, n = shape
    s, args, outs = scheduled(P.merged_heads_matmul, *shape)
    assert k_run(fused(outs), outs[0]) == d
    assert f"for k.outer in 0..{h}:" in tile_text(s, args), tile_text(s, args)   # runs of d
    assert_matches_reference(s, args)          # a bounds-checked build, then a plain one
    s, args, outs = scheduled(P.matmul_nn, 37, 45, 29)
    assert k_run(fused(outs), outs[0]) is None
    assert "k.inner" not in tile_text(s, args), "a contiguous A keeps its whole k loop"


def test_matmul_tiles_follow_the_target():
    avx2 = sl.Target.create("llvm -mcpu=haswell")
    s, args, _ = scheduled(P.matmul_nn, 64, 64, 64, target=avx2)
    assert "alloc mm.global: f32[4, 16]" in tile_text(s, args)     # 4 x 2 ymm accumulators
    avx512 = sl.Target.create("llvm -mcpu=skylake-avx512")
    s, args, _ = scheduled(P.matmul_nn, 64, 64, 64, target=avx512)
    assert "alloc mm.global: f32[4, 64]" in tile_text(s, args)     # 4 x 4 zmm (6 rows leave a tail of 64)
    s, args, _ = scheduled(P.matmul_nn, 96, 64, 64, target=avx512)
    assert "alloc mm.global: f32[6, 64]" in tile_text(s, args)     # 6 x 4 zmm accumulators
    s, args, _ = scheduled(P.matmul_nn, 64, 48, 64, target=avx512)
    assert "alloc mm.global: f32[8, 32]" in tile_text(s, args)     # narrower than 4 zmm: 8 x 2
    s, args, _ = scheduled(P.matmul_nn, 64, 64, 3072, target=avx512)
    assert "alloc mm.global: f32[4, 64]" in tile_text(s, args)     # a 3072 x 64 panel: four zmm too
    s, args, _ = scheduled(P.linear, 64, 64, 64, target=avx2)
    assert "alloc mm.rf: f32[4, 2, 8]" in tile_text(s, args)       # 8 of the 16 ymm accumulate
    s, args, _ = scheduled(P.linear, 64, 64, 64, target=avx512)
    assert "alloc mm.rf: f32[4, 4, 16]" in tile_text(s, args)      # 16 of the 32 zmm accumulate
    s, args, _ = scheduled(P.linear, 1, 64, 64)                     # one row: a wider tile
    assert f"alloc mm.rf: f32[1, 8, {F32}]" in tile_text(s, args)
    assert_matches_reference(s, args)


@pytest.mark.parametrize("shape", [(1, 1, 1), (7, 13, 5), (2, 31, 17)])
def test_matmul_odd_shapes(shape):
    for program in (P.matmul_nn, lambda M, N, K: P.linear(M, N, K, act="relu")):
        s, args, _ = scheduled(program, *shape)
        assert_matches_reference(s, args)


def test_batch_matmul():
    s, args, _ = scheduled(P.bmm, 3, 9, 20, 17)
    assert_matches_reference(s, args)
    assert "parallel z.j.outer.i.outer.fused" in tile_text(s, args)


def test_swiglu_gate_and_up_share_one_tile_with_the_silu_mul():
    s, args, outs = scheduled(P.swiglu, 10, 32, 48)
    assert_matches_reference(s, args)
    tile = tile_text(s, args)
    assert tile.count("parallel") == 2, "gate, up and silu*mul should be one kernel, down another"
    assert "alloc gate.rf" in tile and "alloc up.rf" in tile and "alloc mul:" in tile


# ---- symbolic batch ----------------------------------------------------------------------

def _run_symbolic(s, args, outs, sizes, seed=0):
    rng = np.random.default_rng(seed)
    arrays, feed = [], {}
    for t in args:
        shape = tuple(sizes.get(e, e) for e in t.shape)
        if t in outs:
            arrays.append(np.full(shape, 7, t.dtype))
        else:
            feed[t] = random_input(shape, t.dtype, rng)
            arrays.append(feed[t])
    for target in (CHECKED, HOST):
        sl.build(s, args, target=target)(*arrays)
        for t, want in zip(outs, sl.reference(outs, feed)):
            assert_close(arrays[args.index(t)], want, str(t.dtype), name=t.name)


@pytest.mark.parametrize("program", ["silu", "rms_norm", "linear"])
def test_symbolic_batch(program):
    n = sl.size_var("n")
    if program == "silu":
        args, outs = P.silu_and_mul(5, 40, batch=n)
    elif program == "rms_norm":
        args, outs = P.rms_norm(3, 48, batch=n)
    else:
        args, outs = P.linear(6, 20, 16, act="relu", batch=n)
    s = default_schedule(outs, HOST)
    for size in (1, 3):
        _run_symbolic(s, args, outs, {n: size})


# ---- robustness: the schedule-invariance programs ---------------------------------------------

INVARIANCE_PROGRAMS = ["gemm_i32_7x16x5", "gemm_i8_5x17x11", "gemm_packed_7x24x13_bn8", "conv2d_3x7x7_co4_k33_p1",
                       "eltwise_f16_7x33", "rowmax_i32_5x37", "rowprod_7x13", "indexmaps_9x12_5", "blur_f64_7x33",
                       "intmix_7x13", "masked_9x13", "tuple_outputs_7x13"]


@pytest.mark.parametrize("name", INVARIANCE_PROGRAMS)
def test_default_schedule_of_other_programs(name):
    """Programs the frontend does not make (int and float64 dtypes, packed GEMM, conv2d, masked
    and tuple reductions, padding): the default schedule is still right, bounds-checked too."""
    from tests.lowering.random_schedules import all_programs, checked_target, run_case
    program = all_programs()[name]
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # no kernel falls back to plain loops
        s = default_schedule(program.outputs, HOST)
    for target in (HOST, checked_target()):
        assert run_case(program, s, seed=3, target=target) is None


def test_a_schedule_error_leaves_the_kernel_plain(monkeypatch):
    from schedlang.torch import schedules
    args, outs = P.silu_and_mul(4, 32)

    def broken(s, st, target):
        s[st].parallel(s[st].op.axis[0])
        s[st].parallel(s[st].op.axis[1])        # nested parallel: a ScheduleError

    monkeypatch.setattr(schedules, "schedule_pointwise_cpu", broken)
    with pytest.warns(UserWarning, match="kernel 'mul' keeps its plain loops"):
        s = default_schedule(outs, HOST)
    assert "parallel" not in str(s)
    assert_matches_reference(s, args)


# ---- tuning records ------------------------------------------------------------------------

def test_a_tuning_record_replaces_the_default(tmp_path):
    from schedlang.autoschedule import records
    from schedlang.autoschedule.task import SearchTask
    args, outs = P.silu_and_mul(4, 32)
    log = str(tmp_path / "records.jsonl")
    assert default_schedule(outs, HOST, log=log).steps == default_schedule(outs, HOST).steps  # no record
    task = SearchTask.from_outputs(outs, HOST)
    tuned = task.schedule()
    for st in tuned.stages:
        if st.op is not outs[0].op and isinstance(st.op, sl.tensor.ComputeOp):
            st.compute_inline()
    tuned[outs[0]].unroll(tuned[outs[0]].op.axis[0])
    steps = json.loads(tuned.to_json())
    records.append(log, [records.make_record(task.workload_key, str(task.target), steps, "h0", [1e-6], None, 1)])
    s = default_schedule(outs, HOST, log=log)
    assert "unroll" in str(s) and "parallel" not in str(s)
    assert_matches_reference(s, args)


# ---- CUDA: compiled by NVRTC, run on the CPU through the g++ shim ------------------------------

CUDA_PROGRAMS = {
    "silu_and_mul": lambda: P.silu_and_mul(3, 50),
    "softmax": lambda: P.softmax((5, 37)),
    "linear_gelu": lambda: P.linear(19, 21, 13, act="gelu"),
    "bmm": lambda: P.bmm(2, 9, 20, 7),
    "argmax": lambda: P.argmax(7, 13),
}


@functools.cache
def _cuda_programs_emulated():
    """name -> (args, outs, their arrays after the run, the reference's outputs): every program
    of CUDA_PROGRAMS scheduled and built as one module (the programs share nothing, so each
    keeps its kernels) and run once through the shim: one g++ run, not one per program."""
    from tests.target.cuda.schedules import arrays_for
    programs = {name: CUDA_PROGRAMS[name]() for name in sorted(CUDA_PROGRAMS)}
    all_args = [a for args, _ in programs.values() for a in args]
    all_outs = [t for _, outs in programs.values() for t in outs]
    s = default_schedule(all_outs, "cuda")
    arrays, feed = arrays_for(s, all_args)
    sl.build(s, all_args, target="cuda").emulate(*arrays)
    return {name: (args, outs, [arrays[all_args.index(a)] for a in args], sl.reference(outs, feed))
            for name, (args, outs) in programs.items()}


@pytest.mark.parametrize("name", sorted(CUDA_PROGRAMS))
def test_cuda_default_schedules_emulated(name):
    pytest.importorskip("cuda.bindings")
    args, outs = CUDA_PROGRAMS[name]()
    src = sl.build(default_schedule(outs, "cuda"), args, target="cuda").get_source("cuda")
    assert "blockIdx.x" in src and "threadIdx.x" in src
    args, outs, arrays, wants = _cuda_programs_emulated()[name]
    for t, want in zip(outs, wants):
        assert_close(arrays[args.index(t)], want, str(t.dtype), name=t.name)
    if name == "linear_gelu":
        assert src.count("__global__") == 1, "the matmul epilogue is a kernel of its own"


def test_silu_and_mul_default_is_the_benchmarks_best_hand_schedule():
    """benchmarks/sl_kernels.py's SiluAndMul (rows parallel, columns in vectors of 32: the best
    factor measured on AVX-512) and the default schedule give the same LLVM IR on AVX-512."""
    import importlib.util
    import pathlib
    path = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "sl_kernels.py"
    spec = importlib.util.spec_from_file_location("sl_kernels", path)
    kernels = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(kernels)
    target = sl.Target.create("llvm -mcpu=skylake-avx512")
    x, out = kernels.silu_program(64, 512)
    mine = sl.build(default_schedule([out], target), [x, out], target=target, name="silu_mul")
    assert mine.get_source("ll") == kernels.silu_and_mul(target, 64, 512, 32).get_source("ll")
