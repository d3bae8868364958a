"""Schedule steps: every primitive call, recorded as small serialisable data.

A schedule is the replay of its step list. Steps name stages and axes by their
(unique) names, so a step list prints as Python, round-trips through JSON, and
replays on a fresh schedule of the same algorithm.
"""
from __future__ import annotations

import json
import re
from dataclasses import MISSING, dataclass, fields
from typing import Any, ClassVar, Dict, List, Optional, Sequence, Tuple, Type, Union

from ..tensor.axis import thread_axis

_REGISTRY: Dict[str, Type["Step"]] = {}
VERSION = 1   # of the JSON format written by steps_to_json


def unique_name(base: str, taken) -> str:
    """base, or base2, base3, ... : the first not in taken (how primitives name new axes)."""
    name, n = base, 1
    while name in taken:
        n += 1
        name = f"{base}{n}"
    return name


# What each field annotation accepts in JSON (annotations are strings: `from __future__ import annotations`).
_FIELD_KINDS = {"str": "a string", "int": "an integer", "Optional[int]": "an integer or null",
                "Optional[Size]": "an integer, a size variable's name or null",
                "Tuple[str, ...]": "a list of strings", "Any": "any JSON value"}


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _accepts(annotation: str, v) -> bool:
    if annotation == "str":
        return isinstance(v, str)
    if annotation == "int":
        return _is_int(v)
    if annotation == "Optional[int]":
        return v is None or _is_int(v)
    if annotation == "Optional[Size]":
        return v is None or _is_int(v) or (isinstance(v, str) and v.isidentifier())
    if annotation == "Tuple[str, ...]":
        return isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v)
    return True     # "Any", or a field type this table does not know yet


def _check_field(kind: str, name: str, annotation: str, value) -> None:
    """A JSON field of a step must have its field's type: a string where a list of axes
    belongs would otherwise replay as a list of one-character axis names."""
    if not _accepts(annotation, value):
        raise ValueError(f"step {kind!r}: field {name!r} must be {_FIELD_KINDS.get(annotation, annotation)}, "
                         f"got {value!r}")


@dataclass(frozen=True)
class Step:
    """Base of all steps; `primitive` is the schedule method that the step calls."""

    primitive: ClassVar[str] = ""

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        if "primitive" in vars(cls) and cls.primitive:     # a shared base (_AxisStep) is no step
            _REGISTRY[cls.primitive] = cls

    def to_json(self) -> Dict[str, Any]:
        data = {"primitive": self.primitive}
        for f in fields(self):
            value = getattr(self, f.name)
            data[f.name] = list(value) if isinstance(value, tuple) else value
        return data

    @staticmethod
    def from_json(data: Dict[str, Any]) -> "Step":
        if not isinstance(data, dict):
            raise ValueError(f"a schedule step is a JSON object with a \"primitive\" field, got {data!r}")
        data = dict(data)
        kind = data.pop("primitive", None)
        if not isinstance(kind, str) or kind not in _REGISTRY:
            raise ValueError(f"unknown schedule step {kind!r}; known steps: {', '.join(sorted(_REGISTRY))}")
        cls = _REGISTRY[kind]
        names = [f.name for f in fields(cls)]
        unknown = sorted(set(data) - set(names))
        if unknown:
            raise ValueError(f"step {kind!r} has unknown fields {unknown}; its fields are {names}")
        missing = [f.name for f in fields(cls) if f.name not in data
                   and f.default is MISSING and f.default_factory is MISSING]
        if missing:
            raise ValueError(f"step {kind!r} is missing fields {missing}; its fields are {names}")
        for f in fields(cls):
            if f.name in data:
                _check_field(kind, f.name, f.type, data[f.name])
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})

    def apply(self, s) -> None:
        raise NotImplementedError

    def to_python(self, names: "PythonNames") -> str:
        raise NotImplementedError


Size = Union[int, str]     # an int, or the name of a size variable (a split by a symbolic factor)


def _size(s, value):
    return s.size_var_named(value) if isinstance(value, str) else value


@dataclass(frozen=True)
class Split(Step):
    primitive: ClassVar[str] = "split"
    stage: str
    axis: str
    factor: Optional[Size] = None
    nparts: Optional[Size] = None

    def apply(self, s):
        st = s[self.stage]
        st.split(st.axis(self.axis), factor=_size(s, self.factor), nparts=_size(s, self.nparts))

    def to_python(self, names):
        arg = f"factor={self.factor}" if self.factor is not None else f"nparts={self.nparts}"
        outer = names.new_axis(self.stage, self.axis + ".outer")
        inner = names.new_axis(self.stage, self.axis + ".inner")
        return f"{outer}, {inner} = s[{self.stage!r}].split({names.get(self.stage, self.axis)}, {arg})"


@dataclass(frozen=True)
class Tile(Step):
    primitive: ClassVar[str] = "tile"
    stage: str
    x: str
    y: str
    x_factor: int
    y_factor: int

    def apply(self, s):
        st = s[self.stage]
        st.tile(st.axis(self.x), st.axis(self.y), self.x_factor, self.y_factor)

    def to_python(self, names):
        x, y = names.get(self.stage, self.x), names.get(self.stage, self.y)
        xo, xi, yo, yi = [names.new_axis(self.stage, n) for n in (self.x + ".outer", self.x + ".inner",
                                                                   self.y + ".outer", self.y + ".inner")]
        return f"{xo}, {yo}, {xi}, {yi} = s[{self.stage!r}].tile({x}, {y}, {self.x_factor}, {self.y_factor})"


@dataclass(frozen=True)
class Fuse(Step):
    primitive: ClassVar[str] = "fuse"
    stage: str
    axes: Tuple[str, ...]

    def apply(self, s):
        st = s[self.stage]
        st.fuse(*(st.axis(a) for a in self.axes))

    def to_python(self, names):
        args = ", ".join(names.get(self.stage, a) for a in self.axes)
        fused = '.'.join(self.axes) + '.fused' if self.axes else 'singleton'
        return f"{names.new_axis(self.stage, fused)} = s[{self.stage!r}].fuse({args})"


@dataclass(frozen=True)
class Reorder(Step):
    primitive: ClassVar[str] = "reorder"
    stage: str
    axes: Tuple[str, ...]

    def apply(self, s):
        st = s[self.stage]
        st.reorder(*(st.axis(a) for a in self.axes))

    def to_python(self, names):
        return f"s[{self.stage!r}].reorder({', '.join(names.get(self.stage, a) for a in self.axes)})"


@dataclass(frozen=True)
class _StageStep(Step):
    """s[stage].<primitive>(): a step of one stage with no arguments."""
    stage: str

    def apply(self, s):
        getattr(s[self.stage], self.primitive)()

    def to_python(self, names):
        return f"s[{self.stage!r}].{self.primitive}()"


@dataclass(frozen=True)
class _AxisStep(Step):
    """s[stage].<primitive>(axis, *rest): a step on one axis of a stage, the fields after
    stage and axis passed on as they are (plain ints)."""
    stage: str
    axis: str

    def _rest(self) -> tuple:
        return tuple(getattr(self, f.name) for f in fields(self)[2:])

    def apply(self, s):
        st = s[self.stage]
        getattr(st, self.primitive)(st.axis(self.axis), *self._rest())

    def to_python(self, names):
        args = [names.get(self.stage, self.axis), *map(repr, self._rest())]
        return f"s[{self.stage!r}].{self.primitive}({', '.join(args)})"


@dataclass(frozen=True)
class Unroll(_AxisStep):
    primitive: ClassVar[str] = "unroll"


@dataclass(frozen=True)
class Vectorize(_AxisStep):
    primitive: ClassVar[str] = "vectorize"


@dataclass(frozen=True)
class Parallel(_AxisStep):
    primitive: ClassVar[str] = "parallel"


@dataclass(frozen=True)
class Bind(Step):
    primitive: ClassVar[str] = "bind"
    stage: str
    axis: str
    thread: str

    def apply(self, s):
        st = s[self.stage]
        st.bind(st.axis(self.axis), thread_axis(self.thread))

    def to_python(self, names):
        return f"s[{self.stage!r}].bind({names.get(self.stage, self.axis)}, sl.thread_axis({self.thread!r}))"


@dataclass(frozen=True)
class ComputeAt(Step):
    primitive: ClassVar[str] = "compute_at"
    stage: str
    target: str
    axis: str

    def apply(self, s):
        s[self.stage].compute_at(s[self.target], s[self.target].axis(self.axis))

    def to_python(self, names):
        return f"s[{self.stage!r}].compute_at(s[{self.target!r}], {names.get(self.target, self.axis)})"


@dataclass(frozen=True)
class ComputeInline(_StageStep):
    primitive: ClassVar[str] = "compute_inline"


@dataclass(frozen=True)
class ComputeRoot(_StageStep):
    primitive: ClassVar[str] = "compute_root"


@dataclass(frozen=True)
class CacheRead(Step):
    primitive: ClassVar[str] = "cache_read"
    tensor: str
    scope: str
    readers: Tuple[str, ...]

    def apply(self, s):
        s.cache_read(self.tensor, self.scope, list(self.readers))

    def to_python(self, names):
        return f"s.cache_read({self.tensor!r}, {self.scope!r}, {list(self.readers)!r})"


@dataclass(frozen=True)
class CacheWrite(Step):
    primitive: ClassVar[str] = "cache_write"
    tensor: str
    scope: str

    def apply(self, s):
        s.cache_write(self.tensor, self.scope)

    def to_python(self, names):
        return f"s.cache_write({self.tensor!r}, {self.scope!r})"


@dataclass(frozen=True)
class RFactor(Step):
    primitive: ClassVar[str] = "rfactor"
    tensor: str
    axis: str
    factor_axis: int = 0

    def apply(self, s):
        s.rfactor(self.tensor, s[self.tensor].axis(self.axis), self.factor_axis)

    def to_python(self, names):
        axis = names.get(self.tensor, self.axis)
        names.forget_stage(self.tensor)   # the stage gets a fresh op and fresh axes
        return f"s.rfactor({self.tensor!r}, {axis}, {self.factor_axis})"


@dataclass(frozen=True)
class StorageAlign(_AxisStep):
    primitive: ClassVar[str] = "storage_align"
    factor: int
    offset: int


@dataclass(frozen=True)
class DoubleBuffer(_StageStep):
    primitive: ClassVar[str] = "double_buffer"


@dataclass(frozen=True)
class SetScope(Step):
    primitive: ClassVar[str] = "set_scope"
    stage: str
    scope: str

    def apply(self, s):
        s[self.stage].set_scope(self.scope)

    def to_python(self, names):
        return f"s[{self.stage!r}].set_scope({self.scope!r})"


@dataclass(frozen=True)
class Pragma(Step):
    primitive: ClassVar[str] = "pragma"
    stage: str
    axis: str
    key: str
    value: Any = None

    def apply(self, s):
        st = s[self.stage]
        st.pragma(st.axis(self.axis), self.key, self.value)

    def to_python(self, names):
        return f"s[{self.stage!r}].pragma({names.get(self.stage, self.axis)}, {self.key!r}, {self.value!r})"


@dataclass(frozen=True)
class Prefetch(Step):
    primitive: ClassVar[str] = "prefetch"
    stage: str
    axis: str
    tensor: str
    offset: int

    def apply(self, s):
        st = s[self.stage]
        st.prefetch(self.tensor, st.axis(self.axis), self.offset)

    def to_python(self, names):
        return f"s[{self.stage!r}].prefetch({self.tensor!r}, {names.get(self.stage, self.axis)}, {self.offset!r})"


class PythonNames:
    """Python variable names for axes while printing a step list; root axes are fetched
    from `s[stage].op.axis` / `.op.reduce_axis` the first time a step uses them."""

    def __init__(self, schedule_state, axis_names=None):
        self._state = schedule_state   # callable: stage name -> (axis names, reduce axis names)
        self._axis_names = axis_names  # callable: stage name -> names of all its axes so far
        self._names: Dict[Tuple[str, str], str] = {}
        self._taken: set = set()
        self._made: Dict[str, set] = {}  # axes made by the step being printed, per stage
        self.prelude: List[str] = []

    def step_done(self) -> None:
        """Call after each step is printed and applied to the schedule behind axis_names."""
        self.prelude.clear()
        self._made.clear()

    def new_axis(self, stage: str, base: str) -> str:
        """A variable for an axis that the step makes, named as the primitive will name it
        (base, or base2 ... when an axis of the stage is already called base)."""
        made = self._made.setdefault(stage, set())
        taken = made | (set(self._axis_names(stage)) if self._axis_names else set())
        name = unique_name(base, taken)
        made.add(name)
        return self.new(stage, name)

    def _ident(self, stage: str, axis: str) -> str:
        base = re.sub(r"\W", "_", f"{stage}_{axis}")
        base = base if not base[0].isdigit() else "_" + base
        name, n = base, 1
        while name in self._taken:
            n += 1
            name = f"{base}_{n}"
        self._taken.add(name)
        return name

    def new(self, stage: str, axis: str) -> str:
        name = self._ident(stage, axis)
        self._names[(stage, axis)] = name
        return name

    def forget_stage(self, stage: str) -> None:
        for k in [k for k in self._names if k[0] == stage]:
            del self._names[k]

    def get(self, stage: str, axis: str) -> str:
        if (stage, axis) in self._names:
            return self._names[(stage, axis)]
        axes, reduce_axes = self._state(stage)
        if axis in axes:
            expr = f"s[{stage!r}].op.axis[{axes.index(axis)}]"
        elif axis in reduce_axes:
            expr = f"s[{stage!r}].op.reduce_axis[{reduce_axes.index(axis)}]"
        else:
            return f"s[{stage!r}].axis({axis!r})"
        name = self.new(stage, axis)
        self.prelude.append(f"{name} = {expr}")
        return name


def steps_to_json(steps: Sequence[Step]) -> str:
    return json.dumps({"version": VERSION, "steps": [st.to_json() for st in steps]}, indent=1)


def steps_from_json(text: str) -> List[Step]:
    data = json.loads(text)
    if not isinstance(data, dict) or "version" not in data:
        raise ValueError("not a schedlang schedule: expected a JSON object with \"version\": 1 and \"steps\"")
    if data["version"] != VERSION:
        raise ValueError(f"schedule JSON has version {data['version']!r}; this schedlang reads version {VERSION}")
    if not isinstance(data.get("steps"), list):
        raise ValueError("schedule JSON needs a \"steps\" list")
    return [Step.from_json(d) for d in data["steps"]]
