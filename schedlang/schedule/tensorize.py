"""tensorize: replace the loop nest under an axis by a tensor intrinsic (TVM's
Stage.tensorize with te.decl_tensor_intrin; loop/tensor_intrin.py declares intrinsics).

The primitive checks what it can when called (a leaf axis of a compute stage, an intrinsic,
one tensorize per stage) and records the step; lowering matches the nest under the axis
with the intrinsic's compute once the loop extents are known (loop/tensorize.py) and raises
ScheduleError naming what differs.

A step names its intrinsic by key (its name and a digest of its compute, body and buffers),
so equal keys are equal intrinsics; a step list replays in a process that declared it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Dict

from ..errors import ScheduleError
from ..tensor.axis import IterVar
from ..tensor.op import ComputeOp
from .steps import Step

_DECLARED: Dict[str, object] = {}     # key -> intrinsic, for replaying steps


def declare_intrin(intrin) -> None:
    """Make intrin findable by its key in this process (tensorize does so on first use; a
    library declares its intrinsics ahead so that step lists naming them replay)."""
    _DECLARED.setdefault(intrin.key, intrin)      # equal keys: equal intrinsics


def declared_intrin(key: str):
    """The intrinsic a step names (its key); ValueError when this process has not declared it
    (a tensorize step printed by to_python finds its intrinsic with sl.declared_intrin)."""
    intrin = _DECLARED.get(key)
    if intrin is None:
        raise ValueError(f"tensorize: the tensor intrinsic {key!r} is not declared in this process; declare it "
                         "(decl_tensor_intrin) before replaying a schedule that uses it")
    return intrin


class TensorizePrimitive:
    """Mixin of Stage: tensorize."""

    def tensorize(self, ivar: IterVar, intrin) -> None:
        """Compute the loops from ivar inwards with intrin (from decl_tensor_intrin): their
        extents, the computation and its index pattern must be the intrinsic's."""
        self._require_schedulable("tensorize")
        self._require_leaf("tensorize", ivar)
        if not (hasattr(intrin, "key") and hasattr(intrin, "op") and hasattr(intrin, "buffers")):
            raise ScheduleError("tensorize", self.name, f"expected a tensor intrinsic (decl_tensor_intrin), "
                                f"got {intrin!r}", axis=ivar.name)
        if not isinstance(self.op, ComputeOp) or self.op.num_outputs != 1:
            raise ScheduleError("tensorize", self.name, "only a single-output compute stage can be tensorized",
                                axis=ivar.name)
        done = getattr(self, "tensorize_at", None)
        if done is not None:
            raise ScheduleError("tensorize", self.name, f"is already tensorized at '{done[0].name}' with "
                                f"{done[1].name}", axis=ivar.name, hint="a stage takes one tensorize")
        declare_intrin(intrin)
        self.tensorize_at = (ivar, intrin)
        self._record(Tensorize(self.name, ivar.name, intrin.key))


@dataclass(frozen=True)
class Tensorize(Step):
    primitive: ClassVar[str] = "tensorize"
    stage: str
    axis: str
    intrin: str

    def apply(self, s):
        st = s[self.stage]
        st.tensorize(st.axis(self.axis), declared_intrin(self.intrin))

    def to_python(self, names):
        return f"s[{self.stage!r}].tensorize({names.get(self.stage, self.axis)}, sl.declared_intrin({self.intrin!r}))"
