"""The NCHWc convolution kernels of a CNN (ResNet-50 by default) with the most time, each
timed with its default schedule and with variants of its tile choices (torch/conv_variants.py),
beside oneDNN's convolution of the layer: F.conv2d (which reorders its weights into oneDNN's
blocked layout on every call) and a prepacked oneDNN convolution (the weights reordered
once, as Inductor's freezing does: torch._C._nn.mkldnn_reorder_conv2d_weight then
torch.ops.aten.mkldnn_convolution on an mkldnn input). One thread, CPU time (process_time),
every contender of a layer timed in interleaved rounds in one process; each variant's
result checked against the default's.

    SCHEDLANG_KERNEL_CACHE=0 OMP_NUM_THREADS=1 python benchmarks/conv_variants.py --top 6
    ... conv_variants.py --cpu znver3 --match "1x1 64->256 56x56 +"    # AVX2 code, one kernel

With --model-log LOG: the whole model instead, tuned with no search trials (each task's
default schedule and its variants, then the final side-by-side comparison; tune.tune_program,
one thread) into LOG (resumed when it holds them), then built without and with LOG and timed
at one thread, CPU time, in interleaved rounds beside eager torch.
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
if HERE not in sys.path:
    sys.path.append(HERE)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def onednn_layer(info: dict):
    """(F.conv2d of the layer, the layer with prepacked oneDNN weights) on NCHW float32 tensors."""
    from conv_model_layers import torch_layer
    plain, stride = torch_layer(info)
    pad = (info["k"] - 1) // 2
    x = torch.randn(1, info["ic"], info["oh"] * stride, info["oh"] * stride)
    w = torch.randn(info["oc"], info["ic"], info["k"], info["k"])
    b = torch.randn(info["oc"])
    xm = x.to_mkldnn()
    wp = torch._C._nn.mkldnn_reorder_conv2d_weight(w.to_mkldnn(), [pad, pad], [stride, stride], [1, 1], 1,
                                                   list(x.shape))
    packed = lambda: torch.ops.aten.mkldnn_convolution(xm, wp, b, [pad, pad], [stride, stride], [1, 1], 1)  # noqa: E731
    return plain, packed


def inductor_layer(info: dict):
    """The layer as a one-conv module compiled by Inductor with freezing (its weights
    prepacked for oneDNN once, as a frozen model's are), called under no_grad."""
    import torch._inductor.config as config
    config.freezing = True
    stride = max(1, round(info["in"] / info["oh"]))
    conv = torch.nn.Conv2d(info["ic"], info["oc"], info["k"], stride, (info["k"] - 1) // 2).eval()
    x = torch.randn(1, info["ic"], info["oh"] * stride, info["oh"] * stride)
    fn = torch.compile(conv)
    with torch.no_grad():
        fn(x)
    return lambda: fn(x)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--top", type=int, default=6, help="kernels with the most (weight x default) time")
    ap.add_argument("--limit", type=int, default=16, help="choices per kernel, the default's first")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--cpu", default="", help="LLVM CPU name of the schedlang code (default: host)")
    ap.add_argument("--match", default="", help="only the kernels whose label (e.g. '3x3 64->64 56x56') contains this")
    ap.add_argument("--inductor", action="store_true", help="also time each layer under Inductor with freezing")
    ap.add_argument("--model-log", help="tune the whole model's variants into this log and time it (see above)")
    args = ap.parse_args(argv)
    if args.model_log:
        return model_check(args)
    import schedlang as sl
    import schedlang.torch as slt
    from schedlang.target.target import Target
    from schedlang.torch import zoo
    from schedlang.torch.conv_variants import program_variants, variant_schedule
    from schedlang.torch.tune import extract_tasks
    from conv_model_layers import conv_shape
    from cpu_time import cpu_time_call
    torch.set_num_threads(1)
    target = Target.create(Target("llvm", cpu=args.cpu, num_threads=1))
    model, inputs = zoo.build(args.model, "full")
    rng = np.random.default_rng(0)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = slt.lower_graph(slt.capture(model, inputs), target)
        tasks = [kt for kt in extract_tasks(program, target) if kt.kind == "conv"]
        layers = []
        for kt in tasks:
            outs, task_args = kt.task.outputs, kt.task.args
            choices = program_variants(outs, target, args.limit)
            if not choices:
                continue
            arrays = [(rng.standard_normal(t.shape) * 0.1).astype(t.dtype_obj.numpy) for t in task_args]
            mod = sl.build(variant_schedule(outs, target, None), task_args, target=target)
            t0 = time.process_time()
            mod(*arrays)
            layers.append((kt.weight * (time.process_time() - t0), kt, choices, arrays))
        layers.sort(key=lambda x: -x[0])
        print(f"# {args.model}: {len(layers)} NCHWc conv tasks; the {args.top} of the most weight x time; "
              f"1 thread, CPU time (median of {args.rounds} interleaved rounds)")
        if args.match:
            layers = [x for x in layers if args.match in _label(x[1])]
        for _, kt, choices, arrays in layers[:args.top]:
            outs, task_args = kt.task.outputs, kt.task.args
            infos = [conv_shape(op) for op in _conv_ops(outs)]
            label = _label(kt)
            mods, kept = [], []
            for c in choices:
                try:
                    mods.append(sl.build(variant_schedule(outs, target, c), task_args, target=target))
                    kept.append(c)
                except Exception as err:         # a variant the schedule rejects: reported, skipped
                    print(f"  skip {c}: {type(err).__name__}: {str(err)[:100]}")
            n_out = len(outs)
            results = []
            for m in mods:
                a = [x.copy() for x in arrays]
                m(*a)
                results.append(a[-n_out:])
            for c, r in zip(kept[1:], results[1:]):
                for got, want in zip(r, results[0]):
                    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3, err_msg=str(c))
            fns = [(lambda m: lambda: m(*arrays))(m) for m in mods]
            torch_fns = []
            for i in infos:
                torch_fns += list(onednn_layer(i))
            ind_fns = [inductor_layer(i) for i in infos] if args.inductor else []
            times = cpu_time_call(*fns, *torch_fns, *ind_fns, rounds=args.rounds, min_s=0.05)
            ours, theirs = times[:len(fns)], times[len(fns):len(fns) + len(torch_fns)]
            plain, packed = sum(theirs[0::2]), sum(theirs[1::2])
            inductor = sum(times[len(fns) + len(torch_fns):])
            flops = kt.task.flops
            print(f"\n{label}  x{kt.weight}  ({flops / 1e9:.3f} GFLOP)")
            print(f"  oneDNN F.conv2d {plain * 1e3:7.3f} ms   prepacked {packed * 1e3:7.3f} ms "
                  f"({plain / packed:.2f}x faster than F.conv2d)"
                  + (f"   Inductor (freezing) {inductor * 1e3:7.3f} ms" if ind_fns else ""))
            best = min(range(len(ours)), key=lambda k: ours[k])
            for k, (c, t) in enumerate(zip(kept, ours)):
                mark = "default" if k == 0 else ("best" if k == best else "")
                print(f"  {t * 1e3:7.3f} ms {flops / t / 1e9:5.1f} GF/s {ours[0] / t:5.2f}x  {_short(c)} {mark}")
            print(f"  best/default {ours[0] / ours[best]:.2f}x; best vs prepacked oneDNN {packed / ours[best]:.2f}x")


def model_check(args) -> None:
    """--model-log: the model tuned with variants only, then timed without and with the log."""
    import schedlang as sl
    import schedlang.torch as st
    from schedlang.torch import zoo
    from schedlang.torch.tune import task_table, tune_program
    from cpu_time import cpu_time_call
    torch.set_num_threads(1)
    target = sl.Target.create(sl.Target("llvm", num_threads=1))
    model, inputs = zoo.build(args.model, "full")
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = st.lower_graph(st.capture(model, inputs), target)
        print(task_table(tune_program(program, target, 0, args.model_log, verbose=1, number=3, repeat=3)))
        plain = st.compile(model, inputs, target=target)
        tuned = st.compile(model, inputs, target=target, log=args.model_log)
        torch.testing.assert_close(tuned(*inputs), model(*inputs), rtol=1e-3, atol=1e-3)
        a, b, e = cpu_time_call(lambda: plain(*inputs), lambda: tuned(*inputs), lambda: model(*inputs),
                                rounds=7, min_s=0.3)
    print(f"{args.model} 1 thread CPU time: default {a * 1e3:.1f} ms, variants-tuned {b * 1e3:.1f} ms "
          f"({a / b:.3f}x), eager {e * 1e3:.1f} ms")


def _label(kt) -> str:
    """The task's convolutions as '1x1 64->256 56x56 + ...'."""
    from conv_model_layers import conv_shape
    infos = [conv_shape(op) for op in _conv_ops(kt.task.outputs)]
    return " + ".join(f"{i['k']}x{i['k']} {i['ic']}->{i['oc']} {i['oh']}x{i['ow']}" for i in infos)


def _conv_ops(outputs):
    """The convolution ops of the one kernel of the program computing outputs."""
    from schedlang.schedule import create_schedule
    from schedlang.torch.fuse import fuse
    s = create_schedule([t.op for t in outputs])
    return [c.op for g in fuse(s) for c in g.convs]


def _short(c) -> str:
    pw = "-" if c.pointwise is None else f"{c.pointwise[0]}/{','.join(map(str, c.pointwise[1]))}"
    return (f"tile {c.vecs}x{c.rt}x{c.wt} pw {pw:7s} rows_outer {int(c.rows_outer)} "
            f"ch_outside {int(c.channels_outside)}")


if __name__ == "__main__":
    main()
