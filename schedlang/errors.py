"""The three error channels: the user's schedule, lowering, and broken invariants."""
from __future__ import annotations

from typing import Iterable, Optional


class ScheduleError(ValueError):
    """A schedule primitive was misused.

    The message starts with the primitive's name, names the stage and the axis,
    lists the valid choices and ends with a hint on how to fix it.
    """

    def __init__(self, primitive: str, stage: Optional[str], problem: str, *,
                 axis: Optional[str] = None, choices: Optional[Iterable[str]] = None,
                 hint: Optional[str] = None):
        self.primitive = primitive
        self.stage = stage
        self.axis = axis
        self.problem = problem
        self.choices = list(choices) if choices is not None else None
        self.hint = hint
        where = [f"stage '{stage}'"] if stage else []
        if axis is not None:
            where.append(f"axis '{axis}'")
        text = f"{primitive}: {', '.join(where) + ': ' if where else ''}{problem}"
        if self.choices is not None:
            listed = ", ".join(self.choices) if self.choices else "(none)"
            text += f"\n  valid choices: {listed}"
        if hint:
            text += f"\n  hint: {hint}"
        super().__init__(text)

    def __reduce__(self):
        # Rebuilt from the fields, so it survives pickling (process pools, Dask measurers).
        return (_rebuild_schedule_error, (type(self), self.primitive, self.stage, self.problem, self.axis,
                                          self.choices, self.hint))


class LoweringError(RuntimeError):
    """A program could not be lowered; the message names the lowering stage."""

    def __init__(self, stage: str, problem: str):
        self.stage = stage
        self.problem = problem
        super().__init__(f"{stage}: {problem}")

    def __reduce__(self):
        return (type(self), (self.stage, self.problem))


class InternalError(RuntimeError):
    """An invariant of the compiler itself was broken: a bug in schedlang."""

    def __init__(self, problem: str):
        self.problem = problem
        super().__init__(f"internal error (a bug in schedlang, please report it): {problem}")

    def __reduce__(self):
        return (type(self), (self.problem,))


def _rebuild_schedule_error(cls, primitive, stage, problem, axis, choices, hint) -> ScheduleError:
    """Unpickle a ScheduleError (its keyword-only fields rule out a plain args tuple)."""
    return cls(primitive, stage, problem, axis=axis, choices=choices, hint=hint)
