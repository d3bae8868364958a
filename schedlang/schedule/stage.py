"""A stage: the schedule of one operation's loop nest; the primitives live in loops.py,
annotate.py and placement.py.

Every primitive checks its arguments before changing anything, raises ScheduleError
naming the primitive, the stage and the axis, and records itself as a step.
"""
from __future__ import annotations

import numbers
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple

from ..errors import ScheduleError
from ..expr.nodes import Var
from ..limits import INT32_MAX
from ..tensor.axis import IterVar, Range, has_axis
from ..tensor.op import Operation, PlaceholderOp
from . import scan as scan_rules, steps
from .relations import FuseRel, SplitRel, pass_down_extents
from .annotate import Annotation, AnnotationPrimitives
from .loops import LoopPrimitives
from .placement import PlacementPrimitives
from .pipeline import PipelinePrimitive
from .tensorize import TensorizePrimitive

if TYPE_CHECKING:
    from .schedule import Schedule

class Stage(LoopPrimitives, AnnotationPrimitives, PlacementPrimitives, TensorizePrimitive, PipelinePrimitive):
    """The schedule of one operation: its loops (leaf axes), how they derive from the
    operation's axes, their annotations, and where the stage is computed."""

    def __init__(self, schedule: "Schedule", op: Operation, name: str, scope: Optional[str] = None):
        self.name = name
        self.scope = scope     # None: global at the root, local when computed at a loop
        self.store_predicate = None     # set_store_predicate: who stores a cross-thread reduction's result
        self.is_output = False
        self.attach_type = "root"          # "root", "inline" or "at"
        self.attach_stage: Optional[Stage] = None
        self.attach_ivar: Optional[IterVar] = None
        self.storage_aligns: Dict[int, Tuple[int, int]] = {}
        self.double_buffered = False       # double_buffer(): two buffers, filled in turn
        self._reset(op)
        self.schedule = schedule           # last: a stage being made has no state to save (__setattr__)

    def __setattr__(self, name: str, value) -> None:
        # Every change of a stage's state goes through here or through _touch (the primitives'
        # in-place edits of its lists and dicts), so the schedule's open undo points can save the
        # state first (Schedule.snapshot).
        schedule = self.__dict__.get("schedule")
        if schedule is not None and schedule._undo:
            schedule._touch(self)
        object.__setattr__(self, name, value)

    def _touch(self) -> None:
        """Call before changing one of the stage's lists or dicts in place."""
        if self.schedule._undo:
            self.schedule._touch(self)

    def _reset(self, op: Operation) -> None:
        self.op = op
        roots = list(op.root_axes)
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
        return list(self.op.root_axes)

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
        scan_rules.require_loops(self, primitive)

    def _leaf_problem(self, ivar, whose: Optional[str] = None) -> Optional[Tuple[str, str]]:
        """Why ivar is not a loop of this stage that a primitive can take: (problem, hint), or None.
        whose names this stage in the problem text."""
        whose = whose or f"stage '{self.name}'"
        if not isinstance(ivar, IterVar):
            return f"expected an axis (IterVar), got {ivar!r}", f"take the axes from s[{self.name!r}].op.axis"
        if not has_axis(self.all_iter_vars, ivar):
            owner = self.schedule._owner_of(ivar)
            where = f"belongs to stage '{owner.name}', not to {whose}" if owner else "is not an axis of this schedule"
            return (f"the axis {where}",
                    f"take the axes from s[{self.name!r}].op.axis or from this stage's own split/fuse results")
        if not has_axis(self.leaf_iter_vars, ivar):
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
        if primitive != "reorder":
            scan_rules.check_scan_leaf(self, primitive, ivar)
        return ivar

    def _require_unannotated(self, primitive: str, ivar: IterVar) -> None:
        ann = self.annotations.get(ivar)
        if ann is not None:
            raise ScheduleError(primitive, self.name, f"the axis is already marked {ann}", axis=ivar.name,
                                hint="split/fuse/annotate an axis before marking it; an axis takes one of "
                                     "unroll, vectorize, parallel or bind")

    def _require_positive(self, primitive: str, name: str, value, axis: Optional[IterVar] = None,
                          maximum: Optional[int] = INT32_MAX) -> int:
        """A factor-like argument: an int in [1, maximum] (loops and their factors are int32)."""
        where = axis.name if axis is not None else None
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
            raise ScheduleError(primitive, self.name, f"{name} must be a positive int, got {value!r}", axis=where)
        if maximum is not None and value > maximum:
            raise ScheduleError(primitive, self.name, f"{name} is {value}, more than 2**31 - 1", axis=where,
                                hint="loop extents and factors are int32: a loop runs at most 2**31 - 1 times")
        return int(value)

    def _record(self, step) -> None:
        self.schedule._record(step)

    def _new_axis(self, name: str, extent: int, kind: str) -> IterVar:
        unique = steps.unique_name(name, {a.name for a in self.all_iter_vars})
        ivar = IterVar(Var(unique), Range(0, extent), kind)
        self._touch()
        self.all_iter_vars.append(ivar)
        return ivar

    def _retarget_attached(self, old: Sequence[IterVar], new: IterVar) -> None:
        # A stage computed at a loop moves into the loop that now runs that loop's body.
        for st in self.schedule.stages:
            if st.attach_stage is self and any(st.attach_ivar is o for o in old):
                st.attach_ivar = new
