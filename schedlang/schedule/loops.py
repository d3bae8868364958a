"""Loop transformations of a stage: split, tile, fuse, reorder."""
from __future__ import annotations

from typing import List, Optional, Tuple, Union

from ..errors import ScheduleError
from ..expr.nodes import Var
from ..tensor.axis import DATA_PAR, REDUCE, IterVar, axis_index
from . import steps
from .relations import FuseRel, SingletonRel, SplitRel, mul_extents, split_extents


def _step_size(x):
    """How a split's factor or nparts is recorded: an int, or a size variable's name."""
    return x.name if isinstance(x, Var) else x


class LoopPrimitives:
    """Mixin of Stage: the primitives that change a stage's loop structure."""

    def split(self, parent: IterVar, factor: Optional[Union[int, Var]] = None,
              nparts: Optional[Union[int, Var]] = None,
              disable_predication: bool = False) -> Tuple[IterVar, IterVar]:
        """Split parent into (outer, inner) loops with inner extent factor, or outer extent nparts.

        A factor that does not divide the extent leaves a tail that lowering guards. factor or
        nparts may be a size variable (sl.var): its value is then an argument of the module
        (build(s, [A, B, m])), and the tail is guarded for every value.
        disable_predication is accepted for TVM compatibility; the guard is kept anyway (it
        is only emitted where the split does not divide), since dropping it would read and
        write out of bounds."""
        self._require_schedulable("split")
        self._require_leaf("split", parent)
        if (factor is None) == (nparts is None):
            given = "both" if factor is not None else "neither"
            raise ScheduleError("split", self.name, f"give exactly one of factor= or nparts= ({given} given)",
                                axis=parent.name, hint=f"split({parent.name}, factor=4) makes the inner loop 4 long, "
                                                       f"split({parent.name}, nparts=4) the outer one")
        if factor is not None:
            factor = self._require_split_size("factor", factor, parent)
        else:
            nparts = self._require_split_size("nparts", nparts, parent)
        self._require_unannotated("split", parent)
        for size in (factor, nparts):
            if isinstance(size, Var):       # checked (a name clash raises) before anything changes
                self.schedule._register_size_var("split", self.name, size)
        outer, inner = self._split(parent, factor, nparts)
        self._record(steps.Split(self.name, parent.name, *(_step_size(x) for x in (factor, nparts))))
        return outer, inner

    def _require_split_size(self, name: str, value, parent: IterVar):
        """A positive int, or a size variable (TVM's split by a symbolic factor: the module
        takes its value as an argument and refuses one below 1)."""
        if not isinstance(value, Var):
            return self._require_positive("split", name, value, parent)
        if not value.dtype.is_int or value.dtype.lanes != 1:
            raise ScheduleError("split", self.name, f"{name} '{value.name}' must be a scalar integer variable, "
                                f"got dtype {value.dtype}", axis=parent.name)
        if any(value is a.var for st in self.schedule.stages for a in st.all_iter_vars):
            raise ScheduleError("split", self.name, f"{name} '{value.name}' is a loop variable, not a size",
                                axis=parent.name, hint="split by an int or a size variable (sl.var / sl.size_var)")
        return value

    def _split(self, parent: IterVar, factor, nparts) -> Tuple[IterVar, IterVar]:
        ext = self.static_extents()[parent]
        outer_ext, inner_ext = split_extents(ext, factor, nparts)
        outer = self._new_axis(parent.name + ".outer", outer_ext, parent.kind)
        inner = self._new_axis(parent.name + ".inner", inner_ext, parent.kind)
        self._touch()
        self.relations.append(SplitRel(parent, outer, inner, factor, nparts))
        pos = axis_index(self.leaf_iter_vars, parent)
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
        """Fuse consecutive loops (outermost first) into one loop.

        As in TVM, fuse() of one axis returns that axis, and fuse() of no axes adds a new
        outermost loop of one iteration (named 'singleton') and returns it."""
        self._require_schedulable("fuse")
        if len(args) == 1 and isinstance(args[0], (list, tuple)):
            args = tuple(args[0])
        if not args:
            singleton = self._new_axis("singleton", 1, DATA_PAR)
            self._touch()
            self.relations.append(SingletonRel(singleton))
            self.leaf_iter_vars.insert(0, singleton)
            self._record(steps.Fuse(self.name, ()))
            return singleton
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
        pos = [axis_index(self.leaf_iter_vars, a) for a in args]
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
            total = mul_extents(total, ext[a])
        fused = self._new_axis(".".join(a.name for a in args) + ".fused", total, args[0].kind)
        self._touch()
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
        positions = sorted(axis_index(self.leaf_iter_vars, a) for a in order)
        self._touch()
        for p, a in zip(positions, order):
            self.leaf_iter_vars[p] = a
