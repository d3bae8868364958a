"""The best schedule of each GEMM tuning log (benchmarks/tune.py's gemm logs) at one thread,
CPU time: timed in the same interleaved rounds as the hand schedules (register-tiled and the
tutorial's), numpy and torch, each as a ratio to the register-tiled one (hand / auto: above 1
is faster than the hand schedule).

    OMP_NUM_THREADS=1 taskset -c 1 python benchmarks/gemm_logs_cpu_time.py --size 512 \\
        --target "llvm -num-cores=1" runs/s0/gemm512-64-_num_cores_1.jsonl runs/s1/...

On a loaded machine tune.py's table times one contender after another, minutes after the
search: its ratios move by 10-20% between runs; interleaved rounds in one process do not.
"""
from __future__ import annotations

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for path in (ROOT, HERE):
    if path not in sys.path:
        sys.path.insert(0, path)

import numpy as np  # noqa: E402
import torch  # noqa: E402

import schedlang as sl  # noqa: E402
import sl_kernels  # noqa: E402
from cpu_time import cpu_time_call  # noqa: E402


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("logs", nargs="+", help="tuning logs of the GEMM of --size for --target")
    p.add_argument("--size", type=int, default=512, help="M = N = K")
    p.add_argument("--target", default="llvm -num-cores=1")
    p.add_argument("--rounds", type=int, default=7)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    n = args.size
    rng = np.random.default_rng(0)
    a, b = (rng.uniform(-1, 1, (n, n)).astype("float32") for _ in range(2))
    want = a @ b
    fns = []

    def add(label, mod):
        c = np.zeros((n, n), "float32")
        mod(a, b, c)
        np.testing.assert_allclose(c, want, rtol=1e-3, atol=1e-3 * n)
        fns.append((label, lambda: mod(a, b, c)))

    add("schedlang hand (reg-tiled)", sl_kernels.gemm_register_tiled(args.target, n, n, n))
    add("schedlang hand (tutorial)", sl_kernels.gemm(args.target, n, n, n))
    for log in args.logs:
        s, sargs = sl.apply_best(log, sl_kernels.gemm_program(n)[-1:], target=args.target)
        add("auto " + os.path.relpath(log), sl.build(s, sargs, target=args.target))
    c = np.zeros((n, n), "float32")
    fns.append(("numpy matmul", lambda: np.matmul(a, b, out=c)))
    ta, tb, tc = (torch.from_numpy(v) for v in (a, b, c))
    fns.append(("torch.mm(out=)", lambda: torch.mm(ta, tb, out=tc)))
    times = cpu_time_call(*[fn for _, fn in fns], rounds=args.rounds, best=True)
    print(f"GEMM {n}^3, CPU time at 1 thread, best of {args.rounds} interleaved rounds, target {args.target}")
    for (label, _), t in zip(fns, times):
        print(f"  {label:70s} {t * 1e3:7.3f} ms {2 * n ** 3 / t / 1e9:6.1f} GFLOP/s  {times[0] / t:.2f}x hand")


if __name__ == "__main__":
    main()
