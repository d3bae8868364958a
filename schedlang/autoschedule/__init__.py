"""The auto-scheduler: sketch rules and random annotation, evolved under a learned cost model
on Tile IR features, measured in worker processes, logged as JSON lines (see README.md,
"Auto-scheduling")."""
from .api import OtherCPUWarning, apply_best, auto_schedule, check_against_reference, print_best  # noqa: F401
from .cost_model import CostModel  # noqa: F401
from .executor import LocalExecutor, WorkerError, phase  # noqa: F401
from .measure import Measurer  # noqa: F401
from .plot import plot_tuning, tuning_curves  # noqa: F401
from .search import SearchPolicy  # noqa: F401
from .task import SearchTask  # noqa: F401
