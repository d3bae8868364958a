"""Allocating a tuning budget over the tasks of a model (Ansor's task scheduler, section 6 of
Zheng et al., "Ansor: Generating High-Performance Tensor Programs for Deep Learning",
OSDI 2020; TVM's python/tvm/auto_scheduler/task_scheduler.py).

The objective is the model's estimated latency, f = sum_i w_i * g_i, where g_i is the best
latency of task i found so far and w_i how often it runs per forward. Tuning goes in rounds
of `per_round` measurements of one task. First a warm-up round of every task (with
"gradient", of every task whose latency is not known at the start: one that starts from its
default schedule's measured latency, or a resumed log's, has what the warm-up is for); then

- "round-robin": the live tasks in turn;
- "gradient": the task i with the most negative estimated gradient of f along its trials,

      df/dt_i = df/dg_i * (alpha * backward_i + (1 - alpha) * forward_i)

  with df/dg_i = w_i; backward_i = (g_i(r) - g_i(r - window)) / window, the drop of its best
  over its last `backward_window_size` rounds (0 before it has that many); forward_i =
  min(g_i - g_i / r_i, beta * C_i / max_{j similar} (C_j / g_j)) - g_i, the optimistic
  estimate of the next round: either a 1/r_i share of the rest (r_i: rounds task i has had)
  or, when similar tasks (the same kernel kind within a factor 1.618 of FLOPs: its tag) run
  faster per FLOP, the latency it would have at `beta` times their best speed. When all
  gradients are equal (nothing to tell them apart) the pick is random (seeded).

A task is dead (never picked again) when a round measured nothing new (its search space is
exhausted), with `early_stopping`, when its best has not improved in that many of its own
trials (converged), or when the caller retires it (`retire`: torch/tune.py's give_up); tuning ends when the budget, the time limit or the live tasks run out. A
task that has stayed `beta` times slower per FLOP than its group's best after 5 rounds more
than any other member leaves its similarity group (as TVM's _adjust_similarity_group).

The scheduler only decides: `tune(tune_round)` calls tune_round(task index, measurements)
for each round, which searches and measures (torch/tune.py passes one that runs the
evolutionary search; tests pass deterministic fakes), and returns how many candidates it
measured and the task's best latency in seconds so far (None: none ran yet).
"""
from __future__ import annotations

import random
import sys
import time
from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence, Tuple

STRATEGIES = ("gradient", "round-robin")
NO_COST = 1e10            # the best latency of a task with no successful measurement (TVM's 1e10)
SIMILAR_PATIENCE = 5      # extra rounds before a slow task leaves its similarity group


@dataclass(frozen=True)
class RoundInfo:
    """What a progress callback gets after each round."""

    round: int                # rounds done, warm-up included
    task: int                 # the task of this round
    measured: int             # candidates this round measured
    task_trials: int          # trials of this task so far
    best_s: Optional[float]   # the task's best latency (None: nothing ran)
    estimate_s: Optional[float]   # sum of weight x best over all tasks (None until every task has one)
    trials: int               # trials of all tasks so far
    elapsed_s: float


class TaskScheduler:
    """Decides which task each round of tuning goes to (module docstring).

    weights: how often each task runs per forward; flops: its arithmetic operations (for the
    similarity estimate); tags: its similarity tag ('' shares with none). initial_s: a known
    latency per task to start from (its default schedule's, or a resumed log's best; None
    where unknown). initial_trials: trials a resumed log already holds per task: such a task
    counts as having had that many trials' rounds and skips the warm-up (TVM's
    _restore_status)."""

    def __init__(self, weights: Sequence[float], flops: Sequence[float], tags: Optional[Sequence[str]] = None,
                 *, strategy: str = "gradient", alpha: float = 0.2, beta: float = 2.0,
                 backward_window_size: int = 3, early_stopping: Optional[int] = None,
                 initial_s: Optional[Sequence[Optional[float]]] = None,
                 initial_trials: Optional[Sequence[int]] = None, seed: Optional[int] = None,
                 callback: Optional[Callable[[RoundInfo], None]] = None, verbose: int = 0):
        n = len(weights)
        if strategy not in STRATEGIES:
            raise ValueError(f"TaskScheduler: strategy must be one of {', '.join(STRATEGIES)}, got {strategy!r}")
        if n == 0:
            raise ValueError("TaskScheduler: no tasks to tune")
        tags = list(tags) if tags is not None else [""] * n
        if len(flops) != n or len(tags) != n or any(x is not None and len(x) != n for x in (initial_s, initial_trials)):
            raise ValueError("TaskScheduler: weights, flops, tags and initial_s must have one entry per task")
        if any(not w > 0 for w in weights):
            raise ValueError(f"TaskScheduler: weights must be positive, got {list(weights)}")
        if not 0 <= alpha <= 1 or not beta >= 1 or backward_window_size < 1:
            raise ValueError("TaskScheduler: needs 0 <= alpha <= 1, beta >= 1 and backward_window_size >= 1")
        if early_stopping is not None and early_stopping < 1:
            raise ValueError(f"TaskScheduler: early_stopping must be a positive number of trials, got {early_stopping}")
        self.weights, self.flops, self.tags = list(weights), [float(f) for f in flops], tags
        self.strategy, self.alpha, self.beta, self.window = strategy, alpha, beta, backward_window_size
        self.early_stopping = early_stopping
        self.best = [NO_COST if s is None else float(s) for s in (initial_s or [None] * n)]
        self.rounds = [0] * n                 # rounds each task has had
        self.resumed = list(initial_trials or [0] * n)   # trials a resumed log held (not this run's)
        self.trials = [0] * n                 # measurements each task has had in this run
        self.history: List[List[float]] = [[] for _ in range(n)]     # best after each of its rounds
        self.improved_at = [0] * n            # the task's trial count when its best last dropped
        self.dead: set = set()
        self.order: List[int] = []            # the task of each round, in order
        self.rng = random.Random(seed)
        self.callback, self.verbose = callback, verbose
        self.groups = {}
        for i, tag in enumerate(tags):
            if tag:
                self.groups.setdefault(tag, []).append(i)

    # ---- the objective ---------------------------------------------------------------------

    def estimate(self, costs: Optional[Sequence[float]] = None) -> float:
        """sum of weight x best latency: the model's estimated latency (seconds)."""
        costs = self.best if costs is None else costs
        return sum(w * c for w, c in zip(self.weights, costs))

    def known_estimate(self) -> Optional[float]:
        return None if any(c >= NO_COST for c in self.best) else self.estimate()

    # ---- choosing ----------------------------------------------------------------------------

    def gradient(self, i: int) -> float:
        """The estimated change of the objective per round of task i (<= 0; module docstring)."""
        chain = self.weights[i]                    # d(sum w_j g_j) / d g_i
        r, hist = self.rounds[i], self.history[i]
        backward = (hist[r - 1] - hist[r - 1 - self.window]) / self.window if r - 1 - self.window >= 0 else 0.0
        g = self.best[i]
        g_next = g - g / max(r, 1)
        peers = self.groups.get(self.tags[i], [])
        if len(peers) > 1:
            best_speed = max(self.flops[j] / self.best[j] for j in peers)
            if best_speed > 0:
                g_next = min(g_next, self.beta * self.flops[i] / best_speed)
        forward = g_next - g
        return chain * (self.alpha * backward + (1 - self.alpha) * forward)

    def pick(self, last: int) -> int:
        """The task of the next round (after warm-up); last: the previous round's task."""
        live = [i for i in range(len(self.weights)) if i not in self.dead]
        if self.strategy == "round-robin":
            return min((i for i in live if i > last), default=live[0])
        grads = [self.gradient(i) for i in live]
        if max(grads) == min(grads):
            return self.rng.choice(live)
        return live[min(range(len(live)), key=lambda k: grads[k])]

    # ---- tuning ------------------------------------------------------------------------------

    def tune(self, trials: int, tune_round: Callable[[int, int], Tuple[int, Optional[float]]],
             per_round: int = 8, timeout: Optional[float] = None) -> None:
        """Spend up to `trials` measurements in rounds of at most per_round (fewer when the
        budget is small, so that the warm-up reaches every task not resumed), stopping after `timeout`
        seconds (no new round starts then)."""
        n = len(self.weights)
        for i, done in enumerate(self.resumed):
            if done:                  # a resumed task: its rounds so far, estimated as TVM does
                self.rounds[i] = max(1, int(done / per_round + 0.5))
                self.history[i] = [self.best[i]] * self.rounds[i]
        # Ansor's warm-up gives every task a latency to compare; the gradient strategy skips
        # it for tasks that start with one (their default schedule measured): tiny kernels
        # (a model's pads and pools) then get no round until their weighted share calls for it.
        warm = [i for i in range(n) if not self.resumed[i]
                and (self.strategy == "round-robin" or self.best[i] >= NO_COST)]
        if warm:
            per_round = max(1, min(per_round, trials // len(warm)))
        start = time.monotonic()
        spent, last = 0, -1
        while spent < trials and len(self.dead) < n:
            if timeout is not None and time.monotonic() - start >= timeout:
                break
            if warm:
                i = warm.pop(0)
            else:
                i = self.pick(last)
            k = min(per_round, trials - spent)
            measured, best = tune_round(i, k)
            spent += measured
            self._record(i, measured, best)
            last = i
            self._report(i, measured, sum(self.trials), time.monotonic() - start)

    def retire(self, i: int) -> None:
        """Give task i no more rounds (its caller judged its search hopeless: tune.py's give_up)."""
        self.dead.add(i)

    def _record(self, i: int, measured: int, best: Optional[float]) -> None:
        self.order.append(i)
        self.rounds[i] += 1
        self.trials[i] += measured
        if best is not None and best < self.best[i]:
            self.best[i] = best
            self.improved_at[i] = self.trials[i]
        self.history[i].append(self.best[i])
        if measured == 0:
            self.dead.add(i)                       # its search space is exhausted
        elif self.early_stopping is not None and self.trials[i] - self.improved_at[i] >= self.early_stopping:
            self.dead.add(i)                       # converged
        self._adjust_group(i)

    def _adjust_group(self, i: int) -> None:
        """A task that stays far slower per FLOP than its group's best is not similar after all."""
        peers = self.groups.get(self.tags[i], [])
        if len(peers) <= 1 or self.best[i] >= NO_COST:
            return
        best_speed = max(self.flops[j] / self.best[j] for j in peers)
        if self.flops[i] / self.best[i] < best_speed / self.beta \
                and self.rounds[i] > SIMILAR_PATIENCE + max(self.rounds[j] for j in peers if j != i):
            peers.remove(i)
            self.tags[i] = ""

    def _report(self, i: int, measured: int, total: int, elapsed: float) -> None:
        est = self.known_estimate()
        info = RoundInfo(len(self.order), i, measured, self.trials[i],
                         None if self.best[i] >= NO_COST else self.best[i], est, total, elapsed)
        if self.callback is not None:
            self.callback(info)
        if self.verbose:
            print(format_round(info), file=sys.stderr, flush=True)


def format_round(info: RoundInfo) -> str:
    """One line of progress: the round, its task, the task's best and the model's estimate."""
    best = "-" if info.best_s is None else f"{info.best_s * 1e3:.4g} ms"
    model = "-" if info.estimate_s is None else f"{info.estimate_s * 1e3:.4g} ms"
    return (f"tune: round {info.round}: task {info.task} ({info.task_trials} trials, best {best}); "
            f"model estimate {model}; {info.trials} trials, {info.elapsed_s:.0f} s")
