"""The two CPU engines of the CUDA target, timed: the g++ shim and the SIMT interpreter.

    python benchmarks/emulators.py                 # every workload on both engines
    python benchmarks/emulators.py --quick         # small sizes (a smoke run)
    python benchmarks/emulators.py --engines shim --only elementwise
    python benchmarks/emulators.py --repeat 3      # the best of 3 runs of each

Workloads (float32 unless said), each checked against numpy after its run:
  elementwise  B = exp(A) * 2 over 2**18 elements, 1024 blocks x 256 threads (no barrier)
  gemm-shared  C = A @ B, 256^3: topi.cuda.schedule_matmul_shared, 16x16 threads a block,
               the A and B tiles through shared memory (two __syncthreads a k step)
  gemm-reg     C = A @ B, 512^3: topi.cuda.schedule_matmul_register_tiled (TVM's GEMM tutorial:
               a 64x64 tile a block of 8x8 threads, 2x2 vthreads, an 8x8 register tile a thread)
  gemm-tc      C = A @ B, 256^3, float16 in, float32 out: topi.cuda_tensorcore (mma.sync m16n8k16 +
               ldmatrix, a 64x64 block of 4 warps, K by 32 through two cp.async stages: gpu_check's
               small tile), checked against numpy's float32 product of the float16 inputs

Issue 19's goals (CPU seconds, the SIMT engine with its race check and profile): GEMM 512^3
shared + register-tiled <= 10 s, the tensor-core GEMM 256^3 <= 10 s; the shim's 1024 x 256
elementwise <= 2 s.

Each engine's first call builds (g++ for the shim) and is timed apart ("first"), then the
best of --repeat runs: wall time ("run") and this process's CPU time ("cpu", all its threads).
The shim is run with its default bounds check on; the SIMT engine with its race check and,
with --profile, its profile. This is a benchmark, not a test: on a machine that others share,
wall time counts the time slices they take (a load of 15 on 2 cores made the SIMT engine's
wall time 7-9x its CPU time), so compare the cpu column, and rows of one run.

Measured 2026-12-02 on the 2-core AMD EPYC (Zen 5) development machine, shared (load 10-20),
CPU seconds of one run, before (main at 3c24458) -> after the emulator work:
  shim elementwise 2**18, 1024 x 256:    ~9 (an OS thread a GPU thread; 23-27 s wall) -> 0.02 (0.05 wall)
  shim GEMM 256^3 shared 16x16:          -> 0.15;  shim GEMM 512^3 register-tiled: -> 0.23
  SIMT GEMM 256^3 register-tiled:         2.1-2.4 -> 0.66-0.75 (profile=False)
  SIMT GEMM 512^3 register-tiled:         8.5 -> 3.9 (profile=True); 2.1 with profile=False
Measured 2026-12-03 on the 2-core AMD EPYC (Zen 1) machine, loaded (load 5-7), CPU seconds,
--profile, before -> after the profile's counters took one sort an access (not np.unique x 3):
  SIMT GEMM 256^3 shared tiles 16x16:     9.8 -> 4.7 (2.6 with profile=False)
  SIMT GEMM 512^3 register-tiled:         20.6 -> 13.4 (10.1 with profile=False)
  SIMT tensor-core GEMM 256^3:            0.64 (shim: 0.22)
Measured 2026-12-03 on the Zen 1, loaded (load 7-10, more than the line above), CPU seconds, --profile,
taskset -c 1, main at 341f64a -> the numba kernels for the race check and profile (simt/jit.py;
SCHEDLANG_SIMT_JIT=0 turns them off), local buffers element-major and loop-index arithmetic kept
per loop values:
  SIMT elementwise 2**18:                 0.08 -> 0.06-0.07
  SIMT GEMM 256^3 shared tiles 16x16:     4.5 -> 1.8-3.0
  SIMT GEMM 512^3 register-tiled:         15.9 -> 8.0-8.3 (issue 19's goal: <= 10)
  SIMT tensor-core GEMM 256^3:            1.03 -> 0.89-0.96
  the numba kernels alone (one process, SCHEDLANG_SIMT_JIT=0 vs 1): GEMM 256^3 shared 5.2 -> 2.9,
  GEMM 512^3 register-tiled 11.9 -> 7.5. Once a process: numba's import and first cached load
  ~1.8 CPU s (in "first"); a fresh install's compile ~12 s.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import schedlang as sl                      # noqa: E402
from schedlang import topi                  # noqa: E402
from schedlang.topi import cuda, cuda_tensorcore  # noqa: E402


def elementwise(n: int, threads: int):
    A = sl.placeholder((n,), name="A")
    B = sl.compute((n,), lambda i: sl.exp(A[i]) * 2.0, name="B")
    s = sl.create_schedule(B.op)
    bo, bi = s[B].split(B.op.axis[0], factor=threads)
    s[B].bind(bo, sl.thread_axis("blockIdx.x"))
    s[B].bind(bi, sl.thread_axis("threadIdx.x"))
    a = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    return s, [A, B], [a, np.zeros(n, np.float32)], lambda: np.exp(a) * np.float32(2)


def _gemm(n: int):
    A = sl.placeholder((n, n), name="A")
    B = sl.placeholder((n, n), name="B")
    C = topi.nn.matmul(A, B)
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
    return A, B, C, [a, b, np.zeros((n, n), np.float32)], lambda: a @ b


def gemm_shared(n: int):
    A, B, C, arrays, want = _gemm(n)
    s = cuda.schedule_matmul_shared(sl.create_schedule(C.op), C, block=(16, 16), k_tile=16)
    return s, [A, B, C], arrays, want


def gemm_register_tiled(n: int):
    A, B, C, arrays, want = _gemm(n)
    s = cuda.schedule_matmul_register_tiled(sl.create_schedule(C.op), C, tile=64, threads=8, vthreads=2,
                                            k_tile=8)
    return s, [A, B, C], arrays, want


def gemm_tensor_cores(n: int):
    s, (A, B, C) = cuda_tensorcore.gemm(n, n, n, "float16", "float32", BM=64, BN=64, BK=32, WM=32, WN=32,
                                        pad=8, async_copy=True, stages=2)
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((n, n)).astype(np.float16) for _ in range(2))
    want = a.astype(np.float32) @ b.astype(np.float32)
    return s, [A, B, C], [a, b, np.zeros((n, n), np.float32)], lambda: want


def workloads(quick: bool):
    """name -> (title, builder)"""
    if quick:
        return {"elementwise": ("elementwise 2**12, 16 x 256", lambda: elementwise(1 << 12, 256)),
                "gemm-shared": ("GEMM 64^3 shared tiles 16x16", lambda: gemm_shared(64)),
                "gemm-reg": ("GEMM 128^3 register-tiled 64/8x8", lambda: gemm_register_tiled(128)),
                "gemm-tc": ("GEMM 64^3 tensor cores f16 -> f32", lambda: gemm_tensor_cores(64))}
    return {"elementwise": ("elementwise 2**18, 1024 x 256", lambda: elementwise(1 << 18, 256)),
            "gemm-shared": ("GEMM 256^3 shared tiles 16x16", lambda: gemm_shared(256)),
            "gemm-reg": ("GEMM 512^3 register-tiled 64/8x8", lambda: gemm_register_tiled(512)),
            "gemm-tc": ("GEMM 256^3 tensor cores f16 -> f32", lambda: gemm_tensor_cores(256))}


def time_engine(mod, arrays, want, engine: str, repeat: int, profile: bool):
    """(first call's wall seconds, best run's (wall, CPU) seconds); asserts the result."""
    options = {"profile": True} if engine == "simt" and profile else {}
    times = []
    for _ in range(1 + repeat):
        arrays[-1][...] = 0
        start, cpu = time.perf_counter(), time.process_time()
        mod.emulate(*arrays, engine=engine, **options)
        times.append((time.perf_counter() - start, time.process_time() - cpu))
        np.testing.assert_allclose(arrays[-1], want(), rtol=1e-4, atol=1e-3)
    return times[0][0], min(times[1:]) if repeat else times[0]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    p.add_argument("--engines", default="shim,simt", help="comma-separated: shim, simt")
    p.add_argument("--only", action="append",
                   help="a workload (elementwise, gemm-shared, gemm-reg, gemm-tc); repeatable")
    p.add_argument("--repeat", type=int, default=1, help="timed runs after the first call (best is shown)")
    p.add_argument("--profile", action="store_true", help="SIMT with profile=True")
    args = p.parse_args(argv)
    engines = args.engines.split(",")
    table = workloads(args.quick)
    print(f"{'workload':36} {'engine':6} {'first s':>9} {'run s':>9} {'cpu s':>9}")
    for name, (title, make) in table.items():
        if args.only and name not in args.only:
            continue
        s, tensors, arrays, want = make()
        mod = sl.build(s, tensors, target="cuda")
        for engine in engines:
            first, (wall, cpu) = time_engine(mod, arrays, want, engine, args.repeat, args.profile)
            print(f"{title:36} {engine:6} {first:9.3f} {wall:9.3f} {cpu:9.3f}", flush=True)


if __name__ == "__main__":
    main()
