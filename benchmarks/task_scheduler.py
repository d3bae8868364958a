"""Task-scheduler benchmark (issue 18): how many trials the gradient strategy (Ansor's) and
round-robin need to bring a model's estimated latency to 95 % of the final one, tuning the
same model's tasks with the same budget and seeds.

    python benchmarks/task_scheduler.py --quick                 # simulated rounds, tiny ResNet-18 (seconds)
    python benchmarks/task_scheduler.py --simulate              # simulated rounds, full ResNet-18 tasks
    python benchmarks/task_scheduler.py --trials 512            # real tuning of ResNet-18 (a quiet machine; long)
    python benchmarks/task_scheduler.py --model resnet50 --trials 1024 --seeds 1

The tasks are the model's kernels as schedlang.torch.compile(..., tune=N) extracts them
(torch/tune.py: equal kernels are one task weighted by how often they run per forward).
The curve is the scheduler's estimated model latency (sum of weight x best kernel latency)
after each round, starting from the default schedules' (measured first, not counted as
trials). Two readings of "reached 95 %", both counted in trials (None: not within the
budget, counted as the budget):

- "to 95 %": the first trial count at which the estimate is within 1/0.95 of the better
  final estimate of the two strategies (benchmarks/transfer.py's reading);
- "to 95 % of gain": the first at which 95 % of the drop from the default schedules'
  estimate to that better final is made.

The real mode tunes with measured kernels (st.compile(..., tune=N, strategy=...)). The
simulated mode replaces each round with draws from a per-task model of a search, so it runs
anywhere in seconds and isolates the scheduler's choices: task i's default latency follows
its FLOPs and kind, its best reachable latency is 1-2.5x better for conv and matmul kernels
(1-1.5x for others), and its t-th candidate costs best * 2**X with X exponential whose mean
shrinks as the search learns (8 / (8 + t)) — diminishing returns, different sizes and run
counts as in the model. The t-th candidate of a task is the same under both strategies
(common random numbers), so the two differ only in where the trials went.
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)
if os.path.dirname(HERE) not in sys.path:
    sys.path.insert(0, os.path.dirname(HERE))

from transfer import trials_to  # noqa: E402

STRATEGIES = ("gradient", "round-robin")


def model_tasks(name: str, size: str):
    """(model, inputs, [(kind, name, weight, flops, similarity tag)]) of a zoo model's kernels
    for the host."""
    import schedlang as sl
    from schedlang.torch import zoo
    from schedlang.torch.export import capture
    from schedlang.torch.lower import lower_graph
    from schedlang.torch.tune import extract_tasks
    model, inputs = zoo.build(name, size)
    target = sl.Target.create("llvm")
    tasks = extract_tasks(lower_graph(capture(model, inputs), target), target)
    return model, inputs, [(t.kind, t.name, t.weight, t.task.flops, t.tag) for t in tasks]


class SimulatedRounds:
    """tune_round(i, count) for TaskScheduler.tune: count draws of task i's simulated search
    (module docstring); the t-th draw of a task depends only on (seed, i, t)."""

    def __init__(self, tasks, seed: int):
        rng = random.Random(seed)
        self.seed = seed
        self.default, self.best_reachable, self.spread = [], [], []
        for kind, _, _, flops, _ in tasks:
            heavy = kind in ("conv", "matmul")
            self.default.append(3e-6 + flops / (50e9 if heavy else 5e9))
            self.best_reachable.append(self.default[-1] / rng.uniform(1.0, 2.5 if heavy else 1.5))
            self.spread.append(rng.uniform(1.0, 3.0))        # mean doublings above the best, at first
        self.drawn = [0] * len(tasks)
        self.best = list(self.default)

    def __call__(self, i: int, count: int):
        for _ in range(count):
            t = self.drawn[i]
            x = random.Random(f"{self.seed}:{i}:{t}").expovariate(1.0) * self.spread[i] * 8 / (8 + t)
            self.best[i] = min(self.best[i], self.best_reachable[i] * 2.0 ** x)
            self.drawn[i] += 1
        return count, self.best[i]


def simulate(tasks, strategy: str, trials: int, seed: int, per_round: int):
    """The (trials, estimate s) curve of one simulated tuning, its first point the defaults'."""
    from schedlang.autoschedule.task_scheduler import TaskScheduler
    rounds = SimulatedRounds(tasks, seed)
    curve = [(0, sum(t[2] * d for t, d in zip(tasks, rounds.default)))]
    ts = TaskScheduler([t[2] for t in tasks], [t[3] for t in tasks], [t[4] for t in tasks], strategy=strategy,
                       seed=seed, initial_s=list(rounds.default),
                       callback=lambda info: curve.append((info.trials, info.estimate_s)))
    ts.tune(trials, rounds, per_round=per_round)
    return curve


def real(model, inputs, strategy: str, trials: int, seed: int, per_round: int, folder: str):
    """The (trials, estimate s) curve of one measured tuning (a fresh log), the defaults' first."""
    import schedlang.torch as st
    log = os.path.join(folder, f"{strategy}-{seed}.jsonl")
    if os.path.exists(log):
        os.remove(log)
    curve = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = st.compile(model, inputs, tune=trials, log=log, strategy=strategy, seed=seed,
                              per_round=per_round, verbose=0, final=0,
                              callback=lambda info: curve.append((info.trials, info.estimate_s)))
    sched = compiled.tuning
    start = sum(kt.weight * d for kt, d in zip(sched.tasks, sched.default_s))
    return [(0, start)] + [(n, s) for n, s in curve if s is not None]


def trials_to_gain(curve, reference: float, share: float = 0.95):
    """The first trial count at which share of the drop from curve's start to reference is made."""
    goal = curve[0][1] - share * (curve[0][1] - reference)
    return next((n for n, s in curve if s <= goal), None)


def run(args) -> str:
    size = args.size or ("tiny" if args.quick else "full")
    model, inputs, tasks = model_tasks(args.model, size)
    simulated = args.quick or args.simulate
    folder = args.log_dir or tempfile.mkdtemp(prefix="task-scheduler-")
    os.makedirs(folder, exist_ok=True)
    heavy = sum(kind in ("conv", "matmul") for kind, *_ in tasks)
    lines = [f"task scheduler: {args.model} ({size}), {len(tasks)} tasks ({heavy} conv/matmul, "
             f"{sum(t[2] for t in tasks)} kernels a forward); {args.trials} trials per run, "
             f"rounds of {args.per_round}; {'simulated rounds' if simulated else 'measured kernels'}",
             f"{'seed':>4}  {'strategy':<11}  {'default ms':>10}  {'final ms':>9}  {'to 95 %':>8}  "
             f"{'to 95 % of gain':>15}  {'wall s':>7}"]
    to = {k: [] for k in STRATEGIES}
    to_gain = {k: [] for k in STRATEGIES}
    for seed in range(args.seeds):
        curves, wall = {}, {}
        for strategy in STRATEGIES:
            start = time.perf_counter()
            curves[strategy] = simulate(tasks, strategy, args.trials, seed, args.per_round) if simulated \
                else real(model, inputs, strategy, args.trials, seed, args.per_round, folder)
            wall[strategy] = time.perf_counter() - start
        reference = min(c[-1][1] for c in curves.values())
        for strategy, c in curves.items():
            n, g = trials_to(c, reference), trials_to_gain(c, reference)
            to[strategy].append(args.trials if n is None else n)
            to_gain[strategy].append(args.trials if g is None else g)
            lines.append(f"{seed:>4}  {strategy:<11}  {c[0][1] * 1e3:>10.4g}  {c[-1][1] * 1e3:>9.4g}  "
                         f"{str(n):>8}  {str(g):>15}  {wall[strategy]:>7.1f}")
    mean = {k: (statistics.mean(to[k]), statistics.mean(to_gain[k])) for k in STRATEGIES}
    ratio = [mean["gradient"][j] / mean["round-robin"][j] if mean["round-robin"][j] else float("nan")
             for j in (0, 1)]
    lines.append(f"mean trials to 95 %: gradient {mean['gradient'][0]:.1f}, round-robin "
                 f"{mean['round-robin'][0]:.1f} ({ratio[0]:.2f}x); to 95 % of gain: gradient "
                 f"{mean['gradient'][1]:.1f}, round-robin {mean['round-robin'][1]:.1f} ({ratio[1]:.2f}x)")
    if not simulated:
        lines.append(f"logs in {folder}; wall s: defaults measured, searches, the best checked (noisy when shared)")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="simulated rounds on the tiny model (seconds; deterministic)")
    p.add_argument("--simulate", action="store_true", help="simulated rounds on the full model's tasks")
    p.add_argument("--model", default="resnet18", choices=("resnet18", "resnet50", "mobilenet_v2", "bert", "llama"))
    p.add_argument("--size", choices=("tiny", "full"), default=None, help="the zoo's size (default tiny quick, else full)")
    p.add_argument("--trials", type=int, default=0, help="trials per run (default 256 quick, 1024 simulated, 512 real)")
    p.add_argument("--per-round", type=int, default=8)
    p.add_argument("--seeds", type=int, default=0, help="seeds (default 8 simulated, 1 real)")
    p.add_argument("--log-dir", default=None, help="where the real mode's logs go (default: a temporary folder)")
    args = p.parse_args(argv)
    simulated = args.quick or args.simulate
    args.trials = args.trials or (256 if args.quick else 1024 if simulated else 512)
    args.seeds = args.seeds or (8 if simulated else 1)
    print(run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
