"""A Linear x[M, K] @ W[N, K]^T + bias on ONE core, CPU time: the kernel reading W packed in
[N / nr, K, nr] panels (prepack.py) beside the kernel reading W in place as [N, K]
(schedules._matmul_nt) and torch's F.linear, timed in the same interleaved rounds.

    taskset -c 1 env OMP_NUM_THREADS=1 python benchmarks/linear_inplace.py
    python benchmarks/linear_inplace.py --shapes 1x2048x2048 128x768x768 --rounds 9

Shapes are M x K x N. The choice between the two is ops/matmul.reads_weight_in_place; this
script forces each side by replacing it. "packed" and "in place" are the compiled modules'
kernels alone (gemm_one_thread.kernel_calls: the same tensors, no per-call Python work);
figures are GFLOP/s of the best round's mean per call (time.process_time) and the ratio of
in place to packed time.
"""
from __future__ import annotations

import argparse
import os
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for path in (HERE, ROOT):
    if path not in sys.path:
        sys.path.insert(0, path)

import torch  # noqa: E402

import harness  # noqa: E402
from gemm_one_thread import kernel_calls  # noqa: E402

SHAPES = ((128, 768, 768), (128, 768, 3072), (128, 3072, 768),
          (128, 2048, 2048), (128, 2048, 5632), (128, 5632, 2048),
          (1, 2048, 2048), (1, 2048, 5632), (1, 5632, 2048),
          (8, 2048, 2048), (8, 2048, 5632), (8, 5632, 2048))


def compiled_kernels(mod, x, target, in_place: bool):
    """The kernel calls of mod compiled with its weight read in place or packed, checked."""
    import schedlang.torch as slt
    from schedlang.torch import model_cache
    from schedlang.torch.ops import matmul
    saved, key = matmul.reads_weight_in_place, model_cache.key_text
    matmul.reads_weight_in_place = lambda *a, **k: in_place
    model_cache.key_text = lambda *a, **k: None        # the model cache's key holds no choice of layout
    try:
        with torch.no_grad():
            compiled = slt.compile(mod, (x,), target=target)
            got, want = compiled(x), mod(x)
    finally:
        matmul.reads_weight_in_place, model_cache.key_text = saved, key
    err = float((got - want).abs().max() / want.abs().max())
    if err > 1e-4:
        raise AssertionError(f"{'in place' if in_place else 'packed'}: relative error {err:.2e}")
    packs = len(compiled._plan.packs) if hasattr(compiled, "_plan") else -1
    if in_place and packs > 0:
        raise AssertionError("the in-place module still packs its weight")
    calls = kernel_calls(compiled, x)
    return lambda: [c() for c in calls]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", nargs="+", help="MxKxN (default: BERT-base and Llama, M = 128, 1 and 8)")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--round-ms", type=float, default=5.0)
    args = ap.parse_args(argv)
    from schedlang.target.target import Target
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    target = Target("llvm", num_threads=1)
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes] if args.shapes else list(SHAPES)
    timing = harness.Timing(repeat=args.rounds, min_round_s=args.round_ms / 1e3, warmup_s=0.05,
                            clock="cpu", pause_s=0.0)
    print(f"# {harness.cpu_model()}, 1 thread, CPU time (time.process_time), best of {args.rounds} "
          f"interleaved rounds; load {harness.load_average()}")
    print(f"# {'M x K x N':>16} {'packed':>9} {'in place':>9} {'F.linear':>9}   GFLOP/s; in place / packed time")
    for m, k, n in shapes:
        torch.manual_seed(0)
        mod = torch.nn.Linear(k, n).eval()
        x = torch.randn(m, k)
        fns = [compiled_kernels(mod, x, target, False), compiled_kernels(mod, x, target, True),
               lambda: torch.nn.functional.linear(x, mod.weight, mod.bias)]
        secs = [r[0] for r in harness.measure(fns, timing)]
        g = [2 * m * k * n / s / 1e9 for s in secs]
        print(f"  {f'{m}x{k}x{n}':>16} {g[0]:9.1f} {g[1]:9.1f} {g[2]:9.1f}   {secs[1] / secs[0]:.2f}", flush=True)


if __name__ == "__main__":
    main()
