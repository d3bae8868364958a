"""Fused attention against torch's own CPU scaled_dot_product_attention, side by side.

    python benchmarks/attention.py                    # B=1, H=12, D=64, S = 128, 512, 2048
    python benchmarks/attention.py --seq 128 512 --reps 20 --causal
    python benchmarks/attention.py --seq 2048 --causal --written-out   # GPT-2's tril + masked_fill

For each sequence length: F.scaled_dot_product_attention compiled by schedlang.torch.compile
(one fused kernel, default schedule) and run by torch, on the same thread count, calls
interleaved (A, B, A, B, ...) so that a shared machine's noise hits both alike; min and
median milliseconds and torch / schedlang (> 1: schedlang faster). Memory: the bytes of
every buffer the fused kernel allocates per worker (from its Kernel IR) against the S x S
score matrix an unfused attention holds per head; with --rss, the growth of a fresh
process's resident set over its first call, for each contender (Linux). With --written-out,
schedlang compiles causal attention as GPT-2's code writes it (q @ k^T * scale, masked_fill
of ~tril, softmax, @ v: one fused kernel, the written-out mask recognized as causal) and torch
runs SDPA with is_causal.
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import schedlang as sl  # noqa: E402
import schedlang.torch as st  # noqa: E402
from schedlang.torch.schedules import threads  # noqa: E402


class SDPA(torch.nn.Module):
    def __init__(self, causal: bool):
        super().__init__()
        self.causal = causal

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)


class WrittenOutCausal(torch.nn.Module):
    """Causal attention as GPT-2's code writes it."""

    def forward(self, q, k, v):
        n = q.shape[-2]
        s = torch.matmul(q, k.transpose(-2, -1)) * (q.shape[-1] ** -0.5)
        mask = torch.tril(torch.ones(n, n, dtype=torch.bool))
        return torch.softmax(s.masked_fill(~mask, float("-inf")), dim=-1) @ v


def scratch_bytes(compiled) -> int:
    """Bytes of the buffers the kernels allocate (per worker: each runs its own copy)."""
    text = compiled.ir("kernel")
    sizes = re.findall(r"(?:local|global) \w+: f(\d+)\[(\d+)\]", text)
    return sum(int(bits) // 8 * int(n) for bits, n in sizes)


def run(seq: int, heads: int, dim: int, causal: bool, reps: int, written_out: bool = False) -> str:
    q, k, v = (torch.randn(1, heads, seq, dim) for _ in range(3))
    module = WrittenOutCausal() if written_out and causal else SDPA(causal)
    with warnings.catch_warnings():
        warnings.simplefilter("error", st.FallbackWarning)
        compiled = st.compile(module, (q, k, v))
    out = torch.empty_like(q)
    with torch.no_grad():
        torch.testing.assert_close(compiled(q, k, v), module(q, k, v), rtol=1e-4, atol=1e-4)
        ours, theirs = [], []
        for _ in range(reps):
            t = time.perf_counter()
            compiled(q, k, v, out=out)
            ours.append(time.perf_counter() - t)
            t = time.perf_counter()
            F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            theirs.append(time.perf_counter() - t)
    ms = lambda xs: f"{min(xs) * 1e3:8.2f} {statistics.median(xs) * 1e3:8.2f}"   # noqa: E731
    scratch = scratch_bytes(compiled)
    kind = ("written" if written_out else "causal") if causal else "full  "
    return (f"S={seq:5d} {kind} | schedlang {ms(ours)} | torch {ms(theirs)} | "
            f"x{min(theirs) / min(ours):5.2f} x{statistics.median(theirs) / statistics.median(ours):5.2f} | "
            f"scratch/worker {scratch / 1024:7.1f} KiB ({scratch / seq:6.0f} B per key), S x S f32 "
            f"{seq * seq * 4 / 1024:8.0f} KiB")


def first_call_rss(seq: int, heads: int, dim: int, who: str) -> str:
    """In this (fresh) process: compile, then the first call of who ("schedlang" into a
    preallocated output, or "torch"); the growth of the peak RSS over that call."""
    q, k, v = (torch.randn(1, heads, seq, dim) for _ in range(3))
    compiled = st.compile(SDPA(False), (q, k, v))
    out = torch.empty_like(q)
    before = _rss_kib()
    with torch.no_grad():
        kept = compiled(q, k, v, out=out) if who == "schedlang" else F.scaled_dot_product_attention(q, k, v)
    grew = (_rss_kib() - before) / 1024
    del kept
    return f"S={seq:5d} {who:9s}: RSS +{grew:6.1f} MiB over the first call (the output is {out.numel() * 4 / 2**20:.1f} MiB)"


def _rss_kib() -> int:
    """The resident set now (pages touched and kept: stacks, heap, the output), in KiB."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seq", type=int, nargs="+", default=[128, 512, 2048])
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--causal", action="store_true", help="causal only (default: both)")
    ap.add_argument("--written-out", action="store_true",
                    help="causal as GPT-2 writes it (tril mask, masked_fill) for schedlang; torch: SDPA is_causal")
    ap.add_argument("--rss", action="store_true", help="also each contender's peak RSS growth, in fresh processes")
    ap.add_argument("--rss-child", nargs=2, metavar=("SEQ", "WHO"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rss_child:
        print(first_call_rss(int(args.rss_child[0]), args.heads, args.dim, args.rss_child[1]))
        return
    n = threads(sl.Target.create("llvm"))
    torch.set_num_threads(n)
    print(f"B=1 H={args.heads} D={args.dim} float32, {n} threads (torch too); ms min / median; "
          "x = torch / schedlang (min, median)")
    for seq in args.seq:
        for causal in ((True,) if args.causal else (False, True)):
            print(run(seq, args.heads, args.dim, causal, args.reps if seq < 2048 else max(3, args.reps // 3),
                      args.written_out), flush=True)
    if args.rss:
        for seq in args.seq:
            for who in ("schedlang", "torch"):
                child = [sys.executable, os.path.abspath(__file__), "--rss-child", str(seq), who,
                         "--heads", str(args.heads), "--dim", str(args.dim)]
                done = subprocess.run(child, capture_output=True, text=True)
                print(done.stdout.strip() or done.stderr.strip().splitlines()[-1], flush=True)


if __name__ == "__main__":
    main()
