"""Default schedules: fusion (fuse.py), then a schedule per kernel chosen by its kind, its
shape and the target. Library functions: the PyTorch frontend calls default_schedule on
every program it compiles, and a DSL user can call it on any program.

Per kernel (a fuse.Group), on the CPU:
- pointwise: the outer axes fused into one parallel loop, the contiguous axis split by
  two native vectors and the inner part vectorized (a tail is guarded); a kernel that reads
  a large input transposed (x[j, i] written at [i, j]) in tiles of a cache line by a cache
  line (transposed_axis);
- rows (a pointwise kernel with reductions computed at its row loop: softmax, layer_norm):
  the rows fused and parallel, each reduction computed at the row loop and, when it runs
  along the contiguous axis, rfactor'd onto a vector of partial results;
- reduction outputs: parallel over the outputs; with few outputs and a long reduction, the
  reduction is split into parallel partial sums (rfactor) first;
- matmul (and batch matmul), with its elementwise epilogue: a register tile per pair of
  tile loops, the whole k loop inside it (K_UNROLL steps unrolled; a long one in blocks, a
  column panel's tiles at a time: k_block). B contiguous along the output columns, or packed
  in [N / nr, K, nr] panels (a Linear's weight, packed once by the compiled module, see
  prepack.py): an mr x nr tile of vector accumulators (broadcast A, vector B), as
  benchmarks/sl_kernels.py's gemm_register_tiled (mr = register_rows, nr = panel_width columns:
  6 x 16 with AVX2, or 4 x 24 where that pads a Linear less, 6 x 64 with AVX-512, or 8 x 48
  where that pads a Linear less; a Linear pads its product to whole tiles, ops/matmul.py);
  both operands contiguous along k (q @ k^T, a Linear whose weight is not a constant): an
  mr x nr tile of k-vectors (rfactor over k lanes), summed across lanes at the end; a
  bfloat16 Linear's weight in [N / nr, K / 2, nr, 2] pair panels (a CPU with avx512bf16,
  ops/matmul.reads_pairs): the same tile, each step a pair of k by vdpbf16ps (tensorized,
  pair_width).
- convolution (fuse.Group.convs) with its epilogue: conv_schedules.py (NCHWc register tiles,
  rows along the width for depthwise ones).
On CUDA: blockIdx/threadIdx bound loops (one thread per element with a short vectorized
inner loop, per row for reductions, per output for a tiled matmul); a float16/bfloat16
matmul in whole fragments on sm_80+ on tensor cores, its epilogue fused
(tensorcore_schedules.py).

A kernel whose rules raise ScheduleError (a program shape they did not foresee) keeps its
plain loops, with a warning. With `log=`, a tuning record of the workload wins over all this.
"""
from __future__ import annotations

import warnings
from typing import Callable, List, Optional

from ..expr.extent import ceil_div
from ..expr.functor import substitute, uses_var, walk
from ..errors import ScheduleError
from ..expr.nodes import Binary, Call, Const, Var
from ..loop.plan import as_dtype_of
from ..schedule import Schedule, create_schedule
from ..target.registry import get_backend
from ..target.target import Target
from ..tensor import thread_axis as _thread_axis
from ..tensor.axis import IterVar
from ..tensor.commutes import commutes
from ..tensor.op import ComputeOp, TensorRead
from ..tensor.reduce import Reduce
from .attention_schedule import is_attention
from .fuse import Group, fuse, is_matmul, matmul_operands
from .pad_fusion import CONV_PAIRS_TAG
from .tensorcore_schedules import schedule_matmul_tensorcore, tensorcore_plan
from .winograd_schedules import is_winograd_kernel, schedule_winograd_group
from ..topi.x86_intrin import PAIR, bf16_dot_lanes, dot_bf16_intrin

MAX_VECTOR = 64          # lanes of one vectorized loop (schedule.legal.MAX_VECTOR_EXTENT)
MR = 4                   # the fewest rows of a matmul register tile
MR_MAX = 8               # the most rows of one
NR = 16                  # columns of a matmul register tile, at least one native vector
NR_VECTORS = 2           # native vectors across a register tile where NR is narrower
WIDE_FILE_VECTORS = 4    # ... with 32 vector registers, where the output is that wide (panel_width)
PREFETCH_AHEAD = 16      # k steps ahead that a packed B panel's rows are prefetched (_prefetch_panel)
K_UNROLL = 4             # steps of a register tile's k loop unrolled (where they divide it)
KC = 512                 # k steps of a block of a long reduction (k_block) ...
K_BLOCK_PANEL_BYTES = 512 * 1024   # ... where a packed B panel of all k rows is larger
PANEL_L2_BYTES = 256 * 1024   # a packed B panel stays in L2 as A's rows pass: half of a 512 KB L2
STREAMED_B_BYTES = 8 << 20     # a matmul's B this large comes from memory in a model (row_parts) ...
ROW_PART_TILES = 8             # ... where each thread keeps this many row tiles of a panel
NT_TILE = 4              # columns of a k-vector (dot product) matmul tile
NT_BLOCK = 16            # column tiles of such a tile's L2 block (16 vector registers)
LINE_BYTES = 64          # a cache line: the side of a transposing kernel's tile (schedule_transpose_cpu)
TRANSPOSE_MIN_BYTES = 1 << 20      # ... for an input read transposed at least this large (smaller
                                   # ones come from a core's L2 either way: no faster in tiles)
COLUMN_VECTORS = 4       # native vectors of columns a reduction across rows accumulates at once (_column_loops)
TAIL_VECTORS = 8         # a tuple reduction this many vectors long runs on vector partials, its tail masked
LONG_ROW = 4096          # a reduction this long is worth splitting over the cores
PARTIAL_VECTORS = 4      # vector partials of each parallel chunk of such a reduction (_parallel_partials)
CUDA_THREADS = 256       # threads per block for pointwise kernels
CUDA_ROW_THREADS = 64    # threads (rows) per block for reductions
CUDA_REDUCE_THREADS = 256  # threads of the block a reduction to a scalar runs on
CUDA_TILE = (8, 16)      # a matmul block's rows and columns (one output per thread)


def default_schedule(outputs: List, target=None, log: Optional[str] = None) -> Schedule:
    """The schedule of the program computing outputs: fused, each kernel scheduled for target
    ("llvm", "cuda", a Target; None: the host CPU). With log (a tuning-record file) holding a
    successful record of this workload for target, the best record's schedule instead; else
    each kernel with a record of its own program (torch/kernel_tasks.py) gets that record's."""
    outputs = list(outputs)
    if not outputs:
        raise ValueError("default_schedule: no output tensors given")
    target = Target.create(target if target is not None else "llvm")
    if log is not None:
        tuned = tuned_schedule(outputs, target, log)
        if tuned is not None:
            return tuned
    s = create_schedule([t.op for t in outputs])
    index = None
    if log is not None:                    # per-kernel records (torch/kernel_tasks.py)
        from .kernel_tasks import RecordIndex, apply_group_record
        index = RecordIndex(log)
    for group in fuse(s):
        if index is not None and apply_group_record(s, group, target, index):
            continue
        try:
            with s.all_or_nothing():
                schedule_group(s, group, target)
        except ScheduleError as err:
            # A program shape these rules did not foresee: the kernel keeps its plain loops
            # (correct, slower) rather than failing the compile; the warning says which.
            warnings.warn(f"default_schedule: kernel '{group.anchor.name}' keeps its plain loops: {err}",
                          stacklevel=2)
    return s


def tuned_schedule(outputs: List, target: Target, log: str) -> Optional[Schedule]:
    """The best recorded schedule of this workload and target in log, or None without one."""
    from ..autoschedule.api import tuned_schedule_or_none     # this CPU's records first (records.choose)
    return tuned_schedule_or_none(log, outputs, target)


def schedule_group(s: Schedule, group: Group, target: Target) -> None:
    """Schedule one kernel of s by its kind, with the target's function for that kind
    (Backend.default_schedules: schedule_matmul_cpu for "matmul" on llvm, ...)."""
    if group.anchor.attach_type == "at":    # placed inside another kernel by its rule (a padded input plane)
        return
    rules = get_backend(target.kind).default_schedules()
    if is_winograd_kernel(s, group):
        return schedule_winograd_group(s, group, target, schedule_group)
    if is_attention(group.anchor):
        return rules["attention"](s, group, target)
    if group.convs:
        return rules["conv"](s, group, target)
    matmuls = group.matmuls
    anchor = group.anchor
    if is_matmul(anchor) and len(anchor.op.axis) >= 2 and not group.attached:
        rules["matmul"](s, anchor, [anchor], target)
    elif matmuls and len(matmuls) == len(group.attached) and len(anchor.op.axis) >= 2 \
            and not isinstance(anchor.op.body, Reduce):
        rules["matmul"](s, anchor, matmuls, target)
    elif group.attached or isinstance(anchor.op.body, Reduce):
        rules["rows"](s, group, target)
    else:
        rules["pointwise"](s, anchor, target)


# ---- shape and target facts -------------------------------------------------------------

def static(e) -> Optional[int]:
    """The int value of an extent, or None when it is symbolic."""
    if isinstance(e, int):
        return e
    return int(e.value) if isinstance(e, Const) and isinstance(e.value, int) else None


def _product(extents) -> Optional[int]:
    out = 1
    for e in extents:
        v = static(e)
        if v is None:
            return None
        out *= v
    return out


def threads(target: Target) -> int:
    """Worker threads the CPU target runs parallel loops on (HostCPUBackend.worker_threads)."""
    return get_backend(target.kind).worker_threads(target)


def lanes(target: Target, st) -> int:
    """Native vector lanes for the stage's result dtype."""
    return target.native_lanes(st.op.output_dtype(0).bits)


def _extent(ivar: IterVar):
    return ivar.dom.extent


def _fuse(stage, axes):
    return axes[0] if len(axes) == 1 else stage.fuse(*axes)


def unit_stride(index, var: Var) -> bool:
    """index is var plus terms that do not use var (the read walks memory with var)."""
    if index is var:
        return True
    if isinstance(index, Binary) and index.op in ("add", "sub"):
        if unit_stride(index.a, var) and not uses_var(index.b, var):
            return True
        return index.op == "add" and unit_stride(index.b, var) and not uses_var(index.a, var)
    return False


def read_through_views(read: TensorRead, through: Callable[[object], bool]) -> TensorRead:
    """read, followed through the computes whose body is one read (a transpose, a view) and
    that through(op) accepts: the read of the tensor they move data from."""
    for _ in range(64):          # a chain of views; the bound keeps a cycle impossible to hang on
        op = read.tensor.op
        if not isinstance(op, ComputeOp) or not isinstance(op.body, TensorRead) or not through(op):
            return read
        mapping = {a.var: as_dtype_of(a.var, i) for a, i in zip(op.axis, read.indices)}
        read = substitute(op.body, mapping)
    return read


def resolve_read(s: Schedule, read: TensorRead) -> TensorRead:
    """The read a kernel really makes: through inlined IndexMaps (a transpose, a view), the
    read of the tensor they move data from."""
    return read_through_views(read, lambda op: op in s.stage_map and s[op].attach_type == "inline")


def resolved_reads(s: Schedule, st):
    """Every tensor read of the stage, as resolve_read sees it."""
    for body in st.op.bodies:
        for e in (body.source if isinstance(body, Reduce) else (body,)):
            for node in walk(e):
                if isinstance(node, TensorRead):
                    yield resolve_read(s, node)


def kernel_reads(s: Schedule, st, limit: int = 256) -> List[TensorRead]:
    """The reads of the tensors the stage's kernel loads: its own and, through the stages
    inlined into it, theirs (in the stage's variables), each resolved as resolve_read does.
    At most about `limit` (a chain of inlined stages each reading the last twice has many
    paths): past it, the reads found so far."""
    work, out = list(resolved_reads(s, st)), []
    while work and len(out) + len(work) < limit:
        read = work.pop()
        op = read.tensor.op
        if not (isinstance(op, ComputeOp) and op in s.stage_map and s[op].attach_type == "inline"):
            out.append(read)
            continue
        mapping = {a.var: as_dtype_of(a.var, i) for a, i in zip(op.axis, read.indices)}
        for body in op.bodies:
            for node in walk(body):
                if isinstance(node, TensorRead):
                    moved = TensorRead(node.tensor, tuple(substitute(i, mapping) for i in node.indices))
                    work.append(resolve_read(s, moved))
    return out + work


def contiguous_axis(s: Schedule, st, var: Var) -> bool:
    """Every read of the stage that uses var walks memory with it."""
    return all(unit_stride(r.indices[-1], var) for r in resolved_reads(s, st)
               if any(uses_var(i, var) for i in r.indices))


def blocked_lanes(indices, var: Var) -> Optional[int]:
    """m when a read's indices walk a blocked layout with var (layout.py's NCHWc read at a
    channel, a packed weight): the last index is var % m, and the others use var only as
    var // k with k a multiple of m (the same for the m lanes of a block); else None."""
    if not indices:
        return None
    *lead, last = indices
    if not (isinstance(last, Binary) and last.op == "floormod" and last.a is var and isinstance(last.b, Const)
            and isinstance(last.b.value, int) and last.b.value > 0):
        return None
    m = last.b.value

    def whole_blocks(e) -> bool:
        if e is var:
            return False
        if isinstance(e, Binary):
            if e.op == "floordiv" and e.a is var:
                return isinstance(e.b, Const) and isinstance(e.b.value, int) and e.b.value % m == 0
            return whole_blocks(e.a) and whole_blocks(e.b)
        return not uses_var(e, var)
    return m if all(whole_blocks(i) for i in lead) else None


def _blocked_axis(s: Schedule, st, var: Var, width: int) -> bool:
    """Every read of the stage that uses var reads a blocked layout (blocked_lanes) of blocks
    that are a multiple of width, and some read does: split by width, var walks memory within
    each block."""
    found = False
    for r in resolved_reads(s, st):
        if not any(uses_var(i, var) for i in r.indices):
            continue
        m = blocked_lanes(r.indices, var)
        if m is None or m % width:
            return False
        found = True
    return found


def _reads_along(s: Schedule, st, var: Var) -> bool:
    """Some read of the stage uses var."""
    return any(uses_var(i, var) for r in resolved_reads(s, st) for i in r.indices)


def vector_factor(extent, lanes_: int) -> Optional[int]:
    """How many elements one vectorized inner loop takes along an axis of this extent: two
    native vectors on long axes, one on shorter ones, the whole axis when it is shorter."""
    n = static(extent)
    if n is None or n >= 2 * lanes_:
        return min(MAX_VECTOR, 2 * lanes_)
    if n >= lanes_:
        return lanes_
    return n if n > 1 else None


# ---- CPU -------------------------------------------------------------------------------

def schedule_pointwise_cpu(s: Schedule, st, target: Target) -> None:
    """Outer axes fused and parallel, the last axis split by two vectors and vectorized. With
    too few rows to keep every core busy (or a symbolic row count, such as a dynamic batch of
    1), the vector chunks of a row are parallel too."""
    stage = s[st]
    axes = list(stage.op.axis)
    if not axes:
        return
    if is_pair_copy(stage):
        return schedule_pair_copy_cpu(stage, target)
    across = transposed_axis(s, stage)
    if across is not None:
        return schedule_transpose_cpu(stage, across, target)
    last = axes[-1]
    v = vector_factor(_extent(last), lanes(target, st))
    if v is not None and static(_extent(last)) == v:
        outer_chunks, inner = None, last
    elif v is not None:
        outer_chunks, inner = stage.split(last, factor=v)
    else:
        outer_chunks, inner = last, None
    rows = _product(_extent(a) for a in axes[:-1])
    par = axes[:-1]
    if outer_chunks is not None and (not par or rows is None or rows < 4 * threads(target)):
        par = par + [outer_chunks]
    if par:
        stage.parallel(_fuse(stage, par))
    if inner is not None:
        stage.vectorize(inner)


def is_pair_copy(stage) -> bool:
    """A convolution's input copy with each pair of channels side by side, [N, C / 2, *S, 2]
    (ops/conv._padded with pairs, tagged CONV_PAIRS_TAG)."""
    return getattr(stage.op, "tag", "") == CONV_PAIRS_TAG


def schedule_pair_copy_cpu(stage, target: Target) -> None:
    """The pair copy (is_pair_copy) a vector along the last spatial axis at a time, for both
    channels of the pair (unrolled): its reads, and the epilogue of the layer before computed
    in it (wav2vec2's GELU), are vectors of one channel, the store interleaves them. (The
    pointwise schedule took it for a transpose and vectorized the pair, 2 lanes: wav2vec2's
    512 x 3199 copy with its GELU took 11.5 ms.)"""
    n, c, *spatial, e = stage.op.axis
    v = vector_factor(_extent(spatial[-1]), lanes(target, stage))
    if v is None:
        stage.parallel(_fuse(stage, [n, c, *spatial[:-1]]))
        return
    wo, wi = stage.split(spatial[-1], factor=v)
    stage.reorder(n, c, *spatial[:-1], wo, e, wi)
    stage.parallel(_fuse(stage, [n, c, *spatial[:-1]]))
    stage.unroll(e)
    stage.vectorize(wi)


def transposed_axis(s: Schedule, st) -> Optional[IterVar]:
    """The axis a of a pointwise stage that some large input (TRANSPOSE_MIN_BYTES) is read
    along in memory (its last index is a plus terms without a) while the stage's last axis
    indexes that read elsewhere: the stage writes the input transposed. None when no read
    does, or an extent is not static."""
    axes = list(st.op.axis)
    if len(axes) < 2 or any(static(_extent(a)) is None for a in axes):
        return None
    last = axes[-1].var
    for r in kernel_reads(s, st):
        if not r.indices or uses_var(r.indices[-1], last) \
                or not any(uses_var(i, last) for i in r.indices[:-1]):
            continue
        size = _product(r.tensor.shape)
        if size is None or size * r.tensor.dtype_obj.bits // 8 < TRANSPOSE_MIN_BYTES:
            continue
        for a in axes[:-1]:
            if unit_stride(r.indices[-1], a.var) and static(_extent(a)) > 1:
                return a
    return None


def schedule_transpose_cpu(stage, across: IterVar, target: Target) -> None:
    """A pointwise stage that reads an input transposed (transposed_axis: along `across`,
    written along the last axis) in tiles of a cache line of each: the last axis split by a
    line and vectorized, `across` split by a line, its inner part moved next to the vector,
    so each gathered vector's lines are read again by the tile's next rows instead of
    leaving the cache first. The outer loops fused and parallel.
    Why: x.t().contiguous() + 1 of 2048 x 2048 floats took 12.7 ms in rows (each vector
    gathers 16 lines, 2048 of them per row); in tiles of 16 x 16, 2.0 ms (2 threads, Zen 5)."""
    axes = list(stage.op.axis)
    last = axes[-1]
    line = max(1, LINE_BYTES * 8 // stage.op.output_dtype(0).bits)
    ao, ai = stage.split(across, factor=min(line, static(_extent(across))))
    lo, li = stage.split(last, factor=min(line, MAX_VECTOR, static(_extent(last))))
    k = axes.index(across)
    outer = axes[:k] + [ao] + axes[k + 1:-1]
    stage.reorder(*outer, lo, ai, li)
    rows = _product(_extent(a) for a in outer)
    par = outer if rows is not None and rows >= 4 * threads(target) else outer + [lo]
    stage.parallel(_fuse(stage, par))
    stage.vectorize(li)


def _vector_rfactor(s: Schedule, red, lanes_: int, vectors: int = 1):
    """Split the reduction's last reduce axis by lanes_ (times vectors: that many independent
    vector partials) and rfactor it, so the partial results are a vector (the lane axis last,
    contiguous); returns the partial stage or None when the reduction does not run along a
    contiguous axis in whole vectors. A tuple reduction (argmax) only where its combiner
    commutes (tensor/commutes.py: torch's breaks ties by index; TVM's keeps loop order), and
    of TAIL_VECTORS vectors or more in whole vectors but for a masked tail (a vocabulary of
    50257: LLVM's loop vectorizer takes a one-value reduction's scalar loop, not a tuple's).
    Measured (argmax of 256 x 4096 floats, 2 threads, Zen 5): 2.68 ms in scalar rows, 0.19
    on vector partials (torch 0.31)."""
    stage = s[red]
    op = stage.op
    combiner = op.body.combiner
    if not op.reduce_axis or not (combiner.name in ("sum", "max", "min") if combiner.arity == 1 else commutes(combiner)):
        return None
    k = op.reduce_axis[-1]
    n = static(_extent(k))
    kv = _k_vector(k, lanes_) * vectors
    if n is None or n < kv or (n % kv and (combiner.arity == 1 or n < TAIL_VECTORS * kv)) or kv < 4 \
            or not (contiguous_axis(s, stage, k.var) or _blocked_axis(s, stage, k.var, kv)):
        return None
    ko, ki = stage.split(k, factor=kv)
    rf = s.rfactor(op.output(0), ki, factor_axis=len(op.axis))
    rstage = s[rf[0] if isinstance(rf, (list, tuple)) else rf]
    *spatial, lane = rstage.op.axis
    rstage.reorder(*spatial, *rstage.op.reduce_axis, lane)
    rstage.vectorize(lane)
    return rstage


def schedule_rows_cpu(s: Schedule, group: Group, target: Target) -> None:
    """A kernel over rows: the anchor's leading (row) axes fused and parallel, the reductions
    computed at that loop (on vector partials along a contiguous axis), the rest of the row
    vectorized."""
    anchor = s[group.anchor]
    reductions = [s[r] for r in group.attached]
    is_red = isinstance(anchor.op.body, Reduce)
    if is_red and not reductions:
        return schedule_reduction_cpu(s, anchor, target)
    axes = list(anchor.op.axis)
    p = min((group.prefix[r] for r in group.attached), default=len(axes))
    rows = _product(_extent(a) for a in axes[:p])
    long = all((_product(_extent(a) for a in s[r].op.reduce_axis) or 0) >= LONG_ROW for r in reductions)
    if not is_red and rows is not None and rows < threads(target) and long:
        # Too few rows to occupy the cores: each reduction is a kernel of its own, split into
        # parallel partial results, and the rest runs in parallel chunks of the rows.
        for r in reductions:
            schedule_reduction_cpu(s, r, target)
        return schedule_pointwise_cpu(s, anchor, target)
    lanes_ = lanes(target, anchor)
    if not is_red and reductions and p == len(axes) and all(_across_rows(s, r, len(axes)) for r in reductions):
        return _columns_with_epilogue(s, anchor, reductions, lanes_)
    factored = {r: _vector_rfactor(s, r, lanes_) for r in reductions + ([anchor] if is_red else [])}
    partials = [rf for rf in factored.values() if rf is not None]
    p = max(1, min(p, len(axes)))
    shared = _shared_costly(s, anchor, reductions + partials, p) if not is_red else []
    row = _fuse(anchor, axes[:p])
    for st in shared:
        st.compute_root()           # (out of its consumers, to be computed at the row)
    for st in shared + reductions + partials:
        st.compute_at(anchor, row)
    for r in reductions:          # (a sum across the row's rows: a vector of columns at a time)
        if factored[r] is None and _across_rows(s, r):
            _columns_inside(r, lanes_)
    for st in [anchor] + shared if not is_red else []:
        _vectorize_row(st, st.op.axis[p:], lanes_)
    anchor.parallel(row)


def _vectorize_row(stage, cols, lanes_: int) -> None:
    """The stage's columns (the axes after the row) fused, split by a vector and vectorized."""
    if not cols:
        return
    col = _fuse(stage, list(cols))
    n = _product(_extent(a) for a in cols)
    v = vector_factor(n, lanes_)
    if v is not None:
        stage.vectorize(col if n == v else stage.split(col, factor=v)[1])


COSTLY_CALLS = frozenset({"exp", "log", "tanh", "sigmoid", "erf", "pow"})


def _shared_costly(s: Schedule, anchor, reductions, p: int) -> list:
    """Stages inlined into a rows kernel that call a costly function (COSTLY_CALLS) and that
    both a reduction computed at the row and the anchor read, over the anchor's row shape:
    softmax's numerators exp(x - max), which its sum reads and its output divides. Computed
    at the row into a buffer of one row, they are evaluated once instead of in both loops.
    Why: softmax of 256 x 4096 floats computed exp twice an element (0.29 ms, torch 0.21)."""
    def inlined_reads(op):
        found = set()
        for body in op.bodies:
            for e in (body.source if isinstance(body, Reduce) else (body,)):
                for node in walk(e):
                    x = node.tensor.op if isinstance(node, TensorRead) else None
                    if isinstance(x, ComputeOp) and x in s.stage_map and s[x].attach_type == "inline":
                        found.add(x)
        return found
    mine = inlined_reads(anchor.op)
    theirs = set().union(*(inlined_reads(r.op) for r in reductions)) if reductions else set()
    rows = [static(_extent(a)) for a in anchor.op.axis]
    return [s[x] for x in sorted(mine & theirs, key=lambda op: op.name)
            if not isinstance(x.body, Reduce) and len(x.axis) == len(rows)
            and [static(_extent(a)) for a in x.axis] == rows and None not in rows
            and any(isinstance(n, Call) and n.name in COSTLY_CALLS for b in x.bodies for n in walk(b))]


def _across_rows(s: Schedule, red, rank: Optional[int] = None) -> bool:
    """The one-value reduction red runs across rows (x.sum(0), x.mean(1) of [B, S, D]): its
    last axis walks its reads' memory and no reduce axis does, so its outputs are computed a
    vector of columns at a time, the reduce loops outside the vector. rank: the number of axes
    it must have (those of the kernel's anchor)."""
    op = red.op
    if op.num_outputs != 1 or not op.axis or not op.reduce_axis or (rank is not None and len(op.axis) != rank):
        return False
    return contiguous_axis(s, red, op.axis[-1].var) \
        and not any(contiguous_axis(s, red, k.var) and _reads_along(s, red, k.var) for k in op.reduce_axis)


def _column_loops(stage, lanes_: int):
    """(outer, inner): the stage's last axis split by a chunk of columns (COLUMN_VECTORS native
    vectors where it is that wide, else vector_factor's); (None, last) where the axis is one
    chunk wide; (None, None) where it takes no vector. Why the wider chunk: each thread's
    reads of a row are then 4 lines long, not 2 (x.mean(0) of 1024^2: 0.103 -> 0.070 ms,
    torch 0.056; 2 threads, Zen 5)."""
    last = stage.op.axis[-1]
    v = vector_factor(_extent(last), lanes_)
    if v is None or v <= 1:
        return None, None
    n = static(_extent(last))
    if n is not None and n >= COLUMN_VECTORS * lanes_:
        v = min(MAX_VECTOR, COLUMN_VECTORS * lanes_)
    if static(_extent(last)) == v:
        return None, last
    return stage.split(last, factor=v)


def _columns_inside(red, lanes_: int) -> None:
    """The reduction's reduce loops moved outside a vectorized chunk of its last axis."""
    outer_chunk, inner = _column_loops(red, lanes_)
    if inner is None:
        return
    red.reorder(*red.op.axis[:-1], *([outer_chunk] if outer_chunk is not None else []), *red.op.reduce_axis, inner)
    red.vectorize(inner)


def _columns_with_epilogue(s: Schedule, anchor, reductions, lanes_: int) -> None:
    """A kernel whose reductions run across rows (_across_rows) with an elementwise epilogue
    over their outputs (mean's division, var's): the anchor's columns in vectors, its outer
    axes and vector chunks fused and parallel, each reduction computed at that loop with its
    reduce loops outside a vector of columns (as schedule_reduction_cpu's x.sum(0)).
    Why: computed per output at the anchor's rows, x.mean(0) of 1024 x 1024 floats read one
    column at a time (1.78 ms; x.sum(0) 0.09, torch 0.06; 2 threads, Zen 5)."""
    axes = list(anchor.op.axis)
    outer_chunk, inner = _column_loops(anchor, lanes_)
    loops = axes[:-1] + ([outer_chunk] if outer_chunk is not None else [] if inner is not None else [axes[-1]])
    at = _fuse(anchor, loops) if loops else None
    if inner is not None:
        anchor.vectorize(inner)
    for r in reductions:
        if at is not None:
            r.compute_at(anchor, at)
        r_last = r.op.axis[-1]
        r.reorder(*r.op.axis[:-1], *r.op.reduce_axis, r_last)
        if inner is not None:
            r.vectorize(r_last)
    if at is not None:
        anchor.parallel(at)


def _local_partial(s: Schedule, rf):
    """The chunk's partial result of rf (an rfactor's stage, one result per parallel chunk)
    accumulated in a buffer of the chunk's own (an rfactor of a one-wide split of its last
    reduce axis), not in rf's row of results that the threads share: a loop that kept its
    accumulator there wrote a cache line the other thread's chunk wrote too (argmax of a
    million floats, two threads: 56 ms, against 4.6 on one thread)."""
    _, one = rf.split(rf.op.reduce_axis[-1], factor=1)
    return _rfactor_stage(s, rf.op.output(0), one)


def _rfactor_stage(s: Schedule, tensor, axis):
    """The stage of s.rfactor(tensor, axis) (which gives a list for a tuple reduction: argmax)."""
    factored = s.rfactor(tensor, axis)
    return s[factored[0] if isinstance(factored, (list, tuple)) else factored]


def _parallel_partials(s: Schedule, stage, chunks: int, lanes_: int) -> None:
    """A long reduction with few outputs: its first reduce axis in about `chunks` parallel
    chunks, each reduced to a partial result (rfactor) on vector partials along a contiguous
    last reduce axis (_vector_rfactor), the partials combined after. A lone reduce axis is
    cut into chunks of whole vectors, so only the last chunk's last vector is masked;
    PARTIAL_VECTORS independent vector partials hide the add's latency. Measured (x.sum() of
    999,983 floats, 2 threads, a 2-core Xeon VM, AVX-512, beside torch's 0.11 ms): a scalar
    loop per chunk with a guard on every element 4.2 ms; one vector partial 0.24 ms, four
    0.20 (x.abs().amax(): 7.2, 0.28, 0.19 ms; torch 0.35)."""
    op = stage.op
    k = op.reduce_axis[0]
    n = static(_extent(k))
    step = _k_vector(k, lanes_) * PARTIAL_VECTORS if len(op.reduce_axis) == 1 and n is not None else 1
    if n is not None:
        ko, _ = stage.split(k, factor=ceil_div(ceil_div(n, chunks), step) * step)
    else:
        ko, _ = stage.split(k, nparts=chunks)
    rf = _rfactor_stage(s, op.output(0), ko)
    partial = _vector_rfactor(s, rf, lanes_, PARTIAL_VECTORS) or _vector_rfactor(s, rf, lanes_) \
        or _local_partial(s, rf)
    partial.compute_at(rf, rf.op.axis[0])
    rf.parallel(rf.op.axis[0])


def schedule_reduction_cpu(s: Schedule, red, target: Target) -> None:
    """A reduction output: parallel over its outputs, the reduction on vector partials along a
    contiguous axis; with few outputs and a long reduction, parallel over chunks of the
    reduction instead (rfactor), the chunks summed after."""
    stage = s[red]
    op = stage.op
    axes = list(op.axis)
    rows = _product(_extent(a) for a in axes)
    n_red = _product(_extent(a) for a in op.reduce_axis)
    nthreads = threads(target)
    if rows is not None and rows < nthreads and n_red is not None and n_red >= LONG_ROW and op.reduce_axis:
        return _parallel_partials(s, stage, 4 * nthreads, lanes(target, stage))
    partial = _vector_rfactor(s, stage, lanes(target, stage))
    if not axes:
        return
    last = axes[-1]
    if partial is None and _across_rows(s, stage):
        # a reduction across rows (x.sum(0)): the reduce loops outside a vector of columns
        jo, ji = _column_loops(stage, lanes(target, stage))
        if ji is not None:
            outer = axes[:-1] + ([jo] if jo is not None else [])
            stage.reorder(*outer, *op.reduce_axis, ji)
            stage.vectorize(ji)
            if outer:
                stage.parallel(_fuse(stage, outer))
            return
    row = _fuse(stage, axes)
    if partial is not None:
        partial.compute_at(stage, row)
    stage.parallel(row)


def panel_width(target: Target, n: int, m: Optional[int] = None, k: Optional[int] = None) -> int:
    """Columns of a matmul register tile and of a packed B panel: NR (two ymm with AVX2: a
    6 x 16 tile, 12 ymm accumulators), or NR_VECTORS native float32 vectors when those are
    wider; with 32 vector registers (AVX-512) WIDE_FILE_VECTORS of them where the output has
    that many columns (a 6 x 64 tile, 24 zmm accumulators: AOCL-BLIS's Zen 4 sgemm kernel
    shape), else two (8 x 32, 16 accumulators); n when the output has fewer columns. Measured
    (one run of benchmarks/models.py each way, twice, 2 threads, a 2-core Intel Xeon Emerald
    Rapids): BERT-base 152/146 -> 128/121 ms, the Llama 341/385 -> 323/309 ms; the Linear
    128 x 2048 x 5632 alone 0.86-0.89x -> 0.94-0.97x torch's speed. With long reductions
    blocked (k_block) and k unrolled, 128 x 3072 x 768 and 128 x 5632 x 2048 measure the two
    tiles alike (paired rounds, one and two threads, same machine).
    With m and k, a Linear's static rows and reduction: the panel one native vector wider
    (wide_panel: 4 x 24 with AVX2, where its panel of k rows stays within PANEL_L2_BYTES) or
    narrower (narrow_panel: 8 x 48 with AVX-512) where that tile pads the product less (a tie
    keeps nr)."""
    lanes_ = target.native_lanes(32)
    wide_file = target.native_registers() >= 32 and n >= WIDE_FILE_VECTORS * lanes_
    nr = max(1, min(n, max(NR, (WIDE_FILE_VECTORS if wide_file else NR_VECTORS) * lanes_)))
    if m is None or k is None:
        return nr
    best = nr
    for other in (wide_panel(target, nr), narrow_panel(target, nr)):
        if other is None or other > n or (other > nr and k * other * 4 > PANEL_L2_BYTES):
            continue
        if padded_work(target, m, n, other) < padded_work(target, m, n, best):
            best = other
    return best


def wide_panel(target: Target, nr: int) -> Optional[int]:
    """A panel one native vector wider than nr whose tile holds as many accumulators in fewer
    rows, where the register file (not MR_MAX) bounds nr's rows; else None. With 16 registers:
    24 (4 x 24: 12 accumulators, 3 B vectors, the broadcast) beside 16 (6 x 16); with 32
    registers none (panel_width takes four vectors there). Measured (one Zen 3 core, CPU time,
    loaded; the Linear's kernel alone, both tiles in one process,
    benchmarks/results-transformers-zen3-avx2.txt):
    at M = 128 (6 x 16 pads the rows to 132, 3 % more work; 4 x 24 none) 4 x 24 took 0.94-1.00x
    6 x 16's time at K = 768 and 2048, but 1.00-1.03x at K = 3072 and 0.98-1.02x at 5632, where
    its panel (K x 24 floats, 288 KB and more) no longer stays in L2 beside A's rows streaming
    through (hence PANEL_L2_BYTES)."""
    lanes_ = target.native_lanes(32)
    if nr % lanes_ or register_rows(target, nr) >= MR_MAX or target.native_registers() >= 32:
        return None
    wide = nr + lanes_
    return wide if accumulators(target, wide) >= accumulators(target, nr) else None


def narrow_panel(target: Target, nr: int) -> Optional[int]:
    """A panel one native vector narrower than nr whose tile holds as many accumulators in more
    rows, with 32 vector registers; else None: 48 (8 x 48: 24 zmm accumulators, 3 B vectors,
    the broadcast) beside 64 (6 x 64). Measured (a Linear's kernel alone, both tiles in one
    process, paired rounds, two threads, a 2-core Intel Xeon Emerald Rapids): at M = 128 (6 x 64
    pads the rows to 132; 8 x 48 none, its columns at most 0.8 % at N = 2048 and 5632) 8 x 48
    ran 1.02-1.07x faster on BERT's and Llama's shapes, 1.15x at M = 32 (36 rows with 6); where
    neither pads more (M = 96, 197) the two alike."""
    lanes_ = target.native_lanes(32)
    if target.native_registers() < 32 or nr % lanes_ or nr <= lanes_:
        return None
    narrow = nr - lanes_
    return narrow if accumulators(target, narrow) >= accumulators(target, nr) else None


def accumulators(target: Target, nr: int) -> int:
    """Vector accumulators of the register tile of a panel of nr columns (whole native vectors):
    register_rows x vectors across."""
    return register_rows(target, nr) * (nr // target.native_lanes(32))


def padded_work(target: Target, m: int, n: int, nr: int) -> int:
    """Outputs a Linear of m x n computes with panels of nr (ops/matmul.py's padded product:
    columns to whole panels, rows past register_rows to whole tiles)."""
    mr = register_rows(target, nr)
    rows = m if m <= mr else ceil_div(m, mr) * mr
    return rows * ceil_div(n, nr) * nr


def register_rows(target: Target, nr: int) -> int:
    """Rows of an mr x nr matmul register tile: as many accumulator rows as the register file
    holds beside one B vector per column vector and the broadcast A value, from MR to MR_MAX:
    6 x 16 with AVX2 (12 of 16 ymm accumulators, BLIS's Haswell/Zen kernel), 6 x 64 (8 x 32
    on narrower outputs) with AVX-512. Measured (benchmarks/gemm_one_thread.py, one Zen 3
    core, CPU time): AVX2 4 x 16 (8 accumulators, right at the FMA latency x pipes) 79-85 % of
    the FMA peak, 6 x 16 85-90 %; on Zen 5 with AVX-512, 4, 8 or 12 rows of the two-zmm panel
    measure alike (74-88 %). A Linear pads its product's rows to a multiple of these
    (ops/matmul.py), so a row count that does not divide M costs no guard in the k loop; other
    matmuls take tail_free_rows."""
    vectors = max(1, ceil_div(nr, target.native_lanes(32)))
    fit = (target.native_registers() - vectors - 1) // vectors
    return max(MR, min(fit, MR_MAX))


def tail_free_rows(rows: int, m) -> int:
    """rows, or where rows leaves a tail of the static row count m (a guard inside the k
    loop, which costs more than the two accumulators gained), the largest power of two below
    it (8 and 4 divide the transformer shapes' M = 128, ...)."""
    m = static(m)
    if m is None or m <= rows or m % rows == 0:
        return rows
    return 1 << (rows.bit_length() - 1)


def packed_width(s: Schedule, mm) -> Optional[int]:
    """nr when the matmul reads B as packed panels B[j // nr, k, j % nr] (prepack.py), or as one
    of a stack of them, B[g, j // nr, k, j % nr] with g free of j and k (a grouped product's
    panels, ops/grouped_mm.py), else None."""
    op = s[mm].op
    j, (k,) = op.axis[-1].var, op.reduce_axis
    for r in matmul_operands(op.body.source[0]):
        idx = resolve_read(s, r).indices
        if len(idx) < 3 or idx[-2] is not k.var or any(uses_var(i, j) or uses_var(i, k.var) for i in idx[:-3]):
            continue
        p, z = idx[-3], idx[-1]
        if isinstance(p, Binary) and p.op == "floordiv" and p.a is j and isinstance(z, Binary) \
                and z.op == "floormod" and z.a is j and static(p.b) is not None and static(p.b) == static(z.b):
            return static(p.b)
    return None


def pair_width(s: Schedule, mm) -> Optional[int]:
    """nr when the matmul reads B as bfloat16 pair panels B[j // nr, k // 2, j % nr, k % 2]
    (prepack.py's "pair_panels"), or as one of a stack of them, B[g, ...] with g free of j and
    k (a grouped product's, ops/grouped_mm.py), else None."""
    op = s[mm].op
    j, (k,) = op.axis[-1].var, op.reduce_axis
    form = (("floordiv", j, None), ("floordiv", k.var, PAIR), ("floormod", j, None), ("floormod", k.var, PAIR))
    for r in matmul_operands(op.body.source[0]):
        idx = resolve_read(s, r).indices
        if len(idx) < 4 or not all(isinstance(e, Binary) for e in idx[-4:]) \
                or any(uses_var(i, j) or uses_var(i, k.var) for i in idx[:-4]):
            continue
        nr = static(idx[-4].b)
        if nr is not None and all(e.op == o and e.a is v and static(e.b) == (c or nr)
                                  for e, (o, v, c) in zip(idx[-4:], form)):
            return nr
    return None


def _pair_dot(s: Schedule, mm, target: Target):
    """(the bfloat16 pair dot product of topi/x86_intrin.py, its lanes) that mm's register
    tile runs, or None: mm reads B as pair panels of whole intrinsic vectors (pair_width),
    its other operand resolves to a bfloat16 buffer read with k as its last index (the
    intrinsic loads a row's pair at once), and the target has the instruction. Otherwise
    its plain loops compute the same sums."""
    lanes_ = bf16_dot_lanes(target)
    nr = pair_width(s, mm)
    if not lanes_ or nr is None or nr % lanes_ or static(_extent(s[mm].op.reduce_axis[0])) is None:
        return None
    op = s[mm].op
    j, (k,) = op.axis[-1].var, op.reduce_axis
    for r in matmul_operands(op.body.source[0]):
        read = resolve_read(s, r)
        if any(uses_var(i, j) for i in read.indices):
            continue                                    # B, the pair panels
        inlined = read.tensor.op in s.stage_map and s[read.tensor.op].attach_type == "inline"
        if str(read.tensor.dtype) != "bfloat16" or inlined or not pairs_contiguous(read.indices, k.var):
            return None
    return dot_bf16_intrin(lanes_), lanes_


def pairs_contiguous(indices, k: Var) -> bool:
    """Whether a read at indices holds each pair (2i, 2i + 1) of k side by side: its last index
    is k plus a term free of k (a slice's offset) and the others are free of k; or its last is
    k % c with c even and the others use k only as k // c (a head merge, k = h * D + d: a pair
    never straddles two heads)."""
    if not indices:
        return False
    *rest, last = indices
    if unit_stride(last, k) and not (isinstance(last, Binary) and last.op == "floormod"):
        return not any(uses_var(i, k) for i in rest)
    c = static(last.b) if isinstance(last, Binary) and last.op == "floormod" and last.a is k else None
    if c is None or c % PAIR:
        return False
    return all(isinstance(i, Binary) and i.op == "floordiv" and i.a is k and static(i.b) == c
               for i in rest if uses_var(i, k))


def matmul_layout(s: Schedule, mm) -> Optional[str]:
    """"nn" when the operand indexed by the output's last axis is contiguous along it (B[k, j]);
    "packed" when it is read in packed panels (B[j // nr, k, j % nr]); "nt" when both operands
    are contiguous along k (A[i, k] * W[j, k]: a Linear); else None."""
    op = s[mm].op
    j = op.axis[-1].var
    (k,) = op.reduce_axis
    if packed_width(s, mm) is not None or pair_width(s, mm) is not None:
        return "packed"
    a, b = (resolve_read(s, r) for r in matmul_operands(op.body.source[0]))
    if any(uses_var(i, j) for i in a.indices):
        a, b = b, a
    if any(uses_var(i, j) for i in a.indices) or not any(uses_var(i, j) for i in b.indices):
        return None
    if unit_stride(b.indices[-1], j):
        return "nn"
    if unit_stride(b.indices[-1], k.var) and runs_along(a.indices[-1], k.var):
        return "nt"
    return None


def runs_along(index, var: Var, run: int = 16) -> bool:
    """unit_stride(index, var), or (a unit stride in var) % c with c a multiple of run: the
    read walks memory with var in runs of c, so every aligned k-vector of up to run lanes is
    contiguous (attention's output read through its head split, [B, H, S, D] as [B, S, H * D]:
    without it Llama's output projection fell to the scalar rows schedule, 5.6x slower)."""
    if unit_stride(index, var):
        return True
    c = static(index.b) if isinstance(index, Binary) and index.op == "floormod" else None
    return c is not None and c % run == 0 and unit_stride(index.a, var)


def _tile_sizes(anchor, rows_wanted: int, cols_wanted: int):
    *_, i, j = anchor.op.axis
    m, n = static(_extent(i)), static(_extent(j))
    mr = rows_wanted if m is None else max(1, min(rows_wanted, m))
    nr = cols_wanted if n is None else max(1, min(cols_wanted, n))
    return mr, nr


def schedule_matmul_cpu(s: Schedule, anchor, matmuls: List, target: Target) -> None:
    """Register-tiled matmul(s) with the anchor (their epilogue, or a write cache) as the tile
    loops; tiles of one column panel run one after another, so the panel of B stays in cache."""
    layout = matmul_layout(s, matmuls[0])
    if layout is None or any(matmul_layout(s, m) != layout for m in matmuls):
        rest = [m for m in matmuls if m is not anchor]
        return schedule_rows_cpu(s, Group(anchor, rest, {m: len(s[anchor].op.axis) for m in rest}), target)
    lanes_ = lanes(target, s[matmuls[0]])
    if layout in ("nn", "packed"):
        n = static(_extent(s[anchor].op.axis[-1]))
        k = static(_extent(s[matmuls[0]].op.reduce_axis[0]))
        nr = panel_width(target, n if n is not None else NR, k=k)
        if layout == "packed":                     # the tile is one panel, so j // nr is the tile loop
            widths = {packed_width(s, m) or pair_width(s, m) for m in matmuls}
            if len(widths) != 1:
                raise ScheduleError("default_schedule", s[anchor].name,
                                    f"the fused matmuls read B in panels of different widths {sorted(widths)}")
            nr = widths.pop()
        if anchor in matmuls:                      # no epilogue: accumulate in a write cache
            cache = s.cache_write(s[anchor].op.output(0), "global")
            matmuls = [s[cache]]
        rows = tail_free_rows(register_rows(target, nr), _extent(s[matmuls[0]].op.axis[-2]))
        _matmul_nn(s, s[anchor], [s[m] for m in matmuls], rows, nr, lanes_, target)
    else:
        _matmul_nt(s, s[anchor], [s[m] for m in matmuls], lanes_, target)


def _tile_anchor(anchor, mr: int, nr: int):
    *batch, i, j = anchor.op.axis
    xo, yo, xi, yi = anchor.tile(i, j, mr, nr)
    anchor.reorder(*batch, yo, xo, xi, yi)
    return batch, yo, xo, xi, yi


def k_run(s, mm) -> Optional[int]:
    """c when the matmul's A operand walks memory with k in runs of c shorter than k, its last
    index (a unit stride in k) % c (attention's output read through its head merge, [B, H, S,
    D] as [B, S, H * D]: runs of D), and c divides k's extent; else None."""
    op = s[mm].op
    j, (k,) = op.axis[-1].var, op.reduce_axis
    n = static(_extent(k))
    for r in matmul_operands(op.body.source[0]):
        idx = resolve_read(s, r).indices
        if any(uses_var(i, j) for i in idx):
            continue                                    # B
        last = idx[-1]
        c = static(last.b) if isinstance(last, Binary) and last.op == "floormod" else None
        if c is not None and n is not None and 1 < c < n and n % c == 0 and unit_stride(last.a, k.var):
            return c
    return None


def _vectorize_columns(stage, ji, width: int, lanes_: int) -> None:
    """Vectorize a tile's columns; a width of whole native vectors whose count is not a power
    of two (24 = 3 ymm) as that many unrolled native vectors: LLVM splits a power-of-two
    vector into native ones, but legalizes a <24 x float> with shuffles (5 % of the FMA peak
    measured in the k loop, benchmarks/results-gemm-one-thread-zen3-avx2.txt)."""
    count = width // lanes_
    if width % lanes_ == 0 and count > 1 and count & (count - 1):
        jv, ji = stage.split(ji, factor=lanes_)
        stage.unroll(jv)
    stage.vectorize(ji)


def k_block(mm, nr: int, tasks: Optional[int], target: Target) -> Optional[int]:
    """Steps of a block of the k loop, where a matmul's packed B panel of all k rows (k x nr
    floats) is over K_BLOCK_PANEL_BYTES and its column panels (tasks, with the batch) are
    twice the threads or more (blocked, only they run in parallel): the largest divisor of k
    up to KC that K_UNROLL divides (at least KC / 4); else None. Blocked, a panel's rows of
    one block stay in L2 as every row tile passes over them, beside A's rows of that block
    (GotoBLAS's kc). Measured
    (a 6 x 64 tile alone, paired rounds, a 2-core Intel Xeon Emerald Rapids): 128 x 5632 x 2048
    1.21x (one thread) and 1.40x (two) with blocks of 512, 128 x 3072 x 768 1.03-1.04x, but
    128 x 2048 x 5632 (a 512 KB panel) 0.98x; AVX2's 6 x 16 tile (panels of 360 KB and less)
    none."""
    n = static(_extent(mm.op.reduce_axis[0]))
    if n is None or n * nr * 4 <= K_BLOCK_PANEL_BYTES or tasks is None or tasks < 2 * threads(target):
        return None
    kc = max(d for d in range(K_UNROLL, KC + 1, K_UNROLL) if n % d == 0) if n % K_UNROLL == 0 else 0
    return kc if kc >= KC // 4 else None


def row_parts(anchor, mm, batch, xo, target: Target) -> int:
    """Parts of the row tiles that the threads take, each walking every column panel (1: the
    threads take column panels). Split where B is at least STREAMED_B_BYTES, there is no batch,
    and each thread keeps at least ROW_PART_TILES row tiles of a panel: in a model such a B
    comes from memory (the other layers' weights evicted it), and the threads then read each
    panel from memory once, together, instead of each streaming panels of its own. Measured
    (whole models, both ways in one process, interleaved rounds, two threads, a 2-core Xeon
    VM, AVX-512): the Llama of benchmarks/models.py 0.965-0.990x the time, with only B of 8 MB
    or more split 0.970x; BERT-base 0.977-0.984x (0.991x its 9.4 MB FFN weights only). A
    Linear called alone again and again, its weight kept in L3, loses: 128 x 2048 x 5632
    1.057x, 128 x 5632 x 2048 1.079x, 128 x 2048 x 2048 1.01x; 128 x 768 x 3072 (9.4 MB) 1.034x.
    Fewer row tiles per thread lost alone too (32 x 2048 x 2048, 2 each: 1.069x). The parts
    split the row tiles evenly or not at all: a last part short of a tile puts the padded rows'
    guard inside the k loop of every tile (256 x 2048 x 2048, 43 tiles of 6 rows: 155 against
    313 GFLOP/s unsplit)."""
    t = threads(target)
    rows = static(_extent(xo))
    k = static(_extent(mm.op.reduce_axis[0]))
    n = static(_extent(anchor.op.axis[-1]))
    if t < 2 or batch or None in (rows, k, n) or rows < t * ROW_PART_TILES or rows % t:
        return 1
    return t if k * n * mm.op.output_dtype(0).bytes >= STREAMED_B_BYTES else 1


def _matmul_nn(s, anchor, matmuls, mr: int, nr: int, lanes_: int, target: Target) -> None:
    mr, nr = _tile_sizes(anchor, mr, nr)
    batch, yo, xo, xi, yi = _tile_anchor(anchor, mr, nr)
    kc = k_block(matmuls[0], nr, _product(_extent(a) for a in batch + [yo]), target)
    parts = row_parts(anchor, matmuls[0], batch, xo, target)
    if parts > 1:
        xp, xo = anchor.split(xo, nparts=parts)
        anchor.reorder(xp, yo, xo, xi, yi)
    for mm in matmuls:
        # blocked k: a column panel's sums at once (the panel of C stays in L1/L2 across blocks)
        mm.compute_at(anchor, yo if kc else xo)
        *_, i, j = mm.op.axis
        (k,) = mm.op.reduce_axis
        io, ii = mm.split(i, factor=mr)
        jo, ji = mm.split(j, factor=nr)
        if kc:
            ko, ki = mm.split(k, factor=kc)
            mm.reorder(jo, ko, io, ki, ii, ji)
            k = ki
        elif (run := k_run(s, mm)) is not None:
            # k split at A's runs: within one, A's index is affine in the inner k (no floordiv
            # and floormod per step). Measured (one Zen 1 core, CPU time, loaded, same process):
            # BERT's output projection 128 x 768 x 768 from the attention's [1, 12, 128, 64],
            # 5.16 -> 4.69 ms (a plain [128, 768] input: 4.51).
            ko, ki = mm.split(k, factor=run)
            mm.reorder(io, jo, ko, ki, ii, ji)
            k = ki
        else:
            mm.reorder(io, jo, k, ii, ji)
        dot = _pair_dot(s, mm, target)
        if dot is not None:             # k in pairs: an mr x nr tile of vdpbf16ps per pair
            k, kp = mm.split(k, factor=PAIR)
            jv, jl = mm.split(ji, factor=dot[1])
            mm.reorder(k, ii, jv, jl, kp)
            _unroll_k(mm, k)
            _prefetch_panel(s, mm, k)
            mm.unroll(ii)
            mm.unroll(jv)
            mm.tensorize(jl, dot[0])
            continue
        _unroll_k(mm, k)
        _prefetch_panel(s, mm, k)
        mm.unroll(ii)
        _vectorize_columns(mm, ji, nr, lanes_)
    _vectorize_columns(anchor, yi, nr, lanes_)
    if parts > 1:
        anchor.parallel(xp)
    else:
        anchor.parallel(_fuse(anchor, batch + ([yo] if kc else [yo, xo])))


def unroll_by_llvm(stage, axis, copies: int) -> None:
    """Ask LLVM's unroller for copies of axis's loop body (the "unroll_count" pragma) where they
    divide its static extent; otherwise leave the loop as it is."""
    n = static(_extent(axis))
    if n is not None and n > copies and n % copies == 0:
        stage.pragma(axis, "unroll_count", copies)


def _unroll_k(mm, k) -> None:
    """K_UNROLL copies of a register tile's k step where they divide the k loop's extent (BLIS's
    sgemm kernels unroll k by 4 too), made by LLVM's unroller (the "unroll_count" pragma), not
    by a split unrolled in schedlang's IR, whose copies every later pass and the LLVM text
    carry. Measured (an nn.Linear's kernel alone, 6 x 64 tile, both ways in one process, paired
    rounds, a 2-core Intel Xeon Emerald Rapids): 1.05-1.12x at 128 x 768 x 3072 and 1.08x at
    128 x 768 x 768 on one core, 1.09x at 128 x 2048 x 5632 on two; the AVX2 6 x 16 tile
    1.10-1.16x on the same machine."""
    unroll_by_llvm(mm, k, K_UNROLL)


def _prefetch_panel(s: Schedule, mm, k) -> None:
    """Prefetch the packed B panel's row PREFETCH_AHEAD k steps ahead (its nr floats, a cache
    line per 16) at each step of a register tile's k loop, as BLAS micro-kernels do: the panel
    is read from L2 (or, in a model, L3) once per row tile, and the hardware prefetchers alone
    leave the loop short of B's rows. Measured (a 2-core Intel Xeon Emerald Rapids, both
    schedules in one process, paired rounds): one thread, Linear 128 x 768 x 3072, 3072 x 768,
    2048 x 5632 and 5632 x 2048 1.02-1.04x (8 to 64 steps ahead alike); stacks of Linears whose
    weights come from L3, as in a model: 24 x (768 x 768) twice 1.017x on two threads and
    1.034x on one, Llama's MLP shapes 1.039x, BERT's 72 Linears 1.014x (two threads); a lone
    128 x 768 x 768 kept in L2, two threads, 0.94-0.98x. gcc-built C kernels of the same tile:
    1.05-1.09x."""
    if packed_width(s, mm) is None and pair_width(s, mm) is None:
        return
    j = mm.op.axis[-1].var
    for read in matmul_operands(mm.op.body.source[0]):
        if any(uses_var(i, j) for i in read.indices) and read.tensor.name in {t.name for t in mm.op.input_tensors}:
            mm.prefetch(read.tensor, k, PREFETCH_AHEAD)


def _k_vector(k, lanes_: int) -> int:
    """Lanes of the partial results along a reduce axis: a native vector, or half or a quarter
    of one when that divides the extent and a whole vector does not (no guarded tail then)."""
    n = static(_extent(k))
    if n is None:
        return lanes_
    for f in (lanes_, lanes_ // 2, lanes_ // 4):
        if f >= 4 and n % f == 0:
            return f
    return min(lanes_, n)


def nt_tile(target: Target) -> tuple:
    """(rows, columns, column block) of a k-vector matmul register tile. With 32 vector
    registers (AVX-512): MR x NT_TILE, 16 accumulators beside a vector of each row and column.
    With 16 (AVX2): MR x NT_TILE / 2, 8 accumulators, so the vectors of a row of A and of a
    column of W fit beside them, and the column tiles in blocks of NT_BLOCK (the block's
    rows of W stay in L2 while every row tile of A passes, A's tile in L1). Measured
    (benchmarks/linear_inplace.py, one Zen 3 core, CPU time, M = 128): 4 x 4 spilled and ran
    at 55-60 % of the packed kernel's speed; 4 x 2 in blocks of 16: 91-99 %; 4 x 3, 3 x 3,
    2 x 4 and blocks of 8 or 32 no better."""
    if target.native_registers() >= 32:
        return MR, NT_TILE, 0
    return MR, NT_TILE // 2, NT_BLOCK


def _matmul_nt(s, anchor, matmuls, lanes_: int, target: Target) -> None:
    """Both operands contiguous along k (A[i, k] * W[j, k]): an mr x nr tile of k-vector
    accumulators (rfactor over k lanes), summed across lanes once per output (nt_tile)."""
    partials = []
    for mm in matmuls:                  # rfactor first: it resets the loops of the stage it factors
        (k,) = mm.op.reduce_axis
        ko, ki = mm.split(k, factor=_k_vector(k, lanes_))
        partials.append(s[s.rfactor(mm.op.output(0), ki, factor_axis=len(mm.op.axis))])
    rows, cols, block = nt_tile(target)
    if block:                           # fused matmuls (gate and up) share the 16 registers
        cols = max(1, cols // len(matmuls))
    mr, nr = _tile_sizes(anchor, rows, cols)
    if mr <= MR // 2 and mr < rows:     # one or two rows (a decode step): more columns instead
        mr, nr = _tile_sizes(anchor, mr, min(2 * NT_TILE, rows * cols // mr))
    batch, yo, xo, xi, yi = _tile_anchor(anchor, mr, nr)
    tile_at, parallel = xo, batch + [yo, xo]
    if block and static(_extent(anchor.op.axis[-1])) is not None \
            and static(_extent(anchor.op.axis[-1])) > block * nr:
        yb, yo = anchor.split(yo, factor=block)
        anchor.reorder(*batch, yb, xo, yo, xi, yi)
        tile_at, parallel = yo, batch + [yb, xo]
    for mm, rf in zip(matmuls, partials):
        *rb, ri, rj, lane = rf.op.axis
        rio, rii = rf.split(ri, factor=mr)
        rjo, rji = rf.split(rj, factor=nr)
        rf.reorder(*rb, rio, rjo, *rf.op.reduce_axis, rii, rji, lane)
        rf.unroll(rii)
        rf.unroll(rji)
        rf.vectorize(lane)
        rf.compute_at(anchor, tile_at)
        if mm is not anchor:
            mm.compute_at(anchor, tile_at)
    if not isinstance(anchor.op.body, Reduce):
        anchor.vectorize(yi)
    anchor.parallel(_fuse(anchor, parallel))


# ---- CUDA ------------------------------------------------------------------------------

def _bind(stage, ivar, name: str) -> None:
    stage.bind(ivar, _thread_axis(name))


def schedule_pointwise_cuda(s: Schedule, st, target: Target) -> None:
    """All axes fused, four elements a thread (a vectorized loop, for vector loads and
    stores), CUDA_THREADS threads a block."""
    stage = s[st]
    axes = list(stage.op.axis)
    if not axes:
        return
    fused = _fuse(stage, axes)
    total = _product(_extent(a) for a in axes)
    per_thread = 4 if total is None or total >= 4 * CUDA_THREADS else 1
    block = CUDA_THREADS if total is None else max(1, min(CUDA_THREADS, ceil_div(total, per_thread)))
    bo, rest = stage.split(fused, factor=block * per_thread)
    if per_thread > 1:
        tx, vec = stage.split(rest, factor=per_thread)
        stage.vectorize(vec)
    else:
        tx = rest
    _bind(stage, bo, "blockIdx.x")
    _bind(stage, tx, "threadIdx.x")


def reduce_threads(n: Optional[int]) -> int:
    """Threads of a cross-thread reduction over n elements: a power of two up to a warp for
    short ones, whole warps (up to CUDA_REDUCE_THREADS) for long ones, as the cuda target's
    thread_allreduce requires."""
    if n is None or n >= 8 * CUDA_REDUCE_THREADS:
        return CUDA_REDUCE_THREADS
    if n > 32:
        return min(CUDA_REDUCE_THREADS, 32 * max(1, n // (8 * 32)))
    return 1 << max(0, (n - 1).bit_length())


def schedule_scalar_reduction_cuda(s: Schedule, st) -> None:
    """A reduction to a scalar (x.sum()): one block, the reduce axes fused and split over its
    threads, combined across them. A reduction of several values (argmax) cannot be combined
    across threads: it keeps its loop, one thread (the cuda target runs such a kernel)."""
    stage = s[st]
    op = stage.op
    if not op.reduce_axis or op.body.combiner.arity != 1:
        return
    k = _fuse(stage, list(op.reduce_axis))
    n = reduce_threads(static(_extent(k)))
    if n > 1:
        _, ki = stage.split(k, factor=n)
        _bind(stage, ki, "threadIdx.x")


def schedule_rows_cuda(s: Schedule, group: Group, target: Target) -> None:
    """One thread per row: the rows fused and bound, the reductions computed in the thread.
    A scalar anchor: a cross-thread reduction (a reduction), one thread (pointwise)."""
    anchor = s[group.anchor]
    axes = list(anchor.op.axis)
    if not axes:
        if isinstance(anchor.op.body, Reduce):
            schedule_scalar_reduction_cuda(s, anchor)
        return
    p = min((group.prefix[r] for r in group.attached), default=len(axes))
    p = max(1, min(p, len(axes)))
    row = _fuse(anchor, axes[:p])
    rows = _product(_extent(a) for a in axes[:p])
    block = CUDA_ROW_THREADS if rows is None else max(1, min(CUDA_ROW_THREADS, rows))
    bo, tx = anchor.split(row, factor=block)
    for r in group.attached:
        s[r].compute_at(anchor, tx)
    _bind(anchor, bo, "blockIdx.x")
    _bind(anchor, tx, "threadIdx.x")


def schedule_matmul_cuda(s: Schedule, anchor, matmuls: List, target: Target) -> None:
    """float16/bfloat16 on sm_80+ in whole fragments: tensor cores (tensorcore_schedules.py).
    Otherwise a tiled matmul: a block per CUDA_TILE tile of the output, a thread per output
    element with its accumulator in a register; the epilogue applied by the same thread."""
    plan = tensorcore_plan(s, anchor, matmuls, target)
    if plan is not None:
        return schedule_matmul_tensorcore(s, anchor, matmuls[0], plan)
    stage = s[anchor]
    if anchor in matmuls:
        cache = s.cache_write(stage.op.output(0), "local")
        matmuls = [cache]
    mr, nr = _tile_sizes(stage, *CUDA_TILE)
    *batch, i, j = stage.op.axis
    bi, bj, ti, tj = stage.tile(i, j, mr, nr)
    if batch:
        _bind(stage, _fuse(stage, batch), "blockIdx.z")
    _bind(stage, bi, "blockIdx.y")
    _bind(stage, bj, "blockIdx.x")
    _bind(stage, ti, "threadIdx.y")
    _bind(stage, tj, "threadIdx.x")
    for mm in matmuls:
        s[mm].compute_at(stage, tj)
