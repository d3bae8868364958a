"""
Tutorial 10: a float16 GEMM on tensor cores, from CUDA cores to a pipelined cp.async kernel
==========================================================================================

Tutorial 7 made C = A @ B fast on a GPU's CUDA cores, one multiply-add per thread and
instruction. An NVIDIA GPU since Volta also has *tensor cores*: a warp's 32 threads together
multiply a 16 x 16 tile of float16 (or bfloat16) by a 16 x 8 tile and add it to a 16 x 8
float32 accumulator in one instruction (`mma.sync.aligned.m16n8k16`), several times the
CUDA cores' throughput (an H200: about 989 TFLOP/s dense fp16 against 67 TFLOP/s fp32).
This tutorial takes one GEMM, float16 in and float32 accumulated, through the steps:

  0. CUDA cores: tutorial 7's register-tiled schedule, on float16 operands,
  1. tensorize: each warp's tile computed by mma.sync on *fragments* (scope "warp": each
     lane holds 1/32 of a tile), loaded from shared memory by `ldmatrix`,
  2. storage_align: the shared tiles' rows padded so that ldmatrix has no bank conflicts,
  3. cp.async: the shared tiles fetched by asynchronous 16-byte copies (sm_80+),
  4. a 3-stage software pipeline: the copies for the next k steps in flight while the
     tensor cores work on this one (`s[S].pipeline(3)`, double_buffer generalized).

No GPU is needed. Each step is compiled by NVRTC (ptxas, where it is on PATH, reports
registers and spills), run on the CPU by the SIMT engine (`engine="simt"`: the Kernel IR
interpreted a warp at a time, with the PTX ISA's per-lane fragment layouts of ldmatrix and
mma) and by the shim (`engine="shim"`: the generated CUDA C compiled by g++, the intrinsics'
portable C++ definitions), checked against numpy, and profiled: bank conflicts, barriers,
occupancy. The schedule is the library's: `schedlang.topi.cuda_tensorcore`, which the tests
use too; read its source beside this script.

    python tutorials/10_tensor_cores.py               # 128 x 128 x 256
    python tutorials/10_tensor_cores.py --size 256    # M = N = K, a multiple of 64
    python tutorials/10_tensor_cores.py --quick       # 64 x 64 x 96, what CI runs
"""
import argparse
import time

import numpy as np

import schedlang as sl
from schedlang import topi
from schedlang.topi import cuda_tensorcore as tc
from _common import format_seconds, header, parse_args  # noqa: E402 (the tutorials' shared helpers)

parser = argparse.ArgumentParser(description=__doc__.split("\n")[1])
parser.add_argument("--size", type=int, default=None,
                    help="M = N = K (a multiple of 64; default 128 x 128 x 256, --quick 64 x 64 x 96)")
args = parse_args(__doc__, parser)
if args.size is not None and (args.size % 64 or args.size < 64):
    parser.error("--size must be a positive multiple of 64 (the block tile is 64 x 64, the k step 32)")
M, N, K = (args.size,) * 3 if args.size else (64, 64, 96) if args.quick else (128, 128, 256)
TARGET = "cuda -arch=sm_80"          # cp.async and mma.sync m16n8k16 need sm_80 (Ampere) or newer


# ---------------------------------------------------------------------------
# The algorithm and the steps
# ---------------------------------------------------------------------------
# `tc.program` is topi.nn.matmul with the operands cast to the accumulator type:
# C[i, j] = sum over k of float32(A[i, k]) * float32(B[k, j]), A and B float16.
#
# Step 1's schedule (tc.schedule_matmul, defaults): a block computes a 64 x 64 tile of C with
# 2 x 4 warps (threadIdx.z, threadIdx.y; threadIdx.x is the lane), each warp a 32 x 16 tile
# as 2 x 2 accumulator fragments of 16 x 8. At each k step of 32 the block copies its A and B
# tiles into shared memory (cache_read "shared", all 256 threads together); each warp then
# loads its A fragments (16 x 16) and B fragments (16 x 8) into registers (cache_read "warp")
# and multiplies them. Three `tensorize` calls replace loop nests by the intrinsics of
# schedlang.target.cuda.intrin.mma:
#   load_a_intrin / load_b_intrin: a 16 x 16 tile of shared memory -> A's fragment, one
#     `ldmatrix.x4`; B's 16 x 8 fragments two at a time where the warp tile is 16 wide (as
#     here), one `ldmatrix.x4.trans` (`.trans`: B is stored [k][n], the fragment wants it [n][k]),
#   mma_intrin: the fragment product, `mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32`,
#   store_c_intrin: the accumulator fragment -> its 16 x 8 tile of C.
# ldmatrix: the warp's 32 lanes each give the address of one 16-byte row of shared memory;
# the hardware reads the rows and hands each lane the elements its fragment holds (lane
# 4g + t: row g, columns 2t and 2t + 1 of each 8 x 8 matrix).

def cuda_cores():
    A, B, C = tc.program(M, N, K)
    s = topi.cuda.schedule_matmul_register_tiled(sl.create_schedule(C.op), C, tile=64, threads=8, vthreads=2,
                                                 k_tile=8, unroll_k=True)
    return s, [A, B, C]


# Step 2: a shared tile row is 32 halves = 64 bytes, so ldmatrix's 8 rows of one 8 x 8
# matrix (rows r .. r + 7, the same columns) fall in the same 16 banks two by two: 2-way
# conflicts. `storage_align(row, 16, 8)` makes the row stride 40 halves (16k + 8): 80 bytes,
# so the 8 rows' 16-byte pieces cover all 32 banks once.
# Step 3: `tensorize(lanes, copy.cp_async_intrin("float16"))` on 8 halves (16 bytes) a thread
# turns the copy into `cp.async.cg.shared.global`; schedlang adds the commit and the
# `cp.async.wait_group` before the barrier that publishes the tile.
# Step 4: `s[S].pipeline(3)`: 3 shared buffers a tile, the prologue issues the copies of the
# first two k steps; each iteration waits for step i (wait_group 1: step i + 1 may still be in
# flight), passes one barrier, then issues step i + 2 into the buffer step i - 1 used, and
# computes: one barrier a k step, as CUTLASS's multistage main loop.
STEPS = [
    ("0 CUDA cores", cuda_cores),
    ("1 mma.sync+ldmatrix", lambda: tc.gemm(M, N, K)),
    ("2 storage_align", lambda: tc.gemm(M, N, K, pad=8)),
    ("3 cp.async", lambda: tc.gemm(M, N, K, pad=8, async_copy=True)),
    ("4 3-stage pipeline", lambda: tc.gemm(M, N, K, pad=8, async_copy=True, stages=3)),
]


# ---------------------------------------------------------------------------
# Build, emulate on both engines, check, profile
# ---------------------------------------------------------------------------
rng = np.random.default_rng(0)
a = rng.standard_normal((M, K)).astype(np.float16)
b = rng.standard_normal((K, N)).astype(np.float16)
expected = a.astype(np.float64) @ b.astype(np.float64)
TOL = dict(rtol=1e-4, atol=1e-3)       # float32 accumulation of exact float16 products
profiles, modules, results = {}, {}, {}

for title, make in STEPS:
    header(f"Step {title} ({M} x {N} x {K}, float16 in, float32 accumulated)")
    s, tensors = make()
    mod = sl.build(s, tensors, target=TARGET)
    info = (mod.ptxas_info or {}).get("C_kernel")
    print("ptxas: not on PATH" if info is None else
          f"ptxas: {info.registers} registers a thread, {info.spill_bytes} bytes spilled")
    assert info is None or info.spill_bytes == 0, f"step {title}: ptxas spilled registers"
    out = {}
    for engine in ("simt", "shim"):
        c = np.zeros((M, N), np.float32)
        start = time.perf_counter()
        report = mod.emulate(a, b, c, engine=engine, profile=engine == "simt")
        np.testing.assert_allclose(c, expected, **TOL, err_msg=f"step {title}, engine {engine}: wrong result")
        print(f"engine={engine}: {format_seconds(time.perf_counter() - start)}, matches numpy")
        out[engine] = c
        if engine == "simt":
            profiles[title] = report["C_kernel"]
    if title != STEPS[0][0]:
        # the same fragment layouts and summation order on both engines: bit for bit
        np.testing.assert_array_equal(out["simt"], out["shim"])
    modules[title], results[title] = mod, out["simt"]
    print(f"profile: {profiles[title]}")

# ---------------------------------------------------------------------------
# The generated CUDA C of the mma step
# ---------------------------------------------------------------------------
# The kernel calls small __device__ functions of the intrinsic library (prepended to the
# source): on a GPU their `__CUDA_ARCH__` branch is the inline PTX (ldmatrix, mma.sync), in
# the shim their C++ branch has the same per-lane semantics. The fragments are arrays in
# registers, each lane's 1/32 of the warp's tiles: A_shared_warp[16] holds this lane's 8 halves
# of each of the warp's two 16 x 16 A fragments, C_warp[16] its 4 floats of each of four 16 x 8
# accumulators.
mma_title = STEPS[1][0]
header(f"The CUDA C of step {mma_title} (mod.get_source('cuda'))")
source = modules[mma_title].get_source("cuda")
prelude, kernel = source.split('extern "C"', 1)
names = sorted({line.split("(")[0].split()[-1] for line in prelude.splitlines()
                if line.startswith("__device__") and "sl_" in line})
print(f"// ... {len(prelude.splitlines())} lines of library definitions: {', '.join(names)}")
print('extern "C"' + kernel)
ptx = modules[mma_title].get_source("ptx")
assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in ptx and "ldmatrix.sync.aligned.m8n8.x4" in ptx
assert "cp.async.wait_group 1" in modules[STEPS[4][0]].get_source("ptx")

# ---------------------------------------------------------------------------
# The profile, step by step
# ---------------------------------------------------------------------------
P = [profiles[t] for t, _ in STEPS]
header("The profile figures (mod.emulate(..., engine='simt', profile=True))")
columns = ["step", "blocks x thr", "regs", "smem B", "occ", "sh req", "conflicts", "barriers"]
rows = [[t, f"{p.blocks} x {p.threads_per_block}", "?" if p.registers is None else str(p.registers),
         str(p.shared_bytes), f"{p.occupancy.occupancy:.0%}", str(p.shared_requests), str(p.bank_conflicts),
         str(p.barriers)] for (t, _), p in zip(STEPS, P)]
widths = [max(len(r[i]) for r in rows + [columns]) for i in range(len(columns))]
for r in [columns] + rows:
    print("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))))


def by_buffer(p):
    return "; ".join(f"{name}: {ld} on loads, {st} on stores"
                     for name, (ld, st) in sorted(p.conflicts_by_buffer.items()) if ld or st) or "none"


# Printed from the measured figures, so that the text stays true if the compiler changes.
print(f"\n1 vs 0: the warps' shared-memory requests go from {P[0].shared_requests} to {P[1].shared_requests}: an "
      "ldmatrix request brings a whole fragment, an mma.sync does 16 x 8 x 16 multiply-adds on registers.")
print(f"1 -> 2: ldmatrix's rows 64 bytes apart conflict ({by_buffer(P[1])}); padded to 80 bytes by storage_align: "
      f"{P[2].bank_conflicts} conflicts ({by_buffer(P[2])}), for {P[2].shared_bytes - P[1].shared_bytes} more bytes "
      "of shared memory a block.")
print(f"2 -> 3: cp.async copies 16 bytes global -> shared a thread, without passing through registers: "
      f"shared requests {P[2].shared_requests} -> {P[3].shared_requests} (the copies' stores are 8 halves a "
      f"lane instead of 1), barriers {P[2].barriers} -> {P[3].barriers}.")
print(f"3 -> 4: three stages triple the shared tiles ({P[3].shared_bytes} -> {P[4].shared_bytes} bytes; occupancy "
      f"{P[3].occupancy.occupancy:.0%} -> {P[4].occupancy.occupancy:.0%}, limited by {P[4].occupancy.limit}) and "
      f"barriers go {P[3].barriers} -> {P[4].barriers}; on a GPU the copies of later k steps overlap the mma.sync "
      "of this one, which the emulators check for correctness (a missing wait is wrong numbers) but do not time.")
assert P[1].bank_conflicts > 0 and P[2].bank_conflicts == 0, "storage_align should remove ldmatrix's conflicts"
