"""serialize_vector_loops: on the c target a vectorized loop stays a plain loop, which the C
compiler vectorizes (-O3); its iterations are independent, so the order is free to change."""
from __future__ import annotations

from ...loop.functor import StmtMutator
from ...loop.nodes import SERIAL, VECTORIZED, For, Stmt


class _Serialize(StmtMutator):
    def visit_For(self, s: For) -> Stmt:
        body = self.visit(s.body)
        if s.kind == VECTORIZED:
            return For(s.var, s.extent, body, SERIAL, s.thread_tag, s.pragmas)
        return s.with_body(body)


def serialize_vector_loops(body: Stmt) -> Stmt:
    """The body with every vectorized loop made serial."""
    return _Serialize().visit(body)
