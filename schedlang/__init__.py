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
                            var, size_var, cast)
from .tensor.intrin import (acos, acosh, asin, asinh, atan, atan2, atanh, call_pure_extern,  # noqa: F401
                            clz, copysign, cosh, exp10, fmod, hypot, indexdiv, indexmod, isfinite,
                            isinf, isnan, ldexp, log10, log1p, nearbyint, nextafter, popcount, sinh,
                            tan, truncdiv, truncmod, div, bitwise_and, bitwise_or, bitwise_xor,
                            bitwise_not, shift_left, shift_right, add, subtract, multiply)
from .tensor.reference import evaluate as reference  # noqa: F401
from .tensor.scan import scan  # noqa: F401
from .tensor.extern import call_packed, extern  # noqa: F401
from .tensor.intrin_calls import broadcast, call_extern, call_intrin, call_llvm_intrin, call_llvm_pure_intrin, reinterpret  # noqa: F401,E501
from .loop.tensor_intrin import decl_buffer, decl_tensor_intrin  # noqa: F401
from . import ir_builder  # noqa: F401
from .packed import get_global_func, register_func, remove_global_func  # noqa: F401

from .version import __version__  # noqa: F401,E402
from .schedule import Schedule, create_schedule  # noqa: F401,E402
from .schedule.tensorize import declared_intrin  # noqa: F401,E402
from .driver import build, load_module, lower  # noqa: F401,E402
from .lowered import LoweredFunc  # noqa: F401,E402
from .target import Backend, CUDAOptions, LLVMOptions, Target, get_backend, register_backend  # noqa: F401,E402
from .autoschedule import SearchTask, apply_best, auto_schedule, plot_tuning, print_best  # noqa: F401,E402
from . import auto_scheduler  # noqa: F401,E402 (TVM's names: `from schedlang import auto_scheduler`)
