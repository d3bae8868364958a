"""The auto-scheduler: search schedules by sketch rules and random annotation, measured in
worker processes, logged as JSON lines (see README.md, "Auto-scheduling")."""
from .api import apply_best, auto_schedule, check_against_reference, print_best  # noqa: F401
from .executor import LocalExecutor, WorkerError, phase  # noqa: F401
from .measure import Measurer  # noqa: F401
from .task import SearchTask  # noqa: F401
