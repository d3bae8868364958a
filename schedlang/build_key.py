"""build_key: what determines the code of a build, as a hashable key (build_cache.py says what
it holds); the in-memory cache keys modules by it, the disk cache (kernel_cache.py) files them
by its text."""
from __future__ import annotations

from typing import Hashable, Optional, Sequence

from .errors import ScheduleError
from .expr.functor import free_vars, substitute
from .expr.nodes import Var
from .schedule import Schedule
from .tensor.serialize import to_json


def target_key(target) -> Hashable:
    """The target itself, or its repr where it cannot be hashed."""
    try:
        hash(target)
        return target
    except TypeError:             # an unhashable target still has a complete repr
        return repr(target)


def build_key(s, args: Sequence, target, name: Optional[str]) -> Optional[Hashable]:
    """The cache key of building s with args for target, or None when the build cannot be
    keyed (an argument that is not a stage of s: the build itself will say why)."""
    # args are iterated once only here (build() needs them too); bad input is left to build().
    if not isinstance(s, Schedule) or not isinstance(args, (list, tuple)):
        return None
    try:
        arg_stages = tuple(("size", a.name) if isinstance(a, Var) else (s[a].name, a.value_index) for a in args)
        program = to_json([op.output(0) for op in s.user_outputs])
    except (ScheduleError, TypeError, ValueError):   # not a stage of s; a compute attr that is not JSON
        return None
    return (program, s.to_json(), predicates_key(s), arg_stages, target_key(target), name)


def predicates_key(s: Schedule) -> str:
    """The store predicates of s as text (they are expressions, not steps): each variable named
    by its stage and axis (axis names are unique within a stage only), or kept as it is (a
    thread axis's or a size variable)."""
    if all(st.store_predicate is None for st in s.stages):
        return ""
    owner = {}
    for st in s.stages:
        for a in st.all_iter_vars:
            owner.setdefault(id(a.var), f"{st.name}/{a.var.name}")
    texts = []
    for st in s.stages:
        if st.store_predicate is not None:
            named = {v: Var(owner[id(v)], v.dtype) for v in free_vars(st.store_predicate) if id(v) in owner}
            texts.append(f"{st.name}: {substitute(st.store_predicate, named)}")
    return "; ".join(texts)
