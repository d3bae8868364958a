"""PyTorch functions for the benchmarks, eager and torch.compile (inductor, default mode).

Every function writes into a preallocated `out`. Compiling the same functions in a child
process first (`python torch_peers.py warm ...`, see `warm_compile_cache`) fills
inductor's on-disk cache under a time limit: a compile that fails or takes too long is
then skipped with a note instead of stalling the run, and the in-process compile that
follows is a cache hit.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Callable, Dict, List, Tuple

import torch
import torch.nn.functional as F


def gemm_out(a, b, out):
    return torch.mm(a, b, out=out)


def silu_and_mul_out(x, out):
    half = x.shape[1] // 2
    return torch.mul(F.silu(x[:, :half]), x[:, half:], out=out)


def softmax_out(x, out):
    return out.copy_(torch.softmax(x, dim=-1))


FUNCTIONS: Dict[str, Callable] = {"gemm": gemm_out, "silu": silu_and_mul_out, "softmax": softmax_out}


def example_inputs(key: str) -> Tuple[torch.Tensor, ...]:
    """Inputs for a workload key 'gemm:1024' (M=N=K), 'silu:8192x8192' or 'softmax:4096x4096'."""
    kind, shape = key.split(":")
    if kind == "gemm":
        n = int(shape)
        return torch.rand(n, n), torch.rand(n, n), torch.empty(n, n)
    rows, cols = (int(v) for v in shape.split("x"))
    x = torch.randn(rows, cols)
    return (x, torch.empty(rows, cols // 2)) if kind == "silu" else (x, torch.empty(rows, cols))


def compiled(kind: str) -> Callable:
    """A fresh torch.compile'd function for one shape (dynamic=False: one kernel per shape)."""
    return torch.compile(FUNCTIONS[kind], dynamic=False)


def warm_compile_cache(keys: List[str], timeout_s: float, num_threads: int) -> Dict[str, str]:
    """Compile every key in a child process under a time limit; returns key -> failure reason
    for the keys that did not compile (empty when all did)."""
    if not keys:
        return {}
    cmd = [sys.executable, os.path.abspath(__file__), "warm", str(num_threads)] + keys
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        ok = {w[3:] for w in out.split() if w.startswith("OK:")}
        return {k: f"torch.compile took longer than {timeout_s:.0f} s (limit: --compile-timeout)"
                for k in keys if k not in ok}
    ok = {w[3:] for w in proc.stdout.split() if w.startswith("OK:")}
    tail = (proc.stderr.strip().splitlines() or ["no message"])[-1][:160]
    return {k: f"torch.compile failed: {tail}" for k in keys if k not in ok}


def _warm_main(num_threads: int, keys: List[str]) -> None:
    torch.set_num_threads(num_threads)
    for key in keys:
        t0 = time.perf_counter()
        fn = compiled(key.split(":")[0])
        fn(*example_inputs(key))
        print(f"OK:{key} {time.perf_counter() - t0:.1f}s", flush=True)


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "warm":
        _warm_main(int(sys.argv[2]), sys.argv[3:])
    else:
        sys.exit("usage: python torch_peers.py warm NUM_THREADS KEY...  (keys like gemm:1024 silu:8192x8192)")
