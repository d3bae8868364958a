"""TVM's tir.ir_builder, the part tensor intrinsics use: `ib = sl.ir_builder.create();
ib.emit(stmt_or_call); ib.get()` (loop/tensor_intrin.py)."""
from .loop.tensor_intrin import IRBuilder, create  # noqa: F401
