"""Where MobileNetV2's time goes, by kind of layer, schedlang beside ONNX Runtime: every schedlang
kernel built alone and timed (CPU time, one thread, cpu_time.cpu_time_call), ORT's nodes from its
profiler (scaled to the session's CPU time), both summed per kind: the first 3x3 convolution,
depthwise 3x3 at stride 1 and 2, the 1x1 expansions (ReLU6) and projections (+ residual), the
last 1x1 (320 -> 1280), the classifier and the rest; with the whole model's CPU time per call
and schedlang's time outside its kernels (the call's Python work: state, packed constants).

    OMP_NUM_THREADS=1 taskset -c 1 python benchmarks/mobilenet_kinds.py [--model mobilenet_v2] [--size tiny]

Kernels timed alone see warm caches; the sums are not the model's time exactly, the shares
say where the gap is.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import warnings
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path and "PYTHONPATH" not in os.environ:
    sys.path.insert(0, ROOT)
if HERE not in sys.path:
    sys.path.append(HERE)

import numpy as np  # noqa: E402
import torch  # noqa: E402

from cpu_time import cpu_time_call, ort_session  # noqa: E402

KINDS = ("first 3x3", "dw s1", "dw s2", "1x1 expand", "1x1 project", "1x1 last", "classifier", "other")


def conv_kind(in_ch: int, out_ch: int, taps: int, depthwise: bool, stride: int, first: bool) -> str:
    """The kind of a convolution of MobileNetV2 from its channels, taps and stride."""
    if depthwise:
        return f"dw s{stride}"
    if taps > 1:
        return "first 3x3" if first else "other"
    if out_ch >= 1280:
        return "1x1 last"
    return "1x1 expand" if out_ch > in_ch else "1x1 project"


def schedlang_kind(s, group) -> str:
    """conv_kind of the kernel's (first) convolution, from its Tensor IR."""
    from schedlang.torch.conv_schedules import _dense
    from schedlang.torch.kernel_tasks import kind_of
    kind = kind_of(group)
    if kind == "matmul":
        return "classifier"
    if kind != "conv":
        return "other"
    conv = s[group.convs[0]]
    op = conv.op
    out_ch = op.shape[1] * (op.shape[4] if len(op.shape) == 5 else 1)
    taps = 1
    for r in op.reduce_axis:
        if r.var.name.startswith(("rh", "rw")):
            taps *= r.dom.extent
    acts = [t for t in op.input_tensors if len(t.shape) == len(op.shape) and t.shape[0] == op.shape[0]
            and (len(op.shape) == 4 or t.shape[-1] == op.shape[-1])]
    x = max(acts, key=lambda t: t.shape[2], default=None)
    if x is None:                 # the image itself (NCHW, 3 channels)
        return "first 3x3"
    in_ch = x.shape[1] * (x.shape[4] if len(x.shape) == 5 else 1)
    hin = x.shape[2] - (2 if taps > 1 else 0)        # a 3x3's input is its padded plane
    depthwise = not _dense(conv)
    return conv_kind(in_ch, out_ch, taps, depthwise, max(1, round(hin / op.shape[2])), in_ch == 3)


def schedlang_rows(compiled, target):
    """{kind: CPU seconds per forward} of schedlang's kernels built and timed alone, and the count of
    kernels per forward."""
    from model_profile import distinct_kernels
    calls, built = distinct_kernels(compiled.program, target)
    calls = [(schedlang_kind(s, group), key) for s, group, key in calls]
    keys = list(built)
    times = dict(zip(keys, cpu_time_call(*[(lambda m, a: lambda: m(*a))(*built[k]) for k in keys],
                                         rounds=3, min_s=0.02)))
    per = defaultdict(float)
    for kind, key in calls:
        per[kind] += times[key]
    return per, len(calls)


def ort_kind(op: str, shapes, out_shape) -> str:
    """conv_kind of an ORT node from its input and output shapes."""
    if op == "Gemm" or op == "MatMul":
        return "classifier"
    if op not in ("Conv", "FusedConv"):
        return "other"
    x, w = shapes[0]["float"], shapes[1]["float"]
    depthwise = w[1] == 1 and w[0] > 1 and x[1] == w[0]
    stride = max(1, round(x[2] / out_shape[2])) if out_shape else 1
    return conv_kind(x[1], w[0], w[2] * w[3], depthwise, stride, x[1] == 3)


def ort_rows(model, inputs, cpu_per_call: float, calls: int = 50):
    """{kind: CPU seconds per forward} of ORT's nodes (profiler medians, scaled to cpu_per_call),
    and the node count."""
    prefix = os.path.join(tempfile.mkdtemp(), "ort")
    sess, fn = ort_session(model, inputs, prefix)
    for _ in range(calls + 5):
        fn()
    durs, info = defaultdict(list), {}
    for e in json.load(open(sess.end_profiling())):
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            a = e.get("args", {})
            durs[e["name"]].append(e["dur"])
            out = a.get("output_type_shape") or [{}]
            info[e["name"]] = (a.get("op_name", "?"), a.get("input_type_shape", []),
                               next(iter(out[0].values()), None))
    med = {name: float(np.median(sorted(d)[5:] or d)) for name, d in durs.items()}
    total = sum(med.values())
    per = defaultdict(float)
    for name, us in med.items():
        per[ort_kind(*info[name])] += us / total * cpu_per_call
    return per, len(med)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="mobilenet_v2")
    ap.add_argument("--size", default="full", help="zoo size: full, or tiny (a smoke run)")
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    import schedlang.torch as slt
    from schedlang.target.target import Target
    from schedlang.torch import zoo
    target = Target.create(Target("llvm", num_threads=1))
    model, inputs = zoo.build(args.model, args.size)
    model.eval()
    with torch.no_grad():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compiled = slt.compile(model, inputs, target=target)
        compiled(*inputs)
        state = compiled._state

        def outside():                        # the call's Python work before its kernels
            compiled._packs.values(state.current(None))
        _, ort = ort_session(model, inputs)
        whole, py, t_ort = cpu_time_call(lambda: compiled(*inputs), outside, ort, rounds=args.rounds)
        mine, n_mine = schedlang_rows(compiled, target)
        theirs, n_theirs = ort_rows(model, inputs, t_ort)
    print(f"# {args.model}, 1 thread, CPU ms per call (median of {args.rounds} interleaved rounds); "
          f"load avg {os.getloadavg()[0]:.1f}")
    print(f"  whole: schedlang {whole * 1e3:.2f}  onnxruntime {t_ort * 1e3:.2f}  ratio {whole / t_ort:.3f};  "
          f"schedlang state + packed constants per call {py * 1e3:.2f}")
    print(f"  kernels per forward: schedlang {n_mine}, onnxruntime nodes {n_theirs}")
    print(f"  {'kind':12s} {'schedlang':>9s} {'ORT':>7s} {'ratio':>6s}   (schedlang kernels alone, ORT profiler)")
    for kind in KINDS:
        a, b = mine.get(kind, 0.0), theirs.get(kind, 0.0)
        if a or b:
            print(f"  {kind:12s} {a * 1e3:9.3f} {b * 1e3:7.3f} {a / b if b else float('nan'):6.2f}")
    a, b = sum(mine.values()), sum(theirs.values())
    print(f"  {'sum':12s} {a * 1e3:9.3f} {b * 1e3:7.3f} {a / b:6.2f}")


if __name__ == "__main__":
    main()
