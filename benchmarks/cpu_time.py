"""A whole model's CPU time per call at one thread: schedlang beside ONNX Runtime and Inductor
in one process, timed in interleaved rounds with the process's CPU clock, and optionally
schedlang's kernels one by one (--kernels) and ONNX Runtime's per-node profile (--ort-nodes);
with --log LOG also schedlang compiled from a tuning log (benchmarks/tune_whole.py's), its
output checked against eager torch first.

    OMP_NUM_THREADS=1 taskset -c 1 python benchmarks/cpu_time.py --model mobilenet_v2 --kernels
    OMP_NUM_THREADS=1 python benchmarks/cpu_time.py --model bert --log /work/bench/tunelogs/tune-bert.jsonl

On a machine shared with other processes, wall-clock latency measures the neighbours; the CPU
time a single-threaded call consumes (time.process_time) does not (up to cache and frequency
effects), so this is the number to compare there. Every contender runs on one thread: torch,
ORT (intra_op_num_threads=1), schedlang (num_threads=1).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import warnings
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path and "PYTHONPATH" not in os.environ:    # PYTHONPATH: another tree's schedlang (a baseline)
    sys.path.insert(0, ROOT)
if HERE not in sys.path:
    sys.path.append(HERE)

import numpy as np  # noqa: E402
import torch  # noqa: E402


def cpu_time_call(*fns, rounds: int = 7, min_s: float = 0.1, best: bool = False, samples: bool = False):
    """Median (best: least) CPU seconds per call of each fn (time.process_time), in interleaved
    rounds, each round timing every fn over enough calls to take min_s of CPU time; one warm-up
    call each. The least is the round the neighbours disturbed least (their cache traffic
    slows a call's CPU time too). samples: each fn's list of per-round times instead."""
    clock = time.process_time
    for fn in fns:
        fn()
    counts = []
    for fn in fns:
        start = clock()
        fn()
        fn()
        counts.append(max(1, int(2 * min_s / max(clock() - start, 1e-6))))
    times = [[] for _ in fns]
    for _ in range(rounds):
        for fn, n, out in zip(fns, counts, times):
            start = clock()
            for _ in range(n):
                fn()
            out.append((clock() - start) / n)
    if samples:
        return times
    return [min(t) if best else sorted(t)[len(t) // 2] for t in times]


def ratios(t) -> None:
    """schedlang's (and tuned's) time over each other contender's, and tuned over untuned."""
    for mine in ("schedlang", "tuned"):
        if mine in t:
            print(f"  {mine}: " + "   ".join(f"/ {n} {t[mine] / t[n]:.3f}" for n in ("onnxruntime", "inductor", "eager")
                                            if n in t))
    if "tuned" in t:
        print(f"  tuned / untuned {t['tuned'] / t['schedlang']:.3f}")


def ort_session(model, inputs, profile_prefix=None):
    """ORT CPU session at one intra-op thread, all graph optimizations (models.py's setup)."""
    import io
    import onnxruntime as ort
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, inputs, buf, dynamo=True, verbose=False, optimize=True)
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    if profile_prefix:
        opts.enable_profiling = True
        opts.profile_file_prefix = profile_prefix
    sess = ort.InferenceSession(buf.getvalue(), opts, providers=["CPUExecutionProvider"])
    feed = {i.name: x.numpy() for i, x in zip(sess.get_inputs(), inputs)}
    return sess, (lambda: sess.run(None, feed)[0])


def ort_nodes(model, inputs, calls: int = 50):
    """[(total us per call, op type, node name, input shapes)] from ORT's profiler, summed over calls."""
    prefix = os.path.join(tempfile.mkdtemp(), "ort")
    sess, fn = ort_session(model, inputs, prefix)
    for _ in range(5):
        fn()
    for _ in range(calls):
        fn()
    path = sess.end_profiling()
    events = json.load(open(path))
    per = defaultdict(list)
    info = {}
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            name = e["name"][:-len("_kernel_time")]
            per[name].append(e["dur"])
            a = e.get("args", {})
            info[name] = (a.get("op_name", "?"), a.get("input_type_shape", ""))
    rows = []
    for name, durs in per.items():
        durs = sorted(durs)[5:] or durs                       # the warm-up calls out
        rows.append((float(np.median(durs)), info[name][0], name, info[name][1]))
    return rows


def describe(group, s):
    """A short label of a kernel: its anchor's output shape; for a matmul M x N x K and the
    epilogue's inlined ops (the tags of the stages it reads through); for a convolution, its
    inputs' shapes."""
    from schedlang.tensor.reduce import Reduce
    from schedlang.torch.fuse import is_matmul
    op = group.anchor.op
    shape = "x".join(str(d) for d in op.shape)
    if group.convs:
        reads = [t for t in op.input_tensors]
        return shape + " in " + ",".join("x".join(str(d) for d in t.shape) for t in reads)
    mms = [group.anchor] if is_matmul(group.anchor) else group.matmuls
    if mms and isinstance(mms[0].op.body, Reduce):
        mm = mms[0].op
        *batch, m, n = (str(d) for d in mm.shape)
        k = mm.reduce_axis[0].dom.extent
        epi = sorted({o.name.rstrip("0123456789_") for o in _reachable(s, s[group.anchor])})
        lead = "x".join(batch) + "x" if batch and any(b != "1" for b in batch) else ""
        return f"{lead}{m}x{n}x{k}" + (f" +{len(mms)}" if len(mms) > 1 else "") \
            + (" (" + ",".join(epi) + ")" if epi else "")
    return shape


def _reachable(s, st, seen=None):
    """The ops st reads through chains of inlined stages."""
    seen = set() if seen is None else seen
    for inp in s.inputs_of(st):
        if inp.attach_type == "inline" and inp.op not in seen:
            seen.add(inp.op)
            _reachable(s, inp, seen)
    return seen


def schedlang_kernels(compiled, target):
    """[(kind, label, mod, fn)] per kernel call of the compiled model (model_profile.kernels;
    equal kernels share one built module)."""
    from model_profile import kernels
    from schedlang.schedule import create_schedule
    from schedlang.torch.fuse import fuse
    labels = {}
    for part in compiled.program.parts:
        s = create_schedule([t.op for _, t in part.outputs])
        for group in fuse(s):
            labels[group.anchor.name] = describe(group, s)
    out = []
    for kind, name, mod, arrays in kernels(compiled.program, target):
        out.append((kind, labels.get(name, ""), mod, (lambda m, a: lambda: m(*a))(mod, arrays)))
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="mobilenet_v2")
    ap.add_argument("--size", default="full")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--kernels", action="store_true", help="schedlang's kernels one by one")
    ap.add_argument("--ort-nodes", action="store_true", help="ONNX Runtime's per-node profile")
    ap.add_argument("--no-inductor", action="store_true")
    ap.add_argument("--no-ort", action="store_true")
    ap.add_argument("--log", help="also schedlang compiled from this tuning log ('tuned')")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    import schedlang.torch as slt
    from schedlang.target.target import Target
    from schedlang.torch import zoo
    target = Target.create(Target("llvm", num_threads=1))
    model, inputs = zoo.build(args.model, args.size)
    model.eval()
    names, fns = [], []
    with torch.no_grad():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compiled = slt.compile(model, inputs, target=target)
        names.append("schedlang"); fns.append(lambda: compiled(*inputs))
        if args.log:
            if not os.path.isfile(args.log):
                raise SystemExit(f"cpu_time: no tuning log {args.log}")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tuned = slt.compile(model, inputs, target=target, log=args.log)
            want = model(*inputs)
            for name, c in (("schedlang", compiled), ("tuned", tuned)):     # a wrong record fails here
                torch.testing.assert_close(c(*inputs), want, rtol=1e-3, atol=1e-3, msg=lambda m, n=name: f"{n}: {m}")
            names.append("tuned"); fns.append(lambda: tuned(*inputs))
        if not args.no_ort:
            _, f = ort_session(model, inputs)
            names.append("onnxruntime"); fns.append(f)
        if not args.no_inductor:
            import torch._inductor.config as cfg
            cfg.freezing = True
            ind = torch.compile(model, dynamic=False)
            ind(*inputs)
            names.append("inductor"); fns.append(lambda: ind(*inputs))
        names.append("eager"); fns.append(lambda: model(*inputs))
        rounds = cpu_time_call(*fns, rounds=args.rounds, samples=True)
        times = [sorted(t)[len(t) // 2] for t in rounds]
        print(f"# {args.model} ({args.size}), 1 thread, CPU ms per call (time.process_time, median and least of "
              f"{args.rounds} interleaved rounds); load avg {os.getloadavg()[0]:.1f}")
        for n, t, r in zip(names, times, rounds):
            print(f"  {n:12s} {t * 1e3:8.2f}  (least {min(r) * 1e3:.2f})")
        ratios(dict(zip(names, times)))
        if args.kernels:
            ks = schedlang_kernels(compiled, target)
            uniq = {}
            for kind, label, mod, fn in ks:
                uniq.setdefault(id(mod), [kind, label, fn, 0])[3] += 1
            kt = cpu_time_call(*[u[2] for u in uniq.values()], rounds=3, min_s=0.02)
            rows = sorted(((t * u[3], u[0], u[1], u[3], t) for u, t in zip(uniq.values(), kt)), reverse=True)
            by = defaultdict(float)
            for r in rows:
                by[r[1]] += r[0]
            print(f"  schedlang kernels timed alone: sum {sum(by.values()) * 1e3:.2f} ms; "
                  + ", ".join(f"{k} {v * 1e3:.2f}" for k, v in sorted(by.items(), key=lambda kv: -kv[1])))
            for tot, kind, label, calls, t in rows:
                print(f"    {tot * 1e3:7.3f} {kind:9s} x{calls:<2d} {t * 1e3:6.3f}  {label}")
    if args.ort_nodes:
        rows = ort_nodes(model, inputs)
        total = sum(r[0] for r in rows)
        # The profiler's durations are wall-clock: on a loaded machine they are inflated by the
        # time slices other processes took; scaled by the session's CPU time per call measured
        # above (when ORT ran), they read as CPU time (the load spread evenly assumed).
        scale = times[names.index("onnxruntime")] * 1e6 / total if "onnxruntime" in names else 1.0
        by, same = defaultdict(float), defaultdict(lambda: [0.0, 0])
        for us, op, _, shapes in rows:
            by[op] += us * scale
            key = (op, json.dumps(shapes))
            same[key][0] += us * scale
            same[key][1] += 1
        print(f"  onnxruntime nodes (profiler, median us per call, x{scale:.3f} to the CPU time above): "
              f"sum {sum(by.values()) / 1e3:.2f} ms; "
              + ", ".join(f"{k} {v / 1e3:.2f}" for k, v in sorted(by.items(), key=lambda kv: -kv[1])))
        for (op, shapes), (us, n) in sorted(same.items(), key=lambda kv: -kv[1][0]):
            if us >= 0.001 * total * scale:
                print(f"    {us / 1e3:7.3f} {op:22s} x{n:<2d} {us / n / 1e3:6.3f}  {shapes[:120]}")

if __name__ == "__main__":
    main()
