"""Single PyTorch ops and small blocks compiled whole by schedlang beside eager torch: where a
module a user brings would find an op far slower than torch (a lowering in plain loops, a
decomposition into gathers, a scalar libm call per element). Each case is a module of one op
(or a few) at a size a model uses, checked against eager, then timed side by side in
interleaved rounds (harness.measure); the table gives both latencies and their ratio.

    python benchmarks/op_sweep.py                   # every case, 2 threads
    python benchmarks/op_sweep.py --only conv_t softmax --threads 1
    python benchmarks/op_sweep.py --quick           # small shapes, few rounds: proves it runs (CI)
    PYTHONPATH=/path/to/other/checkout python benchmarks/op_sweep.py    # that checkout's schedlang

The ratio is schedlang / torch (lower is better); a case torch runs in a few microseconds
measures mostly the call's overhead (~20 us for a compiled module on these machines).
"""
from __future__ import annotations

import argparse
import os
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
if "PYTHONPATH" not in os.environ:       # (PYTHONPATH=<another checkout>: its schedlang, for a before/after)
    sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import harness  # noqa: E402


def _modules():
    """name -> (module factory, full input shape, quick input shape: the module's channels)."""
    conv_t2 = lambda: nn.ConvTranspose2d(64, 32, 4, 2, 1)            # noqa: E731
    return {
        "transpose": (lambda: Fn(lambda x: x.t().contiguous() + 1), (2048, 2048), (600, 515)),
        "permute_nchw_nhwc": (lambda: Fn(lambda x: x.permute(0, 2, 3, 1).contiguous()), (1, 96, 112, 112), (1, 80, 61, 59)),
        "argmax_rows": (lambda: Fn(lambda x: torch.argmax(x, -1)), (128, 50257), (16, 1013)),
        "max_dim_rows": (lambda: Fn(lambda x: x.max(-1).values), (256, 4096), (8, 512)),
        "softmax_rows": (lambda: Fn(lambda x: torch.softmax(x, -1)), (256, 4096), (8, 512)),
        "softmax_attn_scores": (lambda: Fn(lambda x: torch.softmax(x, -1)), (8, 64, 49, 49), (2, 4, 49, 49)),
        "softplus": (lambda: Fn(F.softplus), (1024, 1024), (64, 256)),
        "mish": (lambda: Fn(F.mish), (1024, 1024), (64, 256)),
        "bicubic_x2": (lambda: Fn(lambda x: F.interpolate(x, scale_factor=2, mode="bicubic")), (1, 16, 64, 64), (1, 4, 16, 16)),
        "reflect_pad": (lambda: Fn(lambda x: F.pad(x, (1, 1, 1, 1), mode="reflect")), (1, 256, 64, 64), (1, 8, 16, 16)),
        "mean_dim0": (lambda: Fn(lambda x: x.mean(0)), (1024, 1024), (64, 96)),
        "mean_tokens": (lambda: Fn(lambda x: x.mean(1)), (8, 512, 768), (2, 31, 96)),
        "conv_t2d_4x4_s2": (conv_t2, (1, 64, 56, 56), (1, 64, 9, 7)),
        "conv_t2d_2x2_s2": (lambda: nn.ConvTranspose2d(256, 128, 2, 2), (1, 256, 28, 28), (1, 256, 6, 5)),
        "conv_t1d_vocoder": (lambda: nn.ConvTranspose1d(256, 128, 16, 8, 4), (1, 256, 100), (1, 256, 20)),
        "conv3d_3x3x3": (lambda: nn.Conv3d(32, 32, 3, padding=1), (1, 32, 16, 28, 28), (1, 32, 4, 8, 8)),
        "conv3d_temporal": (lambda: nn.Conv3d(64, 64, (3, 1, 1), padding=(1, 0, 0)), (1, 64, 8, 28, 28), (1, 64, 4, 6, 6)),
        "conv_t3d_2x2x2_s2": (lambda: nn.ConvTranspose3d(32, 16, 2, 2), (1, 32, 8, 16, 16), (1, 32, 3, 4, 4)),
        "index_add_rows": (lambda: Fn(lambda x: torch.zeros(1000, x.shape[1]).index_add(0, torch.arange(x.shape[0]) % 1000, x)),
                           (4096, 64), (256, 16)),
        "gelu_tanh": (lambda: Fn(lambda x: F.gelu(x, approximate="tanh")), (128, 3072), (16, 256)),
        "layer_norm": (lambda: nn.LayerNorm(768), (128, 768), (16, 768)),
        "group_norm_silu": (lambda: Fn(lambda x: F.silu(F.group_norm(x, 32))), (1, 320, 64, 64), (1, 64, 8, 8)),
    }


class Fn(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


def run_case(name: str, make, shape, timing: harness.Timing, threads: int):
    import schedlang.torch as slt
    torch.manual_seed(0)
    model = make().eval()
    x = torch.randn(shape)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = slt.compile(model, [x], target=f"llvm -num-cores={threads}")
        want, got = model(x), compiled(x)
        for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4 * max(1.0, float(w.abs().max())))
        fallbacks = compiled.fallback_ops()
        (_, sl_med), (_, t_med) = harness.measure([lambda: compiled(x), lambda: model(x)], timing)
    return sl_med, t_med, fallbacks


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--only", nargs="*", help="cases whose name contains one of these")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--quick", action="store_true", help="small shapes, few rounds")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    timing = harness.Timing.quick() if args.quick else harness.Timing(repeat=7)
    print(f"machine: {harness.cpu_model()}, {harness.core_count()} cores; threads {args.threads}; "
          f"torch {torch.__version__}; load average {harness.load_average()}")
    print(f"{'case':22s} {'shape':>20s} {'schedlang ms':>13s} {'torch ms':>10s} {'ratio':>7s}  in torch")
    for name, (make, full, quick) in _modules().items():
        if args.only and not any(o in name for o in args.only):
            continue
        shape = quick if args.quick else full
        sl_s, t_s, fallbacks = run_case(name, make, shape, timing, args.threads)
        print(f"{name:22s} {'x'.join(map(str, shape)):>20s} {sl_s * 1e3:13.3f} {t_s * 1e3:10.3f} "
              f"{sl_s / t_s:7.2f}  {', '.join(fallbacks) or 'none'}", flush=True)


if __name__ == "__main__":
    main()
