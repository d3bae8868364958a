"""Transfer benchmark (issue 18 item 4): how many trials a model's tuning needs to reach 95 %
of its final estimated latency, fresh and warm-started from the log of a similar model.

    python benchmarks/transfer.py --quick           # formula worker (nothing built), tiny MLPs, seconds
    python benchmarks/transfer.py                   # real timings, wider MLPs (minutes)
    python benchmarks/transfer.py --seeds 3 --trials 96 --log-dir runs/

Model A (an MLP) is tuned first into its own log. Model B, an MLP with one layer in common with
A and the others of similar widths, is then tuned twice on the same seed and budget:
"fresh" from an empty log and "warm" from a copy of A's log, where its cost model trains on
A's records before its first round (autoschedule/transfer.py) and its layer in common is
resumed, not measured again. The curve is the task scheduler's estimated model latency (sum
of weight x best kernel latency) after each round; trials-to-95% is the first trial count at
which it is within 1/0.95 of a reference: the better final estimate of the two runs (so a
run that settles early on a worse latency is not counted as converged), and, in brackets,
of its own final. --quick measures each candidate with the tests' synthetic formula
(tests/autoschedule/workers.formula: a known optimum, no build), so it is deterministic for
a seed and runs anywhere; the real mode times kernels on this machine (noisy when shared).
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
if os.path.dirname(HERE) not in sys.path:
    sys.path.insert(0, os.path.dirname(HERE))

import torch  # noqa: E402

import schedlang.torch as st  # noqa: E402
from schedlang.autoschedule.search import SearchPolicy  # noqa: E402


def mlp(widths, seed: int = 0) -> torch.nn.Module:
    """Linear layers of the given widths with a ReLU after each but the last."""
    torch.manual_seed(seed)
    layers = []
    for k, (a, b) in enumerate(zip(widths, widths[1:])):
        layers.append(torch.nn.Linear(a, b))
        if k < len(widths) - 2:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers).eval()


# (batch, widths of A, widths of B): B shares A's first layer, its others are of similar widths
SIZES = {"quick": (8, [32, 64, 64, 16], [32, 64, 96, 24]),
         "full": (32, [256, 512, 512, 128], [256, 512, 768, 192])}


def tune(model, batch: int, trials: int, log: str, seed: int, args) -> list:
    """Tune model's kernels into log; the curve: (trials so far, estimated latency s) per round."""
    curve = []
    options = dict(seed=seed, verbose=0, per_round=args.per_round, final=0,
                   policy=SearchPolicy(population=16, generations=2, elites=4),
                   callback=lambda info: curve.append((info.trials, info.estimate_s)))
    if args.quick:
        from tests.autoschedule import workers
        options.update(worker_fn=workers.formula, number=1, repeat=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        st.compile(model, (torch.randn(batch, model[0].in_features),), tune=trials, log=log, **options)
    return [(n, s) for n, s in curve if s is not None]


def trials_to(curve, reference: float, share: float = 0.95):
    """The first trial count at which the curve's latency is within reference / share (None: never)."""
    return next((n for n, s in curve if s <= reference / share), None)


def run(args) -> str:
    batch, widths_a, widths_b = SIZES["quick" if args.quick else "full"]
    folder = args.log_dir or tempfile.mkdtemp(prefix="transfer-")
    os.makedirs(folder, exist_ok=True)
    lines = [f"transfer: model A = MLP {widths_a}, model B = MLP {widths_b}, batch {batch}; "
             f"{args.trials} trials each, {'formula worker' if args.quick else 'real timings'}",
             f"{'seed':>4}  {'run':<5}  {'final ms':>9}  {'trials to 95%':>14}  {'(own final)':>11}  {'wall s':>7}"]
    summary = {"fresh": [], "warm": []}
    for seed in range(args.seeds):
        log_a = os.path.join(folder, f"a{seed}.jsonl")
        for path in (log_a, *(os.path.join(folder, f"b-{k}{seed}.jsonl") for k in summary)):
            if os.path.exists(path):
                os.remove(path)
        tune(mlp(widths_a), batch, args.trials, log_a, seed + 1000, args)
        curves, wall = {}, {}
        for kind in summary:
            log_b = os.path.join(folder, f"b-{kind}{seed}.jsonl")
            if kind == "warm":
                shutil.copy(log_a, log_b)
            start = time.perf_counter()
            curves[kind] = tune(mlp(widths_b, seed=1), batch, args.trials, log_b, seed, args)
            wall[kind] = time.perf_counter() - start
        reference = min(c[-1][1] for c in curves.values())
        for kind, c in curves.items():
            n, own = trials_to(c, reference), trials_to(c, c[-1][1])
            summary[kind].append(n if n is not None else args.trials)
            lines.append(f"{seed:>4}  {kind:<5}  {c[-1][1] * 1e3:>9.4g}  {str(n):>14}  {f'({own})':>11}  "
                         f"{wall[kind]:>7.0f}")
    fresh, warm = statistics.mean(summary["fresh"]), statistics.mean(summary["warm"])
    lines.append(f"mean trials to 95% of the better final (None: not within the budget, counted as the "
                 f"budget): fresh {fresh:.1f}, warm {warm:.1f} ({warm / fresh:.2f}x); logs in {folder}")
    lines.append("wall s: the tuning's wall-clock seconds (tasks' default schedules, searches, the best "
                 "checked against the reference; a shared machine: noisy)")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="formula worker, tiny MLPs (seconds; deterministic)")
    p.add_argument("--trials", type=int, default=0, help="trials per model (default 48 quick, 128 full)")
    p.add_argument("--per-round", type=int, default=8)
    p.add_argument("--seeds", type=int, default=0, help="seeds to run (default 3 quick, 1 full)")
    p.add_argument("--log-dir", default=None, help="where the logs go (default: a temporary folder)")
    args = p.parse_args(argv)
    args.trials = args.trials or (48 if args.quick else 128)
    args.seeds = args.seeds or (3 if args.quick else 1)
    print(run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
