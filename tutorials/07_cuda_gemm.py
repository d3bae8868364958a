"""
Tutorial 7: a matrix multiply for CUDA GPUs, one schedule step at a time
========================================================================

Tutorial 1 made C = A @ B fast on a CPU. This one does the same for an NVIDIA GPU, in
the steps of TVM's classic "How to optimize GEMM on GPU" recipe. The algorithm never
changes; each step is a new schedule on it:

  0. naive: one thread per element of C, bound to blockIdx/threadIdx,
  1. shared memory: the block's tiles of A and B copied into shared memory by all of
     its threads together (cache_read "shared" and a cooperative fetch),
  2. register tiles: each thread computes an 8 x 8 tile of C in registers
     (cache_write "local", and cache_read "local" for the operands),
  3. virtual threads: the same tile cut into 2 x 2 strided pieces (vthread),
  4. vector loads: float4 copies into shared memory and float4 reads and writes,
  5. storage_align: A's shared tile padded so that its columns spread over the banks.

No GPU is needed to follow it. `sl.build(..., target="cuda")` compiles the generated CUDA C
to PTX with NVRTC, and `ptxas` (when it is on PATH) reports each kernel's registers, spills
and shared memory. `mod.emulate(a, b, c, engine="simt", profile=True)` runs the kernel on the
CPU, interpreting it with numpy a warp at a time, and counts what the GPU's memory system
would do: global memory sectors per warp request (coalescing), shared-memory bank conflicts,
barriers, and the occupancy the registers and shared memory allow. Every step is checked
against numpy, and the figures are printed side by side at the end. On a machine with an
NVIDIA GPU, each step is also timed on it against torch.matmul (cuBLAS).

Run it with

    python tutorials/07_cuda_gemm.py              # 256 x 256 x 256 on the CPU (tutorials/README.md: times)
    python tutorials/07_cuda_gemm.py --size 512   # any multiple of 64 (the interpreter is slow)
    python tutorials/07_cuda_gemm.py --quick      # 128, what CI runs

The figures are counts, not times: the interpreter runs a warp's 32 lanes as numpy vectors,
so it is slow (seconds for a GEMM a GPU does in microseconds) but exact about which
addresses each warp touches.
"""
import argparse
import time

import numpy as np

import schedlang as sl
from schedlang import topi
from _common import format_seconds, header, parse_args, timing_note  # noqa: E402 (the tutorials' shared helpers)
from schedlang.target.cuda.gpu import gpu_problem

parser = argparse.ArgumentParser(description=__doc__.split("\n")[1])
parser.add_argument("--size", type=int, default=None,
                    help="M = N = K for the CPU emulation (a multiple of 64; default 256, or 128 with --quick)")
args = parse_args(__doc__, parser)
SIZE = args.size or (128 if args.quick else 256)
GPU_SIZE = 512 if args.quick else 2048       # the GPU timings (only where a GPU is present)
if SIZE % 64 or GPU_SIZE % 64:
    parser.error("--size must be a multiple of 64 (the block tile of steps 2 to 5 is 64 x 64)")

THREADS = 8        # steps 2-5: 8 x 8 threads a block ...
PER_THREAD = 8     # ... each computing 8 x 8 elements of C: a 64 x 64 tile a block
K_TILE = 8         # steps 2-5: the reduction is fetched into shared memory 8 columns of A at a time
VTHREADS = 2       # step 3: 2 x 2 virtual threads


# ---------------------------------------------------------------------------
# The algorithm, as in tutorial 1
# ---------------------------------------------------------------------------

def gemm(n):
    A = sl.placeholder((n, n), name="A")
    B = sl.placeholder((n, n), name="B")
    return A, B, topi.nn.matmul(A, B)     # C[i, j] = sum over k of A[i, k] * B[k, j]


# A GPU runs a grid of blocks; a block is up to 1024 threads that share a fast on-chip
# shared memory and can wait for each other at a barrier (__syncthreads()). A schedule
# says which loop runs over which: `bind(loop, thread_axis("blockIdx.x"))` makes the loop
# the x index of the block in the grid, `threadIdx.x` the x index of a thread in its
# block. The hardware runs a block's threads in warps of 32 consecutive threads (x fastest,
# then y), which issue each instruction together: a warp's 32 loads are one *request*.


# The schedules below are schedlang.topi's (`topi.cuda`, read their source: each is a
# short list of the primitives described here), which the tests and benchmarks use too:
# `bind_tile(s, C, i, j, (rows, cols))` tiles two loops and binds the tiles to
# blockIdx.y/x and the points of a tile to threadIdx.y/x, as TVM writes it, and
# `cooperative_fetch(s, tile, ty, tx, vector)` has all threads of the block copy a shared
# tile together: its loops fused into one and split so that consecutive threads copy
# consecutive elements (`vector` of them each).


# ---------------------------------------------------------------------------
# Step 0: naive, one thread per element of C
# ---------------------------------------------------------------------------
# Tile C into 16 x 16 blocks and bind: a block of 16 x 16 threads per tile, each thread
# one element, summing A's row times B's column straight from global memory. With no
# cache stage the sum accumulates in C itself: C[i, j] is loaded and stored at every k
# (nvcc may keep it in a register, as the pointers are __restrict__, but nothing in the
# schedule says so; the profile counts the accesses the code makes).

def step0_naive(n):
    A, B, C = gemm(n)
    s = sl.create_schedule(C.op)
    topi.cuda.bind_tile(s, C, C.op.axis[0], C.op.axis[1], (16, 16))
    return s, [A, B, C]


# ---------------------------------------------------------------------------
# Step 1: shared-memory tiles
# ---------------------------------------------------------------------------
# In step 0 the 256 threads of a block each read a whole row of A and a column of B: a
# block reads every element of its 16 rows of A 16 times from global memory. Here the
# block copies a 16 x 16 tile of A and of B into shared memory once per 16 steps of k,
# all threads together (the cooperative fetch: thread t copies element t of each tile,
# so a warp copies two 16-float rows, 4 sectors), waits at a barrier, and then every thread
# reads the tiles from shared memory. schedlang inserts the two barriers: one after the
# copy (nobody reads a tile before it is complete) and one before the next copy (nobody
# overwrites it while others still read it).
#
# `cache_read(A, "shared", [CL])` makes the copy stage A.shared; `compute_at(s[CL], ko)`
# puts it inside the outer reduction loop, and region inference sizes it to what one
# block needs at one step: 16 x 16. `cache_write(C, "local")` gives each thread a register
# accumulator CL, so C is written once at the end instead of at every k.

def step1_shared(n, tile=16, k_tile=16):
    A, B, C = gemm(n)
    s = topi.cuda.schedule_matmul_shared(sl.create_schedule(C.op), C, block=(tile, tile), k_tile=k_tile)
    return s, [A, B, C]


# ---------------------------------------------------------------------------
# Steps 2-5: register tiles, virtual threads, vector loads, storage_align
# ---------------------------------------------------------------------------
# Step 2, register tiles. In step 1 each multiply-add needs two shared-memory loads, and
# shared memory, fast as it is, is much slower than the arithmetic units. Now each thread
# computes an 8 x 8 tile of C: at each k it loads 8 values of A's column and 8 of B's row
# into registers (the local stages AL and BL) and does 64 multiply-adds with them, 4 per
# load instead of 1/2. The block (8 x 8 threads) now covers a 64 x 64 tile of C, so every
# element fetched from global memory is used 64 times instead of 16.
#
# Step 3, virtual threads. In step 2 thread tx owns columns 8*tx .. 8*tx+7 of the tile, so
# at one k the 8 threads of a warp row read B.shared words 8 apart: two of them in each
# bank that is used (shared memory has 32 banks of 4-byte words; two different words in
# one bank take two passes). The same happens to the stores of C: a warp's 32 lanes write
# 32 addresses 32 bytes apart, one sector each. TVM's answer is `vthread`: split each axis
# of the tile in two *virtual threads* outside the real ones, so that a thread owns two
# 4-wide strips 32 columns apart; neighbouring threads then own neighbouring 4-wide strips,
# and a warp's reads and writes are 4 words (16 bytes) apart. The virtual threads are not
# launched: they are loops inside each thread, bound with thread_axis((0, 2), "vthread").
#
# Step 4, vector loads. The copies into shared memory move 4 consecutive floats per thread
# with one float4 load and one float4 store (16 bytes, aligned, because the tile rows start
# at multiples of 4 floats), the B operand is read from shared memory as float4, and C is
# written back as float4: a quarter of the instructions for the same bytes.
#
# Step 5, storage_align. A.shared is a 64 x 8 tile read down its columns: the threads of
# a warp read A.shared[row, k] for rows 4 apart (8 with step 2's layout), i.e. words 32
# (64) apart, all in one bank. `storage_align(axis, 8, 1)` pads each row to 9 floats
# (a row stride that is 1 modulo 8), so those rows fall in different banks. The price:
# the rows no longer start at multiples of 4 floats, so the float4 stores into A.shared
# become four scalar stores (schedlang only emits a vector access it can prove aligned).

def register_tiled(n, vthread=False, vector=1, align=False):
    """topi.cuda.schedule_matmul_register_tiled: a THREADS x THREADS block of threads, each
    PER_THREAD x PER_THREAD elements of C in registers (split between VTHREADS x VTHREADS virtual
    threads with vthread), A and B staged in shared memory K_TILE columns at a time, the
    inner k loop unrolled; vector: float4 copies into shared memory, B's register row and C's
    stores as vectors; align: storage_align of the A tile."""
    A, B, C = gemm(n)
    s = topi.cuda.schedule_matmul_register_tiled(
        sl.create_schedule(C.op), C, tile=THREADS * PER_THREAD, threads=THREADS,
        vthreads=VTHREADS if vthread else 1, k_tile=K_TILE, fetch_vector=vector, vectorize=vector > 1,
        unroll_k=True, align_a=align)
    return s, [A, B, C]


STEPS = [
    ("0 naive", step0_naive),
    ("1 shared tiles", step1_shared),
    ("2 register tiles", lambda n: register_tiled(n)),
    ("3 vthread", lambda n: register_tiled(n, vthread=True)),
    ("4 float4", lambda n: register_tiled(n, vthread=True, vector=4)),
    ("5 storage_align", lambda n: register_tiled(n, vthread=True, vector=4, align=True)),
]


# ---------------------------------------------------------------------------
# Build, emulate, check, profile
# ---------------------------------------------------------------------------
# What the profile counts (per kernel, over the whole grid):
#
#   global loads/stores: warp-wide requests and the 32-byte *sectors* they touch. The
#     memory system moves whole sectors, so a warp reading 32 consecutive floats needs 4
#     sectors (128 bytes, all used: "coalesced"), 32 floats 128 bytes apart need 32 sectors
#     (1/8 of each used), and a float4 per lane over 512 consecutive bytes needs 16.
#     sectors x 32 bytes is the traffic between the SMs and the L2 cache.
#   shared: warp-wide requests and the bank *passes* they take. A pass serves one word per
#     bank (lanes reading the same word share it: a broadcast); a float access takes one
#     pass without conflicts, a float4 one four. Passes beyond that are bank conflicts.
#   barriers: __syncthreads() executed, summed over the blocks.
#   occupancy: the warps an SM holds at once out of its maximum, limited by the threads a
#     block has, the registers each thread needs (ptxas's count) and the shared memory a
#     block needs. More resident warps hide more memory latency.
#
# These are figures Nsight Compute reports too (sectors per request, shared-memory bank
# conflicts, theoretical occupancy); the interpreter computes them from the exact addresses
# each warp touches, without timing anything.

rng = np.random.default_rng(0)
a = rng.random((SIZE, SIZE), dtype=np.float32)
b = rng.random((SIZE, SIZE), dtype=np.float32)
expected = a.astype(np.float64) @ b.astype(np.float64)
profiles, modules = {}, {}


def show_ptxas(mod):
    info = (mod.ptxas_info or {}).get("C_kernel")
    if info is None:
        print("ptxas: not on PATH, so no register figures (occupancy then leaves registers out)")
    else:
        print(f"ptxas: {info.registers} registers a thread, {info.spill_bytes} bytes spilled, "
              f"{info.shared_bytes} bytes of shared memory a block")


def run_step(title, make):
    s, tensors = make(SIZE)
    mod = sl.build(s, tensors, target="cuda")
    c = np.zeros((SIZE, SIZE), dtype=np.float32)
    start = time.perf_counter()
    report = mod.emulate(a, b, c, engine="simt", profile=True)
    seconds = time.perf_counter() - start
    np.testing.assert_allclose(c, expected, rtol=1e-5, atol=1e-5 * SIZE, err_msg=f"step {title}: wrong result")
    p = report["C_kernel"]
    profiles[title], modules[title] = p, mod
    show_ptxas(mod)
    print(f"emulated on the CPU in {format_seconds(seconds)}; the result matches numpy")
    print(f"profile: {p}")
    return s, tensors, mod, p


def change(what, before, after, fmt="{}", fewer="fewer"):
    """One line saying how a figure moved from the previous step."""
    if before == after:
        return f"  {what}: {fmt.format(after)} (unchanged)"
    ratio = f", {before / after:.3g}x {fewer}" if after and before > after else ""
    return f"  {what}: {fmt.format(before)} -> {fmt.format(after)}{ratio}"


def conflicts(p):
    """Where a step's bank conflicts are: per shared buffer, on loads and on stores."""
    parts = [f"{name} {ld} on loads, {st} on stores" for name, (ld, st) in sorted(p.conflicts_by_buffer.items())]
    return "; ".join(parts) or "no shared memory"


def compare(prev, cur):
    p, q = profiles[prev], profiles[cur]
    print(f"compared with step {prev}:")
    print(change("global load requests", p.load_requests, q.load_requests))
    print(change("MB loaded from L2", p.load_sectors * 32 / 1e6, q.load_sectors * 32 / 1e6, "{:.3g}", "less"))
    print(change("sectors per store request", p.sectors_per_store, q.sectors_per_store, "{:.1f}"))
    print(change("shared requests", p.shared_requests, q.shared_requests))
    print(change("bank conflicts", p.bank_conflicts, q.bank_conflicts) + f"  ({conflicts(q)})")
    print(change("barriers", p.barriers, q.barriers))
    print(change("registers", p.registers, q.registers))
    print(change("occupancy", p.occupancy.occupancy, q.occupancy.occupancy, "{:.0%}", "lower"))


titles = [t for t, _ in STEPS]

header(f"Step 0: naive, one thread per element ({SIZE} x {SIZE} x {SIZE})")
s, tensors, mod, p = run_step(*STEPS[0])
# The default architecture is sm_90 (Hopper); target="cuda -arch=sm_80" picks another, and
# the occupancy figures follow that architecture's limits.
print(repr(mod))
print("\nits kernel, as NVRTC compiles it (mod.get_source()):")
print('extern "C"' + mod.get_source().split('extern "C"', 1)[1])
# A warp is 2 rows of 16 threads. Its B[k, j] loads are 16 consecutive floats, the same
# for both rows (64 bytes: 2 sectors); its A[i, k] loads are one float per row, the
# same in all 16 lanes of the row (2 sectors, 8 of their 64 bytes used); its C loads and
# stores are 2 x 16 consecutive floats (4 sectors). Every thread reads 2 * SIZE floats
# from global memory: the same data again and again, served by the caches at best.

for i in range(1, len(STEPS)):
    title, make = STEPS[i]
    header(f"Step {title}")
    s, tensors, mod, p = run_step(title, make)
    print(sl.lower(s, tensors))
    compare(titles[i - 1], title)

# ---------------------------------------------------------------------------
# What the figures say
# ---------------------------------------------------------------------------
# Printed from the measured figures, so that the text stays true if the compiler changes.

P = [profiles[t] for t in titles]
header("What changed, step by step")
print(f"1 shared tiles: each element of A and B is fetched from global memory once per 16 x 16 block "
      f"instead of once per thread: {P[0].load_sectors / P[1].load_sectors:.3g}x fewer sectors loaded, in "
      f"fully used {P[1].sectors_per_load:.0f}-sector requests (step 0: {P[0].sectors_per_load:.2f} sectors a "
      f"request, partly wasted on A, whose 16 lanes of a row read one float). The price: {P[1].barriers} "
      f"barriers, two per block per tile.")
print(f"2 register tiles: a 64 x 64 tile per block, so {P[1].load_sectors / P[2].load_sectors:.3g}x fewer "
      f"sectors again and {P[1].shared_requests / P[2].shared_requests:.3g}x fewer shared requests (a value "
      f"loaded into a register is used 8 times). But {P[2].bank_conflicts} bank conflicts appear "
      f"({conflicts(P[2])}): A.shared is read down a column (a warp's 4 rows of threads read rows 64 words "
      f"apart: one bank), B.shared at a stride of 8 words, and the copies store rows 64 words apart. Each "
      f"thread needs {P[2].registers} registers for its 64 accumulators and 16 operands, which limits "
      f"occupancy to {P[2].occupancy.occupancy:.0%}, and a warp's stores of C touch "
      f"{P[2].sectors_per_store:.0f} sectors each (each lane its own 32 bytes).")
serial_vthreads = P[3].barriers > P[2].barriers
print(f"3 vthread: the strided ownership puts a warp's B reads and C stores 16 bytes apart: "
      f"{P[3].sectors_per_store:.0f} sectors per store request instead of {P[2].sectors_per_store:.0f}, "
      f"and B.shared's loads are conflict-free ({conflicts(P[3])}).")
if serial_vthreads:
    print(f"  But schedlang still lowers virtual threads as serial loops, each running the whole body "
          f"(TVM interleaves them and hoists what does not depend on them): the shared tiles are copied once "
          f"per virtual thread, so barriers go from {P[2].barriers} to {P[3].barriers}, global load requests "
          f"from {P[2].load_requests} to {P[3].load_requests}, shared requests from {P[2].shared_requests} to "
          f"{P[3].shared_requests} (the copies, and A's column loaded again for each vx), and bank conflicts from "
          f"{P[2].bank_conflicts} to {P[3].bank_conflicts} (A.shared's column reads are still 4-way: rows 4 x 8 "
          f"= 32 words apart). Registers fall to {P[3].registers} (a pass holds 16 accumulators, not 64), "
          f"occupancy rises to {P[3].occupancy.occupancy:.0%}, but on a GPU the 4x copying and barriers would "
          f"cost more than that gains. With real virtual-thread injection the copies and barriers are those "
          f"of step 2 and only the strided accesses change.")
else:
    print(f"  The virtual threads are interleaved inside each thread (TVM's InjectVirtualThread): barriers "
          f"({P[3].barriers}) and global load requests ({P[3].load_requests}) stay as in step 2, bank "
          f"conflicts go from {P[2].bank_conflicts} to {P[3].bank_conflicts}, and the thread still holds 64 "
          f"accumulators ({P[3].registers} registers).")
print(f"4 float4: the shared-memory copies are one float4 per thread: {P[4].sectors_per_load:.0f} sectors per "
      f"load request (512 bytes, all used) and {P[3].load_requests / P[4].load_requests:.3g}x fewer load "
      f"requests; C is stored as float4 ({P[4].store_requests} store requests instead of "
      f"{P[3].store_requests}, {P[4].sectors_per_store:.0f} sectors each); the float4 stores into shared "
      f"memory fill whole rows of banks, so bank conflicts go from {P[3].bank_conflicts} to "
      f"{P[4].bank_conflicts} ({conflicts(P[4])}): what remains is A's column reads.")
print(f"5 storage_align: A.shared's rows padded to 9 floats ({P[4].shared_bytes} -> {P[5].shared_bytes} bytes a "
      f"block) put the rows a warp reads in different banks: bank conflicts {P[4].bank_conflicts} -> "
      f"{P[5].bank_conflicts} ({conflicts(P[5])}). The copy into A.shared is four scalar stores in the CUDA C "
      f"now (a padded row is not 16-byte aligned): four instructions instead of one, but the same four bank "
      f"passes. (The interpreter counts Kernel IR's vector store as one request: hence the same shared "
      f"requests, {P[4].shared_requests} and {P[5].shared_requests}.)")

# ---------------------------------------------------------------------------
# The table
# ---------------------------------------------------------------------------
header(f"The profile figures of every step ({SIZE} x {SIZE} x {SIZE}, mod.emulate(..., engine='simt', profile=True))")
columns = ["step", "blocks x thr", "regs", "smem B", "occ", "ld req", "sect/ld", "MB ld", "sect/st",
           "sh req", "pass/req", "conflicts", "barriers"]
rows = []
for t, p in zip(titles, P):
    rows.append([t, f"{p.blocks} x {p.threads_per_block}", "?" if p.registers is None else str(p.registers),
                 str(p.shared_bytes), f"{p.occupancy.occupancy:.0%}", str(p.load_requests),
                 f"{p.sectors_per_load:.2f}", f"{p.load_sectors * 32 / 1e6:.3g}", f"{p.sectors_per_store:.2f}",
                 str(p.shared_requests), f"{p.passes_per_request:.2f}", str(p.bank_conflicts), str(p.barriers)])
widths = [max(len(r[i]) for r in rows + [columns]) for i in range(len(columns))]
print("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(columns, widths))))
for r in rows:
    print("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))))
print("""
regs: registers a thread (ptxas); smem B: shared bytes a block; occ: occupancy (resident warps
out of the SM's maximum); ld req: warp-wide global loads; sect/ld, sect/st: 32-byte sectors per
load / store request (4 is a coalesced float, 16 a coalesced float4, 32 a scattered float);
MB ld: sectors loaded x 32 bytes; sh req: warp-wide shared accesses; pass/req: bank passes per
shared access (1 for a conflict-free float, 4 for a float4); conflicts: passes beyond the
conflict-free ones; barriers: __syncthreads() executed over all blocks.""")
print(f"Occupancy is per SM and assumes enough blocks to fill the GPU. At {SIZE} x {SIZE} the 64 x 64 tiles of "
      f"steps 2-5 make a grid of only {P[2].blocks} blocks, where a GPU has tens to over a hundred SMs: a real "
      "run wants bigger matrices (or smaller tiles) than the interpreter can afford.")

# ---------------------------------------------------------------------------
# The same CUDA C on real threads: engine="shim"
# ---------------------------------------------------------------------------
# engine="simt" interprets schedlang's Kernel IR. engine="shim" takes the exact CUDA C that
# NVRTC compiled, builds it with g++ against a small CUDA header, and runs each block's
# threads as real threads with __syncthreads() as a barrier: a second, independent check
# of the code a GPU would run. (sanitize="thread" adds ThreadSanitizer, for data races.)

final_title = titles[-1]
final = modules[final_title]
header(f"Step {final_title} through engine='shim': the CUDA C compiled by g++")
c = np.zeros((SIZE, SIZE), dtype=np.float32)
start = time.perf_counter()
final.emulate(a, b, c, engine="shim")
np.testing.assert_allclose(c, expected, rtol=1e-5, atol=1e-5 * SIZE, err_msg="shim: wrong result")
print(f"ran in {format_seconds(time.perf_counter() - start)} (g++ included; its builds are cached on disk); "
      "the result matches numpy")

header(f"The CUDA C of step {final_title} (mod.get_source('cuda'); mod.get_source('ptx') gives the PTX)")
source = final.get_source()
prelude, kernel = source.split('extern "C"', 1)
print(f"// ... {len(prelude.splitlines())} lines of helper definitions (min/max, floordiv, float4 operators)")
print('extern "C"' + kernel)

# ---------------------------------------------------------------------------
# On a real GPU
# ---------------------------------------------------------------------------
# A CUDA module is called like any other, on torch CUDA tensors, in torch's current
# stream. We time each step with CUDA events (the fastest of a few calls) at a size
# where the GPU has work to do, and compare with torch.matmul (cuBLAS; in full float32
# precision, as torch does not use TF32 for matmul unless told to).

header("On a GPU")
problem = gpu_problem()
if problem is not None:
    print(f"No GPU here ({problem}), so nothing is timed. On a machine with an NVIDIA GPU this")
    print(f"section times every step at {GPU_SIZE} x {GPU_SIZE} x {GPU_SIZE} against torch.matmul:")
    print("    c = torch.empty((n, n), device='cuda'); mod(a_gpu, b_gpu, c)   # torch CUDA tensors")
    print("and measures each call with torch.cuda.Event(enable_timing=True).")
else:
    import torch

    def gpu_ms(fn, number=10, repeat=3 if args.quick else 10):
        """Milliseconds a call: the fastest of `repeat` measurements of `number` calls in a row
        (so that the GPU, not the Python call, is what the events measure)."""
        fn()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        best = float("inf")
        for _ in range(repeat):
            start.record()
            for _ in range(number):
                fn()
            end.record()
            end.synchronize()
            best = min(best, start.elapsed_time(end) / number)
        return best

    n = GPU_SIZE
    ga = torch.rand((n, n), device="cuda")
    gb = torch.rand((n, n), device="cuda")
    want = torch.matmul(ga.double(), gb.double()).float()
    timing_note(args.quick)
    print(f"{'step':<20}{'time':>10}{'GFLOP/s':>10}   ({n} x {n} x {n}; fastest of several calls)")
    for title, make in STEPS:
        s, tensors = make(n)
        mod = sl.build(s, tensors, target="cuda")
        gc = torch.empty((n, n), device="cuda")
        ms = gpu_ms(lambda: mod(ga, gb, gc))
        torch.testing.assert_close(gc, want, rtol=1e-4, atol=1e-4 * n)
        print(f"{title:<20}{format_seconds(ms / 1e3):>10}{2 * n ** 3 / ms / 1e6:>10.0f}")
    gc = torch.empty((n, n), device="cuda")
    ms = gpu_ms(lambda: torch.matmul(ga, gb, out=gc))
    print(f"{'torch.matmul':<20}{format_seconds(ms / 1e3):>10}{2 * n ** 3 / ms / 1e6:>10.0f}")
