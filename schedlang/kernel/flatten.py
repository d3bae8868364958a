"""flatten_buffers: multi-dimensional buffer accesses become one flat index."""
from __future__ import annotations

from ..expr.functor import rewrite_post_order
from ..expr.nodes import Buffer, Const, Expr, Load, binary
from ..loop.functor import StmtMutator
from ..loop.nodes import Stmt, Store


def flat_index(buffer: Buffer, indices) -> Expr:
    strides = buffer.dense_strides()
    total = None
    for i, s in zip(indices, strides):
        if isinstance(i, Const) and i.value == 0 and total is None:
            continue        # a vector index after zeros (a tensorized access) stays a ramp
        if isinstance(s, Expr):     # a symbolic stride
            term = binary("mul", i, s)
        else:
            term = i if s == 1 else binary("mul", i, Const(s, i.dtype))
        total = term if total is None else binary("add", total, term)
    return total if total is not None else Const(0)


class _Flatten(StmtMutator):
    def visit_expr(self, e: Expr) -> Expr:
        def post(node: Expr) -> Expr:
            if isinstance(node, Load):
                return Load(node.buffer, (flat_index(node.buffer, node.indices),), node.predicate)
            return node
        return rewrite_post_order(e, post)

    def visit_Store(self, s: Store) -> Stmt:
        value = self.visit_expr(s.value)
        pred = None if s.predicate is None else self.visit_expr(s.predicate)
        idx = tuple(self.visit_expr(i) for i in s.indices)
        return Store(s.buffer, (flat_index(s.buffer, idx),), value, pred)


def flatten_buffers(body: Stmt) -> Stmt:
    return _Flatten().visit(body)
