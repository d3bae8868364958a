"""Which loops LLVM's loop vectorizer must leave alone (the !llvm.loop hints codegen.py adds).

LLVM 22.1 (llvmlite 0.50) miscompiles a loop whose memory index wraps its own induction
variable: `for f in 0..112: C[f] += B[k * 16 + f % 16]` inside a loop over k came out
reading B[k * 16 + 16 ..] for the second interleaved vector of each step (its address taken
as the first's plus the vector width, as if f % 16 did not wrap), so 48 of 112 outputs
were wrong. The pattern is what `fuse` leaves in a serial loop (the fused axis read back as
f // 16 and f % 16); a random schedule of a 7 x 16 x 5 int32 matmul found it
(tests/lowering/test_invariance.py).
LLVM's own report of the class: llvm/llvm-project#156849 ("Miscompile with masked IV").

Our vectorizer has already turned every loop a schedule vectorizes into vector code, so
LLVM's vectorizer only ever sees serial loops; on those whose Load/Store indices divide or
wrap their own variable (floordiv, floormod, their C forms, a mask or a shift) it is turned
off. Such a loop's accesses are not contiguous runs, so LLVM would gather or skip it anyway.
"""
from __future__ import annotations

from typing import Dict, List, Set

from ...expr.functor import free_vars, walk
from ...expr.nodes import Binary, Expr, Load, Var
from ...loop.functor import stmt_exprs, walk_stmts
from ...loop.nodes import Let, Store, Stmt

# Integer ops through which an induction variable stops being affine: the vectorizer's
# address analysis models some of them (a mask as a narrow wrapping recurrence) and got it wrong.
WRAPPING_OPS = frozenset({"floordiv", "floormod", "truncdiv", "truncmod", "bitand", "shr"})


def wrapped_loop_vars(body: Stmt) -> Set[Var]:
    """The variables that a memory index in body (directly, or through a Let bound in body)
    passes through a WRAPPING_OPS operation: for every loop nested in body, whether LLVM's
    vectorizer must leave it alone is whether its variable is in this set (a loop's variable
    is used only inside it), so one walk of the outermost loop answers for the whole nest."""
    lets: Dict[Var, Expr] = {}
    indices: List[Expr] = []
    seen: set = set()
    for s in walk_stmts(body):
        if isinstance(s, Let):
            lets[s.var] = s.value
            indices.append(s.value)
        if isinstance(s, Store):
            indices.extend(s.indices)
        for e in stmt_exprs(s):
            for n in walk(e, seen):
                if isinstance(n, Load):
                    indices.extend(n.indices)
    wrapped: Set[Var] = set()
    walked: set = set()
    for index in indices:
        for n in walk(index, walked):
            if isinstance(n, Binary) and n.op in WRAPPING_OPS:
                wrapped.update(free_vars(n.a))
    todo = [v for v in wrapped if v in lets]        # a Let's variable stands for what it is bound to
    while todo:
        for v in free_vars(lets[todo.pop()]):
            if v not in wrapped:
                wrapped.add(v)
                if v in lets:
                    todo.append(v)
    return wrapped
