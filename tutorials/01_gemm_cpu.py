"""
Tutorial 1: a fast matrix multiply on the CPU, one schedule step at a time
===========================================================================

This is schedlang's version of TVM's classic "How to optimize GEMM on CPU"
tutorial. If you have used TVM's `te` or Halide, everything here will look
familiar: we write *what* to compute once, then change *how* it is computed
with a schedule, and the result never changes, only the speed does.

The plan:

  1. define C = A @ B as a `compute` with a reduction axis,
  2. look at the loop nest the default schedule gives us,
  3. improve it step by step: blocking, vectorization, loop permutation,
     array packing, a write cache, parallel loops (timing each step),
  4. print every IR level of the final schedule, from Tensor IR down to LLVM IR,
  5. check the result against numpy and time it against numpy's BLAS.

Run it with

    python tutorials/01_gemm_cpu.py              # 1024 x 1024 x 1024
    python tutorials/01_gemm_cpu.py --size 512   # any multiple of 32
    python tutorials/01_gemm_cpu.py --quick      # 128, one timing repeat (what CI runs)

The step-by-step timings use a smaller problem (at most 512) because the
first, unscheduled loop nest is very slow on a big one; the final schedule is
timed at the full size.
"""
import argparse
import time

import numpy as np

import schedlang as sl
from schedlang import topi
from _common import format_seconds, header, parse_args, timing_note  # noqa: E402 (the tutorials' shared helpers)

parser = argparse.ArgumentParser(description=__doc__.split("\n")[1])
parser.add_argument("--size", type=int, default=None,
                    help="M = N = K (a multiple of 32; default 1024, or 128 with --quick)")
args = parse_args(__doc__, parser)
SIZE = args.size or (128 if args.quick else 1024)
STEP_SIZE = min(SIZE, 512)
REPEAT = 1 if args.quick else 5      # timing repeats per step
BN = 32          # the tile size: a 32 x 32 block of C
KFACTOR = 4      # how far we unroll the reduction
if SIZE % BN:
    parser.error(f"--size must be a multiple of {BN} (array packing cuts B into {BN}-column panels)")


# ---------------------------------------------------------------------------
# 1. The algorithm
# ---------------------------------------------------------------------------
# `placeholder` declares an input, `reduce_axis` a summation index, and
# `compute` says what each output element is. This is exactly TVM's `te`:
#
#     C[i, j] = sum over k of A[i, k] * B[k, j]
#
# Nothing runs yet: these are descriptions of tensors (float32 by default).

def gemm(n):
    A = sl.placeholder((n, n), name="A")
    B = sl.placeholder((n, n), name="B")
    k = sl.reduce_axis((0, n), name="k")
    C = sl.compute((n, n), lambda x, y: sl.sum(A[x, k] * B[k, y], axis=k), name="C")
    return A, B, C


# Every schedule below is checked and timed by this helper. `sl.build` compiles
# the schedule for this CPU (through LLVM) into a callable module; the module
# writes into the output array in place, like a TVM PackedFunc.

results = []


def evaluate(title, s, tensors, n, repeat=REPEAT):
    rng = np.random.default_rng(0)
    a = rng.random((n, n), dtype=np.float32)
    b = rng.random((n, n), dtype=np.float32)
    c = np.zeros((n, n), dtype=np.float32)
    mod = sl.build(s, tensors)
    mod(a, b, c)
    # The check must fail loudly: a fast wrong answer is worth nothing.
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-3, err_msg=f"{title}: wrong result")
    seconds = mod.time(a, b, c, number=1, repeat=repeat)    # the fastest of `repeat` calls
    gflops = 2 * n ** 3 / seconds / 1e9
    results.append((title, n, seconds, gflops))
    print(f"--> {title}: correct, {format_seconds(seconds)} at {n}^3 ({gflops:.1f} GFLOP/s)")
    return mod


A, B, C = gemm(STEP_SIZE)
header(f"1. The algorithm, as Tensor IR ({STEP_SIZE} x {STEP_SIZE} x {STEP_SIZE} for the step-by-step part)")
s = sl.create_schedule(C.op)
print(sl.lower(s, [A, B, C], level="tensor"))

# ---------------------------------------------------------------------------
# 2. The default schedule
# ---------------------------------------------------------------------------
# With no schedule steps, the loop nest is the obvious one: one loop per output
# axis, the reduction innermost. `sl.lower` (like `tvm.lower`) prints it; the
# default level is Tile IR, the loop nest with the schedule applied. What it
# returns is a LoweredFunc: it prints as that text, and sl.build accepts it too.
#
# Walking B down a column (`B[k, y]` with k innermost) touches a new cache line
# at every step: this is slow.

header("2. Default schedule: the naive loop nest")
print(sl.lower(s, [A, B, C]))
evaluate("default", s, [A, B, C], STEP_SIZE, repeat=1)

# ---------------------------------------------------------------------------
# 3. Blocking
# ---------------------------------------------------------------------------
# Compute C in 32 x 32 blocks so the data one block needs stays in cache.
# `tile` splits two axes and puts both outer loops first; `split` cuts the
# reduction into chunks of 4; `reorder` sets the loop order.

#
# Steps 5 and 6 start again from this blocking, so it is a function: it
# returns the schedule and the loops a later step annotates.

def blocking(C, permuted=False):
    s = sl.create_schedule(C.op)
    x, y = s[C].op.axis
    (k,) = s[C].op.reduce_axis
    xo, yo, xi, yi = s[C].tile(x, y, BN, BN)
    ko, ki = s[C].split(k, factor=KFACTOR)
    if permuted:                                  # step 5
        s[C].reorder(xo, yo, ko, xi, ki, yi)
    else:
        s[C].reorder(xo, yo, ko, ki, xi, yi)
    return s, yi


header("3. Blocking: tile 32 x 32, split k by 4")
s, yi = blocking(C)
print(sl.lower(s, [A, B, C]))
evaluate("blocking", s, [A, B, C], STEP_SIZE)

# ---------------------------------------------------------------------------
# 4. Vectorization
# ---------------------------------------------------------------------------
# The innermost loop yi walks 32 consecutive floats of B and C: `vectorize`
# turns it into SIMD vector operations (AVX2 or AVX-512, whichever this CPU
# has). The loop keeps its name in Tile IR, marked `vectorized`; it becomes
# vector code in Kernel IR. (LLVM's own loop vectorizer often manages this
# simple inner loop already, so the gain here can be small: the memory layout
# changes that come next matter more.)

header("4. Vectorization: vectorize the inner column loop")
s[C].vectorize(yi)
print(sl.lower(s, [A, B, C]))
evaluate("vectorize", s, [A, B, C], STEP_SIZE)

# ---------------------------------------------------------------------------
# 5. Loop permutation
# ---------------------------------------------------------------------------
# With ki outside xi, each ki step sweeps the whole 32 x 32 block of C.
# Moving xi outside ki keeps one row of the block hot while ki walks four rows
# of B, and the accesses to A become cheap scalar broadcasts.

header("5. Loop permutation: reorder to xo, yo, ko, xi, ki, yi")
s, yi = blocking(C, permuted=True)
s[C].vectorize(yi)
print(sl.lower(s, [A, B, C]))
evaluate("loop permutation", s, [A, B, C], STEP_SIZE)

# ---------------------------------------------------------------------------
# 6. Array packing
# ---------------------------------------------------------------------------
# The inner loop still jumps a whole row of B (n floats) every ki step. Array
# packing copies B once into panels of 32 columns, packedB[n/32, k, 32], so the
# block's inner loop reads memory strictly in order. This is a change to the
# algorithm (a new tensor), not to the schedule: the packing is just another
# `compute`, an index map over B. C reads packedB with `//` and `%`:
#
#     packedB = compute((n // BN, n, BN), lambda x, y, z: B[y, x * BN + z])
#     C = compute((n, n), lambda x, y: sum(A[x, k] * packedB[y // BN, k, y % BN], axis=k))
#
# schedlang.topi, the library of reference algorithms and schedules, has it as
# `nn.matmul_packed(A, B, bn)`; the packing is the stage C reads besides A.

def packed_gemm(n):
    A = sl.placeholder((n, n), name="A")
    B = sl.placeholder((n, n), name="B")
    C = topi.nn.matmul_packed(A, B, BN)
    return A, B, C.op.input_tensors[1], C


A, B, packedB, C = packed_gemm(STEP_SIZE)
header("6. Array packing: B copied into 32-column panels")
s, yi = blocking(C, permuted=True)        # step 5's schedule, now reading packedB
s[C].vectorize(yi)
px, py, pz = s[packedB].op.axis
s[packedB].vectorize(pz)
print(sl.lower(s, [A, B, C]))
evaluate("array packing", s, [A, B, C], STEP_SIZE)


# ---------------------------------------------------------------------------
# 7. A write cache
# ---------------------------------------------------------------------------
# The block of C is still written back to memory after every ki step.
# `cache_write(C, "global")` makes a new stage, C.global, that accumulates into
# a buffer, and C becomes a copy out of it. `compute_at(s[C], yo)` places the
# cache stage inside C's yo loop, so the buffer only has to hold one 32 x 32
# block: schedlang infers that region, as TVM does, and allocates f32[32, 32].
# The cache stage then gets the loop order from step 5, with ki unrolled and
# the columns vectorized.
#
# 8. Parallel loops: `parallel` spreads the outer row blocks (and the packing)
# over all cores (OpenMP).
#
# This is the whole final schedule. It is a function so we can apply it at the
# step-by-step size and again at the full size.

# It is schedlang.topi's `cpu.schedule_matmul_packed` (read its source: the
# steps above, in order), which the benchmarks and tests use as well:
#
#     CC = s.cache_write(C, "global")
#     xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], BN, BN)
#     s[CC].compute_at(s[C], yo)
#     ko, ki = s[CC].split(k, factor=KFACTOR); s[CC].reorder(ko, xc, ki, yc)
#     s[CC].unroll(ki); s[CC].vectorize(yc); s[packedB].vectorize(z)
#     s[C].parallel(xo); s[packedB].parallel(x)        # step 8

def final_schedule(C, parallel=True):
    return topi.cpu.schedule_matmul_packed(sl.create_schedule(C.op), C, parallel=parallel, k_factor=KFACTOR)


header("7. Write cache: C.global computed per 32 x 32 block, ki unrolled")
s = final_schedule(C, parallel=False)
print(sl.lower(s, [A, B, C]))
evaluate("write cache", s, [A, B, C], STEP_SIZE)

header("8. Parallel: the outer row blocks and the packing on all cores")
s = final_schedule(C)
print(sl.lower(s, [A, B, C]))
evaluate("parallel", s, [A, B, C], STEP_SIZE)

# A schedule is data: a list of steps. Printing it gives Python you could paste
# back after `s = sl.create_schedule(C.op)` (stages are named by string).
header("The final schedule, printed as Python")
print(s)

# ---------------------------------------------------------------------------
# 9. Every IR level of the final schedule, at the full size
# ---------------------------------------------------------------------------
# `sl.build` keeps the text of each level in `mod.ir`:
#   tensor  what to compute: one line per stage (Elementwise, Reduction, IndexMap)
#   loop    plain loop nests, one per stage, no schedule yet
#   tile    the schedule applied: split/tiled loops, annotations, cache buffers
#   kernel  kernels and workers (the parallel loop), flat indices, vector
#           accesses `ramp(base, stride, lanes)` and broadcasts `x32(...)`
#   llvm    the LLVM IR handed to the JIT

A, B, packedB, C = packed_gemm(SIZE)
s = final_schedule(C)
start = time.perf_counter()
mod = sl.build(s, [A, B, C])
# sl.build keeps an in-memory cache keyed by the program and schedule: building the
# same thing again (e.g. with --size 512, where steps 8 and 9 coincide) returns at once.
print(f"\n(compiled the {SIZE}^3 GEMM in {format_seconds(time.perf_counter() - start)})")
for level, title in [("tensor", "Tensor IR"), ("loop", "Loop IR"), ("tile", "Tile IR"), ("kernel", "Kernel IR")]:
    header(f"9. {title}  (mod.ir[{level!r}])")
    print(mod.ir[level])
header("9. LLVM IR, the first 40 lines  (mod.ir['llvm'] or mod.get_source('ll'))")
llvm_lines = mod.ir["llvm"].splitlines()
print("\n".join(llvm_lines[:40]))
print(f"... ({len(llvm_lines)} lines in all; mod.get_source('asm') gives the assembly)")

# The hot loop in machine code: count the fused multiply-adds the JIT emitted.
asm = mod.get_source("asm")
fmas = [line.strip() for line in asm.splitlines() if "vfmadd" in line]
if fmas:
    print(f"\nthe assembly has {len(fmas)} vector FMA instructions, e.g.  {fmas[0]}")

# ---------------------------------------------------------------------------
# 10. Check against numpy and time it
# ---------------------------------------------------------------------------
header(f"10. Check and time at {SIZE} x {SIZE} x {SIZE}")
rng = np.random.default_rng(1)
a = rng.random((SIZE, SIZE), dtype=np.float32)
b = rng.random((SIZE, SIZE), dtype=np.float32)
c = np.zeros((SIZE, SIZE), dtype=np.float32)
mod(a, b, c)
expected = a @ b
np.testing.assert_allclose(c, expected, rtol=1e-4, atol=1e-3, err_msg="final GEMM: wrong result")
print(f"result matches numpy (max abs error {np.max(np.abs(c - expected)):.2e})")

# We report the fastest of several single calls, for both: on a machine that
# other programs share, the minimum is the most repeatable number.
flops = 2 * SIZE ** 3
repeat = 1 if args.quick else max(3, min(20, int(2e10 / flops)))
t_sl = mod.time(a, b, c, number=1, repeat=repeat)
t_np = float("inf")
for _ in range(repeat):
    start = time.perf_counter()
    np.matmul(a, b, out=expected)
    t_np = min(t_np, time.perf_counter() - start)

header("Summary")
timing_note(args.quick)
print(f"{'schedule':<26}{'size':>6}{'time':>12}{'GFLOP/s':>10}")
for title, n, seconds, gflops in results:
    print(f"{title:<26}{n:>6}{format_seconds(seconds):>12}{gflops:>10.1f}")
print(f"{'schedlang final':<26}{SIZE:>6}{format_seconds(t_sl):>12}{flops / t_sl / 1e9:>10.1f}")
print(f"{'numpy (BLAS)':<26}{SIZE:>6}{format_seconds(t_np):>12}{flops / t_np / 1e9:>10.1f}")
if not args.quick:      # a ratio of single calls on a 128^3 problem would say nothing
    print(f"\nschedlang runs at {t_np / t_sl:.2f}x numpy's speed on this machine.")
