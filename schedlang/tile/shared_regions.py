"""Regions shared between equal nests: bound inference runs once per distinct nest.

A model repeats its layers, and each copy of a layer is a root stage with the same stages
computed at its loops (a convolution's padded input, a Winograd layer's transforms). The
regions of those inner stages depend only on the nest: their readers are all inside it
(bound.py refuses a reader outside the attach loop), and the loops they see are the
nest's. So a nest whose plans are an earlier nest's with the variables, axes and
producers renamed one to one (loop/plan_key.py) takes
that nest's regions, renamed, instead of inferring them again. The regions are the ones
inference would give: every step of it (simplify, the linear forms, the bounds) is blind
to names and orders atoms by first appearance, as Kernel IR's sharing relies on too.

A root stage's own region depends on readers in other nests and is always inferred; a nest
holding a scan, an extern call, a tensorized or scan-bound stage, or anything that cannot
be compared by value is never shared.
"""
from __future__ import annotations

from typing import Dict, List, Optional

from ..expr.functor import free_vars
from ..expr.nodes import Expr
from ..kernel.dedup import Unkeyable, rename, renaming
from ..loop.plan_key import PlanKey, nests, plan_key
from ..tensor.op import ComputeOp


class SharedRegions:
    """The regions of stages computed at a loop, looked up by the nest they are in (see the
    module docstring); bound.py asks `lookup` before inferring a stage, `hits` counts answers."""

    def __init__(self, bounds):
        self.bounds = bounds
        self.hits = 0
        self._table: Dict[tuple, int] = {}            # the nests' keys are compared: one table
        self._members = nests(bounds.program)         # root name -> the nest's plans, in plan order
        self._nest_of = {p.name: root for root, members in self._members.items() for p in members}
        self._keys: Dict[str, Optional[tuple]] = {}   # root name -> (key, keyer) or None
        self._first: Dict[tuple, str] = {}            # key -> root name of the first nest with it

    def lookup(self, plan):
        """The region of plan taken from an equal nest inferred before, or None."""
        if plan.attach_type != "at":
            return None
        root = self._nest_of.get(plan.name)
        keyed = self._key(root) if root is not None else None
        if keyed is None:
            return None
        key, keyer = keyed
        first = self._first.setdefault(key, root)
        if first == root:
            return None
        place = next(i for i, p in enumerate(self._members[root]) if p is plan)
        source = self.bounds.regions.get(self._members[first][place].name)
        if source is None:
            return None
        var_map, _ = renaming(self._keys[first][1], keyer)
        region = []
        for lo, extent in source:
            for x in (lo, extent):
                if isinstance(x, Expr) and any(v not in var_map for v in free_vars(x)):
                    return None            # a variable the key did not see: infer it instead
            region.append(tuple(rename(x, var_map, {}) if isinstance(x, Expr) else x for x in (lo, extent)))
        self.hits += 1
        return region

    def _key(self, root: str) -> Optional[tuple]:
        if root not in self._keys:
            self._keys[root] = self._make_key(root)
        return self._keys[root]

    def _make_key(self, root: str) -> Optional[tuple]:
        members = self._members[root]
        regions = self.bounds.regions
        if root not in regions or len(members) < 2:
            return None
        for p in members:
            if (not isinstance(p.op, ComputeOp) or p.buffer_key is not None or p.scan_update is not None
                    or p.tensorize is not None):
                return None
        place = {id(p): i for i, p in enumerate(members)}
        place_of_name = {p.name: i for i, p in enumerate(members)}
        keyer = PlanKey(self._table, place, self.bounds.program.plan_of_op)
        try:
            parts = [keyer.key(tuple(regions[root]))]
            for p in members:
                readers = [place.get(id(r)) for r, _ in self.bounds.readers(p)] if p.attach_type == "at" else []
                if None in readers:
                    return None            # read outside its nest: inference reports it
                parts.append((plan_key(keyer, p, place_of_name), tuple(readers)))
        except Unkeyable:
            return None
        return tuple(parts), keyer
