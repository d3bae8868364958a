"""The attention kernel kind: which stages form one fused attention (fuse.py asks), and its
default schedules (schedules.py dispatches here).

The stages (ops/attention.py: fused_attention) carry tags: the output "attention", the others
"attention.<role>" (kt, scores, max, exp, sum, pv). They are one kernel whatever the generic
fusion rules would make of them; the score function between the dot products and the row
max (scale, masks, a hand-written chain of elementwise ops) is inlined.

CPU: parallel over (batch dims, chunks of query blocks); K transposed once per chunk; for
each block of QUERY_BLOCK query rows: the block's scores (a register-tiled matmul, vectors
along the keys), row max, exp, row sum, and the value product (register-tiled, vectors
along the head dim), then out = pv / sum. The [L, S] stages hold one block: memory is
QUERY_BLOCK x S per thread. A causal attention's blocks skip the chunks of keys past their
last row (_skip_masked_keys: store predicates on every stage's key loop). A training graph's
attention has one more output column, each row's logsumexp (ops/attention.py, with_lse): the
block computes it beside its row sums like any other column. CUDA: a block per (batch dims,
block of query rows), a thread per query row doing that row's whole softmax and value
product; the tensor-core stages
(attention_tensorcore.py: float16/bfloat16 on sm_80+) take that module's schedule.
"""
from __future__ import annotations

from typing import Dict, List

from ..errors import ScheduleError
from ..expr.extent import ceil_div
from ..tensor import thread_axis
from . import attention_tensorcore

TAG = "attention"                 # the output stage
ROLE_TAG = "attention."           # + role: the other stages
ROLES = ("kt", "scores", "max", "exp", "sum", "pv")
CAUSAL = "causal"                 # the output's attr: every key after the query's row is masked (-inf)
QUERY_BLOCK = 16                  # query rows per block (the [L, S] stages hold this many rows)
MR = 4                            # rows of a register tile (scores, value product) with 16 vector registers
MR_WIDE = 8                       # with 32 (AVX-512): 8 x 2 vector accumulators
KEY_VECTORS = 2                   # vectors of keys a score tile's row holds
VALUE_ACCUMULATORS = 24           # the most vector accumulators of a value product tile over all of d
CUDA_QUERY_BLOCK = 32             # query rows (threads) per CUDA block


def is_attention(st) -> bool:
    """Whether the stage is part of a fused attention (its output or one of its stages)."""
    tag = getattr(st.op, "tag", "")
    return tag == TAG or tag.startswith(ROLE_TAG)


def role(st) -> str:
    """"out" for the attention's output, else the role in ROLES."""
    tag = st.op.tag
    return "out" if tag == TAG else tag[len(ROLE_TAG):]


def claim_attention(s, live: List, anchor_of: Dict, prefix: Dict) -> None:
    """Make each attention of schedule s one kernel in fuse's maps: its stages are anchored at
    its output, and no other stage is computed inside it (a projection the generic rules
    would attach to the scores keeps its own kernel)."""
    owner = {}
    for out in (st for st in live if st.op.tag == TAG):
        todo = [out]
        while todo:                       # through inlined stages too (the score function)
            for st in s.inputs_of(todo.pop()):
                if st not in owner and is_attention(st) and role(st) != "out":
                    owner[st] = out
                    todo.append(st)
                elif st.attach_type == "inline" and not is_attention(st):
                    todo.append(st)
    for st in live:
        if st in owner:
            anchor_of[st], prefix[st] = owner[st], 0
        elif is_attention(anchor_of[st]) and anchor_of[st] is not st:
            anchor_of[st] = st
            prefix.pop(st, None)


def _stages(s, group, roles=ROLES) -> Dict[str, object]:
    """The attention's stages by role: every one of roles (a ScheduleError where one is
    missing), and "q" where the kernel has it (the blocks' copies of padded query rows)."""
    found = {role(s[st]): s[st] for st in group.attached if is_attention(s[st])}
    missing = [r for r in roles if r not in found]
    if missing:
        raise ScheduleError("default_schedule", group.anchor.name,
                            f"the attention kernel lacks its {', '.join(missing)} stage(s)")
    return found


def _cols(n, lanes: int) -> int:
    """Elements of one vectorized inner loop along an axis of n: KEY_VECTORS vectors, or all of n."""
    return KEY_VECTORS * lanes if n is None or n > KEY_VECTORS * lanes else n


def _row_reduction(s, st, lanes: int, at, loop):
    """A reduction along the contiguous key axis at the block loop: on a vector of partial
    results when the keys split in whole vectors, else a plain loop. Returns the stage and
    the loop that runs over the keys (a chunk of `keys` keys per iteration)."""
    from .schedules import static    # schedules imports this module (is_attention)
    (j,) = st.op.reduce_axis
    n = static(j.dom.extent)
    if n is not None and n % lanes == 0 and n >= lanes:
        _, ji = st.split(j, factor=lanes)
        rf = s[s.rfactor(st.op.output(0), ji, factor_axis=len(st.op.axis))]
        *spatial, lane = rf.op.axis
        rf.reorder(*spatial, *rf.op.reduce_axis, lane)
        rf.vectorize(lane)
        rf.compute_at(at, loop)
        st.compute_at(at, loop)
        return rf, rf.op.reduce_axis[0], lanes
    st.compute_at(at, loop)
    return st, j, 1


def _value_tile(d, lanes: int, rows: int) -> tuple:
    """(rows, cols) of the value product's register tile over a head dim of d: rows x two
    vectors where those tile d; else all of d in one tile, with as many of the rows (a power
    of two) as keep its vectors to VALUE_ACCUMULATORS registers, where d is whole vectors: a
    last tile short of d would guard every step of the key loop (a head dim of 80 in tiles of
    32 ran at a third of the speed of 64 or 96)."""
    if d is None or d <= KEY_VECTORS * lanes or d % (KEY_VECTORS * lanes) == 0 or d % lanes:
        return rows, None
    vectors = ceil_div(d, lanes)
    while rows > 1 and rows * vectors > VALUE_ACCUMULATORS:
        rows //= 2
    return rows, d


def _tiled_product(st, lanes: int, rows: int, cols=None):
    """A block's matmul (scores or the value product): rows x cols (default: two vectors)
    of columns in registers, the whole reduction inside the tile. Returns the column loop,
    the reduction loop and the columns per column iteration."""
    from .schedules import _vectorize_columns, static    # (as above)
    *_, i, c = st.op.axis
    (r,) = st.op.reduce_axis
    cols = cols or _cols(static(c.dom.extent), lanes)
    io, ii = st.split(i, factor=rows)
    co, ci = st.split(c, factor=cols)
    st.reorder(io, co, r, ii, ci)
    st.unroll(ii)
    _vectorize_columns(st, ci, cols, lanes)     # (5 vectors as 5 native ones, not one of 80 lanes)
    return co, r, cols


def _skip_masked_keys(block, qb: int, key_loops, grain: int) -> None:
    """Causal attention: the stages of query block `block` (an expression of the output's
    loops) skip every key chunk at or past the block's last row rounded up to `grain` keys:
    those keys are masked for all of the block's rows, so they add nothing to the row max,
    the row sum or the value product (a flash kernel's skipped blocks). key_loops: (stage,
    loop over the keys, keys per iteration), each chunk size dividing grain, so every stage
    computes the same keys and reads only keys its producers computed."""
    limit = ((block + 1) * qb + (grain - 1)) // grain * grain
    for st, loop, keys in key_loops:
        assert grain % keys == 0, (grain, keys)
        st.set_store_predicate(loop.var * keys < limit)


def _chunks(blocks, nb, threads: int) -> int:
    """The parallel chunks of the query blocks of each of nb batch entries: enough tasks for
    the cores, and few of them per batch entry (K is transposed once per task)."""
    if nb is None or blocks is None:
        return 1
    return max(1, min(blocks, ceil_div(2 * threads, nb)))


def query_rows(L: int, nb, target) -> int:
    """The rows the CPU schedule's blocks cover for L query rows of nb batch entries (None:
    symbolic): whole QUERY_BLOCKs, as many in each parallel chunk (else the last chunk's
    missing block would guard each row of the products), or whole MR_WIDE-row tiles where
    L is one block."""
    from .schedules import threads    # (as above)
    if L <= QUERY_BLOCK:
        return ceil_div(L, MR_WIDE) * MR_WIDE
    blocks = ceil_div(L, QUERY_BLOCK)
    chunks = _chunks(blocks, nb, threads(target))
    return ceil_div(blocks, chunks) * chunks * QUERY_BLOCK


def schedule_attention_cpu(s, group, target) -> None:
    from .schedules import static, threads    # (as above)
    out = s[group.anchor]
    parts = _stages(s, group)
    lanes = target.native_lanes(parts["scores"].op.output_dtype(0).bits)
    *batch, i, d = out.op.axis
    # the blocks of the products' rows, which may run past the output's (ops/attention.py pads)
    L = static(parts["scores"].op.axis[-2].dom.extent)
    qb = QUERY_BLOCK if L is None else max(1, min(QUERY_BLOCK, L))
    io, ii = out.split(i, factor=qb)
    nb = 1
    for a in batch:
        e = static(a.dom.extent)
        nb = None if nb is None or e is None else nb * e
    blocks = None if L is None else ceil_div(L, qb)
    chunks = _chunks(blocks, nb, threads(target))
    if chunks > 1:
        outer, io = out.split(io, nparts=chunks)
        out.reorder(*batch, outer, io, ii, d)
        task = out.fuse(*batch, outer) if batch else outer
        # the query block io runs: the chunk (innermost of the fused task loop) and io within it
        block = (task.var % chunks if batch else task.var) * ceil_div(blocks, chunks) + io.var
    else:
        out.reorder(*batch, io, ii, d)
        task = out.fuse(*batch) if batch else None
        block = io.var
    kt = parts["kt"]
    if task is None:                      # no batch dims and one chunk: everything per block
        task = io
    kt.compute_at(out, task)
    *_, ke, kj = kt.op.axis
    kjo, kji = kt.split(kj, factor=lanes)
    kt.reorder(kjo, ke, kji)
    kt.vectorize(kji)
    for r in ("scores", "exp", "pv"):
        parts[r].compute_at(out, io)
    if "q" in parts:                      # the block's padded query rows, copied once
        qc = parts["q"]
        qc.compute_at(out, io)
        *_, qe = qc.op.axis
        qc.vectorize(qc.split(qe, factor=lanes)[1] if (static(qe.dom.extent) or 0) > lanes else qe)
    rows = MR_WIDE if (target.options.vector_bits or 0) >= 512 else MR   # measured: 8 rows 1.3x faster there
    sco, _, scols = _tiled_product(parts["scores"], lanes, rows)
    _, pr, _ = _tiled_product(parts["pv"], lanes, *_value_tile(static(d.dom.extent), lanes, rows))
    ex = parts["exp"]
    *_, ej = ex.op.axis
    ecols = _cols(static(ej.dom.extent), lanes)
    ejo, eji = ex.split(ej, factor=ecols)
    ex.vectorize(eji)
    key_loops = [(parts["scores"], sco, scols), (ex, ejo, ecols)]
    for r in ("max", "sum"):
        key_loops.append(_row_reduction(s, parts[r], lanes, out, io))
    S = static(ej.dom.extent)
    if dict(out.op.attrs).get(CAUSAL) and S is not None and S > 2 * lanes:   # (else one chunk of keys)
        # the value product's keys in chunks too: a guard on each key would sit in its hot loop
        # (measured: most of the gain lost)
        pro, _ = parts["pv"].split(pr, factor=2 * lanes)
        _skip_masked_keys(block, qb, key_loops + [(parts["pv"], pro, 2 * lanes)], 2 * lanes)
    dcols = _cols(static(d.dom.extent), lanes)
    if static(d.dom.extent) == dcols:
        out.vectorize(d)
    else:
        out.vectorize(out.split(d, factor=dcols)[1])
    out.parallel(task)


def schedule_attention_cuda(s, group, target) -> None:
    from .schedules import static    # (as above)
    out = s[group.anchor]
    if any(role(s[st]) == attention_tensorcore.ROLES[0] for st in group.attached if is_attention(s[st])):
        return attention_tensorcore.schedule(s, _stages(s, group, attention_tensorcore.ROLES), out, target)
    parts = _stages(s, group)
    parts["kt"].compute_inline()          # a thread reads its keys straight from k
    *batch, i, d = out.op.axis
    L = static(i.dom.extent)
    qb = CUDA_QUERY_BLOCK if L is None else max(1, min(CUDA_QUERY_BLOCK, L))
    io, ii = out.split(i, factor=qb)
    out.reorder(*batch, io, ii, d)
    block = out.fuse(*batch, io) if batch else io
    for r in ("scores", "max", "exp", "sum", "pv"):
        parts[r].compute_at(out, ii)
    out.bind(block, thread_axis("blockIdx.x"))
    out.bind(ii, thread_axis("threadIdx.x"))
