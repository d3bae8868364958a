"""Stage plans: an immutable snapshot of a schedule that lowering works from, with
inlined stages substituted into their readers."""
from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Dict, List, Optional, Sequence, Tuple

from ..errors import ScheduleError
from ..expr.equality import key
from ..expr.functor import rewrite_post_order, substitute
from ..expr.nodes import Cast, Expr, Var
from ..schedule.dependent_domains import check_loop_order
from ..tensor.axis import IterVar
from ..tensor.op import ComputeOp, Operation, PlaceholderOp, Tensor, TensorRead
from . import scan as scan_plans
from .scan import output_key


@dataclass(frozen=True, eq=False)
class StagePlan:
    """What lowering needs to know about one stage."""

    name: str
    op: Operation
    leaves: Tuple[IterVar, ...] = ()
    relations: Tuple = ()
    annotations: Tuple[Tuple[IterVar, object], ...] = ()
    pragmas: Tuple[Tuple[IterVar, Tuple], ...] = ()
    attach_type: str = "root"
    attach_stage: Optional[str] = None
    attach_ivar: Optional[IterVar] = None
    scope: str = "global"
    storage_aligns: Tuple[Tuple[int, Tuple[int, int]], ...] = ()
    is_arg: bool = False
    buffer_key: Optional[str] = None     # scan init/update/state: the scan result's buffer it stores to / reads
    scan_update: Optional[str] = None    # a scan update: the scan whose axis fixes its first axis
    store_predicate: Optional[Expr] = None   # who stores a cross-thread reduction's result (set_store_predicate)
    double_buffer: bool = False          # double_buffer(): marked on its attach loop for the target's pass
    pipeline_stages: int = 2             # pipeline(n): that many buffers (schedule/pipeline.py)
    tensorize: Optional[Tuple[IterVar, object]] = None   # (axis, intrinsic): loop/tensorize.py lowers it

    @property
    def is_input(self) -> bool:
        return isinstance(self.op, PlaceholderOp)

    @property
    def roots(self) -> List[IterVar]:
        return list(self.op.root_axes)

    def annotation(self, ivar: IterVar):
        for a, ann in self.annotations:
            if a is ivar:
                return ann
        return None

    def pragmas_of(self, ivar: IterVar) -> Tuple:
        for a, p in self.pragmas:
            if a is ivar:
                return p
        return ()


@dataclass
class Program:
    """The plans of one lowering, producers first, and how reads resolve to plans."""

    name: str
    plans: List[StagePlan]
    params: List[StagePlan]
    plan_of_op: Dict[Operation, StagePlan] = field(default_factory=dict)
    param_outputs: List[int] = field(default_factory=list)   # per param: which output of its op

    @cached_property
    def by_name(self) -> Dict[str, StagePlan]:
        """Stage name -> plan (names are unique; plans is not changed after the Program is built)."""
        return {p.name: p for p in self.plans}

    def plan(self, name: str) -> StagePlan:
        return self.by_name[name]

    def producer(self, read: TensorRead) -> StagePlan:
        return self.plan_of_op[read.tensor.op]

    def param_keys(self) -> List[str]:
        outs = self.param_outputs or [0] * len(self.params)
        return [p.buffer_key or output_key(p.name, k, p.op.num_outputs) for p, k in zip(self.params, outs)]


def plain_snapshot(schedule, args: Sequence[Tensor], name: Optional[str]) -> Program:
    """Freeze a schedule into plans without its loop transformations, annotations and
    compute_at (keeping inlining, and a scan's cells inside its scan loop): what Loop IR shows."""
    roles = scan_plans.ScanRoles(schedule)

    def plan(st, is_arg: bool) -> StagePlan:
        scan = roles.scan_attach(st) if st.attach_type != "inline" else None
        if scan is not None:      # a scan's cell runs inside the scan loop even without a schedule
            return StagePlan(st.name, st.op, tuple(_roots(st.op)), attach_type="at", attach_stage=scan.name,
                             attach_ivar=scan.op.scan_axis, scope=st.scope or "local", is_arg=is_arg)
        return _unscheduled(st, is_arg)
    return _snapshot(schedule, args, name, roles, plan, warn=False)


def scheduled_snapshot(schedule, args: Sequence[Tensor], name: Optional[str]) -> Program:
    """Freeze a schedule into plans with everything it says: what Tile IR lowers."""
    def plan(st, is_arg: bool) -> StagePlan:
        if st.attach_type == "inline":
            return _unscheduled(st, is_arg)
        check_loop_order(st)
        return StagePlan(
            st.name, st.op, tuple(st.leaf_iter_vars), tuple(st.relations),
            tuple(st.annotations.items()), tuple((a, tuple(p)) for a, p in st.pragmas.items()),
            st.attach_type, st.attach_stage.name if st.attach_stage else None, st.attach_ivar,
            st.scope or ("local" if st.attach_type == "at" else "global"),
            tuple(sorted(st.storage_aligns.items())), is_arg,
            store_predicate=getattr(st, "store_predicate", None),
            double_buffer=getattr(st, "double_buffered", False), tensorize=getattr(st, "tensorize_at", None),
            pipeline_stages=getattr(st, "pipeline_stages", 2))
    return _snapshot(schedule, args, name, scan_plans.ScanRoles(schedule), plan, warn=True)


def _unscheduled(st, is_arg: bool) -> StagePlan:
    """A stage's plan over its whole domain at the root (or inlined)."""
    return StagePlan(st.name, st.op, tuple(_roots(st.op)),
                     attach_type="inline" if st.attach_type == "inline" else "root",
                     scope=st.scope or "global", is_arg=is_arg)


def _snapshot(schedule, args: Sequence[Tensor], name: Optional[str], roles, plan_of, warn: bool) -> Program:
    """The program of the reachable stages, each planned by plan_of(stage, is_arg)."""
    entries = _arg_entries(schedule, args)
    arg_stages = [e for e in entries if not isinstance(e, Tensor)]
    reachable = reachable_stages(schedule, [schedule[o] for o in schedule.outputs] + arg_stages)
    plans: Dict[int, StagePlan] = {}
    for st in schedule.stages:
        if id(st) not in reachable:
            continue
        is_arg = any(a is st for a in arg_stages)
        plans[id(st)] = roles.with_roles(st, plan_of(st, is_arg))
    plan_of_op = {op: plans[id(st)] for op, st in schedule.stage_map.items() if id(st) in plans}
    ordered = [plans[id(st)] for st in schedule.stages if id(st) in plans]
    for t in entries:      # placeholders the program never reads: arguments that stay unused
        if isinstance(t, Tensor):
            plan_of_op[t.op] = StagePlan(t.op.name, t.op, is_arg=True)
            ordered.insert(0, plan_of_op[t.op])
    params = [plan_of_op[e.op] if isinstance(e, Tensor) else plans[id(e)] for e in entries]
    _check_args(ordered, params, schedule, warn=warn)
    program = Program(name or _default_name(schedule), ordered, params, plan_of_op, [a.value_index for a in args])
    return inline_stages(program)


def _roots(op) -> List[IterVar]:
    return list(op.root_axes)


def split_size_args(args) -> Tuple[list, Tuple[Tuple[int, Var], ...]]:
    """(the tensors of an argument list, the size variables in it with their positions):
    TVM lets size variables be listed as arguments, build(s, [A, B, n]); the module then
    takes their values as integers."""
    if not isinstance(args, (list, tuple)):
        return args, ()
    sizes = tuple((i, a) for i, a in enumerate(args) if isinstance(a, Var))
    for i, (_, v) in enumerate(sizes):
        if not v.dtype.is_int or v.dtype.lanes != 1:
            raise TypeError(f"size argument '{v.name}' must be a scalar integer variable, got dtype {v.dtype}")
        if any(v is w for _, w in sizes[:i]):
            raise ValueError(f"argument '{v.name}' is listed twice")
    return [a for a in args if not isinstance(a, Var)], sizes


def _arg_entries(schedule, args):
    """Per argument, its stage, or the tensor itself for a placeholder the program never
    reads (TVM accepts those as unused arguments)."""
    if not isinstance(args, (list, tuple)) or not args:
        raise TypeError("args must be a non-empty list of the tensors the function takes, e.g. [A, B, C]")
    entries, outputs = [], []
    for a in args:
        if not isinstance(a, Tensor):
            raise TypeError(f"args must be tensors (placeholders and outputs) or size variables, got {a!r}")
        try:
            entry = schedule[a]
        except ScheduleError:
            if not isinstance(a.op, PlaceholderOp):
                raise ValueError(f"argument '{a.name}' is not part of the scheduled program") from None
            if any(st.name == a.op.name for st in schedule.stages):
                raise ValueError(f"argument '{a.name}' is not read by the program, and its name is taken by a "
                                 "stage of the program; rename the placeholder") from None
            entry = a
        if any((entry is e and a.value_index == i) or (isinstance(e, Tensor) and e.op is getattr(entry, "op", None))
               for e, i in zip(entries, outputs)):
            raise ValueError(f"argument '{a.name}' is listed twice")
        entries.append(entry)
        outputs.append(a.value_index)
    return entries


def reachable_stages(schedule, roots):
    """ids of the stages the roots depend on (roots included)."""
    seen, stack = set(), list(roots)
    while stack:
        st = stack.pop()
        if id(st) in seen:
            continue
        seen.add(id(st))
        stack.extend(schedule.inputs_of(st))
    return seen


def _check_args(plans: List[StagePlan], params: List[StagePlan], schedule, warn: bool) -> None:
    param_names = {p.name for p in params}
    for p in plans:
        if p.is_input and p.buffer_key is None and p.name not in param_names:
            raise ValueError(f"input '{p.name}' is read by the program but missing from the argument list "
                             f"({', '.join(sorted(param_names))})")
    for op in schedule.outputs:
        if schedule[op].name not in param_names:
            raise ValueError(f"output '{schedule[op].name}' is not in the argument list; add it so the result "
                             "has somewhere to go")
    for p in params:
        if p.buffer_key is not None:
            raise ValueError(f"argument '{p.name}' is the state placeholder, init or update of a scan, which live in "
                             f"the scan's result '{p.buffer_key}'; pass the scan's result instead")
        if p.attach_type == "inline" and warn:
            # TVM's meaning: the stage is substituted into its readers, so nothing writes the buffer.
            warnings.warn(f"'{p.name}' is inlined (compute_inline) but also a function argument: the kernel "
                          "never writes that argument; compute_root() it to have it stored",
                          stacklevel=6)   # the user's lower()/build() call


def _default_name(schedule) -> str:
    return re.sub(r"\W", "_", schedule[schedule.outputs[0]].name)


def as_dtype_of(var: Var, index: Expr) -> Expr:
    """index (a read's, within the axis var's extent) in var's dtype: a gather reads with int64
    indices (torch's), and the inlined body's arithmetic on var must keep one dtype."""
    return index if index.dtype == var.dtype else Cast(var.dtype, index)


def inline_stages(program: Program) -> Program:
    """Substitute inlined stages into their readers and drop them from the plan list."""
    bodies: Dict[str, ComputeOp] = {}     # inlined stage name -> its (already inlined) op
    plans: List[StagePlan] = []

    substituted: Dict[object, Expr] = {}   # equal reads of an inlined stage share one copy of its body

    def inline(e: Expr) -> Expr:
        def post(node: Expr) -> Expr:
            if isinstance(node, TensorRead):
                src = program.plan_of_op[node.tensor.op]
                if src.attach_type == "inline":
                    op = bodies[src.name]
                    k = (src.name, node.tensor.value_index, key(node.indices))
                    if k not in substituted:
                        body = op.bodies[node.tensor.value_index]
                        substituted[k] = substitute(body, {a.var: as_dtype_of(a.var, i)
                                                           for a, i in zip(op.axis, node.indices)})
                    return substituted[k]
            return node
        return rewrite_post_order(e, post)

    for p in program.plans:
        if isinstance(p.op, ComputeOp):
            new_bodies = [inline(b) for b in p.op.bodies]
            if any(b is not old for b, old in zip(new_bodies, p.op.bodies)):
                p = replace(p, op=p.op.with_bodies(new_bodies))
        if p.attach_type == "inline":
            bodies[p.name] = p.op
        if p.attach_type != "inline" or p.is_arg:    # an inlined argument keeps its (unwritten) buffer
            plans.append(p)
    new_by_name = {p.name: p for p in plans}
    plan_of_op = {}
    for op, old in program.plan_of_op.items():
        if old.name in new_by_name:
            plan_of_op[op] = new_by_name[old.name]
    for p in plans:
        plan_of_op[p.op] = p
    params = [new_by_name[p.name] for p in program.params]
    return Program(program.name, plans, params, plan_of_op, program.param_outputs)
