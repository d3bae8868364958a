"""Tuning a PyTorch model's kernels: each lowered part (one Tensor IR program between the
ops that run in torch, the program default_schedule schedules) becomes a SearchTask, the
trial budget is split by each part's estimated weight, and the records go to one log that
default_schedule(..., log=log) reads when the model is built.

Records are kept for each part's canonical copy (canonical_program): the same program with
its tensors and axes named by position, so that a part recurs under the same workload key
in any model that contains it, whatever the module and graph call its parameters and ops
(`fc1.weight` in one model, `block.mlp.fc1.weight` in another)."""
from __future__ import annotations

import math
import warnings
from typing import List, Optional, Tuple

from ..autoschedule.task import SearchTask
from ..tensor.op import PlaceholderOp
from .lower import LoweredProgram, Part


def canonical_program(inputs: List, outputs: List) -> Tuple[List, List]:
    """(inputs, outputs) of a copy of the program computing outputs from inputs (its
    placeholders, every one the program reads) whose names say only where things are: the
    inputs in0, in1 ... in the given order, the other operations t0, t1 ... and the variables
    v0, v1 ... in the canonical walk's order (tensor/serialize.py). Names are part of a
    workload key (a schedule's steps name stages and axes), so this is the key under which
    the same computation is found in every model."""
    from ..tensor.graph import post_order
    from ..tensor.serialize import from_json, to_data
    data = to_data(outputs)
    position = {t.op.name: k for k, t in enumerate(inputs)}
    computed = 0
    for op in data["ops"]:
        if op["kind"] == "placeholder" and op["name"] in position:
            op["name"] = f"in{position[op['name']]}"
        else:
            op["name"], computed = f"t{computed}", computed + 1
    for k, var in enumerate(data["vars"]):
        var["name"] = f"v{k}"
    outs = from_json(data)
    found = {op.name: op.output(0) for op in post_order([t.op for t in outs]) if isinstance(op, PlaceholderOp)}
    return [found[f"in{k}"] for k in range(len(inputs))], outs


def part_task(part: Part, target) -> Optional[SearchTask]:
    """The SearchTask of a part's canonical copy (its workload key is the one the compiled
    module looks up), or None when there is nothing to tune: no computed output, or a shape
    with a size variable."""
    outs = canonical_program([t for _, t in part.inputs], [t for _, t in part.outputs])[1]
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
