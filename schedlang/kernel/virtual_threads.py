"""inject_virtual_threads: loops bound to vthread run inside each GPU thread, one virtual
thread after another, at the place of the loop (never as a launch axis).

This is the plain form of TVM's InjectVirtualThread: every virtual thread runs the whole
loop body, so a shared tile fetched inside it (its region covers all virtual threads: they
share the block's memory) is fetched once per virtual thread, and a barrier inside it runs
once per virtual thread in every thread of the block alike. TVM also hoists the statements
that do not depend on the virtual thread out of the loop and interleaves the rest; we do
not yet.
"""
from __future__ import annotations

from ..loop.functor import StmtMutator
from ..loop.nodes import BOUND, SERIAL, For, Stmt


class _SerialVirtualThreads(StmtMutator):
    def visit_For(self, s: For) -> Stmt:
        body = self.visit(s.body)
        if s.kind == BOUND and s.thread_tag == "vthread":
            return For(s.var, s.extent, body, SERIAL, "", s.pragmas)
        return s.with_body(body)


def inject_virtual_threads(body: Stmt) -> Stmt:
    """The body with every vthread loop a serial loop in place."""
    return _SerialVirtualThreads().visit(body)
