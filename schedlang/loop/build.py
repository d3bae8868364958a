"""build_func: turn stage plans plus the region each stage computes into one function of
loop nests (Loop IR from loop/plan.py: plain_snapshot's plans, Tile IR from scheduled_snapshot's).

For each stage: loops over its leaf axes, root indices rebuilt from them, guards where
a split overshoots or a region leaves the stage's domain, reduction init placed just
outside the first reduction loop, and stages attached by compute_at emitted at the
start of their loop's body inside their own allocation.
"""
from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

from ..errors import ScheduleError
from ..expr.bounds import const_bounds
from ..expr.functor import free_vars, rewrite_post_order, substitute, uses_var
from ..expr.equality import key
from ..expr.nodes import FAST_MATH_MARKER, Buffer, Call, Const, Expr, Load, Var, binary, logical
from ..expr.simplify import simplify
from ..schedule.relations import SplitRel, pass_down_extents, pass_up_values, split_overshoots
from ..schedule.annotate import BIND, PARALLEL, UNROLL, VECTORIZE
from ..tensor.axis import REDUCE, IterVar
from ..tensor.op import ComputeOp, TensorRead
from ..tensor.reduce import Reduce
from .nodes import (BOUND, PARALLEL as K_PARALLEL, PREFETCH, SERIAL, UNROLLED, VECTORIZED, Allocate, For, Func,
                    IfThen, Let, StageNest, Stmt, Store, seq)
from .plan import Program, StagePlan
from .shared_nests import SharedNests
from . import cooperative, cross_thread
from .tensorize import tensorized_nest
from . import scan as scan_lowering
from ..tensor.extern import ExternOp
from ..tensor.op import output_name as tensor_output_name
from ..tensor.scan import ScanOp

Region = List[Tuple[Expr, int]]     # per root axis: (min, extent)
_KIND = {UNROLL: UNROLLED, VECTORIZE: VECTORIZED, PARALLEL: K_PARALLEL, BIND: BOUND}


def full_region(plan: StagePlan) -> Region:
    return [(Const(a.dom.min), a.dom.extent) for a in plan.roots]


def loop_extents(plan: StagePlan, region: Region) -> Dict[IterVar, int]:
    """Trip counts of every axis of a stage (its loops included) over the given region."""
    return pass_down_extents({a: e for a, (_, e) in zip(plan.roots, region)}, plan.relations)


def output_name(plan: StagePlan, index: int = 0) -> str:
    """The buffer name of output index of a stage: the stage's name, or '<name>.v<index>'
    when its op has several outputs (TVM's tensor names)."""
    return tensor_output_name(plan.name, index, plan.op.num_outputs)


def make_buffer(plan: StagePlan, region: Region, index: int = 0) -> Buffer:
    """The buffer a stage writes (output index of its op): its full shape for arguments,
    its region (what its readers need) for temporaries."""
    op = plan.op
    ndim = len(op.output_shape(index))
    whole = plan.is_arg or plan.is_input or not isinstance(op, ComputeOp)   # scan, extern: whole buffers
    shape = tuple(op.output_shape(index)) if whole else tuple(e for _, e in region[:ndim])
    strides = None
    if plan.storage_aligns:
        if plan.is_arg:
            raise ScheduleError("storage_align", plan.name, "is a function argument, whose layout is fixed by the caller",
                                hint="storage_align a cache stage instead")
        aligns = dict(plan.storage_aligns)
        out, step = [1] * ndim, 1
        for d in reversed(range(ndim)):
            if d in aligns:
                factor, offset = aligns[d]
                step = step + ((offset - step) % factor)
            out[d] = step
            step *= shape[d]
        strides = tuple(simplify(x) if isinstance(x, Expr) else x for x in out)   # symbolic shapes
    return Buffer(output_name(plan, index), shape, op.output_dtype(index), "global" if plan.is_arg else plan.scope,
                  strides)


class _FuncBuilder:
    def __init__(self, program: Program, regions: Dict[str, Region]):
        self.program = program
        self.regions = regions
        self.buffers: Dict[str, Buffer] = {}
        self.offsets: Dict[str, List[Expr]] = {}
        for p in program.plans:
            region = regions[p.name] if not p.is_input else [(Const(0), n) for n in p.op.shape]
            for i in range(p.op.num_outputs):
                self.buffers[output_name(p, i)] = make_buffer(p, region, i)
            ndim = len(p.op.shape)
            temp = not p.is_arg and not p.is_input and isinstance(p.op, ComputeOp)
            self.offsets[p.name] = [m for m, _ in region[:ndim]] if temp else [Const(0)] * ndim
        for p in program.plans:     # scan init/update/state stages share the scan's result buffers
            if p.buffer_key is not None:
                self.buffers[p.name] = self.buffers[p.buffer_key]
                self.offsets[p.name] = [Const(0)] * len(p.op.shape)
        self.extents = {p.name: loop_extents(p, regions[p.name]) for p in program.plans if not p.is_input}
        # Every loop variable of the function with its range: the domain checks reason over
        # the loops of enclosing stages too.
        self.loop_ranges = {a.var: (0, self.extents[p.name][a] - 1)
                            for p in program.plans if not p.is_input for a in p.leaves}
        self.block_threads = cooperative.block_threads(program, self.extents)    # GPU kernels' threadIdx extents
        self.children: Dict[Tuple[str, int], List[StagePlan]] = {}
        for p in program.plans:
            if p.attach_type == "at":
                self.children.setdefault((p.attach_stage, id(p.attach_ivar)), []).append(p)
        self.param_ids = set(map(id, self.params()))     # allocate asks per stage

    # -- expressions --------------------------------------------------------------------
    def lower_reads(self, e: Expr) -> Expr:
        def post(node: Expr) -> Expr:
            if isinstance(node, TensorRead):
                src = self.program.producer(node)
                offs = self.offsets[src.name]
                idx = tuple(i if (isinstance(o, Const) and o.value == 0) else binary("sub", i, o)
                            for i, o in zip(node.indices, offs))
                return Load(self.buffers[output_name(src, node.tensor.value_index)], idx)
            return node
        return rewrite_post_order(e, post)

    # -- one stage ----------------------------------------------------------------------
    def stage_nest(self, plan: StagePlan) -> Stmt:
        if isinstance(plan.op, ScanOp):      # the scan loop; its cell is computed at it
            return self.nest(plan, list(plan.leaves), seq(), [], attach=True)
        if isinstance(plan.op, ExternOp):
            return scan_lowering.extern_call(plan, self.program, self.buffers)
        op: ComputeOp = plan.op
        region = self.regions[plan.name]
        roots = plan.roots
        ext = self.extents[plan.name]
        rel = pass_up_values({a: a.var for a in plan.leaves}, plan.relations, ext)
        ranges = {a.var: (0, ext[a] - 1) for a in plan.leaves}
        value = {a: simplify(binary("add", m, rel[a]), ranges) for a, (m, _) in zip(roots, region)}
        vmap = {a.var: value[a] for a in roots}
        buffers = [self.buffers[output_name(plan, i)] for i in range(op.num_outputs)]
        offs = self.offsets[plan.name]
        store_idx = tuple(simplify(binary("sub", value[a], o), ranges) for a, o in zip(op.axis, offs))

        guards = self.guards(plan, roots, region, rel, value, ext, ranges)
        if plan.tensorize is not None:          # the loops under an axis computed by an intrinsic
            return tensorized_nest(self, plan, value, ranges, buffers, store_idx, vmap, guards)
        body = op.body
        if isinstance(body, Reduce) and cross_thread.thread_reduce_leaf(plan) is not None:
            # a reduce axis bound to threadIdx.x; its store predicate says who stores the result
            return cross_thread.cross_thread_nest(self, plan, body, buffers, store_idx, vmap, guards)
        if plan.store_predicate is not None:      # placed, as every guard, inside the deepest loop it names
            guards = guards + [self.store_predicate(plan)]
        if isinstance(body, Reduce):
            update, init = self.reduction_update(plan, body, buffers, store_idx, vmap)
            return self.reduction_nest(plan, update, init, guards)
        return self.nest(plan, list(plan.leaves), self.plain_stores(plan, buffers, store_idx, vmap), guards, attach=True)

    def plain_stores(self, plan: StagePlan, buffers: List[Buffer], store_idx, vmap) -> Stmt:
        """The stores of one element of a stage that is not a reduction."""
        return seq(*(Store(b, store_idx, _fast_math_marked(plan, self.lower_reads(substitute(e, vmap))))
                     for b, e in zip(buffers, plan.op.bodies)))

    def store_predicate(self, plan: StagePlan) -> Expr:
        """The stage's store predicate, its thread-axis variables read as the stage's loops bound
        to them; every other variable must be one of the loops around its stores (its own, or
        those of the stages it is computed inside)."""
        pred = cross_thread.with_bound_threads(plan, plan.store_predicate)
        loops = {id(a.var) for a in plan.leaves} | {id(a.var) for _, a in cooperative.attach_path(plan, self.program.by_name)}
        axes = {id(a.var) for p in self.program.plans if not p.is_input for a in _iter_vars(p)}
        outside = [v.name for v in free_vars(pred) if id(v) in axes and id(v) not in loops]   # (size variables pass)
        if outside:
            raise ScheduleError("set_store_predicate", plan.name, f"the predicate '{pred}' reads {', '.join(outside)}, "
                                "which is not a loop around the stage's stores",
                                hint="use the stage's own loop variables (ax.var) or those of the loops it is "
                                "computed inside")
        return pred

    def reduction_update(self, plan: StagePlan, body: Reduce, buffers: List[Buffer], store_idx,
                         vmap) -> Tuple[Stmt, Stmt]:
        """The update and the init statements of a reduction with one buffer per value. A
        tuple reduction binds every new value before storing any (each reads all old ones)."""
        comb = body.combiner
        sources = [self.lower_reads(substitute(x, vmap)) for x in body.source]
        env = {lhs: Load(b, store_idx) for lhs, b in zip(comb.lhs, buffers)}
        env.update(zip(comb.rhs, sources))
        combined = [_fast_math_marked(plan, substitute(r, env)) for r in comb.result]
        if len(buffers) == 1:
            update: Stmt = Store(buffers[0], store_idx, combined[0])
        else:
            temps = [Var(f"{b.name}.new", b.dtype) for b in buffers]
            update = seq(*(Store(b, store_idx, t) for b, t in zip(buffers, temps)))
            for t, value in reversed(list(zip(temps, combined))):
                update = Let(t, value, update)
        if body.condition is not None:
            update = IfThen(self.lower_reads(substitute(body.condition, vmap)), update)
        starts = [self.lower_reads(substitute(x, vmap)) for x in body.init] if body.init else comb.identity
        init = seq(*(Store(b, store_idx, x) for b, x in zip(buffers, starts)))
        return update, init

    def guards(self, plan, roots, region, rel, value, ext, ranges) -> List[Expr]:
        """Conditions under which an iteration computes a real element of the stage.

        A split whose parts cover more than its parent overshoots; the parent's value is
        guarded once, and the root checks below reason from that guard (through a proxy
        variable with the parent's true range) instead of repeating it."""
        out: List[Expr] = []
        overshoot = [r for r in plan.relations if isinstance(r, SplitRel) and split_overshoots(r, ext)]
        proxies = {r.parent: Var(r.parent.name + ".guarded") for r in overshoot}
        out += [rel[r.parent] < ext[r.parent] for r in overshoot]
        seeded = {a: a.var for a in plan.leaves}
        seeded.update(proxies)
        proxy_rel = pass_up_values(seeded, plan.relations, ext, stop=set(proxies))
        proxy_ranges = dict(ranges)
        proxy_ranges.update({v: (0, ext[a] - 1) for a, v in proxies.items()})
        all_ranges = {**self.loop_ranges, **proxy_ranges}
        for a, (m, extent) in zip(roots, region):
            if a not in proxies:
                if not isinstance(extent, int):
                    if not _proved(proxy_rel[a] < extent, proxy_ranges):
                        out.append(rel[a] < extent)
                else:
                    hi = const_bounds(simplify(proxy_rel[a], proxy_ranges), proxy_ranges)[1]
                    if hi is None or hi >= extent:
                        out.append(rel[a] < extent)
            proxy_value = simplify(binary("add", m, proxy_rel[a]), proxy_ranges)
            vlo, vhi = const_bounds(proxy_value, all_ranges)
            dom = a.dom
            if vlo is None or vlo < dom.min:
                out.append(value[a] >= dom.min)
            if not isinstance(dom.extent, int):
                if not _proved(proxy_value < dom.min + dom.extent, all_ranges):
                    out.append(value[a] < dom.min + dom.extent)
            elif vhi is None or vhi >= dom.min + dom.extent:
                out.append(value[a] < dom.min + dom.extent)
        unique: Dict[object, Expr] = {}
        for g in out:
            g = simplify(g, ranges)
            unique.setdefault(key(g), g)
        return [g for g in unique.values() if not (isinstance(g, Const) and g.value)]

    def reduction_nest(self, plan: StagePlan, update: Stmt, init: Stmt, guards: List[Expr],
                       loops: Sequence[IterVar] = None) -> Stmt:
        """The loops (by default all the stage's) with the init just outside the first reduction loop."""
        leaves = list(plan.leaves if loops is None else loops)
        first = next(i for i, a in enumerate(leaves) if a.kind == REDUCE)
        outer, inner = leaves[:first], leaves[first:]
        pos = {a.var: i for i, a in enumerate(leaves)}

        def depth(g: Expr) -> int:
            return max((pos[v] for v in pos if uses_var(g, v)), default=-1)

        inner_guards = [g for g in guards if depth(g) >= first]
        outer_guards = [g for g in guards if depth(g) < first]
        init_loops = [a for a in inner if a.kind != REDUCE]
        init_guards = [g for g in inner_guards if all(not uses_var(g, a.var) for a in inner if a.kind == REDUCE)]
        init_nest = self.nest(plan, init_loops, init, init_guards, attach=False)
        update_nest = self.nest(plan, inner, update, inner_guards, attach=True)
        return self.nest(plan, outer, seq(init_nest, update_nest), outer_guards, attach=True)

    def nest(self, plan: StagePlan, loops: Sequence[IterVar], inner: Stmt, guards: List[Expr], attach: bool) -> Stmt:
        """Loops around inner, each guard just inside the deepest loop it mentions, and the
        stages computed at each loop at the start of its body."""
        levels: Dict[int, List[Expr]] = {}
        for g in guards:
            lvl = max((i for i, a in enumerate(loops) if uses_var(g, a.var)), default=-1)
            levels.setdefault(lvl, []).append(g)
        body = inner
        for i in reversed(range(len(loops))):
            a = loops[i]
            body = self.loop(plan, a, _guarded(levels.get(i, []), body), attach)
        return _guarded(levels.get(-1, []), body)

    def loop(self, plan: StagePlan, a: IterVar, body: Stmt, attach: bool) -> Stmt:
        """Loop a of plan around body, with the stages computed at a (if attach) at the start of its body."""
        if attach:
            for child in reversed(self.children.get((plan.name, id(a)), [])):
                nest = cooperative.distribute_over_threads(
                    self.stage_nest(child), cooperative.idle_threads(child, self.program, self.block_threads), child.name)
                nest = cooperative.bind_inner_threads(nest, child, self.program, self.offsets[child.name],
                                                      self.loop_ranges)
                body = self.allocate(child, seq(nest, body))
        ann = plan.annotation(a)
        kind = _KIND[ann.kind] if ann is not None else SERIAL
        return For(a.var, self.extents[plan.name][a], body, kind, ann.thread_tag if ann is not None else "",
                   self.pragmas(plan, a) + self.double_buffers_at(plan, a, attach))

    def pragmas(self, plan: StagePlan, a: IterVar) -> Tuple:
        """Loop a's pragmas, a prefetch's tensor name replaced by its buffer (so that kernels
        that differ only in their buffers still share code: kernel/dedup.py renames it)."""
        return tuple((k, (self.buffers[v[0]], v[1])) if k == PREFETCH and v[0] in self.buffers else (k, v)
                     for k, v in plan.pragmas_of(a))

    def double_buffers_at(self, plan: StagePlan, a: IterVar, attach: bool) -> Tuple:
        """("double_buffer_scope", buffer name) for each double-buffered stage computed at loop a
        (TVM's attribute of that name): the target's Kernel IR pass finds its buffer by it."""
        if not attach:
            return ()
        staged = [c for c in self.children.get((plan.name, id(a)), []) if c.double_buffer]
        return tuple(("double_buffer_scope", self.buffers[output_name(c, 0)].name) for c in staged) + \
            tuple(("pipeline_stages", (self.buffers[output_name(c, 0)].name, c.pipeline_stages))
                  for c in staged if c.pipeline_stages > 2)

    def allocate(self, plan: StagePlan, body: Stmt) -> Stmt:
        """body inside the allocations of the output buffers of plan that are not arguments
        (an argument may be one output of a multi-output op; the others are temporaries).
        A scan's init/update/state stage stores into the scan's buffers: nothing to allocate."""
        if plan.buffer_key is not None:
            return body
        params = self.param_ids
        for i in reversed(range(plan.op.num_outputs)):
            buffer = self.buffers[output_name(plan, i)]
            if id(buffer) not in params:
                body = Allocate(buffer, body)
        return body

    def params(self) -> Tuple[Buffer, ...]:
        outputs = self.program.param_outputs or [0] * len(self.program.params)
        return tuple(self.buffers[output_name(p, i)] for p, i in zip(self.program.params, outputs))

    # -- the function ----------------------------------------------------------------------
    def build(self) -> Func:
        roots = [p for p in self.program.plans if not p.is_input and p.attach_type == "root"]
        shared = SharedNests(self)          # a nest equal to an earlier one is that one renamed
        body = seq(*(StageNest(p.name, shared.stage_nest(p)) for p in roots))
        param_keys = self.program.param_keys()
        for p in reversed(roots):
            body = self.allocate(p, body)
        params = self.params()
        return Func(self.program.name, params, body)


def _iter_vars(plan: StagePlan) -> List[IterVar]:
    """Every axis of a stage: its roots, the axes its splits and fuses made, its leaves."""
    out = list(plan.roots) + list(plan.leaves) + list(getattr(plan.op, "reduce_axis", ()))
    for r in plan.relations:
        out += [v for v in vars(r).values() if isinstance(v, IterVar)]
    return out


def _proved(cond: Expr, ranges) -> bool:
    """Whether cond holds for every value of the loops in ranges (symbolic extents)."""
    decided = simplify(cond, ranges)
    return isinstance(decided, Const) and bool(decided.value)


def _fast_math_marked(plan: StagePlan, value: Expr) -> Expr:
    """value, marked for fast math when a pragma of the stage asks for it."""
    if value.dtype.is_float and any(k == "fast_math" and v for _, p in plan.pragmas for k, v in p):
        return Call(FAST_MATH_MARKER, (value,), value.dtype)
    return value


def _guarded(conds: List[Expr], body: Stmt) -> Stmt:
    if not conds:
        return body
    cond = conds[0]
    for c in conds[1:]:
        cond = logical("and", cond, c)
    return IfThen(cond, body)


def build_func(program: Program, regions: Dict[str, Region]) -> Func:
    """One function computing the program, given the region each stage computes (before
    simplify_func and unique_loop_names, which the Loop and Tile IR lowerings run next)."""
    return _FuncBuilder(program, regions).build()
