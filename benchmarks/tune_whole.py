"""Tune one zoo model whole for a one-thread CPU target (schedlang.torch.tune.tune_program:
each task's default schedule and its conv variants, then the search under the gradient task
scheduler), appending to --log; prints each round (stderr) and the per-task table. A
one-thread target's measurements are CPU time, so a loaded machine can run it:

    OMP_NUM_THREADS=1 python benchmarks/tune_whole.py --model resnet50 --timeout 1800 \
        --log /work/bench/tunelogs/tune-resnet50.jsonl

Time the result with conv_layer_ab.py --whole --log LOG.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import torch  # noqa: E402


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--size", default="full", help="zoo size (default full)")
    ap.add_argument("--log", required=True)
    ap.add_argument("--trials", type=int, default=100000, help="measurements in all (default: the timeout ends it)")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds from the start, defaults included")
    ap.add_argument("--variants", type=int, default=15)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    import schedlang as sl
    import schedlang.torch as st
    from schedlang.torch import zoo
    from schedlang.torch.tune import task_table, tune_program
    torch.set_num_threads(1)
    target = sl.Target.create(sl.Target("llvm", num_threads=1))
    model, inputs = zoo.build(args.model, args.size)
    model.eval()
    start = time.monotonic()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = st.lower_graph(st.capture(model, inputs), target)
        sched = tune_program(program, target, args.trials, args.log, seed=args.seed, timeout=args.timeout,
                             variants=args.variants, verbose=1)
    print(task_table(sched))
    print(f"{args.model}: {sum(sched.trials)} search trials over {len(sched.tasks)} tasks; "
          f"{time.monotonic() - start:.0f} s wall in all (lowering, defaults, variants, search, final comparison)")
    print("round order (task ids):", " ".join(map(str, sched.order)))


if __name__ == "__main__":
    main()
