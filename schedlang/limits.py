"""Limits on the size of programs: how deep an expression may nest.

Every pass walks expressions recursively, a few Python frames per level, and Python
stops at 1,000 frames: a chain of ~300 additions was the deepest that lowered. A compute
body deeper than MAX_EXPR_DEPTH is refused when it is defined, with the depth named;
deeper expressions that only appear during lowering (producers inlined into consumers
compose their depths) end the build with a LoweringError instead of a RecursionError.
"""
from __future__ import annotations

import contextlib
from typing import Iterator

from .errors import LoweringError
from .expr.functor import children

MAX_EXPR_DEPTH = 256
INT32_MAX = 2**31 - 1     # loop variables, indices and split factors are int32


def expr_depth(e) -> int:
    """Nodes on the longest path from e to a leaf (iteratively, once per distinct node)."""
    depth, stack = {}, [(e, False)]
    while stack:
        node, done = stack.pop()
        if done:
            depth[id(node)] = 1 + max((depth[id(c)] for c in children(node)), default=0)
        elif id(node) not in depth:
            depth[id(node)] = 0     # in progress
            stack.append((node, True))
            stack.extend((c, False) for c in children(node) if id(c) not in depth)
    return depth[id(e)]


def check_expr_depth(what: str, e) -> None:
    """ValueError when e nests deeper than MAX_EXPR_DEPTH."""
    d = expr_depth(e)
    if d > MAX_EXPR_DEPTH:
        raise ValueError(f"{what}: the expression is nested {d} levels deep; schedlang lowers at most "
                         f"{MAX_EXPR_DEPTH} (MAX_EXPR_DEPTH). Sum many terms with sl.sum over a reduce_axis, "
                         "or split the expression over several computes (and do not inline all of them)")


@contextlib.contextmanager
def recursion_guard(stage: str) -> Iterator[None]:
    """Turn a RecursionError from a too deeply nested expression into a LoweringError."""
    try:
        yield
    except RecursionError:
        raise LoweringError(stage, "an expression nests too deeply to lower (Python's recursion limit was "
                            f"reached); keep expressions under {MAX_EXPR_DEPTH} levels, also after inlining "
                            "(compute_root some of the inlined stages)") from None
