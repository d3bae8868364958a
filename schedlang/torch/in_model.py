"""The tuned kernels of a model checked inside the model, after the search.

The search times each candidate alone, on warm caches, with no neighbours; its final
comparison too. Inside the model a kernel runs after another that left its own data in the
caches, split between the threads its own way; there a record that won alone may lose (a
tuned ResNet-50 whose records were 0.82-0.98x their defaults' times alone ran exactly as fast
as the untuned model). So the model is built twice for the "profile" target (each kernel
reads the clock around it: target/llvm/profile.py), once with every kernel's default schedule
and once with the log's choices, and called in alternating rounds; each tuned task's kernels'
times in the two models decide between its record and its default, and the decision is
logged as a final comparison of the two (records.ranked puts the latest first), with the
in-model times: every later compile with the log builds the winner.
"""
from __future__ import annotations

import json
import re
import statistics
import sys
import time
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

from ..autoschedule import records
from ..kernel.kernels import stage_symbol
from .kernel_tasks import RecordIndex
from .tune import DEFAULT

ROUNDS = 7         # alternating rounds of the two models
NUMBER = 5         # forwards per round and model (a kernel's time is their mean)


class InModel(NamedTuple):
    """One tuned task's kernels inside the model: milliseconds per forward with its default
    schedule and with its record (medians of the rounds), and which was kept."""
    task: int
    default_ms: float
    tuned_ms: float
    kept: str             # "record" or "default"


class Sites(NamedTuple):
    """Per part: (kernel name prefix, task index) pairs, longest prefix first; and the part's
    canonical names (t0, t1 ...) -> its own, for a part built from its canonical copy (a
    record of the whole part: CompiledModule._tuned), whose kernels are named after those."""
    pairs: Dict[int, List[Tuple[str, int]]]
    aliases: Dict[int, Dict[str, str]]


def site_index(tasks, program=None) -> Sites:
    """Where each task's kernels run: a kernel is named after the root stage of its loop nest,
    which is a stage of its group (the anchor, the padded copy it writes) or one a schedule
    made from one (a Winograd transform's `<conv>_wino_V`)."""
    from .tune import canonical_names
    pairs: Dict[int, List[Tuple[str, int]]] = {}
    for i, kt in enumerate(tasks):
        for part, names in kt.sites:
            pairs.setdefault(part, []).extend((stage_symbol(n), i) for n in names)
    for found in pairs.values():
        found.sort(key=lambda p: -len(p[0]))
    aliases = {}
    for part in program.parts if program is not None else ():
        names = canonical_names([t for _, t in part.inputs], [t for _, t in part.outputs])
        aliases[part.index] = {stage_symbol(k): stage_symbol(v) for k, v in names.items()}
    return Sites(pairs, aliases)


def row_task(sites: Sites, part: int, kernel: str) -> Optional[int]:
    """The task of a kernel of the part (by its name, as ModelProfile rows give it), or None."""
    pairs = sites.pairs.get(part, [])
    i = task_of(pairs, kernel)
    if i is None:
        m = re.fullmatch(r"(t\d+)(_.*)?", kernel)
        own = sites.aliases.get(part, {}).get(m.group(1)) if m else None
        if own is not None:
            i = task_of(pairs, own + (m.group(2) or ""))
    return i


def task_of(pairs: List[Tuple[str, int]], kernel: str) -> Optional[int]:
    """The task a kernel of the part belongs to, by its name (the part's name taken off), or None.
    A longer name that continues with a number is another stage's ("relu_41", "bn_3" after
    "relu_4", "bn"), so a stage made from one must add a word ("bn_3_wino_V")."""
    for name, i in pairs:
        if kernel == name:
            return i
    for name, i in pairs:
        if kernel.startswith(name + "_") and not kernel[len(name) + 1:][:1].isdigit():
            return i
    return None


def task_times(prof, sites: Sites) -> Dict[int, float]:
    """Milliseconds per forward of each task's kernels in one profile (a ModelProfile)."""
    out: Dict[int, float] = {}
    for row in prof.rows:
        i = row_task(sites, row.part, row.name)
        if i is not None:
            out[i] = out.get(i, 0.0) + row.ms
    return out


def chosen_records(tasks, log: str, target) -> Dict[int, Tuple[dict, dict]]:
    """Tasks whose compile takes a record other than their default schedule's: task index ->
    (that record, the default's record), as replay_best ranks them."""
    index = RecordIndex(log)
    out = {}
    for i, kt in enumerate(tasks):
        ranked = index.ranked(kt.workload_key, kt.task.target)
        if not ranked or ranked[0].get("sketch") == DEFAULT:
            continue
        steps = json.loads(kt.default_steps) if kt.default_steps else None
        default = next((r for r in ranked if r.get("sketch") == DEFAULT and (steps is None or r["steps"] == steps)),
                       None)
        if default is not None:
            out[i] = (ranked[0], default)
    return out


def compare_in_model(build, inputs: Sequence, tasks, log: str, target, program=None, rounds: int = ROUNDS,
                     number: int = NUMBER, verbose: int = 1) -> List[InModel]:
    """Time each tuned task's kernels inside the model, with its record and with its default
    schedule, and log the winner (see the module's docstring). build(log) compiles the model for
    the profile target with that tuning log (None: default schedules); program: the lowered
    program (its parts' canonical names). One round of both models first, untimed (a first
    call's costs); returns a row per task compared."""
    chosen = chosen_records(tasks, log, target)
    if not chosen:
        return []
    if verbose:
        print(f"tune: timing {len(chosen)} tuned tasks inside the model, against their default schedules "
              f"({rounds} alternating rounds)", file=sys.stderr, flush=True)
    models = [build(None), build(log)]
    sites = site_index(tasks, program)
    times: List[Dict[int, List[float]]] = [{}, {}]
    for model in models:                  # untimed: a first call's costs
        model.profile(*inputs, number=number)
    for _ in range(rounds):
        for model, out in zip(models, times):
            for i, ms in task_times(model.profile(*inputs, number=number), sites).items():
                out.setdefault(i, []).append(ms)
    stamp = time.time()
    here = {"cpu": records.this_cpu(), "register_file": records.register_file(target)}   # where the models ran
    threads = records.target_threads(target)
    if threads is not None:
        here["threads"] = threads
    rows, new = [], []
    for i, (rec, default) in sorted(chosen.items()):
        if i not in times[0] or i not in times[1]:
            continue                                   # its kernels were not found by name
        d, t = statistics.median(times[0][i]), statistics.median(times[1][i])
        kept = "record" if t < d else "default"
        rows.append(InModel(i, d, t, kept))
        weight = tasks[i].weight
        for r, ms in ((default, times[0][i]), (rec, times[1][i])):
            new.append(records.make_record(r["workload"], r["target"], r["steps"], r["kernel_hash"],
                                           [m * 1e-3 / weight for m in ms], None, tasks[i].task.flops,
                                           final=stamp, sketch=r.get("sketch"), decisions=r.get("decisions"),
                                           in_model=True, **here))
    records.append(log, new)
    if verbose:
        print(f"tune: {summary(rows)}", file=sys.stderr, flush=True)
    return rows


def summary(rows: List[InModel]) -> str:
    """One line on the in-model check's rows."""
    if not rows:
        return "inside the model: no tuned task to check (every task builds its default schedule)"
    d = sum(r.default_ms for r in rows)
    t = sum(r.tuned_ms for r in rows)
    kept = sum(r.default_ms if r.kept == "default" else r.tuned_ms for r in rows)
    back = sum(r.kept == "default" for r in rows)
    return (f"inside the model, the kernels of the {len(rows)} tasks with records take {d:.4g} ms per forward "
            f"with default schedules, {t:.4g} ms with their records, {kept:.4g} ms as kept: {back} keep their "
            "default (their record lost there)")
