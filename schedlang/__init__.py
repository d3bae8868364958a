"""schedlang: a tensor compiler with a TVM-style schedule language.

Write what to compute with placeholder/compute/reduce_axis, how with a schedule,
and build it for the CPU (LLVM) — see README.md and tutorials/.
"""
from .dtypes import DType, dtype  # noqa: F401
from .errors import InternalError, LoweringError, ScheduleError  # noqa: F401
from .expr.nodes import Expr, Var  # noqa: F401
from .tensor import (IterVar, Range, Tensor, comm_reducer, compute, placeholder,  # noqa: F401
                     reduce_axis, thread_axis)
from .tensor.intrin import (abs, all, any, ceil, cos, const, erf, exp, exp2, floor, floordiv,  # noqa: F401
                            floormod, if_then_else, log, log2, max, max_value, min, min_value, pow,
                            power, prod, round, rsqrt, select, sigmoid, sin, sqrt, sum, tanh, trunc,
                            var, cast)
from .tensor.reference import evaluate as reference  # noqa: F401
from .tensor.scan import scan  # noqa: F401
from .tensor.extern import call_packed, extern  # noqa: F401
from .packed import get_global_func, register_func, remove_global_func  # noqa: F401

__version__ = "0.1.0"
from .schedule import Schedule, create_schedule  # noqa: F401,E402
from .driver import build, lower  # noqa: F401,E402
from .target.target import Target  # noqa: F401,E402
