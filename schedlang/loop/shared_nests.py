"""Loop nests shared between equal root stages: build_func builds each distinct nest once.

A model repeats its layers: a root stage with the stages computed at its loops, equal to an
earlier one up to the names of its variables, axes, buffers and the tensors it reads
(plan_key.py), over regions that are equal too, reading buffers of the same shapes, scopes,
strides and offsets. Its loop nest is then the earlier one's with the variables and buffers
renamed (kernel/dedup.py's rename), which is what building it again gives: the builder reads
no names and orders nothing by them. The renaming is strict: a nest whose statement holds a
variable or buffer the key did not number (one the builder made, such as a tuple
reduction's temporaries, which are named after their buffer) is built instead.

Never shared: nests with a scan, an extern call, a tensorized, double-buffered or
thread-bound stage, and anything that cannot be compared by value.
"""
from __future__ import annotations

from typing import Dict, List, Optional

from ..kernel.dedup import Unkeyable, Unmapped, rename, renaming
from ..schedule.annotate import BIND
from ..tensor.op import ComputeOp, output_name
from .nodes import Stmt
from .plan_key import PlanKey, nests, plan_key


class SharedNests:
    """stage_nest for the root stages of one build_func, once per distinct nest; `hits`
    counts the nests taken from an earlier one."""

    def __init__(self, builder):
        self.builder = builder
        self.hits = 0
        self._members = nests(builder.program)        # root name -> the nest's plans, in plan order
        self._table: Dict[tuple, int] = {}
        self._first: Dict[tuple, tuple] = {}           # key -> (keyer, statement) of the first nest

    def stage_nest(self, root) -> Stmt:
        keyed = self._key(root)
        if keyed is None:
            return self.builder.stage_nest(root)
        key, keyer = keyed
        first = self._first.get(key)
        if first is not None:
            var_map, buf_map = renaming(first[0], keyer)
            try:
                stmt = rename(first[1], var_map, buf_map, strict=True)
            except Unmapped:
                return self.builder.stage_nest(root)
            self.hits += 1
            return stmt
        stmt = self.builder.stage_nest(root)
        self._first[key] = (keyer, stmt)
        return stmt

    def _key(self, root) -> Optional[tuple]:
        members = self._members.get(root.name)
        if not members:
            return None
        for p in members:
            if (not isinstance(p.op, ComputeOp) or p.buffer_key is not None or p.scan_update is not None
                    or p.tensorize is not None or p.double_buffer
                    or any(ann.kind == BIND for _, ann in p.annotations)):
                return None
        b = self.builder
        place = {id(p): i for i, p in enumerate(members)}
        place_of_name = {p.name: i for i, p in enumerate(members)}
        keyer = PlanKey(self._table, place, b.program.plan_of_op)
        try:
            parts: List[tuple] = []
            for p in members:
                parts.append((plan_key(keyer, p, place_of_name), keyer.key(tuple(b.regions[p.name])),
                              tuple(self._buffer(keyer, p, i) for i in range(p.op.num_outputs)),
                              keyer.key(tuple(b.offsets[p.name]))))
            done = 0
            while done < len(keyer.ops):            # what the nest reads: buffers, offsets (keying may add more)
                p = b.program.plan_of_op[keyer.ops[done]]
                parts.append((tuple(self._buffer(keyer, p, i)[0] for i in range(p.op.num_outputs)),
                              keyer.key(tuple(b.offsets[p.name]))))
                done += 1
        except (Unkeyable, KeyError):
            return None
        return tuple(parts), keyer

    def _buffer(self, keyer: PlanKey, plan, index: int) -> tuple:
        """The key of a buffer a stage writes (numbered, so that renaming maps it) and whether it is a
        parameter (a member's buffers that are not are allocated in the nest)."""
        buffer = self.builder.buffers[output_name(plan.name, index, plan.op.num_outputs)]
        return keyer.key(buffer), id(buffer) in self.builder.param_ids
