"""Every convolution kernel of a compiled CNN (ResNet-18/50 by default), timed alone at
CPU time, beside torch's own (oneDNN) convolution of the same layer: GFLOP/s of each and of
the machine's FMA peak. Run it on one core so that CPU time is the kernel's own time on a
loaded machine:

    OMP_NUM_THREADS=1 taskset -c 1 python benchmarks/conv_model_layers.py --model resnet18
    ... conv_model_layers.py --model resnet50 --cpu znver3 --peak 117   # AVX2 code on an AVX-512 host

Each kernel is the model's own (model_profile.kernels: built alone from its default
schedule, its inputs as placeholders, NCHWc activations where the model has them), so its
epilogue (batch norm folded, ReLU, the residual add and a fused downsampling convolution)
is in its time; torch's time is F.conv2d of the layer's convolutions (with bias) on NCHW
tensors. Times are the best of rounds of process_time over a few calls.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def cpu_seconds(fn, rounds: int, budget: float = 0.05) -> float:
    """The best CPU time of one call of fn over rounds rounds of enough calls to fill budget."""
    fn()
    t0 = time.process_time()
    fn()
    once = max(time.process_time() - t0, 1e-5)
    calls = max(1, int(budget / once))
    best = float("inf")
    for _ in range(rounds):
        t0 = time.process_time()
        for _ in range(calls):
            fn()
        best = min(best, (time.process_time() - t0) / calls)
    return best


def conv_shape(conv_op) -> dict:
    """(oc, ic, kernel, stride, out size) of a convolution op of the lowered program (NCHW or NCHWc)."""
    from schedlang.torch.schedules import static
    shape = [static(e) for e in conv_op.shape]
    oc = shape[1] * shape[4] if len(shape) == 5 else shape[1]
    red = [static(a.dom.extent) for a in conv_op.body.axis]
    taps = 1
    for r in red:
        taps *= r
    ks = [r for r in red[1:] if r in (1, 3, 5, 7)][:2] if len(red) > 2 else []
    k = ks[0] if len(ks) == 2 and ks[0] == ks[1] else 1
    from schedlang.expr.functor import walk
    from schedlang.tensor.op import TensorRead
    n = conv_op.axis[0].var
    x = next(r for r in walk(conv_op.body.source[0]) if isinstance(r, TensorRead) and r.indices[0] is n)
    return {"oc": oc, "ic": taps // (k * k), "k": k, "oh": shape[2], "ow": shape[3],
            "in": static(x.tensor.shape[2])}


def torch_layer(info: dict):
    """F.conv2d of the layer on NCHW tensors (its input unpadded: info["in"] may count the padding)."""
    pad = (info["k"] - 1) // 2
    stride = max(1, round(info["in"] / info["oh"]))
    in_hw = info["oh"] * stride
    x = torch.randn(1, info["ic"], in_hw, in_hw)
    w = torch.randn(info["oc"], info["ic"], info["k"], info["k"])
    b = torch.randn(info["oc"])
    return lambda: F.conv2d(x, w, b, stride, pad), stride


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", action="append", default=None)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--peak", type=float, default=88.9, help="1-thread FMA peak, GFLOP/s (benchmarks/peak.py)")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--cpu", default="", help="LLVM CPU name of the schedlang code (default: host)")
    args = ap.parse_args(argv)
    import schedlang.torch as slt
    from schedlang.target.target import Target
    from schedlang.torch import zoo
    from schedlang.torch.fuse import fuse
    from schedlang.schedule import create_schedule
    from model_profile import kernels
    torch.set_num_threads(1)
    target = Target.create(Target("llvm", cpu=args.cpu, num_threads=1))
    for model_name in args.model or ["resnet18", "resnet50"]:
        model, inputs = zoo.build(model_name, "full")
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compiled = slt.compile(model, inputs, target=target)
            convs = []           # (anchor name, [conv ops]) per kernel, in kernels()' order
            for part in compiled.program.parts:
                s = create_schedule([t.op for _, t in part.outputs])
                for group in fuse(s):
                    if group.convs:
                        convs.append((group.anchor.name, [c.op for c in group.convs]))
            ks = [k for k in kernels(compiled.program, target) if k[0] == "conv"]
            assert len(ks) == len(convs), (len(ks), len(convs))
            seen = {}
            for (kind, name, mod, arrays), (_, ops) in zip(ks, convs):
                infos = [conv_shape(op) for op in ops]
                key = tuple(tuple(sorted(i.items())) for i in infos)
                if key in seen:
                    seen[key][1] += 1
                    continue
                seen[key] = [(mod, arrays, infos), 1]
            total_ours = total_torch = 0.0
            print(f"{model_name}: cpu={args.cpu or 'host'}, 1 thread, CPU time (best of {args.rounds} rounds), "
                  f"GFLOP/s and % of a {args.peak:.1f} GFLOP/s peak")
            for key, ((mod, arrays, infos), calls) in seen.items():
                flops = sum(2 * i["oc"] * i["ic"] * i["k"] ** 2 * i["oh"] * i["ow"] for i in infos)
                ours = cpu_seconds(lambda: mod(*arrays), args.rounds)
                theirs = 0.0
                if not args.no_torch:
                    for i in infos:
                        fn, _ = torch_layer(i)
                        theirs += cpu_seconds(fn, args.rounds)
                total_ours += ours * calls
                total_torch += theirs * calls
                label = " + ".join(f"{i['k']}x{i['k']} {i['ic']}->{i['oc']} {i['oh']}x{i['ow']}" for i in infos)
                g = flops / ours / 1e9
                tg = flops / theirs / 1e9 if theirs else float("nan")
                print(f"  {label:44s} x{calls:<2d} ours {ours * 1e3:7.3f} ms {g:6.1f} GF/s {100 * g / args.peak:4.0f} %"
                      f"   oneDNN {theirs * 1e3:7.3f} ms {tg:6.1f} GF/s")
            print(f"  all convs: ours {total_ours * 1e3:.1f} ms, oneDNN {total_torch * 1e3:.1f} ms")
            whole = cpu_seconds(lambda: compiled(*inputs), args.rounds, budget=0.5)
            print(f"  whole model compiled: {whole * 1e3:.1f} ms CPU time per call")


if __name__ == "__main__":
    main()
