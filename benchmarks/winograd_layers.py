"""ResNet's 3x3 stride-1 layers as Winograd F(m x m, 3 x 3) kernels (topi/winograd.py, m = 2
and 4) beside prepacked oneDNN (the weight reordered once, mkldnn._convolution_pointwise on a
channels-last input with the ReLU fused: what Inductor with freezing runs), each with bias and
ReLU; checked against float64 numpy; one thread, CPU time (process_time), best of --rounds
interleaved rounds; GFLOP/s counted as the direct convolution's 2 * OC * IC * 9 * OH * OW,
beside this process's float32 FMA peak (peak.py's loop, CPU time). Run it on one core:

    OMP_NUM_THREADS=1 taskset -c 1 python benchmarks/winograd_layers.py
"""
from __future__ import annotations

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for p in (ROOT, HERE):
    if p not in sys.path:
        sys.path.insert(0, p)

import numpy as np  # noqa: E402
import torch  # noqa: E402

from conv_layer_ab import best_cpu_times  # noqa: E402

# (channels, size) of ResNet-18/50's 3x3 stride-1 layers (ResNet-50's bottlenecks: the same
# channels / 4 at each size; ResNet-18's: 64-512)
LAYERS = ((64, 56), (128, 28), (256, 14), (512, 7))


def peak_gflops() -> float:
    """peak.py's FMA loop on this thread, timed in CPU time."""
    import peak
    fn, lanes, _ = peak._compile()
    n = 1 << 24
    fn(n, 1.0)
    best = 0.0
    for _ in range(3):
        t0 = time.process_time()
        fn(n, 1.0)
        best = max(best, n * 2 * lanes * peak.ACCUMULATORS / (time.process_time() - t0))
    return best / 1e9


def winograd_layer(c: int, size: int, m: int, x: np.ndarray, w: np.ndarray, b: np.ndarray):
    """(the built Winograd kernel as a no-argument call, its output checked against numpy)."""
    import schedlang as sl
    from schedlang.topi import winograd as wg
    cb, nr = 8, 16
    u = wg.transform_weight(w, m, nr)
    X = sl.placeholder((1, c // cb, size, size, cb), name="X")
    U = sl.placeholder(u.shape, name="U")
    B = sl.placeholder((c,), name="B")
    out = wg.conv2d_winograd_nchwc(X, U, c, m, 1, bias=B, relu=True)
    f = sl.build(wg.schedule_conv2d_winograd(sl.create_schedule(out.op), out), [X, U, B, out], target="llvm")
    xb = np.ascontiguousarray(x.reshape(1, c // cb, cb, size, size).transpose(0, 1, 3, 4, 2))
    o = np.empty([int(e) for e in out.shape], np.float32)
    f(xb, u, b, o)
    got = o.transpose(0, 1, 4, 2, 3).reshape(1, c, size, size)
    ref = wg.reference(x, w, 1, b, True)
    err = np.abs(got - ref).max() / (np.abs(w).sum(axis=(1, 2, 3)).max() * np.abs(x).max())
    return (lambda: f(xb, u, b, o)), err


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--tiles", default="2,4", help="the m of F(m x m, 3 x 3) to time")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    ms = [int(t) for t in args.tiles.split(",")]
    peak = peak_gflops()
    print(f"FMA peak, this thread, CPU time: {peak:.1f} GFLOP/s")
    print(f"{'layer':>16} " + " ".join(f"{'F(%d) ms' % m:>9} {'GF/s':>5}" for m in ms)
          + f" {'oneDNN':>7} {'GF/s':>5}  " + " ".join(f"{'F(%d)/dnn' % m:>9}" for m in ms) + "  rel.err")
    for c, size in LAYERS:
        rng = np.random.default_rng(0)
        x = rng.standard_normal((1, c, size, size)).astype(np.float32)
        w = (rng.standard_normal((c, c, 3, 3)) / (3 * c ** 0.5)).astype(np.float32)
        b = rng.standard_normal(c).astype(np.float32)
        fns, errs = [], []
        for m in ms:
            fn, err = winograd_layer(c, size, m, x, w, b)
            fns.append(fn)
            errs.append(err)
        xt = torch.from_numpy(x).contiguous(memory_format=torch.channels_last)
        wt, bt = torch.from_numpy(w), torch.from_numpy(b)
        conv_args = ([1, 1], [1, 1], [1, 1], 1)
        wp = torch.ops.mkldnn._reorder_convolution_weight(wt, *conv_args, list(xt.shape))
        fns.append(lambda: torch.ops.mkldnn._convolution_pointwise(xt, wp, bt, *conv_args, "relu", [], ""))
        times = best_cpu_times(fns, args.rounds)
        flop = 2 * c * c * 9 * size * size
        cells = " ".join(f"{t * 1e3:9.3f} {flop / t / 1e9:5.1f}" for t in times)
        ratios = " ".join(f"{t / times[-1]:9.3f}" for t in times[:-1])
        print(f"{'3x3 %d %dx%d' % (c, size, size):>16} {cells}  {ratios}  " + " ".join(f"{e:.1e}" for e in errs))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
