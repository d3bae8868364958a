"""The Python around a compiled model's kernels: one forward's CPU time split into the
native kernel calls and the rest, and (with --profile) cProfile's view of the rest.

Each model is compiled once at one thread; each round times `calls` forwards by the thread's
CPU time (time.thread_time: neighbours on a shared machine do not inflate it), then as many
with the built modules' entry functions stubbed (returning at once): the Python around the
kernels. Where the compiled module
has the prepared call (CompiledModule.prepared_calls), rounds alternate between it and the
fully checked call, in one process.

    OMP_NUM_THREADS=1 taskset -c 1 python benchmarks/call_overhead.py --size full
"""
from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402


def stub_entries(compiled, stubbed: bool) -> None:
    """Replace each built module's entry function by one that returns at once (stubbed), or
    put the real one back: a forward with the kernels stubbed is the Python around them."""
    for mod in compiled.modules.values():
        real = mod.__dict__.setdefault("real_entry", mod._fn)
        mod._fn = (lambda argv: 0) if stubbed else real


def measure(compiled, inputs, calls: int) -> float:
    """ms of thread CPU time per forward over calls forwards."""
    start = time.thread_time()
    for _ in range(calls):
        compiled(*inputs)
    return 1e3 * (time.thread_time() - start) / calls


def profile(compiled, inputs, calls: int, top: int) -> str:
    prof = cProfile.Profile(time.thread_time)     # CPU time: the machine may be shared
    prof.enable()
    for _ in range(calls):
        compiled(*inputs)
    prof.disable()
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(top)
    return text.getvalue()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="mobilenet_v2,resnet18,bert")
    p.add_argument("--size", default="tiny", choices=("tiny", "full"))
    p.add_argument("--calls", type=int, default=20)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--profile", action="store_true", help="print cProfile's top functions (kernels stubbed)")
    args = p.parse_args(argv)
    import schedlang as sl
    import schedlang.torch as sl_torch
    from schedlang.torch import zoo
    torch.set_num_threads(1)
    target = sl.Target.create("llvm").with_options(num_threads=1)
    print(f"# {args.size} models, batch 1, one thread, thread CPU time, {args.rounds} rounds of {args.calls} "
          "calls, median; python = forward with the kernels stubbed; kernels = forward - python")
    print(f"{'model':14s} {'path':9s} {'forward ms':>10s} {'kernels ms':>10s} {'python ms':>9s}")
    for name in args.models.split(","):
        model, inputs = zoo.build(name, args.size)
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            compiled = sl_torch.compile(model, inputs, target=target)
            paths = ("checked", "prepared") if hasattr(compiled, "prepared_calls") else ("checked",)
            rows = {(path, stub): [] for path in paths for stub in (False, True)}
            for _ in range(args.rounds):
                for path in paths:
                    if len(paths) > 1:
                        compiled.prepared_calls = path == "prepared"
                    for stub in (False, True):
                        stub_entries(compiled, stub)
                        compiled(*inputs)           # the prepared call is made here
                        rows[(path, stub)].append(measure(compiled, inputs, args.calls))
            stub_entries(compiled, True)
            for path in paths:
                fwd = statistics.median(rows[(path, False)])
                py = statistics.median(rows[(path, True)])
                print(f"{name:14s} {path:9s} {fwd:10.3f} {fwd - py:10.3f} {py:9.3f}", flush=True)
            if args.profile:
                for path in paths:
                    if len(paths) > 1:
                        compiled.prepared_calls = path == "prepared"
                    print(f"## cProfile, {name}, {path}, {args.calls} calls")
                    print(profile(compiled, inputs, args.calls, 25))
    return 0


if __name__ == "__main__":
    sys.exit(main())
