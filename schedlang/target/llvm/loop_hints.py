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

from ...expr.functor import free_vars, walk
from ...expr.nodes import Binary, Load, Var
from ...loop.functor import stmt_exprs, walk_stmts
from ...loop.nodes import Let, Store, Stmt

# Integer ops through which an induction variable stops being affine: the vectorizer's
# address analysis models some of them (a mask as a narrow wrapping recurrence) and got it wrong.
WRAPPING_OPS = frozenset({"floordiv", "floormod", "truncdiv", "truncmod", "bitand", "shr"})


def wraps_induction(body: Stmt, var: Var) -> bool:
    """Whether a memory index in body (directly, or through a Let bound in body) applies a
    WRAPPING_OPS operation to an expression of the loop variable var."""
    tainted = {var}
    indices = []
    seen: set = set()
    for s in walk_stmts(body):              # parents first: a Let before the statements that use it
        if isinstance(s, Let):
            if _mentions(s.value, tainted):
                tainted.add(s.var)
            indices.append(s.value)
        if isinstance(s, Store):
            indices.extend(s.indices)
        for e in stmt_exprs(s):
            for n in walk(e, seen):
                if isinstance(n, Load):
                    indices.extend(n.indices)
    walked: set = set()
    for index in indices:
        for n in walk(index, walked):
            if isinstance(n, Binary) and n.op in WRAPPING_OPS and _mentions(n.a, tainted):
                return True
    return False


def _mentions(e, names: set) -> bool:
    return any(v in names for v in free_vars(e))
