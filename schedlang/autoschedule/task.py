"""SearchTask: one program to tune (its argument tensors, in call order) and the target."""
from __future__ import annotations

import math
from typing import Callable, List, Optional, Sequence

from ..expr.functor import children
from ..expr.nodes import Binary, Call
from ..schedule import Schedule, create_schedule
from ..target.registry import get_backend
from ..target.target import Target
from ..tensor.graph import post_order
from ..tensor.op import ComputeOp, PlaceholderOp, Tensor, TensorRead
from ..tensor.reduce import Reduce
from ..tensor.serialize import as_tensor_list, from_json, to_json, workload_key


def _as_tensor_list(tensors, what: str) -> List[Tensor]:
    out = as_tensor_list(tensors, what)
    if not out:
        raise ValueError(f"{what}: no tensors given")
    return out


def default_args(outputs: Sequence[Tensor]) -> List[Tensor]:
    """The argument list of a program given by its outputs: its inputs (placeholders, in
    the order the program first reads them) followed by the outputs."""
    inputs = [op.output(0) for op in post_order([t.op for t in outputs]) if isinstance(op, PlaceholderOp)]
    return inputs + list(outputs)


def _arithmetic(root) -> int:
    """The Binary and Call nodes of an expression (each shared node once), not counting the
    index arithmetic of the tensors it reads: addressing is not work (TVM's FLOP estimate
    does not count it either; conv2d's hh + rh would double its FLOPs)."""
    stack, seen, count = [root], set(), 0
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        count += isinstance(node, (Binary, Call))
        if not isinstance(node, TensorRead):
            stack.extend(children(node))
    return count


def _op_flops(op: ComputeOp) -> int:
    """Arithmetic operations of one compute stage: points times operations per point."""
    body = op.body
    points = math.prod(op.shape)
    roots = body.source if isinstance(body, Reduce) else op.bodies
    per_point = sum(_arithmetic(root) for root in roots)
    if isinstance(body, Reduce):
        points *= math.prod(int(a.dom.extent) for a in body.axis)
        per_point += 1          # the combine
    return points * max(1, per_point)


class SearchTask:
    """A program to tune for a target, as TVM's auto_scheduler.SearchTask.

    SearchTask(func, args, target): func(*args) returns the argument tensors of the
    program in call order (placeholders and outputs, as a TVM workload function does);
    a list of outputs alone is completed with the inputs they read.
    SearchTask.from_outputs(outputs, target) does the same for tensors at hand."""

    def __init__(self, func: Optional[Callable] = None, args: Sequence = (), target="llvm", *, tensors=None):
        if tensors is None:
            if not callable(func):
                raise TypeError(f"SearchTask(func, args, target): func must be callable, got {func!r}")
            tensors = func(*args)
        tensors = _as_tensor_list(tensors, "SearchTask")
        outputs = [t for t in tensors if not isinstance(t.op, PlaceholderOp)]
        if not outputs:
            raise ValueError("SearchTask: the workload has no computed tensor (only placeholders)")
        if not any(isinstance(t.op, PlaceholderOp) for t in tensors):
            tensors = default_args(outputs)
        self.args: List[Tensor] = tensors
        self.outputs: List[Tensor] = outputs
        self.inputs: List[Tensor] = [t for t in tensors if isinstance(t.op, PlaceholderOp)]
        self.target: Target = Target.create(target)
        if get_backend(self.target.kind).builds_static_shapes:
            symbolic = [t.name for t in tensors if not all(isinstance(d, int) for d in t.shape)]
            if symbolic:
                raise ValueError(f"SearchTask: the {self.target.kind} target tunes static shapes only, and "
                                 f"{', '.join(symbolic)} have symbolic ones; bind the sizes to numbers first")
        self.program_json: str = to_json(tensors)
        self.workload_key: str = workload_key(tensors)
        self.flops: int = sum(_op_flops(op) for op in post_order([t.op for t in outputs])
                              if isinstance(op, ComputeOp))

    @staticmethod
    def from_outputs(outputs, target="llvm") -> "SearchTask":
        outputs = _as_tensor_list(outputs, "auto_schedule")
        return SearchTask(tensors=default_args(outputs), target=target)

    @staticmethod
    def from_json(program_json: str, target) -> "SearchTask":
        """The task rebuilt from program_json (how a measurement worker receives it)."""
        return SearchTask(tensors=from_json(program_json), target=target)

    def schedule(self) -> Schedule:
        """A fresh (unscheduled) schedule of the program, the tensor intrinsics of the target's
        sketch rules declared (so that candidates' steps replay in any process)."""
        get_backend(self.target.kind).sketch_rules().declare_intrinsics()
        return create_schedule([t.op for t in self.outputs])

    # ---- TVM's methods (tvm_names.py maps TVM's auto_scheduler names) --------------------
    # They call the entry points that take a SearchTask (api.py, search.py, tvm_names.py all
    # import this module): the one cycle of the API itself, so they import them when called.

    def tune(self, tuning_options, search_policy=None):
        """TVM's task.tune(TuningOptions(...)): sl.auto_schedule on this task with those
        options (search_policy: a SearchPolicy); returns (schedule, args) of the best."""
        from .api import auto_schedule
        from .search import SearchPolicy
        from .tvm_names import TuningOptions
        if not isinstance(tuning_options, TuningOptions):
            raise TypeError(f"SearchTask.tune: tuning_options must be a TuningOptions, got {tuning_options!r}")
        if search_policy is not None and not isinstance(search_policy, SearchPolicy):
            raise TypeError("SearchTask.tune: search_policy must be a schedlang SearchPolicy(population=, "
                            f"generations=, ...) (TVM's SketchPolicy has no counterpart), got {search_policy!r}")
        return auto_schedule(self, policy=search_policy, **tuning_options.auto_schedule_args())

    def apply_best(self, log_file: str):
        """TVM's task.apply_best(log): (schedule, args) of the best record (sl.apply_best)."""
        from .api import apply_best
        return apply_best(log_file, self)

    def print_best(self, log_file: str) -> str:
        """TVM's task.print_best(log): the best schedule as Python text, returned (not
        printed, as TVM's), the text sl.print_best prints."""
        from .api import best_python
        return best_python(log_file, self, None, "SearchTask.print_best")

    def __repr__(self) -> str:
        return (f"SearchTask({', '.join(t.name for t in self.args)}; target={self.target}, "
                f"workload={self.workload_key[:12]})")


def as_task(outputs, target, caller: str) -> "SearchTask":
    """The SearchTask of outputs (tensors, or a SearchTask); target None means the task's own,
    or "llvm"; a target= that contradicts a SearchTask's own is an error, not ignored."""
    if not isinstance(outputs, SearchTask):
        return SearchTask.from_outputs(outputs, "llvm" if target is None else target)
    if target is not None and str(Target.create(target)) != str(outputs.target):
        raise ValueError(f"{caller}: target={str(target)!r} contradicts the SearchTask's target "
                         f"'{outputs.target}'; leave target= out (the task has one)")
    return outputs
