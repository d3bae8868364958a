"""The schedule language: stages, loop primitives, dataflow primitives, and steps."""
from .schedule import SCOPES, Schedule, create_schedule  # noqa: F401
from .annotate import Annotation  # noqa: F401
from .stage import Stage  # noqa: F401
from . import steps  # noqa: F401
