"""
Tutorial 2: a tour of the schedule primitives
==============================================

One small two-stage program, and each schedule primitive applied to it on its
own, so you can see exactly what each one does to the loop nest. If you know
TVM's `te` schedules or Halide's scheduling directives, the names and the
meanings are the ones you know: split, tile, fuse, reorder, vectorize, unroll,
parallel, compute_inline, compute_at, compute_root, cache_read, cache_write,
storage_align and pragma. (rfactor has its own tutorial, number 4; bind is for
the GPU target.)

Along the way we will see:

  * the Tile IR (`sl.lower(s, args)`, like `tvm.lower`) after each primitive,
    and the Kernel IR where that is where the primitive shows its effect,
  * that every schedule computes the same result (checked against numpy),
  * a schedule printed as Python, and a JSON round trip that replays it,
  * what a schedule error looks like,
  * a short timing of a good schedule against numpy on a bigger image.

Run it with  `python tutorials/02_schedule_primitives.py`  (`--quick`: a 256 x 256
image for the timing and two repeats, what CI runs).
"""
import os
import time

import numpy as np

import schedlang as sl
from _common import format_seconds, header, parse_args, timing_note  # noqa: E402 (the tutorials' shared helpers)

args = parse_args(__doc__)
REPEAT = 2 if args.quick else 30     # timing repeats


# ---------------------------------------------------------------------------
# The program: square every pixel, then blur vertically over three rows
# ---------------------------------------------------------------------------
#     B[i, j] = A[i, j] * A[i, j]
#     C[i, j] = (B[i, j] + B[i + 1, j] + B[i + 2, j]) / 3
#
# Two stages (B feeds C) give compute_at and the cache stages something to do,
# and the 3-row window shows how schedlang infers the region of B that C needs.
# W = 10 is deliberately not a multiple of 4, so a split by 4 leaves a tail.

def blur(height, width):
    A = sl.placeholder((height + 2, width), name="A")
    B = sl.compute((height + 2, width), lambda i, j: A[i, j] * A[i, j], name="B")
    C = sl.compute((height, width), lambda i, j: (B[i, j] + B[i + 1, j] + B[i + 2, j]) / 3.0, name="C")
    return A, B, C


def blur_numpy(a):
    b = a * a
    return (b[:-2] + b[1:-1] + b[2:]) / 3.0


H, W = 6, 10
A, B, C = blur(H, W)
a = np.random.default_rng(0).standard_normal((H + 2, W)).astype(np.float32)
expected = blur_numpy(a)


def check(s, title):
    """Build the schedule, run it and compare with numpy: every schedule must agree."""
    c = np.zeros((H, W), dtype=np.float32)
    sl.build(s, [A, C])(a, c)
    np.testing.assert_allclose(c, expected, rtol=1e-5, atol=1e-6, err_msg=f"{title}: wrong result")


def show(title, s, level="tile"):
    header(title)
    print(sl.lower(s, [A, C], level=level))
    check(s, title)


# `create_schedule` gives the default schedule: every stage computed in full,
# in order, with one plain loop per axis ("compute_root" for every stage).
s = sl.create_schedule(C.op)
show("Before: the default schedule (Tile IR)", s)
print("\nThe Tensor IR behind it (one line per stage):\n")
print(sl.lower(s, [A, C], level="tensor"))

# ---------------------------------------------------------------------------
# Loop structure: split, tile, fuse, reorder
# ---------------------------------------------------------------------------
# split(axis, factor=4) makes an outer and an inner loop. 10 is not a multiple
# of 4, so the last outer iteration would run past the end: schedlang keeps it
# correct with a guard on the tail, exactly as TVM does. (nparts=3 is the other
# way to say it: fix the number of outer iterations instead.)
s = sl.create_schedule(C.op)
i, j = s[C].op.axis                          # the stage's original axes
jo, ji = s[C].split(j, factor=4)
show("split: s[C].split(j, factor=4) -- note the guard on the tail", s)

# tile(x, y, fx, fy) is split + split + reorder: the two outer loops first.
s = sl.create_schedule(C.op)
i, j = s[C].op.axis
io, jo, ii, ji = s[C].tile(i, j, 2, 5)
show("tile: s[C].tile(i, j, 2, 5)", s)

# fuse makes one loop out of adjacent ones; indices come back with // and %.
s = sl.create_schedule(C.op)
i, j = s[C].op.axis
ij = s[C].fuse(i, j)
show("fuse: s[C].fuse(i, j)", s)

# reorder sets the nesting order of the stage's loops (outermost first).
s = sl.create_schedule(C.op)
i, j = s[C].op.axis
s[C].reorder(j, i)
show("reorder: s[C].reorder(j, i)", s)

# ---------------------------------------------------------------------------
# Loop annotations: vectorize, unroll, parallel, pragma
# ---------------------------------------------------------------------------
# In Tile IR an annotation only marks the loop. It becomes real code in Kernel
# IR: a vectorized loop turns into vector loads/stores, ramp(base, stride,
# lanes), and broadcasts xN(...). With a tail, the full vectors take the fast
# path and the last, partial vector falls back to a guarded scalar loop.
s = sl.create_schedule(C.op)
i, j = s[C].op.axis
jo, ji = s[C].split(j, factor=4)
s[C].vectorize(ji)
show("vectorize: split j by 4, vectorize j.inner (Tile IR)", s)
show("vectorize: the same schedule in Kernel IR", s, level="kernel")

# unroll copies the loop body once per iteration; guards on lanes that are
# always in bounds disappear.
s = sl.create_schedule(C.op)
i, j = s[C].op.axis
jo, ji = s[C].split(j, factor=4)
s[C].unroll(ji)
show("unroll: split j by 4, unroll j.inner (Kernel IR)", s, level="kernel")

# parallel runs the iterations of a loop on all cores (OpenMP on the CPU); in
# Kernel IR the loop becomes the kernel's `workers`. pragma attaches a free-form
# hint to a loop, printed as a comment and passed along.
s = sl.create_schedule(C.op)
i, j = s[C].op.axis
s[C].parallel(i)
s[C].pragma(j, "unroll_explicit", 1)
show("parallel + pragma: s[C].parallel(i); s[C].pragma(j, 'unroll_explicit', 1)", s)

# ---------------------------------------------------------------------------
# Where a stage is computed: compute_inline, compute_at, compute_root
# ---------------------------------------------------------------------------
# compute_inline substitutes B's expression into C: no buffer for B at all.
s = sl.create_schedule(C.op)
s[B].compute_inline()
show("compute_inline: s[B].compute_inline()", s)

# compute_at(s[C], i) computes B inside C's loop over i, only the part that one
# iteration needs. C's row i reads rows i, i+1 and i+2 of B, so schedlang infers
# a 3 x 10 region: the buffer for B shrinks to f32[3, 10] and its loops cover
# exactly that window (rows are recomputed for neighbouring i, the classic
# Halide trade of recomputation for locality).
s = sl.create_schedule(C.op)
i, j = s[C].op.axis
s[B].compute_at(s[C], i)
show("compute_at: s[B].compute_at(s[C], i) -- B's region is inferred as 3 rows", s)

# compute_root undoes either of them: back to computing B in full, first.
s[B].compute_root()
show("compute_root: s[B].compute_root() brings back the default", s)

# ---------------------------------------------------------------------------
# Staging data: cache_read, cache_write, storage_align
# ---------------------------------------------------------------------------
# cache_read(A, "local", [B]) adds a stage that copies A into a "local" buffer
# and makes B read the copy. On its own it copies all of A; attached with
# compute_at, it copies only the window that one row of C needs.
s = sl.create_schedule(C.op)
i, j = s[C].op.axis
AA = s.cache_read(A, "local", [B])
show("cache_read: s.cache_read(A, 'local', [B])", s)
s[B].compute_at(s[C], i)
s[AA].compute_at(s[C], i)
show("cache_read + compute_at: A.local and B both computed per row of C", s)

# cache_write(C, "local") computes C into a local buffer first (a new stage,
# C.local, named with a `.c` suffix on its axes) and copies it out. Useful to
# accumulate a reduction in a small buffer; tutorial 1 uses it for GEMM.
s = sl.create_schedule(C.op)
CL = s.cache_write(C, "local")
show("cache_write: s.cache_write(C, 'local')", s)

# storage_align pads the row stride of a buffer (here: stride % 16 == 1), the
# usual trick against cache-set or shared-memory bank conflicts. See `strides`.
s = sl.create_schedule(C.op)
s[B].storage_align(B.op.axis[0], 16, 1)
show("storage_align: s[B].storage_align(B's axis i, 16, 1) -- rows 17 floats apart", s, level="kernel")

# ---------------------------------------------------------------------------
# A schedule is data: print it as Python, round-trip it through JSON
# ---------------------------------------------------------------------------
# Every primitive call is recorded as a step. `print(s)` gives Python source
# that rebuilds the schedule from a fresh `s = sl.create_schedule(...)`;
# `s.to_json()` serialises the steps and `apply_json` replays them. Tuning
# logs use the same format.
s = sl.create_schedule(C.op)
i, j = s[C].op.axis
s[B].compute_at(s[C], i)
jo, ji = s[C].split(j, factor=4)
s[C].vectorize(ji)
s[C].parallel(i)

header("The schedule printed as Python: print(s)")
python_text = str(s)
print(python_text)
header("The same schedule as JSON: s.to_json()")
json_text = s.to_json()
print(json_text)

replayed = sl.create_schedule(C.op).apply_json(json_text)
assert sl.lower(replayed, [A, C]) == sl.lower(s, [A, C]), "JSON replay gave a different loop nest"
check(replayed, "replayed from JSON")
from_python = sl.create_schedule(C.op)
exec(python_text, {"s": from_python})          # the printed Python really is Python
assert sl.lower(from_python, [A, C]) == sl.lower(s, [A, C]), "printed Python gave a different loop nest"
check(from_python, "replayed from printed Python")
print("\nreplaying the JSON, and running the printed Python, both give the same Tile IR and result")

# ---------------------------------------------------------------------------
# What a mistake looks like
# ---------------------------------------------------------------------------
# Primitives are checked when you call them. A misuse raises sl.ScheduleError,
# a ValueError whose message starts with the primitive, names the stage and the
# axis, lists the valid choices and gives a hint. A common slip: vectorizing an
# axis that has already been split (only its pieces are loops now).
header("A schedule error: vectorizing an axis after splitting it")
s = sl.create_schedule(C.op)
i, j = s[C].op.axis
jo, ji = s[C].split(j, factor=4)
try:
    s[C].vectorize(j)
except sl.ScheduleError as err:
    print(f"sl.ScheduleError: {err}")
    print(f"\n(the error also carries fields: primitive={err.primitive!r}, stage={err.stage!r}, axis={err.axis!r})")
else:
    raise AssertionError("vectorize(j) after split(j) should have raised ScheduleError")

# ---------------------------------------------------------------------------
# A short timing on a bigger image
# ---------------------------------------------------------------------------
# A reasonable schedule for this program on the CPU: inline B (squaring is
# cheaper than a round trip through memory), vectorize the columns in chunks of
# 16 and run the rows in parallel. numpy, for comparison, makes three
# temporaries.
HB = WB = 256 if args.quick else 2048
header(f"Timing: {HB} x {WB} blur, default schedule vs tuned ones vs numpy ({os.cpu_count()} cores)")
timing_note(args.quick)
A, B, C = blur(HB, WB)
big = np.random.default_rng(1).standard_normal((HB + 2, WB)).astype(np.float32)
want = blur_numpy(big)
nbytes = big.nbytes + want.nbytes            # read A once, write C once


def run_and_time(title, s):
    c = np.zeros((HB, WB), dtype=np.float32)
    mod = sl.build(s, [A, C])
    mod(big, c)
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-5, err_msg=f"{title}: wrong result")
    seconds = mod.time(big, c, number=1, repeat=REPEAT)    # the fastest of REPEAT calls
    print(f"{title:<40}{format_seconds(seconds):>10} {nbytes / seconds / 1e9:8.1f} GB/s")


run_and_time("schedlang, default schedule", sl.create_schedule(C.op))
s = sl.create_schedule(C.op)
i, j = s[C].op.axis
s[B].compute_inline()
jo, ji = s[C].split(j, factor=16)
s[C].vectorize(ji)
run_and_time("schedlang, inline + vectorize", s)
s[C].parallel(i)
run_and_time("schedlang, inline + vectorize + parallel", s)

best = float("inf")
for _ in range(REPEAT):
    start = time.perf_counter()
    blur_numpy(big)
    best = min(best, time.perf_counter() - start)
print(f"{'numpy':<40}{format_seconds(best):>10} {nbytes / best / 1e9:8.1f} GB/s")
