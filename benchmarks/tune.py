"""Auto-scheduler benchmark: tune GEMM 512³ and 1024³ and row softmax for N trials each, then
time the best found schedule beside the hand schedule of sl_kernels.py and numpy.

    python benchmarks/tune.py --trials 256            # the real run (the lead's; minutes per workload)
    python benchmarks/tune.py --quick                 # a smoke run: tiny sizes, 8 trials
    python benchmarks/tune.py --only gemm --trials 64 --log-dir runs/

Every tuning log is kept (one JSON-lines file per workload in --log-dir), so a second run
resumes it. Times are the best mean of `--repeat` rounds after a warm-up, in one process,
one contender after another; GFLOP/s for GEMM, GB/s (bytes read + written) for softmax.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import schedlang as sl  # noqa: E402
import sl_kernels  # noqa: E402


def gemm_program(n: int):
    A = sl.placeholder((n, n), name="A")
    B = sl.placeholder((n, n), name="B")
    k = sl.reduce_axis((0, n), name="k")
    C = sl.compute((n, n), lambda i, j: sl.sum(A[i, k] * B[k, j], axis=k), name="C")
    return [A, B, C]


def softmax_program(rows: int, cols: int):
    X, *_, out = sl_kernels.softmax_stages(rows, cols)
    return [X, out]


def best_time(fn, repeat: int, min_round_s: float = 0.05) -> float:
    """Best mean seconds per call over `repeat` rounds of at least min_round_s, after a warm-up."""
    fn()
    best = float("inf")
    for _ in range(repeat):
        n, start = 0, time.perf_counter()
        while True:
            fn()
            n += 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_round_s:
                break
        best = min(best, elapsed / n)
    return best


def row(name: str, seconds: float, work: float, unit: str, note: str = "") -> str:
    return f"  {name:<28} {seconds * 1e3:10.3f} ms  {work / seconds / 1e9:9.2f} {unit}  {note}"


def tune(name: str, tensors, trials: int, log: str, seed: int):
    start = time.perf_counter()
    s, args = sl.auto_schedule(tensors[-1:], target="llvm", trials=trials, log=log, seed=seed, verbose=1)
    took = time.perf_counter() - start
    return sl.build(s, args), s, took


def gemm(n: int, args) -> None:
    A, B, C = gemm_program(n)
    log = os.path.join(args.log_dir, f"gemm{n}.jsonl")
    mod, s, took = tune(f"gemm{n}", [A, B, C], args.trials, log, args.seed)
    rng = np.random.default_rng(0)
    a, b = (rng.uniform(-1, 1, (n, n)).astype("float32") for _ in range(2))
    c = np.zeros((n, n), "float32")
    flops = 2.0 * n ** 3
    mod(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-3, atol=1e-3 * n)
    print(f"GEMM float32 {n}^3 ({args.trials} trials, tuned in {took:.0f} s, log {log})")
    print(row("schedlang auto_schedule", best_time(lambda: mod(a, b, c), args.repeat), flops, "GFLOP/s"))
    bn = 32 if n % 32 == 0 else 1
    hand = sl_kernels.gemm("llvm", n, n, n, bn)
    print(row("schedlang hand (tutorial)", best_time(lambda: hand(a, b, c), args.repeat), flops, "GFLOP/s"))
    if n % 16 == 0 and n % 4 == 0:
        rt = sl_kernels.gemm_register_tiled("llvm", n, n, n)
        print(row("schedlang hand (reg-tiled)", best_time(lambda: rt(a, b, c), args.repeat), flops, "GFLOP/s"))
    print(row("numpy matmul", best_time(lambda: np.matmul(a, b, out=c), args.repeat), flops, "GFLOP/s"))


def softmax(rows: int, cols: int, args) -> None:
    X, out = softmax_program(rows, cols)
    log = os.path.join(args.log_dir, f"softmax{rows}x{cols}.jsonl")
    mod, s, took = tune("softmax", [X, out], args.trials, log, args.seed)
    x = np.random.default_rng(2).standard_normal((rows, cols), dtype=np.float32)
    o = np.zeros((rows, cols), "float32")
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    ref = e / e.sum(axis=1, keepdims=True)
    mod(x, o)
    np.testing.assert_allclose(o, ref, rtol=1e-4, atol=1e-7)
    nbytes = 2.0 * x.nbytes
    print(f"Row softmax float32 {rows}x{cols} ({args.trials} trials, tuned in {took:.0f} s, log {log})")
    print(row("schedlang auto_schedule", best_time(lambda: mod(x, o), args.repeat), nbytes, "GB/s"))
    factor = 16 if cols % 16 == 0 else 1
    hand = sl_kernels.softmax("llvm", rows, cols, factor, True)
    print(row("schedlang hand", best_time(lambda: hand(x, o), args.repeat), nbytes, "GB/s"))

    def numpy_softmax():
        m = np.exp(x - x.max(axis=1, keepdims=True))
        np.divide(m, m.sum(axis=1, keepdims=True), out=o)
    print(row("numpy", best_time(numpy_softmax, args.repeat), nbytes, "GB/s", "allocates temporaries"))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=256, help="candidates measured per workload")
    p.add_argument("--only", action="append", choices=["gemm512", "gemm1024", "softmax"],
                   help="tune only these workloads (repeatable)")
    p.add_argument("--quick", action="store_true", help="smoke run: GEMM 64, softmax 64x256, 8 trials")
    p.add_argument("--log-dir", default="tune-logs", help="where the tuning logs go (resumed when present)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeat", type=int, default=5, help="timed rounds per contender")
    args = p.parse_args(argv)
    os.makedirs(args.log_dir, exist_ok=True)
    only = set(args.only or ["gemm512", "gemm1024", "softmax"])
    if args.quick:
        args.trials, args.repeat = min(args.trials, 8), 2
        gemm(64, args)
        softmax(64, 256, args)
        return
    for n in (512, 1024):
        if f"gemm{n}" in only:
            gemm(n, args)
    if "softmax" in only:
        softmax(4096, 4096, args)


if __name__ == "__main__":
    main()
