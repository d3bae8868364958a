"""Cooperative fetches: a stage whose buffer several threads of a block share, computed where
those threads all run it, gets its loops spread over them (TVM's cooperative fetch, which a
TVM schedule writes by hand: fuse the stage's loops, split by the block's threads, bind).

A shared stage covers the whole block (its region relaxes the thread loops around it), and an
argument computed at a block loop covers the block's part of the output: without this, every
thread of the block would run the whole nest and write every element (a write-write race).
The thread axes that the stage's own loops bind already, and (for an argument) the ones its
region is fixed in, are not used again; the others take the stage's outer data-parallel loops,
fused, `threadIdx.x` fastest so that consecutive threads touch consecutive elements:

    for ax0 in 0..8: for ax1 in 0..16: A.shared[ax0, ax1] = ...        (threads 4 x 16)
becomes
    bound[threadIdx.y] ax0.ax1.fused.ty in 0..4:
      bound[threadIdx.x] ax0.ax1.fused.tx in 0..16:
        for ax0.ax1.fused.outer in 0..2:
          A.shared[fused // 16, fused % 16] = ...

with fused = (outer * 4 + ty) * 16 + tx, and a guard fused < 128 where the threads do not divide
the elements. A stage with no such loop runs on thread 0 of those axes.

A stage in a thread's own (local) memory is the opposite case: every thread computes its copy,
over the elements that thread reads (the thread loops inside its attach point are bound around
its nest: bind_inner_threads), and none of its data-parallel loops may be bound to threadIdx.
"""
from __future__ import annotations

import math
from typing import Dict, List, Tuple

from ..expr.extent import ceil_div
from ..expr.functor import free_vars, substitute
from ..expr.nodes import Const, Expr, Var
from ..expr.simplify import simplify
from ..errors import ScheduleError
from ..schedule.annotate import BIND
from ..schedule.placement import FRAGMENT_SCOPES, enclosing_loops
from ..tensor.axis import REDUCE
from ..tensor.op import ComputeOp
from .functor import substitute_stmt
from .nodes import BOUND, SERIAL, For, IfThen, Stmt
from .plan import Program, StagePlan

THREAD_AXES = ("threadIdx.z", "threadIdx.y", "threadIdx.x")     # outermost first: x varies fastest

# TVM's storage and thread ranks: a buffer of scope rank r is shared by the threads of
# every thread axis of rank >= r, so a region it holds covers all of their iterations.
STORAGE_RANK = {"global": 0, "shared": 1, "warp": 2, "local": 3}
THREAD_RANK = {"blockIdx": 0, "threadIdx": 1, "vthread": 1}


def need_relax(thread_tag, scope: str) -> bool:
    """Whether an enclosing loop bound to thread_tag (None: not bound) is relaxed in the region
    of a stage stored in scope: a shared stage covers its whole block, a local one one thread."""
    if not thread_tag:
        return False
    return STORAGE_RANK.get(scope, 3) <= THREAD_RANK[thread_tag.split(".")[0]]


def block_threads(program: Program, extents) -> Dict[str, Dict[str, object]]:
    """Per root stage (one kernel): the extent of each threadIdx axis its stages bind."""
    by_name = program.by_name
    out: Dict[str, Dict[str, object]] = {}
    for p in program.plans:
        if p.is_input:
            continue
        axes = out.setdefault(_root(p, by_name).name, {})
        for a, ann in p.annotations:
            if ann.kind == BIND and ann.thread_tag in THREAD_AXES:
                axes.setdefault(ann.thread_tag, extents[p.name][a])
    return out


def idle_threads(plan: StagePlan, program: Program, by_root: Dict[str, Dict[str, object]]) -> List[Tuple[str, int]]:
    """(tag, extent) of the block's thread axes (by_root: block_threads) that would each run
    plan's whole nest into one buffer: none for a stage in a thread's own (local) memory, or
    outside GPU kernels."""
    by_name = program.by_name
    threads = by_root.get(_root(plan, by_name).name, {})
    if plan.attach_type != "at" or not isinstance(plan.op, ComputeOp):
        return []
    if plan.scope != "shared" and not plan.is_arg:
        check_private_binds(plan)
        return []
    used = {ann.thread_tag for _, ann in plan.annotations if ann.kind == BIND}
    if _warp_collective(plan):      # its intrinsic's calls are the warp's: the lanes are threadIdx.x
        used.add(THREAD_AXES[-1])
    # the enclosing thread loops whose iterations the region does not relax: each thread has its own part
    used |= {tag for tag in _path_tags(plan, by_name) if not need_relax(tag, plan.scope)}
    idle = [(tag, threads[tag]) for tag in THREAD_AXES if tag in threads and tag not in used]
    return idle if all(isinstance(e, int) for _, e in idle) else []     # symbolic: refused by the backend


def _warp_collective(plan: StagePlan) -> bool:
    """plan is tensorized with an intrinsic on a warp's fragments (scope warp, wmma.*): each call
    is made by the 32 lanes of a warp together (a tensor-core store from fragments to shared
    memory), so the stage is not spread over threadIdx.x nor run by one of its threads."""
    intrin = plan.tensorize[1] if plan.tensorize is not None else None
    return intrin is not None and any(getattr(b, "scope", "") in FRAGMENT_SCOPES for b in intrin.buffers)


def check_private_binds(plan: StagePlan) -> None:
    """A stage in a thread's own memory binds no data-parallel loop to threadIdx: each thread
    would compute only its share of its own copy, and read the rest unwritten."""
    for a, ann in plan.annotations:
        if ann.kind == BIND and ann.thread_tag in THREAD_AXES and a.kind != REDUCE:
            raise ScheduleError("bind", plan.name, f"is stored in {plan.scope} memory, of which each thread has its "
                                f"own copy; a loop bound to {ann.thread_tag} would leave each thread's copy filled "
                                "only at its own share of the elements", axis=a.name,
                                hint=f"store it in shared memory to fetch it cooperatively "
                                f"(s[{plan.name}].set_scope('shared'), or cache_read(..., 'shared')), or leave its "
                                "loops unbound: each thread then computes what it reads")


def distribute_over_threads(nest: Stmt, idle: List[Tuple[str, int]], name: str) -> Stmt:
    """nest with its outer serial loops fused and spread over the idle thread axes (see the
    module docstring); the guards among those loops move inside them."""
    if not idle:
        return nest
    loops, guards, kept, body = _outer_loops(nest)
    total = math.prod(e for _, e in loops)
    stem = ".".join(v.name for v, _ in loops) + ".fused" if loops else f"{name}.one"
    thread_vars = [(Var(f"{stem}.t{tag[-1]}"), tag, e) for tag, e in idle]
    count = math.prod(e for _, _, e in thread_vars)
    steps = ceil_div(total, count)
    step = Var(f"{stem}.outer")
    fused: Expr = step if steps > 1 else Const(0)
    for v, _, e in thread_vars:
        fused = fused * e + v
    fused = simplify(fused)
    values, stride = {}, total
    for v, e in loops:
        stride //= e
        values[v] = simplify(fused // stride % e if stride * e < total else fused // stride)
    conds = [substitute(g, values) for g in guards]
    if steps * count > total:
        conds.insert(0, fused < total)
    body = substitute_stmt(body, values)
    for c in reversed(conds):
        body = IfThen(simplify(c), body)
    if steps > 1:
        body = For(step, steps, body)
    for loop in reversed(kept):
        body = loop.with_body(body)
    for v, tag, e in reversed(thread_vars):
        body = For(v, e, body, BOUND, tag)
    return body


def _outer_loops(nest: Stmt) -> Tuple[List[Tuple[Var, int]], List[Expr], List[For], Stmt]:
    """The perfectly nested outer loops of a stage's nest: (serial loops as (var, extent), the
    guards met among them, the thread-bound loops kept in place, the body inside them all).
    Serial loops before a sequence are data-parallel (a reduction's loops follow its init)."""
    loops, guards, kept = [], [], []
    s = nest
    while True:
        if isinstance(s, For) and s.kind == SERIAL and isinstance(s.extent, int):
            loops.append((s.var, s.extent))
        elif isinstance(s, For) and s.kind == BOUND and s.thread_tag.startswith("threadIdx."):
            kept.append(s)
        elif isinstance(s, IfThen) and s.else_body is None:
            guards.append(s.cond)
            s = s.then_body
            continue
        else:
            return loops, guards, kept, s
        s = s.body


def bind_inner_threads(nest: Stmt, plan: StagePlan, program: Program, region_starts, ranges) -> Stmt:
    """nest of a stage in a thread's own memory inside loops bound to the thread axes that its
    region is fixed in but that run inside its attach point (a local stage at threadIdx.y read
    inside threadIdx.x holds one thread's elements): each such axis bound around the nest, so
    that each thread computes its own part."""
    by_name = program.by_name
    tags = _thread_axis_tags(program)
    around = set(map(id, _path_vars(plan, by_name)))
    inner = []
    for start in region_starts:
        for v in free_vars(start):
            if v in tags and id(v) not in around and all(v is not w for w in inner):
                inner.append(v)
    if not inner:
        return nest
    fresh = {v: Var(v.name, v.dtype) for v in inner}
    nest = substitute_stmt(nest, fresh)
    for v in sorted(inner, key=lambda v: THREAD_AXES.index(tags[v]), reverse=True):   # x innermost
        nest = For(fresh[v], ranges[v][1] + 1, nest, BOUND, tags[v])
    return nest


def _thread_axis_tags(program: Program) -> Dict[Var, str]:
    """Loop variable -> threadIdx tag of every loop of the program bound to a thread axis (found
    once per program: bind_inner_threads asks for every stage computed at a loop)."""
    tags = program.__dict__.get("_thread_axis_tags")
    if tags is None:
        tags = program.__dict__["_thread_axis_tags"] = {
            a.var: ann.thread_tag for p in program.plans for a, ann in p.annotations
            if ann.kind == BIND and ann.thread_tag in THREAD_AXES}
    return tags


def attach_path(plan: StagePlan, by_name) -> List[Tuple[StagePlan, object]]:
    """(stage, leaf) of the loops around the point where plan is computed, outermost first
    (by_name: stage name -> plan)."""
    return enclosing_loops(plan, lambda p: by_name[p.attach_stage], lambda p: p.leaves)


def _path_vars(plan: StagePlan, by_name) -> List[Var]:
    return [a.var for _, a in attach_path(plan, by_name)]


def _path_tags(plan: StagePlan, by_name) -> List[str]:
    """The thread tags of the loops around the point where plan is computed."""
    return [ann.thread_tag for p, a in attach_path(plan, by_name) for ann in [p.annotation(a)]
            if ann is not None and ann.kind == BIND]


def _root(plan: StagePlan, by_name) -> StagePlan:
    while plan.attach_type == "at":
        plan = by_name[plan.attach_stage]
    return plan
