"""scan: a recurrence over the first axis, with TVM's classic te semantics.

    s_state = placeholder((m, n)); s_init = compute((1, n), ...)
    s_update = compute((m, n), lambda t, i: s_state[t - 1, i] + X[t, i])
    s_scan = scan(s_init, s_update, s_state, inputs=[X])

Rows [0, init_rows) of the result are the init; for t from init_rows to m - 1 in order,
row t is the update at t, whose reads of the state placeholder see the rows already
computed. The computes between the state placeholders (and `inputs`) and the updates
form the scan's cell: they are evaluated per step, inside the scan loop.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Tuple

from ..dtypes import DType, int32
from ..expr.nodes import Var
from .axis import DATA_PAR, IterVar, Range
from .graph import post_order
from .op import ComputeOp, Operation, PlaceholderOp, Tensor


@dataclass(frozen=True, eq=False)
class ScanOp(Operation):
    """A recurrence: one output per state; scan_axis runs over the rows the updates compute."""

    name: str
    scan_axis: IterVar
    init: Tuple[Tensor, ...]
    update: Tuple[Tensor, ...]
    state_placeholder: Tuple[Tensor, ...]
    inputs: Tuple[Tensor, ...] = ()
    tag: str = ""
    attrs: Tuple[Tuple[str, object], ...] = ()

    __hash__ = object.__hash__

    @property
    def num_outputs(self) -> int:
        return len(self.update)

    def output_shape(self, index: int) -> Tuple[int, ...]:
        return self.state_placeholder[index].shape

    def output_dtype(self, index: int) -> DType:
        return self.state_placeholder[index].dtype_obj

    @property
    def shape(self) -> Tuple[int, ...]:
        return self.output_shape(0)

    @property
    def dtype(self) -> DType:
        return self.output_dtype(0)

    @property
    def root_axes(self) -> Tuple[IterVar, ...]:
        return (self.scan_axis,)

    @property
    def init_rows(self) -> int:
        return self.scan_axis.dom.min

    @property
    def input_tensors(self) -> List[Tensor]:
        return list(self.init) + list(self.update)

    def cell_ops(self) -> List[Operation]:
        """The scan's cell, computed once per step (as TVM's scan group): the updates and
        every compute on a path from a state placeholder or one of `inputs` to an update;
        producers first."""
        sources = {t.op for t in self.state_placeholder} | {t.op for t in self.inputs}
        reaches: Dict[Operation, bool] = {}

        def visit(op) -> bool:
            if op in sources:
                return True
            if op not in reaches:
                reaches[op] = False     # a cycle cannot occur; this only stops re-visits
                reaches[op] = any([visit(t.op) for t in op.input_tensors])
            return reaches[op]

        for t in self.update:
            visit(t.op)
        updates = {t.op for t in self.update}
        cell = [op for op, r in reaches.items() if isinstance(op, ComputeOp) and (r or op in updates)]
        order = post_order([t.op for t in self.update])
        return [op for op in order if op in cell]

    def replace_inputs(self, mapping, name: str) -> "ScanOp":
        """The same scan over renamed operations (mapping: old op -> new tensor)."""
        def m(ts):
            return tuple(mapping[t.op].output(t.value_index) if t.op in mapping else t for t in ts)
        return ScanOp(name, self.scan_axis, m(self.init), m(self.update), m(self.state_placeholder),
                      m(self.inputs), self.tag, self.attrs)


def _as_list(x, what: str) -> List[Tensor]:
    items = list(x) if isinstance(x, (list, tuple)) else [x]
    for t in items:
        if not isinstance(t, Tensor):
            raise TypeError(f"scan: {what} must be tensors, got {t!r}")
    return items


def _check_cell(name: str, updates, states, inputs) -> None:
    """The cell (what the updates compute from the states) may hold only computes: an
    extern or nested scan stage cannot run per step."""
    stop = {t.op for t in inputs}
    state_ops = {t.op for t in states}

    def reads_state(op, seen) -> bool:
        if op in state_ops:
            return True
        if op in seen:
            return False
        seen.add(op)
        return any(reads_state(t.op, seen) for t in op.input_tensors)

    stack, seen = [t.op for t in updates], set()
    while stack:
        op = stack.pop()
        if op in seen or op in stop or isinstance(op, PlaceholderOp):
            continue
        seen.add(op)
        if not isinstance(op, ComputeOp) and reads_state(op, set()):
            raise ValueError(f"scan '{name}': stage '{op.name}' ({type(op).__name__}) reads the scan's state; "
                             "only computes can be part of a scan cell")
        stack.extend(t.op for t in op.input_tensors)


def scan(init, update, state_placeholder, inputs=None, name: str = "scan", tag: str = "", attrs=None):
    """A recurrence over axis 0 (TVM's te.scan): one tensor, or a list for several states."""
    many = isinstance(update, (list, tuple))
    inits, updates = _as_list(init, "init"), _as_list(update, "update")
    states = _as_list(state_placeholder, "state_placeholder")
    ins = _as_list(inputs, "inputs") if inputs is not None else []
    if not (len(inits) == len(updates) == len(states)) or not updates:
        raise ValueError(f"scan '{name}': init, update and state_placeholder must have the same number of "
                         f"tensors, got {len(inits)}, {len(updates)} and {len(states)}")
    for k, (i, u, s) in enumerate(zip(inits, updates, states)):
        which = f"scan '{name}', state {k}"
        if not isinstance(s.op, PlaceholderOp):
            raise TypeError(f"{which}: state_placeholder must be a placeholder, got compute '{s.name}'")
        if not isinstance(u.op, ComputeOp) or not isinstance(i.op, ComputeOp):
            raise TypeError(f"{which}: init and update must be computes")
        if tuple(u.shape) != tuple(s.shape):
            raise ValueError(f"{which}: update '{u.name}' has shape {u.shape}, the state placeholder "
                             f"'{s.name}' {s.shape}; they must be equal")
        if len(i.shape) != len(s.shape) or tuple(i.shape[1:]) != tuple(s.shape[1:]):
            raise ValueError(f"{which}: init '{i.name}' has shape {i.shape}; it must be the state's shape "
                             f"{s.shape} with fewer rows")
        if i.dtype != s.dtype or u.dtype != s.dtype:
            raise TypeError(f"{which}: init ({i.dtype}), update ({u.dtype}) and state ({s.dtype}) dtypes differ")
        if i.shape[0] != inits[0].shape[0] or s.shape[0] != states[0].shape[0]:
            raise ValueError(f"scan '{name}': every state must have the same number of rows and init rows")
    _check_cell(name, updates, states, ins)
    rows, first = states[0].shape[0], inits[0].shape[0]
    if isinstance(first, int) and isinstance(rows, int) and first >= rows:     # a symbolic length may be 1 at run time
        raise ValueError(f"scan '{name}': init has {first} rows, the state {rows}; nothing is left to scan")
    axis = IterVar(Var(f"{name}.idx", int32), Range(first, rows - first), DATA_PAR)
    op = ScanOp(name, axis, tuple(inits), tuple(updates), tuple(states), tuple(ins), tag,
                tuple(sorted((attrs or {}).items())))
    outs = [op.output(k) for k in range(op.num_outputs)]
    return outs if many else outs[0]
