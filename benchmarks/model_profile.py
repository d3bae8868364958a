"""Where a compiled model spends its time, per kernel kind (matmul, attention, rows, pointwise,
conv): every kernel of the model built alone from its default schedule (kernel_tasks'
group_program: the kernel with its inputs as placeholders), timed on random inputs, times
how often the model runs it; beside the whole compiled model's latency.

    python benchmarks/model_profile.py --model bert --threads 1
    python benchmarks/model_profile.py --model llama --size tiny

Kernels timed alone see warm caches and no neighbours, so the sum is not the model's time
exactly; the shares say which kind to work on. Timings are medians of interleaved rounds
(tune.time_call), noisy on a shared machine.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402
import torch  # noqa: E402


def distinct_kernels(program, target):
    """(calls, built): every kernel of every part, one per occurrence, as (its part's schedule,
    its fuse group, its key), and {key: (module, arrays)} with each distinct kernel (equal
    canonical programs share a key) built once from its default schedule, on random inputs."""
    import schedlang as sl
    from schedlang.schedule import create_schedule
    from schedlang.tensor.op import PlaceholderOp
    from schedlang.torch.fuse import fuse
    from schedlang.torch.kernel_tasks import group_program
    from schedlang.tensor.serialize import workload_key
    from schedlang.torch.schedules import default_schedule
    from schedlang.torch.tune import canonical_program
    built, calls = {}, []
    rng = np.random.default_rng(0)
    for part in program.parts:
        s = create_schedule([t.op for _, t in part.outputs])
        for group in fuse(s):
            prog = group_program(s, group)
            if prog is None or all(isinstance(t.op, PlaceholderOp) for t in prog.outputs):
                continue
            args = list(prog.inputs) + list(prog.outputs)
            key = workload_key(canonical_program(prog.inputs, prog.outputs)[1])   # equal kernels: one build
            if key not in built:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    mod = sl.build(default_schedule(prog.outputs, target), args, target=target)
                arrays = [(rng.standard_normal(t.shape) * 0.1).astype(t.dtype_obj.numpy)
                          if t.dtype.startswith("float") else np.zeros(t.shape, t.dtype_obj.numpy) for t in args]
                built[key] = (mod, arrays)
            calls.append((s, group, key))
    return calls, built


def kernels(program, target):
    """[(kind, anchor name, module, arrays)] for every kernel of every part, one per occurrence."""
    from schedlang.torch.kernel_tasks import kind_of
    calls, built = distinct_kernels(program, target)
    return [(kind_of(group), group.anchor.name, *built[key]) for _, group, key in calls]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="bert")
    ap.add_argument("--size", default="full")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    import schedlang.torch as slt
    from schedlang.target.target import Target
    from schedlang.torch import zoo
    from schedlang.torch.tune import time_call
    torch.set_num_threads(args.threads)
    target = Target.create(Target("llvm", num_threads=args.threads))
    model, inputs = zoo.build(args.model, args.size)
    with torch.no_grad():
        compiled = slt.compile(model, inputs, target=target)
        t0 = time.perf_counter()
        ks = kernels(compiled.program, target)
        print(f"# {args.model} {args.size}, {args.threads} thread(s): {len(ks)} kernel calls "
              f"(built in {time.perf_counter() - t0:.1f} s)", file=sys.stderr)
        unique = {}
        for kind, name, mod, arrays in ks:
            unique.setdefault(id(mod), (kind, name, (lambda m, a: lambda: m(*a))(mod, arrays), []))[3].append(name)
        fns = [u[2] for u in unique.values()]
        times = time_call(lambda: compiled(*inputs), *fns, rounds=args.rounds)
    whole, per = times[0], times[1:]
    by_kind = defaultdict(float)
    rows = []
    for (kind, name, _, names), t in zip(unique.values(), per):
        by_kind[kind] += t * len(names)
        rows.append((t * len(names), kind, name, len(names), t))
    total = sum(by_kind.values())
    print(f"{args.model} ({args.size}), {args.threads} thread(s): model {whole * 1e3:.1f} ms, "
          f"sum of kernels timed alone {total * 1e3:.1f} ms")
    for kind, t in sorted(by_kind.items(), key=lambda kv: -kv[1]):
        print(f"  {kind:10s} {t * 1e3:8.2f} ms  {100 * t / total:5.1f} %")
    print("  top kernels (total ms, kind, anchor, calls, ms per call):")
    for tot, kind, name, calls, t in sorted(rows, reverse=True)[:8]:
        print(f"    {tot * 1e3:8.2f}  {kind:9s} {name:28s} x{calls:<3d} {t * 1e3:.3f}")


if __name__ == "__main__":
    main()
