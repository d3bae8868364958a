"""Tensor IR: the algorithm language (placeholder, compute, reductions), its printer,
classification and reference evaluator."""
from .axis import IterVar, Range, reduce_axis, thread_axis  # noqa: F401
from .op import ComputeOp, Operation, PlaceholderOp, Tensor, TensorRead, compute, placeholder  # noqa: F401
from .reduce import CommReducer, Reduce, Reducer, comm_reducer  # noqa: F401
from .graph import post_order, consumers  # noqa: F401
from .classify import classify  # noqa: F401
from .printer import print_tensor_ir  # noqa: F401
from .reference import evaluate  # noqa: F401
from .scan import ScanOp, scan  # noqa: F401,E402
from .extern import ExternBuffer, ExternOp, PackedCall, call_packed, extern  # noqa: F401,E402
