"""Where a stage is computed: compute_at, compute_inline, compute_root, and the layout
of its buffer (storage_align)."""
from __future__ import annotations

import numbers
from typing import List, Tuple

from ..errors import ScheduleError
from ..tensor.axis import IterVar
from ..tensor.op import PlaceholderOp
from . import scan as scan_rules, steps
from .annotate import VECTORIZE

# A warp's tensor-core fragments, each lane holding 1/32 (target/cuda/intrin/mma.py): mma.sync's
# "warp", and wmma's scopes of TVM's tensor-core tutorials.
FRAGMENT_SCOPES = ("warp", "wmma.matrix_a", "wmma.matrix_b", "wmma.accumulator")
SCOPES = ("global", "shared", "local") + FRAGMENT_SCOPES


def enclosing_loops(stage, parent_of=None, leaves_of=None) -> List[Tuple[object, IterVar]]:
    """(stage, axis) of every loop around the point where stage is computed, outermost first:
    the loops of the outermost stage of its compute_at chain, then inward to the stage it is
    computed at, each stage's loops up to and including the one the next is attached to.
    Empty at the root or inlined. Works on Stages; for lowering's StagePlans (whose
    attach_stage is a name) pass parent_of (plan -> the plan it is computed at) and leaves_of
    (plan -> its leaf loops)."""
    parent_of = parent_of or (lambda st: st.attach_stage)
    leaves_of = leaves_of or (lambda st: st.leaf_iter_vars)
    out: List[Tuple[object, IterVar]] = []
    while stage.attach_type == "at":
        parent = parent_of(stage)
        leaves = list(leaves_of(parent))
        pos = next(i for i, a in enumerate(leaves) if a is stage.attach_ivar)
        out[:0] = [(parent, a) for a in leaves[:pos + 1]]
        stage = parent
    return out


class PlacementPrimitives:
    """Mixin of Stage: the primitives that place a stage's computation and storage."""

    def compute_at(self, parent, ivar: IterVar) -> None:
        """Compute this stage inside loop ivar of parent, just the part one iteration needs.

        parent must read this stage (directly or through other stages), ivar must be one of
        parent's loops and not a vectorized one, and this stage must not be an output."""
        self._require_schedulable("compute_at")
        scan_rules.check_placement(self, "compute_at", parent, ivar)
        def consumers():      # for the error messages only: a scan of every stage
            return [c.name for c in self.schedule._consumers(self)]
        axis_name = getattr(ivar, "name", None)
        if not isinstance(parent, PlacementPrimitives) or parent.schedule is not self.schedule:   # (a Stage)
            raise ScheduleError("compute_at", self.name, f"the target must be a stage of this schedule (s[T]), got {parent!r}",
                                axis=axis_name, choices=consumers())
        if parent is self:
            raise ScheduleError("compute_at", self.name, "cannot compute a stage inside its own loop", axis=axis_name,
                                choices=consumers(), hint="compute_at takes the stage of a consumer: s[consumer]")
        if self.is_output:
            raise ScheduleError("compute_at", self.name, "is an output of the schedule and must be computed whole, "
                                "at the root", axis=axis_name, hint="cache_write it and compute_at the cache stage instead")
        if isinstance(parent.op, PlaceholderOp) or parent.attach_type == "inline":
            what = "an input placeholder" if isinstance(parent.op, PlaceholderOp) else "inlined"
            raise ScheduleError("compute_at", self.name, f"the target stage '{parent.name}' is {what} and has no loops",
                                axis=axis_name, choices=consumers(), hint="compute it at a loop of a stage that has loops")
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
                                choices=consumers(), hint="compute a stage at a loop of a stage that uses its result")
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
        if scan_rules.init_index(self) is not None or scan_rules.update_index(self) is not None:
            scan_rules.check_placement(self, "compute_inline")
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
        scan_rules.check_placement(self, "compute_root")
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
        self._touch()
        self.storage_aligns[dim] = (factor, offset)
        self._record(steps.StorageAlign(self.name, ivar.name, factor, offset))

    def double_buffer(self) -> None:
        """TVM's double_buffer: a stage computed at a loop gets two buffers, and iteration i of that
        loop fills buffer (i+1)%2 for the next iteration while it computes from buffer i%2; the
        first fill runs before the loop, and a shared stage needs one barrier per iteration
        instead of two.

        On the cuda target the stage must be computed at a serial loop (compute_at) in shared or
        local memory (checked when it is built); the llvm target ignores it, as TVM's CPU targets
        do (the same results, with one buffer)."""
        self._require_loop_stage("double_buffer", "two buffers", "double-buffer")
        self.double_buffered = True
        self._record(steps.DoubleBuffer(self.name))

    def _require_loop_stage(self, primitive: str, buffers: str, verb: str) -> None:
        """The checks of a primitive that gives this stage several buffers (double_buffer, pipeline):
        a schedulable stage that is not an output (an output is stored whole in its argument)."""
        self._require_schedulable(primitive)
        if self.is_output:
            raise ScheduleError(primitive, self.name, "is an output of the schedule, stored whole in its argument "
                                f"array; only a stage computed at a loop can have {buffers}",
                                hint="cache_read the tensor into shared memory, compute_at the cache stage, and "
                                f"{verb} that")

    def set_scope(self, scope: str) -> None:
        """Store this stage's buffer in a memory scope ("global", "shared" or "local"), as
        TVM's Stage.set_scope; by default a stage at the root is global and one computed at
        a loop is local."""
        self._require_schedulable("set_scope")
        if scope not in SCOPES:
            raise ScheduleError("set_scope", self.name, f"unknown memory scope {scope!r}", choices=SCOPES)
        if self.is_output and scope != "global":
            raise ScheduleError("set_scope", self.name, "is an output of the schedule, a function argument that "
                                "lives in global memory", choices=["global"],
                                hint="cache_write it into the scope instead")
        self.scope = scope
        self._record(steps.SetScope(self.name, scope))
