"""TVM's auto_scheduler names, thin wrappers over this auto-scheduler, so that a TVM script
reads the same after `from schedlang import auto_scheduler` (schedlang/auto_scheduler.py):

    TVM (tvm.auto_scheduler)                      here
    SearchTask(func, args, target)                SearchTask (task.py), the same arguments
    task.tune(TuningOptions(...))                 sl.auto_schedule(task, trials=, log=, ...)
    TuningOptions(num_measure_trials,             trials=
                  num_measures_per_round,         per_round= (schedlang's default 8, TVM's 64)
                  verbose, runner,                verbose=; runner: "local", LocalRunner or an Executor
                  measure_callbacks,              [RecordToFile(log)]: log= (one is required)
                  early_stopping, builder)        None / "local" only (timeout= ends a search early)
    RecordToFile(log_file)                        log= (JSON lines, records.py)
    LocalRunner(timeout, number, repeat)          run_timeout=, number=, repeat=
    task.apply_best(log_file)                     sl.apply_best(log, task) -> (schedule, args)
    task.print_best(log_file)                     sl.print_best's text (returned, not printed, as TVM)
    ApplyHistoryBest(log_file) as a context       `with ApplyHistoryBest(log) as best: best.apply_best(task)`;
                                                  for a model, schedlang.torch.compile(m, inputs, log=log)
    load_records(log_file)                        records.load: dicts, not (MeasureInput, MeasureResult)
    SketchPolicy(task, cost_model)                search_policy=SearchPolicy(...) (search.py)
    @register_workload                            accepted, does nothing: a workload's key is
                                                  computed from its program (tensor/serialize.py)
"""
from __future__ import annotations

import concurrent.futures as cf
import os
from dataclasses import dataclass
from typing import List, Optional, Sequence, Union

from . import records
from .api import apply_best, check_count, existing_log
from .executor import RUN_TIMEOUT_S


@dataclass(frozen=True)
class RecordToFile:
    """TVM's measure callback that appends each measurement to a log: here, the log."""

    filename: str

    def __post_init__(self):
        records.log_path(self.filename, "RecordToFile", "filename")


@dataclass(frozen=True)
class LocalRunner:
    """TVM's LocalRunner: each candidate timed in a local worker process, `repeat` rounds of
    `number` calls, a run taking longer than `timeout` seconds failed."""

    timeout: float = RUN_TIMEOUT_S
    number: int = 3
    repeat: int = 1


@dataclass(frozen=True)
class TuningOptions:
    """TVM's TuningOptions, checked when made; SearchTask.tune passes them to auto_schedule."""

    num_measure_trials: int = 0
    early_stopping: Optional[int] = None
    num_measures_per_round: int = 8
    verbose: int = 1
    builder: str = "local"
    runner: Union[str, LocalRunner, cf.Executor] = "local"
    measure_callbacks: Optional[Sequence[RecordToFile]] = None

    def __post_init__(self):
        check_count("num_measure_trials", self.num_measure_trials, "TuningOptions")
        check_count("num_measures_per_round", self.num_measures_per_round, "TuningOptions", 1)
        check_count("verbose", self.verbose, "TuningOptions")
        if self.early_stopping is not None:
            raise ValueError("TuningOptions: early_stopping is not supported; call sl.auto_schedule(task, ..., "
                             "timeout=SECONDS) to end a search early")
        if self.builder != "local":
            raise ValueError(f"TuningOptions: builder must be 'local' (candidates build in the worker that "
                             f"times them), got {self.builder!r}")
        if not (self.runner == "local" or isinstance(self.runner, (LocalRunner, cf.Executor))):
            raise TypeError(f"TuningOptions: runner must be 'local', a LocalRunner or a concurrent.futures."
                            f"Executor (a Dask client's get_executor() included), got {self.runner!r}")
        callbacks = list(self.measure_callbacks or [])
        logs = [c for c in callbacks if isinstance(c, RecordToFile)]
        if len(logs) != 1 or len(callbacks) != 1:
            raise ValueError("TuningOptions: measure_callbacks must be [RecordToFile(log_file)]: the search "
                             f"logs every measurement to one file, got {self.measure_callbacks!r}")

    @property
    def log(self) -> str:
        return os.fspath(self.measure_callbacks[0].filename)

    def auto_schedule_args(self) -> dict:
        """These options as sl.auto_schedule's keyword arguments."""
        kw = dict(trials=self.num_measure_trials, log=self.log, per_round=self.num_measures_per_round,
                  verbose=self.verbose)
        if isinstance(self.runner, LocalRunner):
            kw.update(run_timeout=self.runner.timeout, number=self.runner.number, repeat=self.runner.repeat)
        elif isinstance(self.runner, cf.Executor):
            kw["executor"] = self.runner
        return kw


class ApplyHistoryBest:
    """TVM's ApplyHistoryBest(log): the best records of a log, as a context manager.
    `with ApplyHistoryBest(log) as best: s, args = best.apply_best(task)`. TVM's relay.build
    under it picks each kernel's best record; here schedlang.torch.compile(model, inputs,
    log=log) does that for a PyTorch model."""

    def __init__(self, records: str, n_lines: Optional[int] = None):
        if n_lines is not None:
            raise ValueError("ApplyHistoryBest: n_lines is not supported (the whole log is read)")
        self.log = existing_log(records, "ApplyHistoryBest")

    def __enter__(self) -> "ApplyHistoryBest":
        return self

    def __exit__(self, *exc) -> None:
        return None

    def apply_best(self, task, target=None):
        """(schedule, args) of the task's (or outputs') best record in the log."""
        return apply_best(self.log, task, target)


def register_workload(func_name=None, f=None, override: bool = False):
    """TVM's @auto_scheduler.register_workload (bare or with a name): returns the function
    unchanged; nothing needs registering here, a SearchTask keys its program by content."""
    if callable(func_name):
        return func_name
    if f is not None:
        return f
    return lambda func: func


def load_records(filename: str) -> List[dict]:
    """The valid records of a log, as dicts (records.py says their fields)."""
    return records.load(existing_log(filename, "load_records"))
