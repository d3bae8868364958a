"""`from schedlang import auto_scheduler`: TVM's tvm.auto_scheduler names over schedlang's
auto-scheduler (schedlang/autoschedule/; tvm_names.py maps each name), so a TVM tuning
script runs with its import changed:

    task = auto_scheduler.SearchTask(func=matmul, args=(512, 512, 512), target="llvm")
    task.tune(auto_scheduler.TuningOptions(num_measure_trials=64,
                                           measure_callbacks=[auto_scheduler.RecordToFile("mm.json")]))
    s, args = task.apply_best("mm.json")

TVM's auto_scheduler.auto_schedule(task, search_policy, tuning_options) is not here: its
schedlang counterpart, sl.auto_schedule(task, trials=, log=, ...), takes other arguments.
"""
from .autoschedule.search import SearchPolicy  # noqa: F401
from .autoschedule.task import SearchTask  # noqa: F401
from .autoschedule.tvm_names import (ApplyHistoryBest, LocalRunner, RecordToFile, TuningOptions,  # noqa: F401
                                     load_records, register_workload)
