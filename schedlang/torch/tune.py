"""Tuning a PyTorch model's kernels: each lowered part (one Tensor IR program between the
ops that run in torch, the program default_schedule schedules) becomes a SearchTask, the
trial budget is split by each part's estimated weight, and the records go to one log that
default_schedule(..., log=log) reads when the model is built."""
from __future__ import annotations

import math
import warnings
from typing import List, Optional, Tuple

from ..autoschedule.task import SearchTask
from ..tensor.op import PlaceholderOp
from .lower import LoweredProgram, Part


def part_task(part: Part, target) -> Optional[SearchTask]:
    """The SearchTask of a part (its workload key is the one default_schedule looks up), or
    None when there is nothing to tune: no computed output, or a shape with a size variable."""
    outs = [t for _, t in part.outputs]
    if not any(not isinstance(t.op, PlaceholderOp) for t in outs):
        return None
    if not all(isinstance(e, int) for t in outs for e in t.shape):
        warnings.warn(f"tune: part {part.index} has a symbolic shape and keeps its default schedule "
                      "(the search tunes static shapes)", stacklevel=3)
        return None
    try:
        task = SearchTask.from_outputs(outs, target)
    except (TypeError, ValueError) as err:
        warnings.warn(f"tune: part {part.index} is not tuned ({err})", stacklevel=3)
        return None
    if not all(isinstance(e, int) for t in task.args for e in t.shape):
        return None
    return task


def weight(task: SearchTask) -> float:
    """A part's estimated cost: its arithmetic operations, or the bytes it moves when that is more."""
    moved = sum(math.prod(t.shape) * t.dtype_obj.bits // 8 for t in task.args)
    return float(max(task.flops, moved, 1))


def split_trials(weights: List[float], trials: int) -> List[int]:
    """trials spread over the weights in proportion (largest remainders), each part at least
    one trial while there are enough for all."""
    n = len(weights)
    if n == 0:
        return []
    floor = 1 if trials >= n else 0
    rest = trials - floor * n
    total = sum(weights)
    shares = [rest * w / total for w in weights]
    out = [floor + int(x) for x in shares]
    left = trials - sum(out)
    for i in sorted(range(n), key=lambda i: -(shares[i] - int(shares[i])))[:left]:
        out[i] += 1
    return out


def extract_tasks(program: LoweredProgram, target) -> List[Tuple[Part, SearchTask, float]]:
    """(part, task, weight) of every tunable part, one per distinct workload (equal parts share records)."""
    out, keys = [], set()
    for part in program.parts:
        task = part_task(part, target)
        if task is None or task.workload_key in keys:
            continue
        keys.add(task.workload_key)
        out.append((part, task, weight(task)))
    return out


def tune_program(program: LoweredProgram, target, trials: int, log: str, executor=None, seed=None,
                 **options) -> List[Tuple[SearchTask, int]]:
    """Tune every part of program for target with `trials` in all, logging to `log`;
    returns (task, trials given) per part. options go to sl.auto_schedule."""
    from ..autoschedule import auto_schedule
    from ..autoschedule.executor import LocalExecutor
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 0:
        raise ValueError(f"tune must be a non-negative number of trials, got {trials!r}")
    tasks = extract_tasks(program, target)
    budget = split_trials([w for _, _, w in tasks], trials)
    own = executor is None and any(budget)
    ex = LocalExecutor(1) if own else executor        # one worker for every part
    try:
        for (_, task, _), n in zip(tasks, budget):
            if n:
                auto_schedule(task, trials=n, log=log, executor=ex, seed=seed, **options)
    finally:
        if own:
            ex.shutdown()
    return [(task, n) for (_, task, _), n in zip(tasks, budget)]
