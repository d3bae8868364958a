"""A stage: the schedule of one operation's loop nest, and the loop primitives on it.

Every primitive checks its arguments before changing anything, raises ScheduleError
naming the primitive, the stage and the axis, and records itself as a step.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple

from ..errors import ScheduleError
from ..expr.nodes import Var
from ..tensor.axis import DATA_PAR, REDUCE, THREAD, IterVar, Range
from ..tensor.op import ComputeOp, Operation, PlaceholderOp
from . import steps
from .relations import FuseRel, SplitRel, pass_down_extents

if TYPE_CHECKING:
    from .schedule import Schedule

UNROLL, VECTORIZE, PARALLEL, BIND = "unroll", "vectorize", "parallel", "bind"
PRAGMAS = {"auto_unroll_max_step": "unroll loops nested inside this one whose total trip count is at most the value",
           "unroll_explicit": "accepted for TVM compatibility; unrolling is always explicit here"}
MAX_UNROLL = 1024


@dataclass(frozen=True)
class Annotation:
    """What a loop becomes: unrolled, vectorized, parallel, or bound to a GPU thread axis."""

    kind: str
    thread_tag: str = ""

    def __str__(self) -> str:
        return f"bind({self.thread_tag})" if self.kind == BIND else self.kind


class Stage:
    """The schedule of one operation: its loops (leaf axes), how they derive from the
    operation's axes, their annotations, and where the stage is computed."""

    def __init__(self, schedule: "Schedule", op: Operation, name: str, scope: Optional[str] = None):
        self.schedule = schedule
        self.name = name
        self.scope = scope     # None: global at the root, local when computed at a loop
        self.is_output = False
        self.attach_type = "root"          # "root", "inline" or "at"
        self.attach_stage: Optional[Stage] = None
        self.attach_ivar: Optional[IterVar] = None
        self.storage_aligns: Dict[int, Tuple[int, int]] = {}
        self._reset(op)

    def _reset(self, op: Operation) -> None:
        self.op = op
        roots = list(op.axis) + list(op.reduce_axis) if isinstance(op, ComputeOp) else []
        self.all_iter_vars: List[IterVar] = list(roots)
        self.leaf_iter_vars: List[IterVar] = list(roots)
        self.relations: List = []
        self.annotations: Dict[IterVar, Annotation] = {}
        self.pragmas: Dict[IterVar, List[Tuple[str, object]]] = {}

    def __repr__(self) -> str:
        return f"Stage({self.name})"

    # ---- queries ---------------------------------------------------------------------
    @property
    def root_iter_vars(self) -> List[IterVar]:
        if not isinstance(self.op, ComputeOp):
            return []
        return list(self.op.axis) + list(self.op.reduce_axis)

    def static_extents(self) -> Dict[IterVar, int]:
        """Extents of every axis over the operation's full domain (before bound inference)."""
        return pass_down_extents({a: a.dom.extent for a in self.root_iter_vars}, self.relations)

    def axis(self, name: str) -> IterVar:
        """The axis of this stage called name (a loop or an axis it was derived from)."""
        for a in self.all_iter_vars:
            if a.name == name:
                return a
        raise ScheduleError("axis", self.name, f"no axis named '{name}'",
                            choices=[a.name for a in self.leaf_iter_vars],
                            hint="axis names follow TVM: split gives '<name>.outer'/'<name>.inner', fuse '<a>.<b>.fused'")

    def loops_str(self, mark: Optional[IterVar] = None) -> str:
        return ", ".join(("-> " if a is mark else "") + a.name for a in self.leaf_iter_vars)

    # ---- checks ----------------------------------------------------------------------
    def _require_schedulable(self, primitive: str) -> None:
        if isinstance(self.op, PlaceholderOp):
            raise ScheduleError(primitive, self.name, "is an input placeholder; it has no loops to schedule",
                                hint="schedule the computes that read it, or cache_read it into a stage of its own")
        if self.attach_type == "inline":
            raise ScheduleError(primitive, self.name, "is inlined into its consumers and has no loops of its own",
                                hint="call compute_root() on it first if it should keep its own loops")

    def _leaf_problem(self, ivar, whose: Optional[str] = None) -> Optional[Tuple[str, str]]:
        """Why ivar is not a loop of this stage that a primitive can take: (problem, hint), or None.
        whose names this stage in the problem text."""
        whose = whose or f"stage '{self.name}'"
        if not isinstance(ivar, IterVar):
            return f"expected an axis (IterVar), got {ivar!r}", f"take the axes from s[{self.name!r}].op.axis"
        if ivar not in self.all_iter_vars:
            owner = self.schedule._owner_of(ivar)
            where = f"belongs to stage '{owner.name}', not to {whose}" if owner else "is not an axis of this schedule"
            return (f"the axis {where}",
                    f"take the axes from s[{self.name!r}].op.axis or from this stage's own split/fuse results")
        if ivar not in self.leaf_iter_vars:
            replaced = [r for r in self.relations if (isinstance(r, SplitRel) and r.parent is ivar)
                        or (isinstance(r, FuseRel) and ivar in r.axes)]
            into = ""
            if replaced and isinstance(replaced[0], SplitRel):
                into = f": it was split into {replaced[0].outer.name} and {replaced[0].inner.name}"
            elif replaced:
                into = f": it was fused into {replaced[0].fused.name}"
            return f"the axis is no longer a loop of {whose}{into}", "use the axes that the earlier split/fuse returned"
        twins = [a for a in self.all_iter_vars if a.name == ivar.name and a is not ivar]
        if twins:
            return (f"another axis of the stage ({twins[0].kind}) is also called '{ivar.name}', so a recorded "
                    "step could not tell them apart when it is replayed",
                    "give the reduce_axis a name that differs from the compute's axes")
        return None

    def _require_leaf(self, primitive: str, ivar, what: str = "axis") -> IterVar:
        problem = self._leaf_problem(ivar)
        if problem is not None:
            text, hint = problem
            if what != "axis":
                text = f"the {what}: {text}"
            raise ScheduleError(primitive, self.name, text, axis=getattr(ivar, "name", None),
                                choices=[a.name for a in self.leaf_iter_vars], hint=hint)
        return ivar

    def _require_unannotated(self, primitive: str, ivar: IterVar) -> None:
        ann = self.annotations.get(ivar)
        if ann is not None:
            raise ScheduleError(primitive, self.name, f"the axis is already marked {ann}", axis=ivar.name,
                                hint="split/fuse/annotate an axis before marking it; an axis takes one of "
                                     "unroll, vectorize, parallel or bind")

    def _require_positive(self, primitive: str, name: str, value, axis: Optional[IterVar] = None) -> int:
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
            raise ScheduleError(primitive, self.name, f"{name} must be a positive int, got {value!r}",
                                axis=axis.name if axis is not None else None)
        return int(value)

    def _record(self, step) -> None:
        self.schedule._record(step)

    def _new_axis(self, name: str, extent: int, kind: str) -> IterVar:
        unique = steps.unique_name(name, {a.name for a in self.all_iter_vars})
        ivar = IterVar(Var(unique), Range(0, extent), kind)
        self.all_iter_vars.append(ivar)
        return ivar

    def _retarget_attached(self, old: Sequence[IterVar], new: IterVar) -> None:
        # A stage computed at a loop moves into the loop that now runs that loop's body.
        for st in self.schedule.stages:
            if st.attach_stage is self and any(st.attach_ivar is o for o in old):
                st.attach_ivar = new

    # ---- loop transformations --------------------------------------------------------
    def split(self, parent: IterVar, factor: Optional[int] = None, nparts: Optional[int] = None
              ) -> Tuple[IterVar, IterVar]:
        """Split parent into (outer, inner) loops with inner extent factor, or outer extent nparts.

        A factor that does not divide the extent leaves a tail that lowering guards."""
        self._require_schedulable("split")
        self._require_leaf("split", parent)
        if (factor is None) == (nparts is None):
            given = "both" if factor is not None else "neither"
            raise ScheduleError("split", self.name, f"give exactly one of factor= or nparts= ({given} given)",
                                axis=parent.name, hint=f"split({parent.name}, factor=4) makes the inner loop 4 long, "
                                                       f"split({parent.name}, nparts=4) the outer one")
        if factor is not None:
            factor = self._require_positive("split", "factor", factor, parent)
        else:
            nparts = self._require_positive("split", "nparts", nparts, parent)
        self._require_unannotated("split", parent)
        outer, inner = self._split(parent, factor, nparts)
        self._record(steps.Split(self.name, parent.name, factor, nparts))
        return outer, inner

    def _split(self, parent: IterVar, factor, nparts) -> Tuple[IterVar, IterVar]:
        ext = self.static_extents()[parent]
        outer_ext, inner_ext = (-(-ext // factor), factor) if factor else (nparts, -(-ext // nparts))
        outer = self._new_axis(parent.name + ".outer", outer_ext, parent.kind)
        inner = self._new_axis(parent.name + ".inner", inner_ext, parent.kind)
        self.relations.append(SplitRel(parent, outer, inner, factor, nparts))
        pos = self.leaf_iter_vars.index(parent)
        self.leaf_iter_vars[pos:pos + 1] = [outer, inner]
        self._retarget_attached([parent], inner)
        return outer, inner

    def tile(self, x_parent: IterVar, y_parent: IterVar, x_factor: int, y_factor: int
             ) -> Tuple[IterVar, IterVar, IterVar, IterVar]:
        """Split x and y and order the loops (x.outer, y.outer, x.inner, y.inner)."""
        self._require_schedulable("tile")
        self._require_leaf("tile", x_parent, "x axis")
        self._require_leaf("tile", y_parent, "y axis")
        if x_parent is y_parent:
            raise ScheduleError("tile", self.name, "x and y are the same axis", axis=x_parent.name,
                                choices=[a.name for a in self.leaf_iter_vars])
        x_factor = self._require_positive("tile", "x_factor", x_factor, x_parent)
        y_factor = self._require_positive("tile", "y_factor", y_factor, y_parent)
        self._require_unannotated("tile", x_parent)
        self._require_unannotated("tile", y_parent)
        xo, xi = self._split(x_parent, x_factor, None)
        yo, yi = self._split(y_parent, y_factor, None)
        self._reorder([xo, yo, xi, yi])
        self._record(steps.Tile(self.name, x_parent.name, y_parent.name, x_factor, y_factor))
        return xo, yo, xi, yi

    def fuse(self, *args: IterVar) -> IterVar:
        """Fuse consecutive loops (outermost first) into one loop."""
        self._require_schedulable("fuse")
        if len(args) == 1 and isinstance(args[0], (list, tuple)):
            args = tuple(args[0])
        if not args:
            raise ScheduleError("fuse", self.name, "needs at least one axis", choices=[a.name for a in self.leaf_iter_vars])
        for a in args:
            self._require_leaf("fuse", a)
            self._require_unannotated("fuse", a)
        dup = [a for i, a in enumerate(args) if any(a is b for b in args[:i])]
        if dup:
            raise ScheduleError("fuse", self.name, f"axis listed twice: {', '.join(a.name for a in args)}",
                                axis=dup[0].name, choices=[a.name for a in self.leaf_iter_vars],
                                hint="list each loop to fuse once, outermost first")
        kinds = {a.kind for a in args}
        if len(kinds) > 1:
            red = next(a for a in args if a.kind == REDUCE)
            raise ScheduleError("fuse", self.name, "cannot fuse data-parallel axes with reduction axes: "
                                f"{', '.join(f'{a.name} ({a.kind})' for a in args)}", axis=red.name,
                                hint="reorder so that the axes to fuse are of one kind")
        pos = [self.leaf_iter_vars.index(a) for a in args]
        if pos != list(range(pos[0], pos[0] + len(args))):
            order = "in the wrong order" if sorted(pos) == list(range(min(pos), min(pos) + len(pos))) else "not adjacent"
            raise ScheduleError("fuse", self.name, f"the axes {', '.join(a.name for a in args)} are {order} "
                                f"in the loop nest [{self.loops_str()}]", axis=args[0].name,
                                choices=[a.name for a in self.leaf_iter_vars],
                                hint="fuse takes consecutive loops, outermost first; reorder them first")
        if len(args) == 1:
            return args[0]
        ext = self.static_extents()
        total = 1
        for a in args:
            total *= ext[a]
        fused = self._new_axis(".".join(a.name for a in args) + ".fused", total, args[0].kind)
        self.relations.append(FuseRel(tuple(args), fused))
        self.leaf_iter_vars[pos[0]:pos[0] + len(args)] = [fused]
        self._retarget_attached(args, fused)
        self._record(steps.Fuse(self.name, tuple(a.name for a in args)))
        return fused

    def reorder(self, *args: IterVar) -> None:
        """Put the given loops, in the given order, into the positions they occupy together."""
        self._require_schedulable("reorder")
        if len(args) == 1 and isinstance(args[0], (list, tuple)):
            args = tuple(args[0])
        for a in args:
            self._require_leaf("reorder", a)
        names = [a.name for a in args]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ScheduleError("reorder", self.name, f"axis {', '.join(dup)} appears more than once",
                                axis=dup[0], choices=[a.name for a in self.leaf_iter_vars],
                                hint="list each loop once, in the new order")
        self._reorder(list(args))
        self._record(steps.Reorder(self.name, tuple(names)))

    def _reorder(self, order: List[IterVar]) -> None:
        positions = sorted(self.leaf_iter_vars.index(a) for a in order)
        for p, a in zip(positions, order):
            self.leaf_iter_vars[p] = a

    # ---- annotations -----------------------------------------------------------------
    def _annotate(self, primitive: str, ivar: IterVar, ann: Annotation) -> None:
        self._require_schedulable(primitive)
        self._require_leaf(primitive, ivar)
        self._require_unannotated(primitive, ivar)
        self.annotations[ivar] = ann

    def unroll(self, ivar: IterVar) -> None:
        """Replace the loop by copies of its body, one per iteration."""
        self._require_schedulable("unroll")
        self._require_leaf("unroll", ivar)
        ext = self.static_extents()[ivar]
        if ext > MAX_UNROLL:
            raise ScheduleError("unroll", self.name, f"the loop has {ext} iterations; unrolling more than "
                                f"{MAX_UNROLL} would bloat the code", axis=ivar.name,
                                hint="split the axis and unroll the inner part")
        self._annotate("unroll", ivar, Annotation(UNROLL))
        self._record(steps.Unroll(self.name, ivar.name))

    def vectorize(self, ivar: IterVar) -> None:
        """Run the loop's iterations as the lanes of vector instructions (a tail is guarded)."""
        self._require_schedulable("vectorize")
        self._require_leaf("vectorize", ivar)
        if ivar.kind == REDUCE:
            raise ScheduleError("vectorize", self.name, "cannot vectorize a reduction axis: its iterations "
                                "update the same output element", axis=ivar.name,
                                choices=[a.name for a in self.leaf_iter_vars if a.kind == DATA_PAR],
                                hint="vectorize a data-parallel axis, or rfactor the reduction first")
        self._annotate("vectorize", ivar, Annotation(VECTORIZE))
        self._record(steps.Vectorize(self.name, ivar.name))

    def parallel(self, ivar: IterVar) -> None:
        """Run the loop's iterations on all CPU cores."""
        self._require_schedulable("parallel")
        self._require_leaf("parallel", ivar)
        if ivar.kind == REDUCE:
            raise ScheduleError("parallel", self.name, "cannot parallelize a reduction axis: threads would "
                                "race on the same output element", axis=ivar.name,
                                choices=[a.name for a in self.leaf_iter_vars if a.kind == DATA_PAR],
                                hint="parallelize a data-parallel axis, or rfactor the reduction first")
        outer = [a.name for a, ann in self.annotations.items() if ann.kind == PARALLEL and a is not ivar]
        if outer:
            raise ScheduleError("parallel", self.name, f"loop '{outer[0]}' of the stage is already parallel; "
                                "nested parallel loops are not supported", axis=ivar.name,
                                hint="parallelize one loop per stage (fuse loops first for more parallelism)")
        self._annotate("parallel", ivar, Annotation(PARALLEL))
        self._record(steps.Parallel(self.name, ivar.name))

    def bind(self, ivar: IterVar, thread_ivar: IterVar) -> None:
        """Map the loop to a GPU thread axis (thread_axis("blockIdx.x") ...)."""
        self._require_schedulable("bind")
        self._require_leaf("bind", ivar)
        if not isinstance(thread_ivar, IterVar) or thread_ivar.kind != THREAD:
            raise ScheduleError("bind", self.name, f"the second argument must be a thread axis, got {thread_ivar!r}",
                                axis=ivar.name, hint="create one with sl.thread_axis('threadIdx.x')")
        if ivar.kind == REDUCE:
            raise ScheduleError("bind", self.name, "binding a reduction axis to threads needs a cross-thread "
                                "reduction, which is not supported yet", axis=ivar.name,
                                hint="rfactor the reduction and bind the factored axis")
        for other, ann in self.annotations.items():
            if ann.kind == BIND and ann.thread_tag == thread_ivar.thread_tag and thread_ivar.thread_tag != "vthread":
                raise ScheduleError("bind", self.name, f"{thread_ivar.thread_tag} is already bound to axis '{other.name}'",
                                    axis=ivar.name, hint="each thread axis binds one loop of a stage; fuse the loops first")
        self._annotate("bind", ivar, Annotation(BIND, thread_ivar.thread_tag))
        self._record(steps.Bind(self.name, ivar.name, thread_ivar.thread_tag))

    def pragma(self, ivar: IterVar, key: str, value=None) -> None:
        """Attach a pragma to a loop (see PRAGMAS for the keys understood)."""
        self._require_schedulable("pragma")
        self._require_leaf("pragma", ivar)
        if key not in PRAGMAS:
            raise ScheduleError("pragma", self.name, f"unknown pragma {key!r}", axis=ivar.name,
                                choices=sorted(PRAGMAS))
        if key == "auto_unroll_max_step":
            value = self._require_positive("pragma", "auto_unroll_max_step", value, ivar)
        self.pragmas.setdefault(ivar, []).append((key, value))
        self._record(steps.Pragma(self.name, ivar.name, key, value))

    # ---- where the stage is computed ---------------------------------------------------
    def compute_at(self, parent: "Stage", ivar: IterVar) -> None:
        """Compute this stage inside loop ivar of parent, just the part one iteration needs.

        parent must read this stage (directly or through other stages), ivar must be one of
        parent's loops and not a vectorized one, and this stage must not be an output."""
        self._require_schedulable("compute_at")
        consumers = [c.name for c in self.schedule._consumers(self)]
        axis_name = getattr(ivar, "name", None)
        if not isinstance(parent, Stage) or parent.schedule is not self.schedule:
            raise ScheduleError("compute_at", self.name, f"the target must be a stage of this schedule (s[T]), got {parent!r}",
                                axis=axis_name, choices=consumers)
        if parent is self:
            raise ScheduleError("compute_at", self.name, "cannot compute a stage inside its own loop", axis=axis_name,
                                choices=consumers, hint="compute_at takes the stage of a consumer: s[consumer]")
        if self.is_output:
            raise ScheduleError("compute_at", self.name, "is an output of the schedule and must be computed whole, "
                                "at the root", axis=axis_name, hint="cache_write it and compute_at the cache stage instead")
        if isinstance(parent.op, PlaceholderOp) or parent.attach_type == "inline":
            what = "an input placeholder" if isinstance(parent.op, PlaceholderOp) else "inlined"
            raise ScheduleError("compute_at", self.name, f"the target stage '{parent.name}' is {what} and has no loops",
                                axis=axis_name, choices=consumers, hint="compute it at a loop of a stage that has loops")
        problem = parent._leaf_problem(ivar, f"the target stage '{parent.name}'")
        if problem is not None:
            text, hint = problem
            raise ScheduleError("compute_at", self.name, text,
                                axis=axis_name, choices=[a.name for a in parent.leaf_iter_vars], hint=hint)
        chain = parent
        while chain is not None:
            if chain is self:
                raise ScheduleError("compute_at", self.name, f"'{parent.name}' is itself computed inside "
                                    f"'{self.name}'; attaching would make a cycle", axis=ivar.name,
                                    hint=f"compute_root() '{parent.name}' first, or attach '{self.name}' elsewhere")
            chain = chain.attach_stage
        if not self.schedule._reads_transitively(parent, self):
            raise ScheduleError("compute_at", self.name, f"stage '{parent.name}' does not read '{self.name}', so "
                                f"its loop '{ivar.name}' does not enclose a consumer", axis=ivar.name,
                                choices=consumers, hint="compute a stage at a loop of a stage that uses its result")
        ann = parent.annotations.get(ivar)
        if ann is not None and ann.kind == VECTORIZE:
            raise ScheduleError("compute_at", self.name, f"loop '{ivar.name}' of '{parent.name}' is vectorized: "
                                "its iterations are vector lanes, with no body to compute inside", axis=ivar.name,
                                choices=[a.name for a in parent.leaf_iter_vars if parent.annotations.get(a) != ann],
                                hint="attach at a loop outside the vectorized one")
        self.attach_type, self.attach_stage, self.attach_ivar = "at", parent, ivar
        self._record(steps.ComputeAt(self.name, parent.name, ivar.name))

    def compute_inline(self) -> None:
        """Substitute this stage's expression into every consumer; it gets no loops."""
        self._require_schedulable("compute_inline")
        if self.op.reduce_axis:
            raise ScheduleError("compute_inline", self.name, "a reduction cannot be inlined: each consumer "
                                "element would recompute the whole reduction",
                                hint="compute_at it at a loop of its consumer instead")
        if self.is_output:
            raise ScheduleError("compute_inline", self.name, "is an output of the schedule and must be stored",
                                hint="only intermediate stages can be inlined")
        if self.relations or self.annotations or self.storage_aligns:
            what = "loop transformations" if self.relations or self.annotations else "a storage_align"
            raise ScheduleError("compute_inline", self.name, f"has {what} that inlining would "
                                f"discard (loops: {self.loops_str()})", hint="inline a stage before scheduling it")
        attached = [s.name for s in self.schedule.stages if s.attach_stage is self]
        if attached:
            raise ScheduleError("compute_inline", self.name, f"stages {', '.join(attached)} are computed at its "
                                "loops", hint="compute_root() or re-attach them first")
        self.attach_type, self.attach_stage, self.attach_ivar = "inline", None, None
        self._record(steps.ComputeInline(self.name))

    def compute_root(self) -> None:
        """Compute the whole stage in its own loop nest, before its consumers."""
        if isinstance(self.op, PlaceholderOp):
            self._require_schedulable("compute_root")
        self.attach_type, self.attach_stage, self.attach_ivar = "root", None, None
        self._record(steps.ComputeRoot(self.name))

    def storage_align(self, ivar: IterVar, factor: int, offset: int) -> None:
        """Pad the stride of dimension ivar of this stage's buffer to factor*k + offset elements
        (to avoid cache-set or shared-memory bank conflicts)."""
        self._require_schedulable("storage_align")
        if self.is_output:
            raise ScheduleError("storage_align", self.name, "is an output of the schedule, a function argument "
                                "whose layout the caller fixes", axis=getattr(ivar, "name", None),
                                hint="cache_write it and align the cache stage instead")
        if not isinstance(ivar, IterVar) or ivar not in list(self.op.axis):
            raise ScheduleError("storage_align", self.name, f"{getattr(ivar, 'name', ivar)!r} is not a dimension of "
                                "the stage's buffer", axis=getattr(ivar, "name", None),
                                choices=[a.name for a in self.op.axis],
                                hint="storage_align takes one of s[T].op.axis")
        dim = list(self.op.axis).index(ivar)
        if dim == len(self.op.axis) - 1:
            raise ScheduleError("storage_align", self.name, "the innermost dimension has stride 1 and cannot be "
                                "aligned", axis=ivar.name, choices=[a.name for a in self.op.axis[:-1]],
                                hint="align the dimension whose rows should start at aligned offsets")
        factor = self._require_positive("storage_align", "factor", factor, ivar)
        if isinstance(offset, bool) or not isinstance(offset, numbers.Integral) or not 0 <= offset < factor:
            raise ScheduleError("storage_align", self.name, f"offset must be an int in [0, {factor}), got {offset!r}",
                                axis=ivar.name, hint="the row stride becomes factor*k + offset elements")
        offset = int(offset)
        self.storage_aligns[dim] = (factor, offset)
        self._record(steps.StorageAlign(self.name, ivar.name, factor, offset))
