"""Bound inference: the region of each stage that one iteration of its attach loop needs
(for a temporary computed at the root: what all its readers need, as in TVM).

Stages are visited consumers first. A stage computed at loop x of stage Q must cover
every element its readers touch while the loops enclosing x stay fixed and all loops
inside x run through their ranges. The region's start is symbolic in the fixed loops;
its extent must be a constant (the buffer's size), found exactly when the start
cancels, else bounded from above.
"""
from __future__ import annotations

from typing import Dict, List, Tuple

from ..errors import ScheduleError
from ..expr.bounds import const_bounds, relaxed_interval
from ..expr.equality import equal
from ..expr.functor import free_vars, substitute, walk
from ..expr.nodes import Const, Expr, Var, binary
from ..expr.ranges import LoopRanges
from ..expr.simplify import simplify, span_bound
from ..loop.build import Region, full_region, loop_extents
from ..loop.cooperative import THREAD_AXES, attach_path, need_relax
from ..loop.plan import Program, StagePlan
from ..schedule.annotate import BIND
from ..schedule.relations import pass_up_values
from ..tensor.extern import ExternOp
from ..tensor.op import REALIZE_WHOLE, ComputeOp, TensorRead
from ..tensor.scan import ScanOp
from .shared_regions import SharedRegions


class _Bounds:
    def __init__(self, program: Program, share: bool = True):
        self.program = program
        self.by_name = program.by_name
        self.regions: Dict[str, Region] = {}
        self.ranges = LoopRanges()       # every loop variable seen so far
        self.thread_tags: Dict[Var, str] = {a.var: ann.thread_tag for p in program.plans
                                            for a, ann in p.annotations if ann.kind == BIND}
        self._readers = None      # id(producer stage) -> [(reader stage, read)], built on first use
        self._values: Dict[int, Dict[Var, Expr]] = {}     # id(stage) -> root_values
        self.shared = SharedRegions(self) if share else None

    def leaf_extents(self, plan: StagePlan):
        return loop_extents(plan, self.regions[plan.name])

    def path(self, plan: StagePlan) -> List[Var]:
        """Loop variables around the point where plan is computed, outermost first."""
        return [a.var for _, a in attach_path(plan, self.by_name)]

    def readers(self, plan: StagePlan) -> List[Tuple[StagePlan, TensorRead]]:
        """(reader stage, read) of every read of plan's output, in stage order."""
        if self._readers is None:      # all stages' reads, found in one pass over the program
            self._readers = {}
            for p in self.program.plans:
                for producer, read in self._reads(p):
                    self._readers.setdefault(id(producer), []).append((p, read))
        return list(self._readers.get(id(plan), ()))

    def _reads(self, p: StagePlan):
        """(producer stage, read) of each read p's body makes, in order (none for stages whose body never runs)."""
        if p.is_input or isinstance(p.op, ScanOp) or p.attach_type == "inline":   # an inlined argument's body never runs
            return
        if isinstance(p.op, ExternOp):     # reads its inputs whole, outside any loop
            for t in p.op.inputs:
                producer = self.program.plan_of_op.get(t.op)
                if producer is not None:
                    yield producer, TensorRead(t, tuple(Const(0) for _ in t.shape))
            return
        for body in p.op.bodies:
            for node in walk(body):
                if isinstance(node, TensorRead):
                    producer = self.program.producer(node)
                    if producer is not None:
                        yield producer, node

    def root_values(self, plan: StagePlan) -> Dict[Var, Expr]:
        """Each root axis's value in the stage's loops (kept: a stage's region never changes once inferred)."""
        values = self._values.get(id(plan))
        if values is None:
            ext = self.leaf_extents(plan)
            rel = pass_up_values({a: a.var for a in plan.leaves}, plan.relations, ext)
            values = self._values[id(plan)] = {a.var: binary("add", m, rel[a])
                                               for a, (m, _) in zip(plan.roots, self.regions[plan.name])}
        return values

    def infer(self, plan: StagePlan) -> Region:
        if plan.scan_update is not None:     # one row: the scan loop's current step
            scan = self.by_name[plan.scan_update]
            step = self.root_values(scan)[scan.op.scan_axis.var]
            return [(simplify(step, self.ranges), 1)] + full_region(plan)[1:]
        if (plan.attach_type == "inline" or (plan.is_arg and plan.attach_type != "at")
                or plan.buffer_key is not None or not isinstance(plan.op, ComputeOp)):
            # a scan's init shares the scan's whole buffers; scan and extern stages are whole
            return full_region(plan)
        if plan.attach_type != "at" and any(isinstance(r.op, ExternOp) for r, _ in self.readers(plan)):
            return full_region(plan)      # an extern call reads its inputs whole
        if plan.attach_type != "at" and dict(plan.op.attrs).get(REALIZE_WHOLE):
            return full_region(plan)      # its schedule reads absolute coordinates from its loops
        # A root temporary, like TVM's, is sized by what its readers need over all their loops.
        fixed = self.path(plan)
        # Loops bound to threads that share the stage's memory do not fix its region (TVM's NeedRelax).
        fixed_set = set(id(v) for v in fixed if not need_relax(self.thread_tags.get(v), plan.scope))
        private = plan.scope == "local" and not plan.is_arg
        los: List[List[Expr]] = [[] for _ in plan.op.axis]
        his: List[List[Expr]] = [[] for _ in plan.op.axis]
        for reader, read in self.readers(plan):
            inside = self.path(reader) + [a.var for a in reader.leaves]
            missing = [v for v in fixed if not any(v is w for w in inside)]
            if missing:
                parent = self.by_name[plan.attach_stage]
                raise ScheduleError("compute_at", plan.name, f"stage '{reader.name}' also reads '{plan.name}' but "
                                    f"runs outside loop '{plan.attach_ivar.name}' of '{parent.name}'",
                                    axis=plan.attach_ivar.name,
                                    hint=f"compute '{reader.name}' inside that loop too, or compute '{plan.name}' at the root")
            values = self.root_values(reader)
            # A thread's own (local) copy holds what that thread reads: the thread loops inside the
            # attach point stay fixed too (TVM's NeedRelax); build_func binds them around the stage.
            indices = [substitute(index, values) for index in read.indices]
            relax = {v: self.ranges[v] for v in _vars_of(indices)
                     if id(v) not in fixed_set and v in self.ranges     # size variables stay fixed
                     and not (private and self.thread_tags.get(v) in THREAD_AXES)}
            for d, index in enumerate(indices):
                e = simplify(index)
                lo, hi = self.interval(e, relax)
                los[d].append(lo)
                his[d].append(hi)
        region = []
        for d, ax in enumerate(plan.op.axis):
            lo, extent = self.combine(los[d], his[d], ax)
            if plan.attach_type != "at" and not isinstance(lo, Const):
                lo, extent = Const(ax.dom.min), ax.dom.extent
            region.append((lo, extent))
        region += [(Const(a.dom.min), a.dom.extent) for a in plan.op.reduce_axis]
        return region

    def interval(self, e: Expr, relax) -> Tuple[Expr, Expr]:
        try:
            lo, hi = relaxed_interval(e, relax)
        except ValueError:
            everything = {v: self.ranges[v] for v in free_vars(e) if v in self.ranges}
            lo_c, hi_c = const_bounds(e, everything)
            if lo_c is None or hi_c is None:
                return None, None
            return Const(lo_c), Const(hi_c)
        return simplify(lo, self.ranges), simplify(hi, self.ranges)

    def combine(self, los: List[Expr], his: List[Expr], ax) -> Tuple[Expr, int]:
        dom_lo, dom_ext = ax.dom.min, ax.dom.extent
        if not los or any(x is None for x in los + his):
            return Const(dom_lo), dom_ext
        lo, hi = los[0], his[0]
        for x in los[1:]:
            lo = simplify(binary("min", lo, x), self.ranges)
        for x in his[1:]:
            hi = simplify(binary("max", hi, x), self.ranges)
        extent = simplify(binary("add", binary("sub", hi, lo), Const(1)), self.ranges)
        if not isinstance(extent, Const) and not any(v in self.ranges for v in free_vars(extent)):
            # an extent of size variables only: a buffer sized at run time
            if equal(extent, dom_ext) or isinstance(dom_ext, int):
                return Const(dom_lo), dom_ext
            return lo, extent
        if not isinstance(extent, Const):
            bound = const_bounds(extent, self.ranges)[1]
            span = span_bound(hi, lo, self.ranges)
            if span is not None and (bound is None or span + 1 < bound):
                bound = span + 1
            if bound is None:
                return Const(dom_lo), dom_ext
            extent = Const(bound)
        if not isinstance(dom_ext, int):
            return lo, max(1, int(extent.value))   # a fixed-size buffer, guarded against the symbolic domain
        if extent.value >= dom_ext:
            return Const(dom_lo), dom_ext   # the whole domain is needed anyway: keep it simple
        return lo, max(1, int(extent.value))

    def run(self) -> Dict[str, Region]:
        for plan in reversed(self.program.plans):
            if plan.is_input:
                continue
            region = self.shared.lookup(plan) if self.shared is not None else None
            self.regions[plan.name] = region if region is not None else self.infer(plan)
            ext = self.leaf_extents(plan)
            for a in plan.leaves:
                self.ranges.add(a.var, 0, ext[a] - 1)
        return self.regions


def _vars_of(indices: List[Expr]) -> List[Var]:
    seen: Dict[Var, None] = {}
    for index in indices:
        for v in free_vars(index):
            seen[v] = None
    return list(seen)


def infer_regions(program: Program, share: bool = True) -> Dict[str, Region]:
    """The region (per root axis: start, extent) each stage of the program computes. With
    share, the stages computed inside a nest equal to one inferred before take its regions,
    renamed (shared_regions.py: the same regions, inferred once per distinct nest)."""
    return _Bounds(program, share).run()
