"""What the second core gives each kernel of a zoo model: every distinct kernel (its default
schedule) built for 1 and for 2 threads and timed interleaved in one process (tune.time_call,
medians of rounds), sorted by the time the model loses to imperfect scaling, calls x (t2 - t1 / 2).

    python benchmarks/conv_scaling.py [MODEL [ROUNDS]]        # resnet50, 15 rounds

Run it on an otherwise idle machine: a 2-thread kernel shares nothing with other processes
only then (results-conv-zen3-avx2.txt has a run).
"""
from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
for path in (HERE, os.path.dirname(HERE)):
    if path not in sys.path:
        sys.path.insert(0, path)

import torch  # noqa: E402

import schedlang.torch as slt  # noqa: E402
from model_profile import distinct_kernels  # noqa: E402
from schedlang.target.target import Target  # noqa: E402
from schedlang.torch import zoo  # noqa: E402
from schedlang.torch.kernel_tasks import kind_of  # noqa: E402
from schedlang.torch.tune import time_call  # noqa: E402


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    model, inputs = zoo.build(argv[0] if argv else "resnet50", "full")
    rounds = int(argv[1]) if len(argv) > 1 else 15
    builds = {}
    for th in (1, 2):
        target = Target.create(Target("llvm", num_threads=th))
        with torch.no_grad():
            compiled = slt.compile(model, inputs, target=target)
        calls, built = distinct_kernels(compiled.program, target)
        counts = {}
        for _, group, key in calls:
            counts[key] = counts.get(key, 0) + 1
        names = {key: (kind_of(group), group.anchor.name) for _, group, key in calls}
        builds[th] = (built, counts, names)
    built1, counts, names = builds[1]
    built2 = builds[2][0]
    rows = []
    for key in built1:
        m1, a1 = built1[key]
        m2, a2 = built2[key]
        t1, t2 = time_call(lambda: m1(*a1), lambda: m2(*a2), rounds=rounds)
        n = counts[key]
        rows.append((n * (t2 - t1 / 2), names[key][0], names[key][1], n, t1 * 1e3, t2 * 1e3, t1 / t2))
    rows.sort(reverse=True)
    tot1, tot2 = (sum(r[3] * r[i] for r in rows) for i in (4, 5))
    print(f"sum over calls: 1 thread {tot1:.1f} ms, 2 threads {tot2:.1f} ms ({tot1 / tot2:.2f}x)")
    print(f"{'lost ms':>8} {'kind':9s} {'anchor':45s} {'calls':>5} {'1 thr ms':>9} {'2 thr ms':>9} {'speedup':>7}")
    for lost, kind, name, n, a, b, s in rows:
        print(f"{lost * 1e3:8.2f} {kind:9s} {name:45s} {n:5d} {a:9.3f} {b:9.3f} {s:7.2f}")


if __name__ == "__main__":
    main()
