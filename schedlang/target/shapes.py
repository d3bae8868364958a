"""Sizes from arrays: a module with symbolic shapes reads its size variables from the
shapes of the arrays it is called with, checks that they agree, and checks the extents
that are expressions of them. Target-neutral: any backend passes the values it returns
to its kernels as scalar arguments."""
from __future__ import annotations

import numbers
from typing import Dict, List, Optional, Sequence, Tuple

from ..dtypes import dtype as parse_dtype
from ..expr.extent import evaluate_extent, extent_from_json, extent_to_json, first_overflow, linear_in_one
from ..expr.functor import uses_var
from ..expr.nodes import Buffer, Expr, Var

MAX_ELEMENTS = 2 ** 31 - 1      # indices are 32-bit


def _dims(shape) -> str:
    return "(" + ", ".join(map(str, shape)) + (",)" if len(shape) == 1 else ")")


class UnboundSizes(ValueError):
    """A module's size variable that no argument's extent gives (nor an int argument)."""


class SizeBinder:
    """Where each size variable is read from (the first argument dimension that is exactly
    that variable, else one whose extent is a * v + b), and the checks a call runs on the
    argument shapes."""

    def __init__(self, params: Sequence[Buffer], sizes: Sequence[Var], sized: Sequence[Buffer] = (),
                 extents: Sequence[Expr] = (), size_args: Sequence[Tuple[int, Var]] = (),
                 size_checks: Sequence[Tuple[Expr, str]] = ()):
        self.params = list(params)
        self.sizes = list(sizes)
        self.size_args = list(size_args)      # (call position, variable): sizes the caller passes as ints
        self.size_checks = list(size_checks)  # (expression, what it is): must be >= 1
        self.sized = list(sized)      # every other buffer whose size depends on the sizes
        self.extents = list(extents)  # symbolic loop extents, computed in 32 bits
        self._checked: Tuple[int, ...] = ()
        self.source: Dict[Var, Tuple[int, int]] = {}
        for i, b in enumerate(self.params):
            for d, n in enumerate(b.shape):
                if isinstance(n, Var) and n not in self.source:
                    self.source[n] = (i, d)
        # a size given only through an extent like m * 4 + 1 is solved from it
        self.solved: Dict[Var, Tuple[int, int, int, int]] = {}
        for i, b in enumerate(self.params):
            for d, n in enumerate(b.shape):
                form = linear_in_one(n)
                if form is not None and form[0] not in self.source and form[0] not in self.solved:
                    self.solved[form[0]] = (i, d, form[1], form[2])
        given = {v for _, v in self.size_args}
        missing = [v.name for v in self.sizes if v not in self.source and v not in self.solved and v not in given]
        if missing:
            decls = ", ".join(f"{b.name}{_dims(b.shape)}" for b in self.params)
            raise UnboundSizes(f"size variable(s) {', '.join(map(repr, missing))} are not the extent of any dimension "
                             f"of the arguments ({decls}), so a call could not tell their values; list the "
                             f"variable itself as an argument (build(s, [..., {missing[0]}])) or add a tensor "
                             "with that extent to the arguments")

    def split_call(self, args: Sequence) -> Tuple[list, Dict[Var, int]]:
        """(the arrays of a call, the values of the size variables passed among them as ints)."""
        if not self.size_args:
            return list(args), {}
        total = len(self.params) + len(self.size_args)
        if len(args) != total:
            names = [b.name for b in self.params]
            for pos, v in self.size_args:
                names.insert(pos, v.name)
            raise TypeError(f"the module takes {total} arguments ({', '.join(names)}), got {len(args)}")
        positions = {pos: v for pos, v in self.size_args}
        values: Dict[Var, int] = {}
        for pos, v in positions.items():
            x = args[pos]
            if isinstance(x, bool) or not isinstance(x, numbers.Integral):
                raise TypeError(f"argument '{v.name}' is a size variable and takes an int, got {type(x).__name__}")
            if not -2 ** 31 <= int(x) <= MAX_ELEMENTS:
                raise ValueError(f"size variable '{v.name}' is {int(x)}, beyond the int32 range of size variables")
            if v.nonnegative and int(x) < 0:
                raise ValueError(f"size variable '{v.name}' is a size_var (>= 0), got {int(x)}")
            values[v] = int(x)
        return [x for i, x in enumerate(args) if i not in positions], values

    def _where(self, i: int, d: int) -> str:
        return f"{self.params[i].name}.shape[{d}]"

    def bind(self, shapes: Sequence[Tuple[int, ...]], given: Optional[Dict[Var, int]] = None) -> List[int]:
        """The value of each size variable, from the arguments' shapes (already checked for
        their number of dimensions) and the values given as arguments; raises ValueError
        when they disagree."""
        values: Dict[Var, int] = dict(given or {})
        origin: Dict[Var, str] = {v: f"the argument '{v.name}'" for v in values}
        for i, (b, shape) in enumerate(zip(self.params, shapes)):
            for d, (n, got) in enumerate(zip(b.shape, shape)):
                if not isinstance(n, Var):
                    continue
                if n not in values:
                    if got > MAX_ELEMENTS:
                        raise ValueError(f"size variable '{n.name}' is {got} from {self._where(i, d)}, "
                                         f"beyond the int32 range of size variables")
                    values[n], origin[n] = got, self._where(i, d)
                elif values[n] != got:
                    raise ValueError(f"size variable '{n.name}' is {values[n]} from {origin[n]} but {got} "
                                     f"from {self._where(i, d)}")
        for v, (i, d, coeff, const) in self.solved.items():
            if v in values:       # given as an argument: the extent is checked below
                continue
            got = shapes[i][d]
            value, rest = divmod(got - const, coeff)
            if rest or value < 0:
                raise ValueError(f"argument '{self.params[i].name}' has {self._where(i, d)} = {got}, but its extent "
                                 f"'{self.params[i].shape[d]}' is not {got} for any size '{v.name}'")
            values[v], origin[v] = value, self._where(i, d)
        for i, (b, shape) in enumerate(zip(self.params, shapes)):
            for d, (n, got) in enumerate(zip(b.shape, shape)):
                if isinstance(n, Expr) and not isinstance(n, Var):
                    want = evaluate_extent(n, values)
                    if want != got:
                        given = ", ".join(f"{v.name}={values[v]} (from {origin[v]})" for v in values if _mentions(n, v))
                        raise ValueError(f"argument '{b.name}' has {self._where(i, d)} = {got}, but its extent "
                                         f"'{n}' is {want} with {given}")
        result = [values[v] for v in self.sizes]
        if tuple(result) != self._checked:      # the same sizes as last call: checked already
            self._check_limits(values)
            self._checked = tuple(result)
        return result

    def _check_limits(self, values: Dict[Var, int]) -> None:
        given = ", ".join(f"{v.name}={values[v]}" for v in self.sizes)
        for e, what in self.size_checks:
            value = evaluate_extent(e, values)
            if value < 1:
                raise ValueError(f"{what} is '{e}' = {value} with {given}; it must be at least 1")
        for b in self.params + self.sized:
            if b.is_symbolic:
                count = evaluate_extent(b.size, values)
                if count > MAX_ELEMENTS:
                    raise ValueError(f"tensor '{b.name}' would have {count} elements with {given}; indices are "
                                     "32-bit, so tensors are limited to 2**31 - 1 elements")
        for e in self.extents:
            bad = first_overflow(e, values)
            if bad is not None:
                raise ValueError(f"with {given}, the loop extent '{e}' overflows 32-bit index arithmetic "
                                 f"('{bad}' is {evaluate_extent(bad, values)})")

    def to_json(self, var_ids: Dict[Var, int]) -> dict:
        """What a loader needs to rebuild this binder (export_library); var_ids numbers the
        size variables, filled in here (the parameters' shapes use the same numbers)."""
        for v in self.sizes:
            var_ids.setdefault(v, len(var_ids))
        return {"sizes": [var_ids[v] for v in self.sizes],
                "sized": [{"name": b.name, "shape": [extent_to_json(n, var_ids) for n in b.shape],
                           "dtype": str(b.dtype)} for b in self.sized],
                "extents": [extent_to_json(e, var_ids) for e in self.extents],
                "size_args": [[pos, var_ids[v]] for pos, v in self.size_args],
                "size_checks": [[extent_to_json(e, var_ids), what] for e, what in self.size_checks]}

    @staticmethod
    def from_json(data: dict, params: Sequence[Buffer], variables: Sequence[Var]) -> "SizeBinder":
        sized = [Buffer(b["name"], tuple(extent_from_json(n, variables) for n in b["shape"]), parse_dtype(b["dtype"]))
                 for b in data["sized"]]
        return SizeBinder(params, [variables[i] for i in data["sizes"]], sized,
                          [extent_from_json(e, variables) for e in data["extents"]],
                          [(pos, variables[i]) for pos, i in data["size_args"]],
                          [(extent_from_json(e, variables), what) for e, what in data["size_checks"]])

    def shape_of(self, b: Buffer, values: Sequence[int]) -> Tuple[int, ...]:
        """The concrete shape of a buffer for the given size values."""
        env = dict(zip(self.sizes, values))
        return tuple(evaluate_extent(n, env) for n in b.shape)


def _mentions(e: Expr, v: Var) -> bool:
    return uses_var(e, v)


def check_index_width(kernel) -> None:
    """Refuse buffers of a KernelModule that 32-bit indices cannot address (the host CPU targets'
    build check; symbolic sizes are checked at call time)."""
    for b in kernel.params + kernel.temps:
        if not b.is_symbolic and b.size > MAX_ELEMENTS:     # symbolic sizes are checked at call time
            raise ValueError(f"tensor '{b.name}' has {b.size} elements; indices are 32-bit, so tensors are "
                             "limited to 2**31 - 1 elements for now")
