"""
Tutorial 3: fusion, from SiluAndMul to softmax
==============================================

Most of the time in a neural network outside the matrix multiplies is spent in
small elementwise and row-wise operators, and their cost is memory traffic.
Fusing them (computing several operators in one pass, keeping intermediates in
registers) is the single most useful thing a compiler does for them.

Part 1 follows one program through every IR level: SiluAndMul, the gated
activation of LLaMA-style MLPs,

    left, right = x.chunk(2, dim=-1)          # x: f32[1, 32, 4096]
    out = silu(left) * right                  # silu(v) = v * sigmoid(v)

written as four stages (two chunks, silu, mul) and fused into one kernel with
compute_inline, exactly as a TVM user would write it.

Part 2 schedules a row softmax written as four stages (max, exp, sum, divide):
compute_inline for the exp, compute_at to compute each row's max and sum right
where the row is used, a parallel loop over rows and a vectorized inner loop.

Both are checked against PyTorch and timed against it.

Run it with  `python tutorials/03_fusion_softmax.py`  (`--quick`: small shapes for the
timing part, 256 x 256 softmax, two repeats; what CI runs).
"""

import torch
import torch.nn.functional as F

import schedlang as sl
from schedlang import topi
from schedlang.topi import cpu
from _common import best_time, format_seconds, header, parse_args, timing_note  # noqa: E402 (the tutorials' shared helpers)

args = parse_args(__doc__)
TOKENS = 256 if args.quick else 4096      # the timing part: x[1, TOKENS, 4096]
ROWS = COLS = 256 if args.quick else 4096  # the timing part: softmax X[ROWS, COLS]
REPEAT = 2 if args.quick else 10           # timing repeats


# ===========================================================================
# Part 1: SiluAndMul through every level
# ===========================================================================
# Each PyTorch operator becomes a `compute`. The two halves of `chunk` are not
# copies: they are index maps that read x at shifted coordinates, and the
# Tensor IR printer labels them `IndexMap`. silu and mul are `Elementwise`.

def silu_and_mul(tokens, hidden):
    x = sl.placeholder((1, tokens, 2 * hidden), name="x")
    chunk_0 = sl.compute((1, tokens, hidden), lambda i, j, k: x[i, j, k], name="chunk_0")
    chunk_1 = sl.compute((1, tokens, hidden), lambda i, j, k: x[i, j, k + hidden], name="chunk_1")
    silu = sl.compute((1, tokens, hidden), lambda i, j, k: chunk_0[i, j, k] * sl.sigmoid(chunk_0[i, j, k]),
                      name="silu")
    mul = sl.compute((1, tokens, hidden), lambda i, j, k: silu[i, j, k] * chunk_1[i, j, k], name="mul")
    return x, (chunk_0, chunk_1, silu), mul


# The schedule is schedlang.topi's `cpu.schedule_silu_and_mul` (the library of
# reference schedules the tests and benchmarks use too; see its source):
#   * fusion: every intermediate is substituted into its consumer
#     (compute_inline). No buffers are left for chunk_0, chunk_1 or silu: each
#     output element reads one element from each half of x and is written once,
#     the least memory traffic possible (3 floats moved per output, against 9
#     for the unfused loops below, or 5 for PyTorch eager's two kernels);
#   * each row is processed in vectors (`factor` lanes: 8 floats fill one AVX2
#     register; by default the target's own vector width) ...
#   * ... and the rows are spread over the cores.

def schedule_silu_and_mul(mul, lanes=8):
    return cpu.schedule_silu_and_mul(sl.create_schedule(mul.op), mul, factor=lanes)


x, intermediates, mul = silu_and_mul(32, 2048)

header("SiluAndMul, Tensor IR: two IndexMaps (the chunks) and two Elementwise ops")
s = sl.create_schedule(mul.op)
print(sl.lower(s, [x, mul], level="tensor"))

header("SiluAndMul, Loop IR with the default schedule: four loop nests, three temporaries")
print(sl.lower(s, [x, mul], level="loop"))
# Every intermediate is a full buffer here, written once and read back: the
# memory traffic of running the operators one by one (PyTorch eager).

s = schedule_silu_and_mul(mul)
mod = sl.build(s, [x, mul])
header("The schedule (print(s)): inline the chunks and silu, vectorize, parallel")
print(s)

header("Loop IR after compute_inline: one loop nest, no intermediate buffers")
print(mod.ir["loop"])
header("Tile IR: rows in parallel, each row in vectors of 8")
print(mod.ir["tile"])
# In Kernel IR the parallel loop is the kernel's `workers(j: 32)`: each worker
# handles a row. ramp(base, 1, 8) is a vector of 8 consecutive elements, so the
# loads of both halves and the store are full vector accesses ("# f32x8").
header("Kernel IR: one kernel, 32 workers, vector loads and stores")
print(mod.ir["kernel"])

header("LLVM IR: the start of the kernel's loop body")
llvm = mod.ir["llvm"].splitlines()
start = next(n for n, line in enumerate(llvm) if line.startswith("define") and "mul_kernel" in line)
print("\n".join(llvm[start:start + 36]))
print(f"... ({len(llvm)} lines in all; sigmoid is the vector function @sl.sigmoid.v8f32 defined above it)")
# This is the LLVM IR as schedlang writes it, one instruction per Kernel IR
# operation (x is loaded twice, once per use); LLVM's optimiser cleans that up.
# mod.get_source("ll.opt") shows the optimised IR, mod.get_source("asm") the
# machine code.

# Check against PyTorch, on the same array: schedlang modules accept CPU torch
# tensors and write the output in place.
xt = torch.randn(1, 32, 4096)
got = torch.empty(1, 32, 2048)
mod(xt, got)
left, right = xt.chunk(2, dim=-1)
torch.testing.assert_close(got, F.silu(left) * right, rtol=1e-5, atol=1e-6)
print("\nSiluAndMul matches torch: F.silu(left) * right")

# ===========================================================================
# Part 2: row softmax in four stages
# ===========================================================================
#     maxval[i]    = max over k of X[i, k]
#     expval[i, j] = exp(X[i, j] - maxval[i])
#     total[i]     = sum over k of expval[i, k]
#     softmax[i, j] = expval[i, j] / total[i]
#
# Subtracting the row max keeps exp from overflowing; this is the numerically
# safe softmax that PyTorch computes.

# The algorithm is schedlang.topi's `nn.softmax` (the four stages above, named
# maxval, expval, total and softmax), and the schedule `cpu.schedule_softmax`:
#   * exp is cheap next to a trip through memory: it is inlined into both
#     readers (the sum and the division), so expval never exists as a buffer;
#   * each row's max and sum are computed inside the loop over rows, right
#     before the row is normalised. schedlang infers that one row needs one
#     element of each, so the buffers shrink to f32[1] and the row stays in
#     cache between the three passes over it;
#   * rows are independent: they run on all cores. Within a row, vectorize.

def softmax(rows, cols):
    X = sl.placeholder((rows, cols), name="X")
    out = topi.nn.softmax(X)
    return X, topi.nn.softmax_stages(out), out


def schedule_softmax(out, lanes=8):
    return cpu.schedule_softmax(sl.create_schedule(out.op), out, factor=lanes)


X, stages, out = softmax(4, 1000)        # a small instance, to read the IR
header("Softmax, Tensor IR: two Reductions and two Elementwise ops")
s = sl.create_schedule(out.op)
print(sl.lower(s, [X, out], level="tensor"))

s = schedule_softmax(out)
header("Softmax schedule (print(s))")
print(s)
header("Softmax, Tile IR: max and sum computed per row (f32[1] buffers), exp inlined")
print(sl.lower(s, [X, out], level="tile"))
header("Softmax, Kernel IR")
print(sl.lower(s, [X, out], level="kernel"))

xs = torch.randn(4, 1000)
ys = torch.empty(4, 1000)
sl.build(s, [X, out])(xs, ys)
torch.testing.assert_close(ys, torch.softmax(xs, dim=1), rtol=1e-5, atol=1e-6)
print("\nsoftmax matches torch.softmax on 4 x 1000")

# ===========================================================================
# Timing
# ===========================================================================
header(f"Timing (torch uses {torch.get_num_threads()} threads; schedlang's parallel loops use all cores)")
timing_note(args.quick)

# SiluAndMul with 4096 tokens and hidden size 2048: x is 4096 x 4096 floats.
x, intermediates, mul = silu_and_mul(TOKENS, 2048)
mod = sl.build(schedule_silu_and_mul(mul), [x, mul])
xt = torch.randn(1, TOKENS, 4096)
got = torch.empty(1, TOKENS, 2048)
mod(xt, got)
left, right = xt.chunk(2, dim=-1)
torch.testing.assert_close(got, F.silu(left) * right, rtol=1e-5, atol=1e-6)
nbytes = xt.numel() * 4 + got.numel() * 4        # read x once, write out once
t_sl = mod.time(xt, got, number=1, repeat=REPEAT)
t_torch = best_time(lambda: F.silu(left) * right, repeat=REPEAT)
print(f"SiluAndMul x[1, {TOKENS}, 4096]:  schedlang {format_seconds(t_sl):>9} ({nbytes / t_sl / 1e9:5.1f} GB/s)   "
      f"torch eager {format_seconds(t_torch):>9} ({nbytes / t_torch / 1e9:5.1f} GB/s)")

# Softmax on 4096 x 4096.
X, stages, out = softmax(ROWS, COLS)
mod = sl.build(schedule_softmax(out), [X, out])
xs = torch.randn(ROWS, COLS)
ys = torch.empty(ROWS, COLS)
mod(xs, ys)
torch.testing.assert_close(ys, torch.softmax(xs, dim=1), rtol=1e-5, atol=1e-6)
nbytes = 2 * xs.numel() * 4                      # read X once, write out once (at best)
t_sl = mod.time(xs, ys, number=1, repeat=REPEAT)
t_torch = best_time(lambda: torch.softmax(xs, dim=1), repeat=REPEAT)
print(f"softmax   X[{ROWS}, {COLS}]:      schedlang {format_seconds(t_sl):>9} ({nbytes / t_sl / 1e9:5.1f} GB/s)   "
      f"torch eager {format_seconds(t_torch):>9} ({nbytes / t_torch / 1e9:5.1f} GB/s)")
