"""
Tutorial 4: reductions with rfactor, and a padded conv2d
========================================================

Part 1 is about reductions. A sum along a long row is one long chain of
additions, each waiting for the previous one: no vectors, no parallelism.
`rfactor` (TVM's name; Halide calls it the same) rewrites the reduction into
two stages: independent *partial* sums, which can be vectorized or run in
parallel, and a short final reduction over the partials.

Part 2 is a 3x3 convolution in NCHW layout with zero padding. The padding is a
stage of its own, written with `if_then_else`; we compute it one output row at
a time with `compute_at`, accumulate each output tile in a small cache with
`cache_write`, vectorize along the width and run blocks of filters in
parallel. The result is compared with torch.nn.functional.conv2d.

Run it with  `python tutorials/04_reductions_and_conv.py`  (`--quick`: small shapes and
two timing repeats, what CI runs).
"""

import numpy as np
import torch
import torch.nn.functional as F

import schedlang as sl
from schedlang import topi
from schedlang.topi import cpu
from _common import best_time, format_seconds, header, parse_args, timing_note  # noqa: E402 (the tutorials' shared helpers)

args = parse_args(__doc__)
REPEAT = 2 if args.quick else 20     # timing repeats


# ===========================================================================
# Part 1: row sums and rfactor
# ===========================================================================

def row_sum(rows, length):
    A = sl.placeholder((rows, length), name="A")
    return A, topi.nn.row_reduce(A, "sum", name="B")   # B[i] = sum over k of A[i, k]


ROWS, LENGTH = 16, (1 << 12 if args.quick else 1 << 20)   # 16 rows of a million floats: 64 MB
A, B = row_sum(ROWS, LENGTH)
rng = np.random.default_rng(0)
a = rng.random((ROWS, LENGTH), dtype=np.float32)
a_sums = a.astype(np.float64).sum(axis=1)        # the exact answer, in float64


def check_sums(got, want, title):
    # Summing a million floats in float32 in any order loses a few digits;
    # 1e-5 relative is far tighter than any wrong answer would be.
    np.testing.assert_allclose(got, want, rtol=1e-5, err_msg=f"{title}: wrong sums")


header("Row sum, the default schedule (Tile IR): one scalar chain of additions per row")
s = sl.create_schedule(B.op)
print(sl.lower(s, [A, B]))
default_mod = sl.build(s, [A, B])

# The recipe for vectorized partial sums, as in TVM's rfactor tutorial:
#   1. split the reduction axis k into k.outer and k.inner (8 lanes = one AVX2
#      register of floats),
#   2. rfactor on k.inner: a new stage B.rf[i, k.inner] sums over k.outer only,
#      so its 8 partial sums are independent of each other. factor_axis=1 puts
#      the new axis last, so the 8 partials of a row are adjacent in memory,
#   3. in B.rf, put the lanes innermost and vectorize them,
#   4. B itself now sums just 8 partials per row; compute B.rf per row of B
#      (compute_at), so the 8 partials live in a register, not in memory.

# That recipe is schedlang.topi's `cpu.schedule_row_reduce` (`factor` lanes; by
# default the target's vector width):

def rfactor_schedule(B, lanes=8):
    return cpu.schedule_row_reduce(sl.create_schedule(B.op), B, factor=lanes)


s = rfactor_schedule(B)
# Tensor IR describes the algorithm, which rfactor does not change; the new
# stage B.rf appears from Loop IR on.
header("Row sum after rfactor: Loop IR has a new stage, B.rf[i, k.inner]")
print(sl.lower(s, [A, B], level="loop"))
header("Row sum after rfactor: Tile IR")
print(sl.lower(s, [A, B]))
header("Row sum after rfactor: Kernel IR (B.rf is one vector register: f32x8)")
rfactor_mod = sl.build(s, [A, B])
print(rfactor_mod.ir["kernel"])

b = np.zeros(ROWS, dtype=np.float32)
for title, mod in [("default", default_mod), ("rfactor", rfactor_mod)]:
    b[:] = 0
    mod(a, b)
    check_sums(b, a_sums, title)
print("\nboth schedules give the right row sums")

# A note on the CPU: LLVM's loop vectorizer can do this rewrite by itself for
# the default schedule, because schedlang marks float arithmetic in reductions
# as reassociable (like -ffast-math), and it does here (see the timings at the
# end: the two run at the same speed, both limited by memory bandwidth).
# rfactor makes the choice explicit and yours (how many partials, where they
# live, in which order they are combined), it is what a GPU schedule needs, and
# it is the way to get *parallelism* out of a single reduction, which is next.

# ---------------------------------------------------------------------------
# One very long row: rfactor twice
# ---------------------------------------------------------------------------
# With a single row there is no outer loop to run in parallel. Split the
# reduction into 64 chunks and rfactor on the chunk index: B.rf[chunk] sums one
# chunk, chunks are independent, so they can run in parallel. Then rfactor
# B.rf on its 8-wide inner axis to vectorize each chunk, as above.

LONG = 1 << 16 if args.quick else 1 << 24        # 16M floats: 64 MB
A1, B1 = row_sum(1, LONG)
s1 = sl.create_schedule(B1.op)
(k,) = s1[B1].op.reduce_axis
ko, ki = s1[B1].split(k, factor=8)
chunk, ko_inner = s1[B1].split(ko, nparts=64)
BF = s1.rfactor(B1, chunk)                       # B.rf[chunk, i]: one partial per chunk
chunk_axis, _ = s1[BF].op.axis
_, lanes_axis = s1[BF].op.reduce_axis            # k.outer.inner, k.inner
BFF = s1.rfactor(BF, lanes_axis, factor_axis=2)  # B.rf.rf[chunk, i, lane]
c2, i2, lane = s1[BFF].op.axis
(kr,) = s1[BFF].op.reduce_axis
s1[BFF].reorder(c2, i2, kr, lane)
s1[BFF].vectorize(lane)
s1[BFF].compute_at(s1[BF], chunk_axis)
s1[BF].parallel(chunk_axis)

header(f"One row of {LONG:,} floats, rfactor twice: parallel chunks, vectorized lanes (Tile IR)")
print(sl.lower(s1, [A1, B1]))
long_mod = sl.build(s1, [A1, B1])
long_default = sl.build(sl.create_schedule(B1.op), [A1, B1])
a1 = rng.random((1, LONG), dtype=np.float32)
b1 = np.zeros(1, dtype=np.float32)
long_sum = a1.astype(np.float64).sum(axis=1)
long_default(a1, b1)
check_sums(b1, long_sum, "default, one long row")
long_mod(a1, b1)
check_sums(b1, long_sum, "rfactor twice")
print(f"\nsum of the long row: {b1[0]:.1f} (float64: {a1.astype(np.float64).sum():.1f})")

# ===========================================================================
# Part 2: conv2d, NCHW, 3x3, zero padding
# ===========================================================================
# The padded input is a stage: inside the image it reads X, on the 1-pixel
# border it is 0. if_then_else only evaluates the branch it takes, so the
# out-of-bounds read of X on the border never happens. sl.all(...) is "and".

# schedlang.topi's `nn.conv2d_nchw` writes it that way:
#
#     pad[n, c, h, w] = if_then_else(all(h >= 1, h < H + 1, w >= 1, w < W + 1), X[n, c, h - 1, w - 1], 0)
#     conv[n, f, h, w] = sum over rc, rh, rw of pad[n, rc, h + rh, w + rw] * Wt[f, rc, rh, rw]

def conv2d(n, c, h, w, f, r=3, pad=1):
    X = sl.placeholder((n, c, h, w), name="X")
    Wt = sl.placeholder((f, c, r, r), name="Wt")
    out = topi.nn.conv2d_nchw(X, Wt, pad)
    return X, Wt, out.op.input_tensors[0], out


# A small instance first, to read the IR.
X, Wt, padded, out = conv2d(1, 2, 5, 6, 3)
header("conv2d, Tensor IR: pad is an IndexMap (a shifted read of X, 0 on the border), conv a Reduction")
print(sl.lower(sl.create_schedule(out.op), [X, Wt, out], level="tensor"))

# Step 1: compute the padding one output row at a time. Row h of the output
# reads rows h, h+1, h+2 of the padded input (rh goes 0..2), for every input
# channel: schedlang infers that region and shrinks the pad buffer to
# [1, C, 3, W + 2]. That buffer stays in cache while the row is computed.
s = sl.create_schedule(out.op)
n, f, h, w = s[out].op.axis
s[padded].compute_at(s[out], h)
header("conv2d, step 1: s[pad].compute_at(s[conv], h) -- 3 padded rows per output row")
print(sl.lower(s, [X, Wt, out]))
xs_small, ws_small = torch.randn(1, 2, 5, 6), torch.randn(3, 2, 3, 3)
ys_small = torch.empty(1, 3, 5, 6)
sl.build(s, [X, Wt, out])(xs_small, ws_small, ys_small)
torch.testing.assert_close(ys_small, F.conv2d(xs_small, ws_small, padding=1), rtol=1e-4, atol=1e-4)
print("\nstep 1 matches torch.nn.functional.conv2d on the small instance")


# Step 2, the full schedule (on the real size below):
#   * split the filters into blocks of FB and the width into vectors of 8,
#     with the order n, f.outer, h, w.outer, f.inner, w.inner,
#   * cache_write: accumulate an FB x 8 tile of outputs in a small local buffer
#     (compute_at w.outer), with the reduction loops outside the tile loops and
#     the 8 lanes innermost and vectorized, the 3 taps and the FB filters
#     unrolled: FB vector accumulators that stay in registers,
#   * keep the padding per output row (step 1), and run filter blocks in parallel.
#     (Each block of filters pads the rows it needs again: a cheap copy, 16
#     times over, in exchange for needing no synchronisation.)

# This is schedlang.topi's `cpu.schedule_conv2d_nchw` (`lanes`: by default the
# target's vector width; 8 here, one AVX2 register):

def conv_schedule(out, fb=4, lanes=8):
    return cpu.schedule_conv2d_nchw(sl.create_schedule(out.op), out, filters=fb, lanes=lanes)


N, C, H, W, FILTERS = (1, 8, 16, 16, 8) if args.quick else (1, 64, 56, 56, 64)   # a ResNet-style 3x3 layer
X, Wt, padded, out = conv2d(N, C, H, W, FILTERS)
s = conv_schedule(out)
header(f"conv2d, step 2 at [{N}, {C}, {H}, {W}] x {FILTERS} filters: the schedule, as Python")
print(s)
mod = sl.build(s, [X, Wt, out])
header("conv2d, step 2: Tile IR")
print(mod.ir["tile"])
header("conv2d, step 2: Kernel IR (4 filters x 8 lanes accumulate in conv.local)")
print(mod.ir["kernel"])

x = torch.randn(N, C, H, W)
weight = torch.randn(FILTERS, C, 3, 3)
y = torch.empty(N, FILTERS, H, W)
mod(x, weight, y)
want = F.conv2d(x, weight, padding=1)
torch.testing.assert_close(y, want, rtol=1e-4, atol=1e-3)
print("\nconv2d matches torch.nn.functional.conv2d(x, w, padding=1)")

default_conv = sl.build(sl.create_schedule(out.op), [X, Wt, out])
y_default = torch.empty(N, FILTERS, H, W)
default_conv(x, weight, y_default)
torch.testing.assert_close(y_default, want, rtol=1e-4, atol=1e-3)

# ===========================================================================
# Timing
# ===========================================================================
header(f"Timing (torch uses {torch.get_num_threads()} threads; schedlang's parallel loops use all cores)")
timing_note(args.quick)
at = torch.from_numpy(a)
rs, ls = f"row sum {ROWS} x {LENGTH}", f"sum of {LONG}"
rows = [
    (f"{rs}, default", a.nbytes, default_mod.time(a, b, number=1, repeat=REPEAT)),
    (f"{rs}, rfactor", a.nbytes, rfactor_mod.time(a, b, number=1, repeat=REPEAT)),
    (f"{rs}, numpy", a.nbytes, best_time(lambda: a.sum(axis=1), repeat=REPEAT)),
    (f"{rs}, torch", a.nbytes, best_time(lambda: at.sum(dim=1), repeat=REPEAT)),
    (f"{ls}, default", a1.nbytes, long_default.time(a1, b1, number=1, repeat=REPEAT)),
    (f"{ls}, rfactor twice", a1.nbytes, long_mod.time(a1, b1, number=1, repeat=REPEAT)),
    (f"{ls}, numpy", a1.nbytes, best_time(lambda: a1.sum(), repeat=REPEAT)),
]
for title, nbytes, seconds in rows:
    print(f"{title:<32}{format_seconds(seconds):>10} {nbytes / seconds / 1e9:8.1f} GB/s")

flops = 2 * N * FILTERS * H * W * C * 9
for title, seconds in [
    ("conv2d, default schedule", default_conv.time(x, weight, y_default, number=1, repeat=1)),
    ("conv2d, scheduled", mod.time(x, weight, y, number=1, repeat=REPEAT)),
    ("conv2d, torch", best_time(lambda: F.conv2d(x, weight, padding=1), repeat=REPEAT)),
]:
    print(f"{title:<32}{format_seconds(seconds):>10} {flops / seconds / 1e9:8.1f} GFLOP/s")
