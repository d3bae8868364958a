"""unique_loop_names: give every distinct loop variable of a function its own name, so
printed IR never shows two different loops called `i` (the second becomes `i_1`)."""
from __future__ import annotations

from typing import Dict

from ..expr.nodes import Var
from .functor import StmtMutator, substitute_stmt, walk_stmts
from .nodes import For, Func, ThreadAllReduce


def unique_loop_names(func: Func) -> Func:
    renamed: Dict[Var, Var] = {}
    taken: Dict[str, int] = {}
    for s in walk_stmts(func.body):
        if isinstance(s, For) and s.var not in renamed:
            name = s.var.name
            count = taken.get(name, 0)
            taken[name] = count + 1
            renamed[s.var] = s.var if count == 0 else Var(f"{name}_{count}", s.var.dtype)
    mapping = {old: new for old, new in renamed.items() if old is not new}
    if not mapping:
        return func
    body = substitute_stmt(func.body, mapping)
    body = _rename_loops(body, mapping)
    return Func(func.name, func.params, body)


def _rename_loops(s, mapping):

    class _Loops(StmtMutator):
        def visit_For(self, f: For):
            body = self.visit(f.body)
            var = mapping.get(f.var, f.var)
            if var is f.var and body is f.body:
                return f
            return For(var, f.extent, body, f.kind, f.thread_tag, f.pragmas)

        def visit_ThreadAllReduce(self, r: ThreadAllReduce):
            # it names the thread loop it combines over: the renamed loop's variable
            var = mapping.get(r.var, r.var)
            return r if var is r.var else ThreadAllReduce(r.buffers, r.combiner, var, r.extent, r.thread_tag)

    return _Loops().visit(s)
