"""Tensor intrinsics (TVM's te.decl_tensor_intrin and tir.decl_buffer): a small computation
declared with compute, and the statement that computes it on buffer handles.

    A = sl.placeholder((4,), "uint8", name="a"); B = ...; k = sl.reduce_axis((0, 4))
    C = sl.compute((16,), lambda j: sl.sum(A[k].astype("int32") * B[j, k].astype("int32"), axis=k))
    def intrin_func(ins, outs):          # DeclBuffers: vload/vstore/access_ptr/elem_offset/strides
        return outs[0].vstore([0], ...)  # or (body, reset, update) for a reduction
    dot = sl.decl_tensor_intrin(C.op, intrin_func, binds={B: sl.decl_buffer(..., strides=[s, 1])})

s[stage].tensorize(axis, dot) matches the loop nest under axis with the declared compute and
replaces it by the body, each handle bound to the region of the real buffer it stands for
(loop/tensorize.py). The body's accesses are in the handle's own coordinates: a flat element
offset computed with the handle's strides (Vars bound to the real strides, or dense).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple, Union

from ..dtypes import DType, dtype as parse_dtype
from ..expr.nodes import Buffer, Const, Expr, Load, Ramp, Var, as_expr, binary
from ..tensor.intrin_calls import address_of
from ..tensor.op import ComputeOp, Operation, PlaceholderOp, Tensor
from ..tensor.printer import print_tensor_ir
from ..tensor.reduce import Reduce
from .nodes import Evaluate, Seq, Stmt, Store, seq

@dataclass(frozen=True, eq=False)
class DeclBuffer:
    """A buffer handle of a tensor intrinsic (TVM's tir.decl_buffer): its shape and dtype, the
    memory scope it must live in, strides (ints, size Vars bound to the real buffer's strides,
    or None: dense), elem_offset (a Var bound to where the region starts, or an int) and
    offset_factor (the start must be a multiple of it, checked where it is static)."""

    shape: Tuple[int, ...]
    dtype: DType
    name: str
    scope: str = ""
    strides: Optional[Tuple[Union[int, Var], ...]] = None
    elem_offset: Union[int, Var] = None
    offset_factor: int = 1
    data: Buffer = field(default=None)      # the flat handle the body's loads and stores name

    def __post_init__(self):
        if self.data is None:
            size = 1
            for n in self.shape:
                size *= n
            object.__setattr__(self, "data", Buffer(self.name, (size,), self.dtype, self.scope or "global"))
        if self.elem_offset is None:
            object.__setattr__(self, "elem_offset", Var(f"{self.name}.elem_offset"))

    def stride_exprs(self) -> Tuple[Union[int, Var], ...]:
        """The strides the body computes offsets with: the declared ones, or dense."""
        if self.strides is not None:
            return self.strides
        out, step = [], 1
        for n in reversed(self.shape):
            out.append(step)
            step *= n
        return tuple(reversed(out))

    def offset_of(self, indices) -> Expr:
        """The flat element offset of indices in this handle (without elem_offset)."""
        indices = [as_expr(i) for i in (indices if isinstance(indices, (list, tuple)) else [indices])]
        if len(indices) != len(self.shape):
            raise ValueError(f"buffer '{self.name}' of shape {self.shape} is indexed with {len(indices)} indices")
        total: Expr = Const(0)
        for i, s in zip(indices, self.stride_exprs()):
            total = binary("add", total, binary("mul", i, s))
        return total

    def vload(self, begin, dtype=None) -> Load:
        """dtype's lanes of consecutive elements from begin (TVM's Buffer.vload)."""
        dt = self.dtype if dtype is None else parse_dtype(dtype)
        if dt.element() != self.dtype.element():
            raise TypeError(f"vload of {dt} from buffer '{self.name}' of {self.dtype}: the element types differ "
                            f"(reinterpret the loaded value instead)")
        offset = self.offset_of(begin)
        return Load(self.data, (offset if dt.lanes == 1 else Ramp(offset, Const(1), dt.lanes),))

    def vstore(self, begin, value) -> Store:
        """Store value (its lanes consecutive) at begin (TVM's Buffer.vstore)."""
        value = as_expr(value, self.dtype)
        offset = self.offset_of(begin)
        lanes = value.dtype.lanes
        return Store(self.data, (offset if lanes == 1 else Ramp(offset, Const(1), lanes),), value)

    def __getitem__(self, indices) -> Load:
        return self.vload(indices)

    def access_ptr(self, access_mask="rw", ptr_type="handle", content_lanes=1, offset=0) -> Expr:
        """The address of element `offset` (flat, from the region's start), for extern calls."""
        return address_of(Load(self.data, (as_expr(offset),)))


def decl_buffer(shape, dtype="float32", name: str = "buffer", data=None, strides=None, elem_offset=None,
                scope: str = "", data_alignment: int = -1, offset_factor: int = 0, **_ignored) -> DeclBuffer:
    """A buffer handle for tensor intrinsics' binds, as tvm.tir.decl_buffer."""
    shape = tuple(int(n) for n in (shape if isinstance(shape, (list, tuple)) else [shape]))
    if strides is not None:
        strides = tuple(s if isinstance(s, Var) else int(s) for s in strides)
        if len(strides) != len(shape):
            raise ValueError(f"decl_buffer '{name}': {len(strides)} strides for {len(shape)} dimensions")
    if elem_offset is not None and not isinstance(elem_offset, (int, Var)):
        raise TypeError(f"decl_buffer '{name}': elem_offset is an int or a Var, got {elem_offset!r}")
    return DeclBuffer(shape, parse_dtype(dtype), name, scope, strides, elem_offset, max(int(offset_factor), 1))


@dataclass(frozen=True, eq=False)
class TensorIntrin:
    """A declared intrinsic: the compute it performs (op), its inputs' and outputs' handles
    (buffers: inputs then outputs), and the statements computing it (reset and update for a
    reduction whose outer part stays in loops; None where not given). key names it in
    schedule steps: its name and a digest of everything above."""

    name: str
    op: ComputeOp
    inputs: Tuple[Tensor, ...]
    buffers: Tuple[DeclBuffer, ...]
    body: Stmt
    reset: Optional[Stmt]
    update: Optional[Stmt]
    key: str

    def __str__(self) -> str:
        return f"TensorIntrin({self.name})"


def _as_stmt(x, what: str, name: str) -> Optional[Stmt]:
    if x is None or isinstance(x, Stmt):
        return x
    if isinstance(x, Expr):
        return Evaluate(x)      # a call (call_extern) returned instead of emitted
    if isinstance(x, (list, tuple)):
        return seq(*(_as_stmt(y, what, name) for y in x))
    raise TypeError(f"decl_tensor_intrin '{name}': the {what} is a statement, a call or None, got {x!r}")


def decl_tensor_intrin(op: Operation, fcompute, name: str = "tensor_intrin", binds=None,
                       scalar_params=None, default_buffer_params=None) -> TensorIntrin:
    """A tensor intrinsic computing op (a compute over placeholders) with the statement
    fcompute(ins, outs) returns: a body, or (body, reset, update) for a reduction, built
    from the handles in ins and outs (binds: tensor -> decl_buffer; others dense)."""
    if isinstance(op, Tensor):
        op = op.op
    if not isinstance(op, ComputeOp) or op.num_outputs != 1:
        raise TypeError(f"decl_tensor_intrin '{name}': op is the single-output compute the intrinsic performs, "
                        f"got {op!r}")
    if scalar_params:
        raise ValueError(f"decl_tensor_intrin '{name}': scalar_params are not supported")
    inputs = tuple(op.input_tensors)
    for t in inputs:
        if not isinstance(t.op, PlaceholderOp):
            raise TypeError(f"decl_tensor_intrin '{name}': input '{t.op.name}' must be a placeholder")
    binds = dict(binds or {})
    extra = default_buffer_params or {}
    handles: List[DeclBuffer] = []
    for t in inputs + (op.output(0),):
        b = binds.get(t) or next((v for k, v in binds.items() if isinstance(k, Tensor) and k.op is t.op), None)
        if b is None:
            b = decl_buffer(t.shape, t.dtype, t.op.name, **extra)
        if not isinstance(b, DeclBuffer):
            raise TypeError(f"decl_tensor_intrin '{name}': binds[{t.op.name}] must come from decl_buffer, got {b!r}")
        if tuple(b.shape) != tuple(t.shape) or b.dtype != t.dtype:
            raise ValueError(f"decl_tensor_intrin '{name}': the buffer bound to '{t.op.name}' is "
                             f"{b.dtype}{list(b.shape)}, "
                             f"the tensor {t.dtype}{list(t.shape)}")
        handles.append(b)
    ins, outs = handles[:-1], handles[-1:]
    result = fcompute(ins, outs)
    if isinstance(result, tuple) and len(result) == 3:
        body, reset, update = (_as_stmt(x, w, name) for x, w in zip(result, ("body", "reset", "update")))
        if not isinstance(op.body, Reduce) and (reset is not None or update is not None):
            raise ValueError(f"decl_tensor_intrin '{name}': reset and update are for a reduction; {op.name} is none")
    else:
        body, reset, update = _as_stmt(result, "body", name), None, None
    if body is None and update is None:
        raise ValueError(f"decl_tensor_intrin '{name}': fcompute returned no statement")
    text = "\n".join([print_tensor_ir([op], [t.op for t in inputs] + [op]), str(body), str(reset),
                      str(update), repr([(b.name, b.shape, str(b.dtype), b.scope, b.strides, str(b.elem_offset),
                                          b.offset_factor) for b in handles])])
    key = f"{name}:{hashlib.sha256(text.encode()).hexdigest()[:16]}"
    return TensorIntrin(name, op, inputs, tuple(handles), body, reset, update, key)


class IRBuilder:
    """Statements in order (TVM's tir.ir_builder, the part intrinsics use): emit, get."""

    def __init__(self):
        self._stmts: List[Stmt] = []

    def emit(self, x) -> None:
        self._stmts.append(_as_stmt(x, "statement", "ir_builder"))

    def get(self) -> Stmt:
        return seq(*self._stmts) if self._stmts else Seq(())


def create() -> IRBuilder:
    """A new IR builder (tvm.tir.ir_builder.create())."""
    return IRBuilder()


def handle_vars(intrin: TensorIntrin) -> Dict[Var, DeclBuffer]:
    """The variables of the handles' declarations (strides, elem_offset) that binding replaces."""
    out: Dict[Var, DeclBuffer] = {}
    for b in intrin.buffers:
        for v in (b.elem_offset, *(b.strides or ())):
            if isinstance(v, Var):
                out[v] = b
    return out

