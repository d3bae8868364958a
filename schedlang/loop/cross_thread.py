"""The Tile IR of a cross-thread reduction: a reduce axis bound to threadIdx.x (TVM's
MakeCrossThreadReduction).

Each thread of the bound loop reduces its share of the other reduce loops into a local
partial, a ThreadAllReduce combines the partials of the loop's threads (the GPU backend
lowers it to warp shuffles and shared memory), and one thread stores the result: the one
with the bound variable 0, or where the stage's store predicate holds
(set_store_predicate). The whole of it runs inside the bound loop, which is what every
thread of the block executes.
"""
from __future__ import annotations

from dataclasses import replace
from typing import List, Optional

from ..errors import ScheduleError
from ..expr.functor import free_vars, substitute, uses_var
from ..expr.nodes import Buffer, Const, Expr, Load
from ..schedule.annotate import BIND
from ..tensor.axis import REDUCE, IterVar
from .nodes import Allocate, IfThen, Stmt, Store, ThreadAllReduce, seq


def thread_reduce_leaf(plan) -> Optional[IterVar]:
    """The reduce leaf of plan bound to a thread axis, if any."""
    bound = [a for a in plan.leaves if a.kind == REDUCE and plan.annotation(a) is not None
             and plan.annotation(a).kind == BIND]
    if len(bound) > 1:
        raise ScheduleError("bind", plan.name, "more than one reduce axis is bound to a thread axis; a cross-thread "
                            "reduction runs over one", axis=bound[1].name, hint="fuse the reduce axes first")
    return bound[0] if bound else None


def _store_condition(plan, t: IterVar) -> Optional[Expr]:
    """Who stores the result: where the store predicate holds (its thread axes, such as
    thread_axis("threadIdx.x")'s variable, read as the loops bound to them); without one, every
    thread into its own local buffer, and the thread with t == 0 into shared or global memory."""
    pred = plan.store_predicate
    if pred is None:
        return None if plan.scope == "local" and not plan.is_arg else t.var == 0
    return with_bound_threads(plan, pred)


def with_bound_threads(plan, pred: Expr) -> Expr:
    """pred with each thread axis's variable (thread_axis("threadIdx.x").var, named by its tag)
    read as the loop of plan bound to that axis."""
    by_tag = {plan.annotation(a).thread_tag: a.var for a in plan.leaves
              if plan.annotation(a) is not None and plan.annotation(a).kind == BIND}
    mapping = {v: by_tag[v.name] for v in free_vars(pred) if v.name in by_tag}
    return substitute(pred, mapping) if mapping else pred


def cross_thread_nest(builder, plan, body, buffers: List[Buffer], store_idx, vmap, guards: List[Expr]) -> Stmt:
    t = thread_reduce_leaf(plan)
    tag = plan.annotation(t).thread_tag
    if tag != "threadIdx.x":
        raise ScheduleError("bind", plan.name, f"a reduce axis is bound to {tag}; a cross-thread reduction runs "
                            "over threadIdx.x (consecutive threads of a warp)", axis=t.name,
                            hint="bind the reduce axis to threadIdx.x and the data-parallel one to threadIdx.y")
    leaves = list(plan.leaves)
    first = next(i for i, a in enumerate(leaves) if a.kind == REDUCE)
    outer, inner = leaves[:first], leaves[first:]
    late = [a.name for a in inner if a.kind != REDUCE]
    if late:
        raise ScheduleError("bind", plan.name, f"data-parallel loop '{late[0]}' runs inside the reduce loops; a "
                            "cross-thread reduction needs every data-parallel loop outside them", axis=t.name,
                            hint="reorder the stage's loops: data-parallel ones first")
    ext = builder.extents[plan.name]
    partials = [Buffer(f"{b.name}.red", (1,), b.dtype, "local") for b in buffers]    # one per value (argmax: 2)
    # every thread's partial starts from the identity; init= joins once, in the result
    update, init = builder.reduction_update(plan, replace(body, init=()), partials, (Const(0),), vmap)
    pos = {a.var: i for i, a in enumerate(leaves)}

    def depth(g: Expr) -> int:
        return max((pos[v] for v in pos if uses_var(g, v)), default=-1)

    inner_guards = [g for g in guards if depth(g) >= first]
    outer_guards = [g for g in guards if depth(g) < first]
    update_nest = builder.nest(plan, [a for a in inner if a is not t], update, inner_guards, attach=True)
    results = [Load(p, (Const(0),)) for p in partials]
    if body.init:
        comb = body.combiner
        starts = [builder.lower_reads(substitute(x, vmap)) for x in body.init]
        env = {**dict(zip(comb.lhs, starts)), **dict(zip(comb.rhs, results))}
        results = [substitute(r, env) for r in comb.result]
    store = seq(*(Store(b, store_idx, r) for b, r in zip(buffers, results)))
    who = _store_condition(plan, t)
    store = store if who is None else IfThen(who, store)
    threads = seq(init, update_nest, ThreadAllReduce(tuple(partials), body.combiner, t.var, ext[t], tag), store)
    loop = builder.loop(plan, t, threads, attach=True)     # with the stages computed at t (an rfactor stage)
    for p in reversed(partials):
        loop = Allocate(p, loop)
    return builder.nest(plan, outer, loop, outer_guards, attach=True)
