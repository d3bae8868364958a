"""ResNet's 3x3 stride-1 layers as Winograd F(m x m, 3 x 3) kernels (topi/winograd.py, m = 2
and 4) beside prepacked oneDNN (the weight reordered once, mkldnn._convolution_pointwise on a
channels-last input with the ReLU fused: what Inductor with freezing runs), each with bias and
ReLU; checked against float64 numpy; one thread, CPU time (process_time), best of --rounds
interleaved rounds; GFLOP/s counted as the direct convolution's 2 * OC * IC * 9 * OH * OW,
beside this process's float32 FMA peak (peak.py's loop, CPU time). Run it on one core:

    OMP_NUM_THREADS=1 taskset -c 1 python benchmarks/winograd_layers.py

With --whole MODEL (a zoo name: resnet18, resnet50), the whole model instead: compiled with
every convolution direct (ops/conv_winograd.ENABLED off) and with the Winograd rule, beside
ONNX Runtime, Inductor (freezing) and eager in the same interleaved rounds (cpu_time.py's
timing and ORT session: one thread, CPU time, median and least of --rounds); results checked
against eager first.
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


def whole_model(name: str, rounds: int) -> None:
    """The model compiled direct-only and with Winograd beside ORT, Inductor and eager."""
    import warnings
    import schedlang.torch as slt
    import torch._inductor.config as cfg
    from cpu_time import cpu_time_call, ort_session
    from schedlang.target.target import Target
    from schedlang.torch import zoo
    from schedlang.torch.ops import conv_winograd
    target = Target.create(Target("llvm", num_threads=1))
    model, inputs = zoo.build(name, "full")
    model.eval()
    names, fns = [], []
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        saved = conv_winograd.ENABLED
        for side, enabled in (("direct", False), ("winograd", True)):
            conv_winograd.ENABLED = enabled
            try:
                compiled = slt.compile(model, inputs, target=target)
            finally:
                conv_winograd.ENABLED = saved
            names.append(side)
            fns.append(lambda c=compiled: c(*inputs))
        want = model(*inputs)
        for side, fn in zip(names, fns):
            torch.testing.assert_close(fn(), want, rtol=1e-3, atol=1e-3, msg=lambda m, n=side: f"{n}: {m}")
        names.append("onnxruntime")
        fns.append(ort_session(model, inputs)[1])
        cfg.freezing = True
        ind = torch.compile(model, dynamic=False)
        ind(*inputs)
        names += ["inductor", "eager"]
        fns += [lambda: ind(*inputs), lambda: model(*inputs)]
        samples = cpu_time_call(*fns, rounds=rounds, samples=True)
    t = {n: sorted(r)[len(r) // 2] for n, r in zip(names, samples)}
    print(f"# {name}: 1 thread, CPU ms per call (process_time, median (least) of {rounds} interleaved rounds); "
          f"load avg {os.getloadavg()[0]:.1f}")
    print("  " + "  ".join(f"{n} {t[n] * 1e3:.2f} ({min(r) * 1e3:.2f})" for n, r in zip(names, samples)))
    for n in ("direct", "winograd"):
        print(f"  {n}: " + "   ".join(f"/ {o} {t[n] / t[o]:.3f}" for o in ("onnxruntime", "inductor", "eager")))
    print(f"  winograd / direct {t['winograd'] / t['direct']:.3f}")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--tiles", default="2,4", help="the m of F(m x m, 3 x 3) to time")
    ap.add_argument("--whole", default=None, help="a zoo model (resnet18, resnet50) compiled whole instead")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    if args.whole:
        return whole_model(args.whole, args.rounds)
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
