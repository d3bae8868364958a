"""float32 GEMM on ONE core, CPU time: the hand register-tiled GEMM (topi.cpu), the PyTorch
frontend's nn.Linear default schedule (weight prepacked), torch, numpy and ONNX Runtime (MLAS:
the Linear exported as a one-node graph, intra_op_num_threads=1; `--ort`), beside peak.py's
FMA loop compiled for the same CPU, all timed in the same interleaved rounds.

    taskset -c 1 env OMP_NUM_THREADS=1 python benchmarks/gemm_one_thread.py
    python benchmarks/gemm_one_thread.py --shapes 128x768x768 --rounds 9 --cpu znver3

Shapes are M x K x N: a Linear x[M, K] @ W[N, K]^T + bias (no bias for the squares, which
also run the hand GEMM C = A @ B with B packed in panels each call, as the tutorial does).
"linear" is the whole compiled module's call (its per-call work in Python included),
"kernel" its kernel alone, called with the same tensors.
Defaults: GEMM 512^3 and 1024^3, BERT-base's linears at sequence 128 and the Llama of
schedlang.torch.zoo's (dim 2048, hidden 5632). The clock is time.process_time (one thread:
time slices given to other processes do not count), so a loaded shared machine still gives
the kernel's own speed; each figure is the best round's mean per call (`--median` for the
median of rounds; rounds are short, so that the best one ran undisturbed in one time slice)
and % is of the FMA loop's figure from the same rounds.
"""
from __future__ import annotations

import argparse
import warnings
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for path in (HERE, ROOT):
    if path not in sys.path:
        sys.path.insert(0, path)

import numpy as np  # noqa: E402
import torch  # noqa: E402

import gemm_shapes  # noqa: E402
import harness  # noqa: E402
import peak  # noqa: E402
import sl_kernels  # noqa: E402

SQUARES = ((512, 512, 512), (1024, 1024, 1024))
SHAPES = SQUARES + gemm_shapes.SHAPES["bert"] + gemm_shapes.SHAPES["llama"]


def _check(name: str, got, want) -> None:
    err = float(np.abs(np.asarray(got) - np.asarray(want)).max() / np.abs(np.asarray(want)).max())
    if err > 1e-4:
        raise AssertionError(f"{name}: relative error {err:.2e}")


def kernel_calls(compiled, x) -> list:
    """The compiled module's kernel launches of one call, each as a call with its arguments
    bound (the same tensors: the first call's), without the frontend's per-call work."""
    from schedlang.torch import runtime
    calls, run_part = [], runtime.CompiledModule._run_part

    def spy(self, part, values, sizes, launch, device, modules=None, given=None, record=None):
        def recorded(module, arrays):
            calls.append((launch, module, arrays))
            return launch(module, arrays)
        # no prepared-call record: with one, the part runs its bound call and never launches
        return run_part(self, part, values, sizes, recorded, device, modules, given, None)
    runtime.CompiledModule._run_part = spy
    prepared, compiled.prepared_calls = compiled.prepared_calls, False   # (a replayed call runs no part)
    try:
        compiled(x)
    finally:
        runtime.CompiledModule._run_part = run_part
        compiled.prepared_calls = prepared
    if not calls:
        raise RuntimeError("kernel_calls: the compiled module launched no kernel")
    return [(lambda c: lambda: c[0](c[1], c[2]))(c) for c in calls]


def contenders(m: int, k: int, n: int, target, square: bool, ort: bool = False) -> dict:
    """name -> a call with its arguments bound and output preallocated, each checked first."""
    import schedlang.torch as slt
    torch.manual_seed(0)
    mod = torch.nn.Linear(k, n, bias=not square).eval()
    x = torch.randn(m, k)
    wt = mod.weight.detach().t().contiguous()           # [K, N]: torch.mm's and numpy's B
    out = torch.empty(m, n)
    with torch.no_grad():
        want = mod(x)
        compiled = slt.compile(mod, (x,), target=target)
        _check("linear default", compiled(x), want)
    fns = {}
    if square:
        a, b, c = x.numpy(), wt.numpy(), np.empty((m, n), np.float32)
        hand = sl_kernels.gemm_register_tiled(target, m, n, k)
        hand(a, b, c)
        _check("hand register-tiled", c, want)
        fns["hand"] = lambda: hand(a, b, c)

    def run_compiled():
        with torch.no_grad():
            compiled(x)
    fns["linear"] = run_compiled
    kernels = kernel_calls(compiled, x)
    fns["kernel"] = lambda: [call() for call in kernels]
    if square:
        fns["torch.mm"] = lambda: torch.mm(x, wt, out=out)
        xn, wn, on = x.numpy(), wt.numpy(), out.numpy()
        fns["numpy"] = lambda: np.matmul(xn, wn, out=on)
    else:
        fns["torch"] = lambda: torch.nn.functional.linear(x, mod.weight, mod.bias)
        xn, wn, bn = x.numpy(), wt.numpy(), mod.bias.detach().numpy()
        fns["numpy"] = lambda: np.add(np.matmul(xn, wn), bn)
    if ort:
        from cpu_time import ort_session
        _, run_ort = ort_session(mod, (x,))
        _check("onnxruntime", run_ort(), want)
        fns["ort"] = run_ort
    return fns


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", nargs="+", help="MxKxN (default: the squares, BERT-base and Llama)")
    ap.add_argument("--cpu", default="", help="LLVM CPU name of the schedlang code and FMA loop (default: host)")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--round-ms", type=float, default=5.0,
                    help="least length of a round: short rounds often fit in one time slice of a loaded core")
    ap.add_argument("--median", action="store_true", help="median of rounds instead of the best round")
    ap.add_argument("--ort", action="store_true", help="an ONNX Runtime column (the Linear as a one-node graph)")
    args = ap.parse_args(argv)
    from schedlang.target.target import Target
    warnings.simplefilter("ignore")          # the frontend's notes on compile, not results
    torch.set_num_threads(1)
    target = Target("llvm", cpu=args.cpu, num_threads=1)
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes] if args.shapes else list(SHAPES)
    fma, lanes = gemm_shapes.peak_loop(args.cpu)
    iters = 1 << 19
    peak_flops = iters * 2 * lanes * peak.ACCUMULATORS
    timing = harness.Timing(repeat=args.rounds, min_round_s=args.round_ms / 1e3, warmup_s=0.1, clock="cpu", pause_s=0.0)
    pick = 1 if args.median else 0
    print(f"# {harness.cpu_model()}, cpu={args.cpu or 'host'} ({lanes} float lanes), 1 thread, CPU time "
          f"(time.process_time), {'median' if args.median else 'best'} of {args.rounds} interleaved rounds; "
          f"load {harness.load_average()}")
    columns = ("hand", "linear", "kernel", "torch", "numpy") + (("ort",) if args.ort else ())
    print(f"# {'M x K x N':>16} " + "  ".join(f"{c:>16}" for c in columns)
          + "   GFLOP/s (% of the FMA loop)")
    for m, k, n in shapes:
        square = (m, k, n) in SQUARES or (m == k == n)
        fns = contenders(m, k, n, target, square, args.ort)
        results = harness.measure(list(fns.values()) + [lambda: fma(iters, 1.0)], timing)
        secs = {name: r[pick] for name, r in zip(list(fns) + ["peak"], results)}
        peak_g = peak_flops / secs["peak"] / 1e9
        cells = []
        for name in ("hand", "linear", "kernel", "torch.mm" if square else "torch", "numpy") + (("ort",) if args.ort else ()):
            if name not in secs:
                cells.append("-".rjust(16))
                continue
            g = 2 * m * k * n / secs[name] / 1e9
            cells.append(f"{g:7.1f} {100 * g / peak_g:3.0f}%".rjust(16))
        print(f"  {f'{m}x{k}x{n}':>16} " + "  ".join(cells) + f"   peak {peak_g:.1f}", flush=True)


if __name__ == "__main__":
    main()
