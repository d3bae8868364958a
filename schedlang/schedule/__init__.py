"""The schedule language: stages, loop primitives, dataflow primitives, and steps."""
from .schedule import SCOPES, Schedule, create_schedule  # noqa: F401
from .stage import Annotation, Stage  # noqa: F401
from . import steps  # noqa: F401
