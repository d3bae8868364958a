"""What a model's tuning log says, task by task (tune.tune_program's log, one target): each
task's default time, its best variant, its best searched candidate (and its sketch), how many
candidates the search measured, and which record a compile takes (records.ranked: the latest
final side-by-side comparison first) -- with that final comparison's times against the
default's. Tasks are numbered in the order their default schedules were first logged, which
is tune_program's task order (the ids of its round lines and task table):

    python benchmarks/tune_log_report.py /work/bench/tunelogs/tune-resnet50.jsonl [--model resnet50]

With --model, also how a compile of that zoo model for --threads (default 2) replays the log:
for each kernel, the rank of the record that decided it (0: the chosen one; a default record
builds today's default schedule), or none (no record: the default schedule), and the
parallel loops added to a record tuned at one thread that has none, and those of its parallel
loops too narrow for --threads drawn again wider, by task id.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

DEFAULT, VARIANT = "default", "default-variant"


def kind(rec) -> str:
    """default, variant or search (the record's sketch)."""
    return {DEFAULT: "default", VARIANT: "variant"}.get(rec.get("sketch"), "search")


def best(recs):
    ok = [r for r in recs if not r["error"] and r["median_s"] is not None]
    return min(ok, key=lambda r: r["median_s"]) if ok else None


def report(path: str) -> None:
    from schedlang.autoschedule import records
    recs = [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]
    by_key = collections.defaultdict(list)
    order = []
    for r in recs:
        if r["workload"] not in by_key:
            order.append(r["workload"])
        by_key[r["workload"]].append(r)
    print(f"{path}: {len(recs)} records, {len(order)} workloads")
    print(f"{'id':>3} {'flops':>9} {'default':>9} {'variant':>9} {'search':>9} {'n_var':>5} {'n_srch':>6} "
          f"{'failed':>6}  {'chosen':8} {'final: chosen/default':>21}  best sketch")
    won = collections.Counter()
    for i, key in enumerate(order):
        rs = by_key[key]
        timed = [r for r in rs if "final" not in r]
        d = best([r for r in timed if kind(r) == "default"])
        v = best([r for r in timed if kind(r) == "variant"])
        s = best([r for r in timed if kind(r) == "search"])
        n_var = sum(kind(r) == "variant" for r in timed)
        n_search = sum(kind(r) == "search" for r in timed)
        failed = sum(bool(r["error"]) for r in rs)
        ranked = records.ranked(rs)
        chosen = ranked[0] if ranked else None
        stamps = [r["final"] for r in rs if isinstance(r.get("final"), (int, float))]
        final = [r for r in rs if stamps and r.get("final") == max(stamps)]
        fd = [r for r in final if kind(r) == "default"]
        ratio = (f"{chosen['median_s'] / fd[0]['median_s']:.3f}" if chosen in final and fd else "-")
        won[kind(chosen) if chosen else "none"] += 1

        def ms(r):
            return f"{r['median_s'] * 1e3:9.3f}" if r else f"{'-':>9}"
        flops = (d or rs[0]).get("gflops", 0) * (d or rs[0])["median_s"] * 1e9 if (d or rs[0])["median_s"] else 0
        print(f"{i:3d} {flops / 1e6:8.1f}M {ms(d)} {ms(v)} {ms(s)} {n_var:5d} {n_search:6d} {failed:6d}  "
              f"{kind(chosen) if chosen else '-':8} {ratio:>21}  {(s or {}).get('sketch', '-')}")
    print("chosen records by kind: " + ", ".join(f"{k} {n}" for k, n in won.items()))


def replay_check(model_name: str, log: str, threads: int = 2) -> None:
    """Which record each kernel of the model takes when compiled with log for a `threads`-thread
    target, as models.py compiles (kernel_tasks.replay_best, spied on: the rank of the record
    that decided the kernel; a default record builds today's default schedule, a replayed one
    may get parallel loops the one-thread tuning left out)."""
    import warnings
    import torch
    import schedlang as sl
    import schedlang.torch as st
    from schedlang.autoschedule.task import default_args
    from schedlang.tensor.serialize import workload_key
    from schedlang.torch import kernel_tasks, zoo
    from schedlang.torch.schedules import default_schedule
    order = []
    for line in open(log, encoding="utf-8"):
        key = json.loads(line)["workload"]
        if key not in order:
            order.append(key)
    seen = collections.defaultdict(list)

    def spy(s, group, target, index):
        prog = kernel_tasks.group_program(s, group)
        got = kernel_tasks.replay_best(s, group, target, index)
        if prog is not None:
            seen[workload_key(default_args(prog.outputs))].append(
                (got.rank, kind(got.record) if got.record else "-")
                + ((f"+{got.parallel_added} parallel",) if got.parallel_added else ())
                + ((f"{got.parallel_widened} parallel widened",) if got.parallel_widened else ()))
        return got.replayed
    target = sl.Target.create("llvm").with_options(num_threads=threads)
    model, inputs = zoo.build(model_name, "full")
    kernel_tasks.apply_group_record = spy
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = st.lower_graph(st.capture(model.eval(), inputs), target)
        for part in program.parts:
            default_schedule([t for _, t in part.outputs], target, log)
    ids = {key: i for i, key in enumerate(order)}
    print(f"{model_name} at {threads} threads: kernels by task id: (rank of the record that decided it, its kind"
          f"[, parallel loops added]) per occurrence")
    for key, uses in sorted(seen.items(), key=lambda kv: ids.get(kv[0], 1 << 30)):
        print(f"  task {ids.get(key, '?')}: {uses}")
    bad = sum(use[0] != 0 for key, uses in seen.items() if key in ids for use in uses)
    par = sum(any("parallel" in str(x) for x in use[2:]) for uses in seen.values() for use in uses)
    other = sum(len(uses) for key, uses in seen.items() if key not in ids)
    print(f"{sum(map(len, seen.values()))} kernels, {bad} of the log's tasks not built from their chosen record, "
          f"{other} of no task of the log ('?': untuned kernels, e.g. attention), {par} given parallel loops the "
          f"log's record lacks or has too narrow; tasks of the log not met: {len(set(order) - set(seen))}")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log")
    ap.add_argument("--model", help="also check how a compile of this zoo model replays the log")
    ap.add_argument("--threads", type=int, default=2, help="the compile target's threads for --model (default 2, "
                                                           "as models.py --threads 2)")
    args = ap.parse_args(argv)
    report(args.log)
    if args.model:
        replay_check(args.model, args.log, args.threads)


if __name__ == "__main__":
    main()
