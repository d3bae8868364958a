"""Tune one zoo model whole for a CPU target of --threads threads (default 1;
schedlang.torch.tune.tune_program: each task's default schedule and its conv variants, then
the search under the gradient task scheduler), appending to --log; prints each round (stderr)
and the per-task table. Each record says the threads it was timed at. A one-thread target's
measurements are CPU time, so a loaded machine can run it:

    OMP_NUM_THREADS=1 python benchmarks/tune_whole.py --model resnet50 --timeout 1800 \
        --log /work/bench/tunelogs/tune-resnet50.jsonl

More threads are timed by the wall clock (a quiet machine). With --revalidate, no search:
each task's chosen record is timed beside today's default schedule at --threads, a few
alternating rounds, and the winner logged for that thread count (schedlang.torch.revalidate),
so that a compile for it never takes a record that loses to the default there:

    python benchmarks/tune_whole.py --model bert --revalidate --threads 2 --log LOG

Time the result with conv_layer_ab.py --whole --log LOG, or models.py --tuned-log LOG.
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
    ap.add_argument("--threads", type=int, default=1, help="the target's threads, tuned and timed at (default 1)")
    ap.add_argument("--revalidate", action="store_true",
                    help="no search: re-time each task's chosen record against today's default at --threads")
    ap.add_argument("--rounds", type=int, default=3, help="--revalidate's alternating rounds (default 3)")
    args = ap.parse_args(argv)
    import schedlang as sl
    import schedlang.torch as st
    from schedlang.torch import zoo
    from schedlang.torch.revalidate import revalidate, revalidation_table
    from schedlang.torch.tune import task_table, tune_program
    torch.set_num_threads(args.threads)
    target = sl.Target.create(sl.Target("llvm", num_threads=args.threads))
    model, inputs = zoo.build(args.model, args.size)
    model.eval()
    start = time.monotonic()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = st.lower_graph(st.capture(model, inputs), target)
        if args.revalidate:
            print(revalidation_table(revalidate(program, target, args.log, rounds=args.rounds)))
            print(f"{args.model}: revalidated at {args.threads} thread(s) in {time.monotonic() - start:.0f} s wall")
            return
        sched = tune_program(program, target, args.trials, args.log, seed=args.seed, timeout=args.timeout,
                             variants=args.variants, verbose=1)
    print(task_table(sched))
    print(f"{args.model}: {sum(sched.trials)} search trials over {len(sched.tasks)} tasks; "
          f"{time.monotonic() - start:.0f} s wall in all (lowering, defaults, variants, search, final comparison)")
    print("round order (task ids):", " ".join(map(str, sched.order)))


if __name__ == "__main__":
    main()
