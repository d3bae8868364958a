"""Every distinct convolution kernel of a model (ResNet-50 by default) built from the default
schedules of two trees -- this checkout's and a base checkout's conv_schedules.py and
pad_schedules.py (--base, e.g. /work/main) -- checked equal, and timed in interleaved rounds
beside two oneDNN references of the same layer: a prepacked one (the weight reordered once,
torch.ops.mkldnn._reorder_convolution_weight, then mkldnn._convolution_pointwise on a
channels-last input with the ReLU fused: what Inductor with freezing runs) and F.conv2d
(eager, which reorders the weight at every call). One thread, CPU time (process_time), best
of --rounds rounds; run it on one core of a loaded machine:

    SCHEDLANG_KERNEL_CACHE=0 OMP_NUM_THREADS=1 taskset -c 1 \
        python benchmarks/conv_layer_ab.py --model resnet50 --base /work/main

The kernels are model_profile.kernels' (built alone, NCHWc activations, their epilogues:
batch norm folded, ReLU, residual add, a fused 1x1 shortcut, a padded result "P").
With --blocks-ab, the A side is this tree lowered with every weight packed in single blocks
(conv_schedules.weight_blocks returning 1: prepack.py "conv" where "conv_tiles" would be), the
B side this tree as it is.
With --whole --winograd-ab, the A side is this tree with every convolution direct
(ops/conv_winograd.ENABLED off), the B side this tree (Winograd F(4x4) for the 3x3 stride-1 layers).
With --whole, the whole model instead: compiled with each tree's schedules (build caches off),
timed beside eager torch and torch.compile with freezing (Inductor: prepacked oneDNN weights,
fused post-ops) in the same interleaved rounds; with --log LOG also this tree's compiled from a
tuning log ("tuned", e.g. benchmarks/tune_whole.py's).
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for p in (ROOT, HERE):
    if p not in sys.path:
        sys.path.insert(0, p)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from conv_model_layers import conv_shape  # noqa: E402

SCHEDULE_MODULES = ("conv_schedules", "pad_schedules")


def load_base(base: str) -> dict:
    """The base tree's schedule modules, loaded beside this tree's as schedlang.torch members."""
    import schedlang.torch as slt
    mine = {name: sys.modules[f"schedlang.torch.{name}"] for name in SCHEDULE_MODULES}
    theirs = {}
    try:
        for name in SCHEDULE_MODULES:       # conv_schedules first: pad_schedules imports from it
            full = f"schedlang.torch.{name}"
            spec = importlib.util.spec_from_file_location(full, os.path.join(base, "schedlang", "torch", f"{name}.py"))
            mod = importlib.util.module_from_spec(spec)
            sys.modules[full] = mod
            spec.loader.exec_module(mod)
            theirs[name] = mod
    finally:
        for name, mod in mine.items():
            sys.modules[f"schedlang.torch.{name}"] = mod
            setattr(slt, name, mod)
    return theirs


def use(modules: dict) -> None:
    """Make modules ({name: module}) the schedule modules the default schedules call."""
    import schedlang.torch as slt
    for name, mod in modules.items():
        sys.modules[f"schedlang.torch.{name}"] = mod
        setattr(slt, name, mod)


def single_blocks():
    """A context in which the lowering packs every convolution weight in single blocks."""
    import contextlib
    from schedlang.torch import conv_schedules

    @contextlib.contextmanager
    def ctx():
        saved = conv_schedules.weight_blocks
        conv_schedules.weight_blocks = lambda *a: 1
        try:
            yield
        finally:
            conv_schedules.weight_blocks = saved
    return ctx()


def direct_only():
    """A context in which the lowering runs every convolution as a direct kernel (no Winograd:
    ops/conv_winograd.ENABLED off)."""
    import contextlib
    from schedlang.torch.ops import conv_winograd

    @contextlib.contextmanager
    def ctx():
        saved = conv_winograd.ENABLED
        conv_winograd.ENABLED = False
        try:
            yield
        finally:
            conv_winograd.ENABLED = saved
    return ctx()


def model_kernels(model_name: str, target):
    """[(label, calls, [conv infos], program)] of the model's distinct conv kernels."""
    import schedlang.torch as slt
    from schedlang.schedule import create_schedule
    from schedlang.tensor.serialize import workload_key
    from schedlang.torch import zoo
    from schedlang.torch.fuse import fuse
    from schedlang.torch.kernel_tasks import group_program
    from schedlang.torch.tune import canonical_program
    model, inputs = zoo.build(model_name, "full")
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = slt.lower_graph(slt.capture(model, inputs), target)
    seen = {}
    for part in program.parts:
        s = create_schedule([t.op for _, t in part.outputs])
        for group in fuse(s):
            if not group.convs:
                continue
            prog = group_program(s, group)
            key = workload_key(canonical_program(prog.inputs, prog.outputs)[1])
            if key in seen:
                seen[key][1] += 1
                continue
            infos = [conv_shape(c.op) for c in group.convs]
            label = " + ".join(f"{i['k']}x{i['k']} {i['ic']}->{i['oc']} {i['oh']}x{i['ow']}"
                               f"{'/2' if stride_of(i) == 2 else ''}" for i in infos)
            seen[key] = [label + (" P" if group.pad is not None else ""), 1, infos, prog]
    return list(seen.values())


def same_values(single, arrays, prog) -> list:
    """prog's input arrays holding the values of single's (the same kernel lowered with its
    weights in single blocks): a weight [OC/8, IC, .., 8] re-laid as prog's [OC/(B*8), IC/8, .., 8, B, 8]."""
    out = []
    for t, a in zip(prog.inputs, arrays):
        if tuple(t.shape) == a.shape:
            out.append(a)
            continue
        blocks, width = t.shape[-2:]
        ob, ic, *kernel, _ = a.shape
        b = a.reshape(ob // blocks, blocks, ic // width, width, *kernel, width)   # [OC/32, 4, IC/8, 8, .., 8]
        b = np.moveaxis(b, 3, -2)                                                 # [OC/32, 4, IC/8, .., 8i, 8]
        out.append(np.ascontiguousarray(np.moveaxis(b, 1, -2)))                   # [OC/32, IC/8, .., 8i, 4, 8]
    return out


def onednn_layer(info: dict, stride: int):
    """(prepacked oneDNN conv + ReLU, F.conv2d + ReLU) of the layer, NCHW / channels-last input."""
    pad = (info["k"] - 1) // 2
    x = torch.randn(1, info["ic"], info["oh"] * stride, info["ow"] * stride)
    w = torch.randn(info["oc"], info["ic"], info["k"], info["k"])
    b = torch.randn(info["oc"])
    xc = x.contiguous(memory_format=torch.channels_last)
    args = ([pad, pad], [stride, stride], [1, 1], 1)
    wp = torch.ops.mkldnn._reorder_convolution_weight(w, *args, list(x.shape))
    return (lambda: torch.ops.mkldnn._convolution_pointwise(xc, wp, b, *args, "relu", [], ""),
            lambda: F.conv2d(x, w, b, stride, pad).relu_())


def stride_of(info: dict) -> int:
    padded = info["in"] - (info["k"] - 1)        # info["in"] may count the padding
    return 2 if info["in"] >= 2 * info["oh"] and padded != info["oh"] else 1


def best_cpu_times(fns, rounds: int, budget: float = 0.04):
    """Best CPU seconds per call of each fn over interleaved rounds of enough calls to fill budget."""
    import time
    counts = []
    for fn in fns:
        fn()
        t0 = time.process_time()
        fn()
        counts.append(max(1, int(budget / max(time.process_time() - t0, 1e-5))))
    best = [float("inf")] * len(fns)
    for _ in range(rounds):
        for k, (fn, n) in enumerate(zip(fns, counts)):
            t0 = time.process_time()
            for _ in range(n):
                fn()
            best[k] = min(best[k], (time.process_time() - t0) / n)
    return best


def build(prog, target):
    import schedlang as sl
    from schedlang.torch.schedules import default_schedule
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return sl.build(default_schedule(prog.outputs, target), list(prog.inputs) + list(prog.outputs), target=target)


def whole_model(model_name: str, target, base, mine, rounds: int, log=None, blocks_ab: bool = False,
                winograd_ab: bool = False) -> None:
    """The compiled model with each tree's schedules (and this tree's compiled from the tuning
    records of log, when given; with blocks_ab, this tree's with single weight blocks as the
    base; with winograd_ab, this tree's with direct convolutions only) beside eager and
    Inductor (freezing)."""
    import contextlib
    import schedlang.torch as slt
    import torch._inductor.config as cfg
    from schedlang.torch import zoo
    model, inputs = zoo.build(model_name, "full")
    model.eval()
    names, fns = [], []
    with torch.no_grad():
        base = mine if blocks_ab or winograd_ab else base
        for name, side, records in (("base", base, None), ("this", mine, None), ("tuned", mine, log)):
            if side is None or (name == "tuned" and log is None):
                continue
            use(side)
            singles = contextlib.nullcontext()
            if name == "base" and (blocks_ab or winograd_ab):
                singles = single_blocks() if blocks_ab else direct_only()
            with warnings.catch_warnings(), singles:
                warnings.simplefilter("ignore")
                compiled = slt.compile(model, inputs, target=target, log=records)
            names.append(name)
            fns.append(lambda c=compiled: c(*inputs))
        use(mine)
        want = model(*inputs)
        for fn in fns:
            torch.testing.assert_close(fn(), want, rtol=1e-3, atol=1e-3)
        cfg.freezing = True
        ind = torch.compile(model, dynamic=False)
        ind(*inputs)
        names += ["inductor", "eager"]
        fns += [lambda: ind(*inputs), lambda: model(*inputs)]
        times = best_cpu_times(fns, rounds, budget=0.3)
    t = dict(zip(names, times))
    print(f"{model_name}: 1 thread, CPU ms per call, best of {rounds} interleaved rounds; load avg "
          f"{os.getloadavg()[0]:.1f}")
    print("  " + "  ".join(f"{n} {x * 1e3:.1f}" for n, x in t.items()))
    for n in ("base", "this", "tuned"):
        if n in t:
            print(f"  {n}: / eager {t[n] / t['eager']:.3f}   / inductor {t[n] / t['inductor']:.3f}")
    if "tuned" in t:
        print(f"  tuned speedup over this (untuned): {t['this'] / t['tuned']:.3f}x")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--base", default=None, help="a checkout whose schedule modules are the A side")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--only", default=None, help="only layers whose label contains this")
    ap.add_argument("--whole", action="store_true", help="the whole model, not its conv kernels")
    ap.add_argument("--blocks-ab", action="store_true", help="A: weights in single blocks; B: this tree")
    ap.add_argument("--winograd-ab", action="store_true", help="with --whole: A: direct convolutions only; B: this tree")
    ap.add_argument("--log", default=None, help="with --whole: also the model compiled from this tuning log")
    args = ap.parse_args(argv)
    if args.blocks_ab and args.base:
        ap.error("--blocks-ab compares this tree's two weight layouts: no --base with it")
    import schedlang.build_cache
    schedlang.build_cache.ENABLED = False      # each tree's schedules built, never another's module
    from schedlang.torch import conv_schedules, pad_schedules  # noqa: F401  (this tree's)
    from schedlang.target.target import Target
    torch.set_num_threads(1)
    target = Target.create(Target("llvm", num_threads=1))
    mine = {name: sys.modules[f"schedlang.torch.{name}"] for name in SCHEDULE_MODULES}
    base = load_base(args.base) if args.base else None
    if args.whole:
        return whole_model(args.model, target, base, mine, args.rounds, args.log, args.blocks_ab, args.winograd_ab)
    rng = np.random.default_rng(0)
    rows = []
    print(f"{args.model}: 1 thread, CPU time, best of {args.rounds} interleaved rounds, ms per call")
    print(f"  {'layer':52s} calls  {'base':>7s} {'this':>7s} {'packed':>7s} {'conv2d':>7s}"
          f"  this/base this/packed  GF/s this packed")
    kernels = model_kernels(args.model, target)
    if args.blocks_ab:
        with single_blocks():
            singles = model_kernels(args.model, target)
        assert [k[0] for k in singles] == [k[0] for k in kernels], "the two lowerings' kernels differ"
    for k, (label, calls, infos, prog) in enumerate(kernels):
        if args.only and args.only not in label:
            continue
        arrays = [(rng.standard_normal(t.shape) * 0.1).astype(t.dtype_obj.numpy) for t in prog.inputs]
        outs = [np.zeros(t.shape, t.dtype_obj.numpy) for t in prog.outputs]
        mods = []
        if args.blocks_ab:
            single = singles[k][3]
            mods.append(build(single, target))
            arrays_a = [(rng.standard_normal(t.shape) * 0.1).astype(t.dtype_obj.numpy) for t in single.inputs]
            arrays = same_values(single, arrays_a, prog)
        for side in ([base] if base else []) + [mine]:
            use(side)
            mods.append(build(prog, target))
        use(mine)
        args_of = [arrays_a, arrays] if args.blocks_ab else [arrays] * len(mods)
        results = []
        for mod, a in zip(mods, args_of):
            res = [np.zeros_like(o) for o in outs]
            mod(*a, *res)
            results.append(res)
        for res in results[1:]:
            for a, b in zip(results[0], res):
                np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4, err_msg=label)
        fns = [lambda m=m, a=a: m(*a, *outs) for m, a in zip(mods, args_of)]
        refs = [onednn_layer(i, stride_of(i)) for i in infos]
        fns += [lambda: [r[0]() for r in refs], lambda: [r[1]() for r in refs]]
        times = best_cpu_times(fns, args.rounds)
        *ours, packed, conv2d = times
        flops = sum(2 * i["oc"] * i["ic"] * i["k"] ** 2 * i["oh"] * i["ow"] for i in infos)
        a = ours[0] if base or args.blocks_ab else float("nan")
        b = ours[-1]
        rows.append((calls, a, b, packed, conv2d))
        print(f"  {label:52s} x{calls:<3d} {a * 1e3:7.3f} {b * 1e3:7.3f} {packed * 1e3:7.3f} {conv2d * 1e3:7.3f}"
              f"  {b / a:8.3f} {b / packed:10.3f}   {flops / b / 1e9:5.1f} {flops / packed / 1e9:5.1f}", flush=True)
    tot = [sum(r[0] * r[k] for r in rows) for k in range(1, 5)]
    print(f"  all convs: base {tot[0] * 1e3:.1f} this {tot[1] * 1e3:.1f} packed oneDNN {tot[2] * 1e3:.1f} "
          f"F.conv2d {tot[3] * 1e3:.1f} ms; this/packed {tot[1] / tot[2]:.3f}")


if __name__ == "__main__":
    main()
