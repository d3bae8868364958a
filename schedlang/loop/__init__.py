"""Loop IR: explicit loop nests, loads, stores and reductions (shared statement nodes)."""
from .nodes import *  # noqa: F401,F403
from .printer import print_func  # noqa: F401
from .lower import lower_to_loop_ir  # noqa: F401
