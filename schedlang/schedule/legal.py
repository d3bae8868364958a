"""Which schedule primitive calls are legal where: the facts a schedule generator needs.

Shared by the auto-scheduler's sketch rules and random annotation
(schedlang/autoschedule) and by the test suite's random-schedule generator
(tests/lowering/random_schedules.py), so that both only make calls the schedule
checks accept. A call these functions allow that still raises ScheduleError is a bug
in one of the two.
"""
from __future__ import annotations

import random
from typing import Dict, List, Optional, Tuple

from ..expr.functor import walk
from ..expr.nodes import NEG, Binary, Call, Const, Select
from ..tensor.axis import DATA_PAR
from ..tensor.op import ComputeOp, PlaceholderOp, TensorRead
from ..tensor.reduce import Reduce
from .annotate import PARALLEL
from .placement import enclosing_loops

MAX_UNROLL_EXTENT = 8        # a loop longer than this is not fully unrolled
MAX_UNROLL_PRODUCT = 64      # nor nests of unrolled loops past this many copies (LLVM compile time)
MAX_VECTOR_EXTENT = 64       # vector lanes of one vectorized loop
PRAGMA_STEPS = (1, 2, 4, 8, 16)   # auto_unroll_max_step values


def is_compute(st) -> bool:
    return isinstance(st.op, ComputeOp)


def is_reduction(st) -> bool:
    return is_compute(st) and isinstance(st.op.body, Reduce)


def is_live(st) -> bool:
    """A compute stage that has loops of its own (not inlined into its consumers)."""
    return is_compute(st) and st.attach_type != "inline"


def can_inline(st) -> bool:
    """compute_inline is legal: an intermediate injective stage not yet scheduled."""
    return is_compute(st) and not st.is_output and not st.op.reduce_axis and not st.relations


# Math calls as cheap as an add or two; any other call (exp, log, tanh, erf, pow, ...) is costly.
CHEAP_CALLS = frozenset({NEG, "abs", "floor", "ceil", "round", "trunc", "nearbyint", "copysign", "ldexp"})


def _nodes(op):
    """Every distinct node of op's bodies (reductions included)."""
    return (n for body in op.bodies for n in walk(body))


def costly_to_recompute(s, st) -> bool:
    """An inlinable stage that calls costly math and is read at more than one place (softmax's
    exp, read by the row sum and by the normalize): inlined, it is computed again at every read,
    so computing it once into a buffer near its readers is a choice worth searching."""
    if not can_inline(st) or not any(isinstance(n, Call) and n.name not in CHEAP_CALLS for n in _nodes(st.op)):
        return False
    reads = sum(1 for c in s._consumers(st) if is_compute(c)
                for n in _nodes(c.op) if isinstance(n, TensorRead) and n.tensor.op is st.op)
    return reads > 1


def effective_consumers(s, st) -> List:
    """The non-inlined stages that read st, looking through inlined stages."""
    out, stack, seen = [], list(s._consumers(st)), set()
    while stack:
        c = stack.pop()
        if id(c) in seen:
            continue
        seen.add(id(c))
        if c.attach_type == "inline":
            stack.extend(s._consumers(c))
        elif c not in out:
            out.append(c)
    return out


def attach_points(s, st, own_depth: int) -> List[Tuple]:
    """The loops (stage, iter var) compute_at may put st at with every reader of st inside:
    per non-inlined consumer, its first own_depth outer data-parallel loops and, where the
    consumer is itself computed at another stage, the loops enclosing its attach point (up to
    and including it, the attach point shared with it: softmax's exp beside the row sum at the
    output's row loop). The points all consumers share, in the first consumer's order (its own
    loops outermost first, then its parents'); none for an output or a stage already placed."""
    consumers = effective_consumers(s, st)
    if st.is_output or st.attach_type != "root" or not consumers:
        return []

    def enclosing(c) -> List[Tuple]:
        pts = [(c, a) for a in c.leaf_iter_vars[:min(own_depth, outer_fusable_spatial(c))]]
        while c.attach_type == "at":
            parent, leaves = c.attach_stage, list(c.attach_stage.leaf_iter_vars)
            pts += [(parent, a) for a in leaves[:leaves.index(c.attach_ivar) + 1]]
            c = parent
        return pts

    first, *rest = [enclosing(c) for c in consumers]
    shared = [{(id(t), id(a)) for t, a in pts} for pts in rest]
    return [(t, a) for t, a in first if all((id(t), id(a)) in keys for keys in shared)]


def has_data_reuse(st) -> bool:
    """A reduction some operand of which is not indexed by every spatial axis (matmul,
    batch matmul, conv2d): each loaded element is used by several outputs, so
    multi-level tiling pays off."""
    if not is_reduction(st):
        return False
    spatial = [a.var for a in st.op.axis]
    for node in (n for src in st.op.body.source for n in walk(src)):
        if isinstance(node, TensorRead):
            used = {id(v) for i in node.indices for v in walk(i)}
            if any(id(v) not in used for v in spatial):
                return True
    return False


def packable_inputs(st) -> List:
    """The input tensors a data-reuse reduction reads with the innermost spatial axis alone
    as the last index and without some other spatial axis (B of a matmul, B[k, j]): a tile
    of the output re-reads a panel of them, one row per reduction step, a stride apart, and a
    copy of the panel (cache_read into "global" at the tile's outer loop) is read contiguously."""
    if not has_data_reuse(st):
        return []
    spatial = [a.var for a in st.op.axis]
    found: List = []
    for node in (n for src in st.op.body.source for n in walk(src)):
        if not isinstance(node, TensorRead) or not isinstance(node.tensor.op, PlaceholderOp):
            continue
        used = {id(v) for i in node.indices for v in walk(i)}
        if (node.indices and node.indices[-1] is spatial[-1] and any(id(v) not in used for v in spatial)
                and not any(t is node.tensor for t in found)):
            found.append(node.tensor)
    return found


def is_guarded_copy(st) -> bool:
    """An injective compute stage whose value is a guarded if_then_else (a padding stage):
    inlined, its condition is evaluated in the consumer's innermost loop at every reduction
    step; materialized (compute_root or at an outer loop), each element's condition once."""
    if not is_compute(st) or st.op.reduce_axis:
        return False
    return any(isinstance(n, Select) and n.guarded for body in st.op.bodies for n in walk(body))


def is_input_copy(st) -> bool:
    """A compute stage that copies an input (a placeholder) to another layout or pads it: its
    one value a read of a placeholder, or guarded (is_guarded_copy). A consumer's tile loops
    do not all index it (a conv's output-channel tiles do not index its padded input or the
    channels of its weights), so computed at one of them it is copied again at each."""
    if not is_compute(st) or st.op.reduce_axis:
        return False
    return is_guarded_copy(st) or all(isinstance(b, TensorRead) and isinstance(b.tensor.op, PlaceholderOp)
                                      for b in st.op.bodies)


def relayout_axis(st):
    """The axis a data-reuse reduction should vectorize instead of its innermost one, and
    the inputs to re-lay out for it: None, or (position of the axis in st.op.axis,
    [(tensor, dim)...]).

    It applies when no operand reads the innermost spatial axis alone as its last index
    (conv2d NCHW's ww is read as hh + rh, ww + rw through the padding, a sliding window,
    and not at all by the weights), and an outer spatial axis v (conv2d's output channel ff)
    is read only as the plain index `dim` of placeholder inputs that do not read the
    innermost axis (the weights W[ff, rc, rh, rw]): the output tile is then vectorized
    over v, each other operand's value broadcast across the vector, and each such input
    re-laid out with v split by the vector width and its inner part innermost
    ([F/16, C, R, S, 16]: oneDNN's and TVM's NCHWc weight layout), so the vector loads
    are contiguous. An input read already so laid out (prepacked_width: W[ff // L, rc, rh,
    rw, ff % L], packed ahead of time) needs no copy: it is not in the list, which may then
    be empty, and the vector takes its width (relayout_width)."""
    if not has_data_reuse(st):
        return None
    extents = st.static_extents()
    if not all(isinstance(extents[a], int) for a in st.op.axis):    # the register tile needs static sizes
        return None
    spatial = [a.var for a in st.op.axis]
    reads = [n for src in st.op.body.source for n in walk(src) if isinstance(n, TensorRead)]
    uses = [{id(v) for i in r.indices for v in walk(i)} for r in reads]
    inner = spatial[-1]
    if any(r.indices and r.indices[-1] is inner for r in reads):
        return None
    for pos in range(len(spatial) - 2, -1, -1):
        v = spatial[pos]
        if extents[st.op.axis[pos]] < 2:
            continue
        packs, ok, widths = [], True, set()
        for r, used in zip(reads, uses):
            if id(v) not in used:
                continue
            width = prepacked_width(r, v)
            if width and id(inner) not in used:
                widths.add(width)
                continue
            dims = [d for d, i in enumerate(r.indices) if i is v]
            if (not isinstance(r.tensor.op, PlaceholderOp) or len(dims) != 1 or id(inner) in used
                    or sum(id(v) in {id(x) for x in walk(i)} for i in r.indices) != 1):
                ok = False
                break
            prev = next((d for t, d in packs if t is r.tensor), None)
            if prev is None:
                packs.append((r.tensor, dims[0]))
            elif prev != dims[0]:
                ok = False
                break
        if ok and (packs or widths) and len(widths) <= 1:
            return pos, packs
    return None


def _split_by(index, v, op: str) -> Optional[int]:
    """L where index is `v <op> L` (op floordiv or floormod, L a constant above 1), else None."""
    if (isinstance(index, Binary) and index.op == op and index.a is v and isinstance(index.b, Const)
            and int(index.b.value) > 1):
        return int(index.b.value)
    return None


def prepacked_width(read, v) -> Optional[int]:
    """The width L of a placeholder read already laid out with v split by L, its inner part
    innermost (W[v // L, ..., v % L]: conv2d weights packed ahead of time, [F/L, C, R, S, L],
    as the torch frontend's prepack.py and TVM's alter_op_layout make them): None when read is
    not one (another tensor, v read elsewhere or otherwise)."""
    if not isinstance(read.tensor.op, PlaceholderOp) or len(read.indices) < 2:
        return None
    width = _split_by(read.indices[-1], v, "floormod")
    outer = [d for d, i in enumerate(read.indices[:-1]) if _split_by(i, v, "floordiv") == width]
    rest = [i for d, i in enumerate(read.indices[:-1]) if d not in outer]
    if width is None or len(outer) != 1 or any(id(v) in {id(x) for x in walk(i)} for i in rest):
        return None
    return width


def relayout_width(st, pos: int) -> Optional[int]:
    """The width of the prepacked reads (prepacked_width) of st's axis pos, which its vector
    must take (None: none; relayout_axis returns only an axis whose prepacked reads share one)."""
    v = st.op.axis[pos].var
    reads = [n for src in st.op.body.source for n in walk(src) if isinstance(n, TensorRead)]
    widths = {w for w in (prepacked_width(r, v) for r in reads) if w}
    return min(widths) if widths else None


def register_tile_budget(target) -> int:
    """Vector accumulators a register tile may hold on target: its vector registers
    (Target.native_registers: 32 with AVX-512, 16 with AVX2) less a few for the operands
    (the loaded vectors, a broadcast)."""
    return max(1, target.native_registers() - 4)


def divisors(n: int, limit: Optional[int] = None) -> List[int]:
    """The divisors of n (at most limit), ascending, by trial division up to sqrt(n): a
    loop of 2**31 - 1 iterations costs 46341 steps, not 2**31 (a number below 2**31 has at
    most 1600 divisors, so the list stays short)."""
    small, large = [], []
    d = 1
    while d * d <= n:
        if n % d == 0:
            small.append(d)
            if d * d != n:
                large.append(n // d)
        d += 1
    out = small + large[::-1]
    return out if limit is None else [x for x in out if x <= limit]


def random_factor(rng: random.Random, extent: int) -> int:
    """A split factor: a divisor, a non-divisor, 1, the extent, or more than the extent."""
    pick = rng.random()
    if pick < 0.35:
        return rng.choice(divisors(extent))
    non = _random_non_divisor(rng, extent) if pick < 0.75 else None
    if non is not None:
        return non
    if pick < 0.85:
        return rng.choice([1, extent])
    if pick < 0.95:
        return extent + rng.randint(1, 8)
    return rng.randint(1, max(1, extent))


def fusable_runs(leaves) -> List[int]:
    """Positions i where leaves i and i+1 may be fused (adjacent loops of one kind)."""
    return [i for i in range(len(leaves) - 1) if leaves[i].kind == leaves[i + 1].kind]


def attach_depth(st) -> int:
    """How many compute_at levels st is nested in (0 at the root)."""
    d = 0
    while st.attach_type == "at":
        st, d = st.attach_stage, d + 1
    return d


def is_parallel(st, ivar) -> bool:
    ann = st.annotations.get(ivar)
    return ann is not None and ann.kind == PARALLEL


def inside_parallel(st) -> bool:
    """Whether st's loops run inside a parallel loop of a stage it is computed at (a
    parallel loop of st would then nest parallel loops, which build() rejects)."""
    return any(is_parallel(parent, a) for parent, a in enclosing_loops(st))


def attach_positions(s, st) -> List[int]:
    """The positions in st's leaf loops of the loops other stages are computed at, outermost first."""
    leaves = list(st.leaf_iter_vars)
    return sorted(leaves.index(c.attach_ivar) for c in s.stages if c.attach_stage is st and c.attach_type == "at")


def last_attach_position(s, st) -> int:
    """The position in st's leaf loops of the innermost loop a stage is computed at (-1: none)."""
    return max(attach_positions(s, st), default=-1)


def parallel_candidates(st) -> List[int]:
    """Positions of st's leaf loops that parallel() accepts (data-parallel loops), or none
    when st runs inside a parallel loop already."""
    if inside_parallel(st):
        return []
    return [i for i, a in enumerate(st.leaf_iter_vars) if a.kind == DATA_PAR]


def vectorize_candidates(s, st, par_pos: int = -1) -> List[int]:
    """Positions of st's leaf loops that vectorize() accepts: data-parallel, short enough,
    inside the parallel loop at par_pos and outside every loop a stage is computed at."""
    leaves = list(st.leaf_iter_vars)
    ext = st.static_extents()
    last_attach = last_attach_position(s, st)
    return [i for i, a in enumerate(leaves) if a.kind == DATA_PAR and i > par_pos and i > last_attach
            and ext[a] <= MAX_VECTOR_EXTENT]


def may_unroll(st, ivar, budget: int) -> bool:
    """unroll() of ivar keeps the unrolled copies of st within budget (and ivar is free)."""
    ext: Dict = st.static_extents()
    return ivar not in st.annotations and ext[ivar] <= MAX_UNROLL_EXTENT and ext[ivar] <= budget


def outer_fusable_spatial(st, limit: Optional[int] = None) -> int:
    """How many leading leaf loops of st are data-parallel (fuse them, then parallel the
    fused loop); at most limit."""
    n = 0
    for a in st.leaf_iter_vars:
        if a.kind != DATA_PAR or (limit is not None and n >= limit):
            break
        n += 1
    return n


# ---- GPU (cuda target) --------------------------------------------------------------------

WARP = 32
BLOCK_THREADS = (32, 64, 128, 256, 512, 1024)   # block sizes of a 1-D launch: whole warps
MAX_VTHREAD = 4              # virtual threads per axis of a tiled stage (each a register tile)


def thread_counts(target) -> List[int]:
    """Block sizes (threads) a one-dimensional launch may use on target: whole warps, within
    target.max_threads_per_block."""
    return [n for n in BLOCK_THREADS if n <= target.max_threads_per_block and n % target.warp_size == 0]


def is_cross_thread_extent(threads: int, block: Optional[int] = None) -> bool:
    """A reduce loop of `threads` iterations bound to threadIdx.x lowers to a cross-thread
    reduction (kernel/thread_allreduce.py) in a block of `block` threads (default: threads):
    a power of two up to a warp, or a multiple of a warp, in blocks of whole warps."""
    block = threads if block is None else block
    if threads <= WARP and threads & (threads - 1):
        return False
    if threads > WARP and threads % WARP:
        return False
    return block <= WARP or block % WARP == 0


def cross_thread_counts(target, extent: int) -> List[int]:
    """The thread counts a reduce loop of `extent` may be split by and bound to threadIdx.x:
    cross-thread extents within the block limit, not (much) longer than the loop."""
    out = [n for n in (2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
           if n <= target.max_threads_per_block and is_cross_thread_extent(n)]
    fit = [n for n in out if n <= extent]
    return fit or out[:1]


def gpu_vector_lanes(st, target) -> int:
    """Lanes of the widest CUDA vector access of st's element type (float4: 4 float32 lanes),
    1 when the type has no vector form."""
    size = st.op.output(0).dtype_obj.bytes
    lanes = target.vector_bits // 8 // size if size in (2, 4) else 1
    return max(1, lanes)


def may_bind(st, ivar) -> bool:
    """bind() accepts ivar: a free leaf loop of st (not annotated yet)."""
    return ivar in st.leaf_iter_vars and ivar not in st.annotations


def _random_non_divisor(rng: random.Random, extent: int) -> Optional[int]:
    """A factor in [2, extent) that does not divide extent, or None. Small extents list
    them all (the draws of the random-schedule tests stay as they were); large ones draw by
    rejection, a bounded number of times (few numbers in [2, extent) divide it)."""
    if extent <= 2**16:
        non = [d for d in range(2, extent) if extent % d]
        return rng.choice(non) if non else None
    for _ in range(32):
        d = rng.randint(2, extent - 1)
        if extent % d:
            return d
    return None
