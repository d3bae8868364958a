"""Attention on tensor cores (the cuda target, float16 / bfloat16, sm_80+): the stages of a
fused attention written for mma.sync m16n8k16, and their schedule.

    applies(q, k, v, target, heads_ratio)     whether the tensor-core form is taken
    stages(stage, out_stage, q, k, v, score, safe)   the stages (ops/attention.py asks)
    schedule(s, parts, target)                the schedule (attention_schedule.py asks)

The dot products run on tensor cores, so their operands must be float16 / bfloat16 fragments:
the probabilities are rounded to the input dtype before P.V (as FlashAttention does), and
the row sums are the sums of those rounded values, taken by the same mma: V is extended by
EXTRA columns of ones (`vext`), so column Ev of P.V is the row sum. Per block of BQ = 16
query rows (one warp), in shared memory only a chunk of BKV keys at a time:

    pass 1, over key chunks:  mscores = Q.K^T (mma), max = row max of score(mscores)
    pass 2, over key chunks:  scores = Q.K^T (mma), P = rounded exp(score(scores) - max),
                              acc += P.[V | 1] (mma; the accumulators stay in registers)
    out = acc[:, :Ev] / acc[:, Ev]

Softmax statistics are float32. This is the two-pass form of FlashAttention (Q.K^T twice,
no rescaling): the online form rescales the accumulators at each chunk, a recurrence the
stage language does not express. No stage is L x S: the largest is BQ x BKV.

It applies where q, k and v have one float16 / bfloat16 dtype and the same static batch
dims (no grouped-query heads), L and S are multiples of 16, E of 16 and Ev of 8 (E <= 256,
Ev <= 128): whole fragments. Anything else keeps the CUDA-core schedule.
"""
from __future__ import annotations

from typing import Callable, Dict

import schedlang as sl

from ..tensor import thread_axis
from ..topi.cuda_tensorcore import fragment_load

ELEMENTS = ("float16", "bfloat16")     # (tensorcore_schedules.ELEMENTS: fuse imports this module's importer)

ROLES = ("mscores", "max", "scores", "exp", "vext", "pv")
BQ = 16                 # query rows a block (one warp: an mma tile's rows)
EXTRA = 8               # columns of ones after V's (an mma tile's columns): column Ev is the row sum
WARP = 32
MAX_E, MAX_EV = 256, 128


def _static(x):
    return x if isinstance(x, int) else getattr(x, "value", None)


def applies(q, k, v, target, heads_ratio: int) -> bool:
    """Whether the attention of q [..., L, E], k [..., S, E], v [..., S, Ev] takes the
    tensor-core form on target (see the module's docstring)."""
    from ..target.cuda.intrin import mma    # (the cuda target's library, loaded when used)
    if not getattr(target, "arch", None) or not mma.supported(target) or heads_ratio != 1 or q is k:
        return False
    if str(q.dtype) not in ELEMENTS or not str(q.dtype) == str(k.dtype) == str(v.dtype):
        return False
    shapes = [tuple(_static(x) for x in t.shape) for t in (q, k, v)]
    if any(None in sh or len(sh) < 2 for sh in shapes) or not shapes[0][:-2] == shapes[1][:-2] == shapes[2][:-2]:
        return False
    (L, E), (S, E2), (S2, Ev) = (sh[-2:] for sh in shapes)
    return E == E2 and S == S2 and L % 16 == 0 and S % 16 == 0 and E % 16 == 0 and Ev % 8 == 0 \
        and E <= MAX_E and Ev <= MAX_EV


def stages(stage: Callable, out_stage: Callable, q, k, v, score: Callable, safe: bool) -> sl.Tensor:
    """The tensor-core attention's stages; stage(shape, body, role) makes a tagged stage,
    out_stage(shape, body) the output; score as ops/attention.fused_attention takes it."""
    nb = q.ndim - 2
    batch = tuple(q.shape[:-2])
    L, S, E, Ev = q.shape[-2], k.shape[-2], q.shape[-1], v.shape[-1]
    el, acc = str(q.dtype), "float32"
    f32 = lambda x: sl.cast(acc, x)       # noqa: E731

    def qk(role):
        e = sl.reduce_axis((0, E), name="e")
        return stage(batch + (L, S), lambda x: sl.sum(f32(q[tuple(x[:nb] + [x[nb], e])])
                                                      * f32(k[tuple(x[:nb] + [x[nb + 1], e])]), axis=e), role)
    x1 = score(qk("mscores"))
    j = sl.reduce_axis((0, S), name="s")
    top = stage(batch + (L,), lambda r: sl.max(x1[tuple(r) + (j,)], axis=j), "max")
    x2 = score(qk("scores"))
    ninf, zero = sl.const(float("-inf"), acc), sl.const(0.0, acc)

    def shift(r):
        m = top[tuple(r)]
        return sl.select(m == ninf, zero, m) if safe else m   # exp(-inf - 0) = 0 in a masked row
    p = stage(batch + (L, S), lambda y: sl.cast(el, sl.exp(x2[tuple(y)] - shift(y[:-1]))), "exp")
    one = sl.const(1.0, el)
    vext = stage(batch + (S, Ev + EXTRA), lambda y: sl.select(
        y[-1] < Ev, v[tuple(y[:-1] + [sl.min(y[-1], Ev - 1)])], one), "vext")
    j2 = sl.reduce_axis((0, S), name="s")
    pv = stage(batch + (L, Ev + EXTRA), lambda y: sl.sum(f32(p[tuple(y[:-1] + [j2])])
                                                         * f32(vext[tuple(y[:-2] + [j2, y[-1]])]), axis=j2), "pv")

    def result(y):
        # every extra column holds the row sum; reading column Ev + d % EXTRA makes the tile
        # the output reads whole 16 x 8 accumulator tiles (store_c writes only whole tiles)
        t = pv[tuple(y[:-1] + [Ev + y[-1] % EXTRA])]
        value = pv[tuple(y)] / t
        return sl.cast(el, sl.select(t == zero, zero, value) if safe else value)
    return out_stage(batch + (L, Ev), result)


def shared_bytes(E: int, Ev: int, bkv: int) -> int:
    """Shared memory of a block with key chunks of bkv: Q's rows, K's chunk twice (one copy a
    pass), both passes' float score tiles, the float P.[V | 1] tile, P's and [V | 1]'s chunks
    (half rows padded for ldmatrix: row strides of 16k + 8 halves, the last row unpadded)."""
    def halves(rows, cols):
        return (rows - 1) * (cols + (8 - cols) % 16) + cols
    return 2 * (halves(BQ, E) + 2 * halves(bkv, E) + halves(BQ, bkv) + halves(bkv, Ev + EXTRA)) \
        + 4 * (2 * BQ * bkv + BQ * (Ev + EXTRA))


def _chunk(S: int, E: int, Ev: int, limit: int) -> int:
    """Keys a chunk: the largest of 64, 32, 16 that divides S and fits in limit bytes of shared
    memory (16 always divides S; its tiles are 25 KB at E = 256, Ev = 128)."""
    return next((c for c in (64, 32) if S % c == 0 and shared_bytes(E, Ev, c) <= limit), 16)


def _lanes(st, *axes):
    """The stage's loops over axes fused and spread over the warp's lanes."""
    fused = st.fuse(*axes)
    _, tx = st.split(fused, WARP)
    st.bind(tx, thread_axis("threadIdx.x"))


def _gemm_tile(s, tile, frag_of, cols: int, reduce_step: int, intrin):
    """tile (a shared BQ x cols stage filled from its warp fragment frag_of by store_c) and the
    fragment's loops: k split into reduce_step chunks (returned: the chunk and 16-step loops)
    and 16 x 8 mma tiles unrolled."""
    from ..target.cuda.intrin import mma    # (as above)
    *tb, ti, tj = tile.op.axis
    fo, fi = tile.split(ti, 16)
    go, gi = tile.split(tj, 8)
    tile.reorder(*tb, fo, go, fi, gi)
    tile.unroll(go)
    tile.tensorize(fi, mma.store_c_intrin("float32", "shared"))
    frag = frag_of
    frag.compute_at(tile, fo)
    *cb, ci, cj = frag.op.axis
    ko, kk = frag.split(frag.op.reduce_axis[0], reduce_step)
    km, ki = frag.split(kk, 16)
    cio, cii = frag.split(frag.split(ci, 16)[1], 16)      # (the region first: unroll sees its extents)
    cjo, cji = frag.split(frag.split(cj, cols)[1], 8)
    frag.reorder(*cb, ko, km, cio, cjo, cii, cji, ki)
    frag.unroll(cio)
    frag.unroll(cjo)
    frag.tensorize(cii, intrin)
    return ko, km


def _shared_fetch(s, st, at, loop, element: str) -> None:
    """A shared copy of an operand at loop of at, its rows padded for ldmatrix, spread over the
    lanes: 16-byte cp.async copies where the operand is read directly."""
    from ..target.cuda.intrin import copy    # (as above)
    from .tensorcore_schedules import PAD, _direct
    st.compute_at(at, loop)
    *lead, r, c = st.op.axis
    st.storage_align(r, 16, PAD)
    if _direct(s, st.op.input_tensors[0]) and _static(c.dom.extent) % 8 == 0:
        c, lanes = st.split(c, 8)
        st.tensorize(lanes, copy.cp_async_intrin(element))
    _lanes(st, *lead, r, c)


def schedule(s, parts: Dict[str, object], out, target) -> None:
    """The schedule of the tensor-core attention whose stages are parts (role -> stage) and
    whose output stage is out: a block (one warp) per 16 query rows of each batch entry."""
    from ..target.cuda.intrin import mma    # (as above)
    from .fuse import matmul_operands
    from .tensorcore_schedules import PAD
    ms, mx, sc, p, vx, pv = (parts[r] for r in ROLES)
    el = str(p.op.output_dtype(0))
    q_t, k_t = (r.tensor for r in matmul_operands(ms.op.body.source[0]))
    S = _static(ms.op.axis[-1].dom.extent)
    E = _static(q_t.shape[-1])
    Ev = _static(out.op.axis[-1].dom.extent)
    bkv = _chunk(S, E, Ev, target.max_shared_memory_per_block)
    # the caches first, then scopes and attachments
    pv_frag = s[s.cache_write(pv.op.output(0), "warp")]
    sc_frag = s[s.cache_write(sc.op.output(0), "warp")]
    ms_frag = s[s.cache_write(ms.op.output(0), "warp")]
    qs = s[s.cache_read(q_t, "shared", [sc_frag.op, ms_frag.op])]
    ks = s[s.cache_read(k_t, "shared", [sc_frag.op])]
    ks2 = s[s.cache_read(k_t, "shared", [ms_frag.op])]
    vs = s[s.cache_read(vx.op.output(0), "shared", [pv_frag.op])]
    pf = s[s.cache_read(p.op.output(0), "warp", [pv_frag.op])]
    vf = s[s.cache_read(vs.op.output(0), "warp", [pv_frag.op])]
    qf = s[s.cache_read(qs.op.output(0), "warp", [sc_frag.op])]
    qf2 = s[s.cache_read(qs.op.output(0), "warp", [ms_frag.op])]
    kf = s[s.cache_read(ks.op.output(0), "warp", [sc_frag.op])]
    kf2 = s[s.cache_read(ks2.op.output(0), "warp", [ms_frag.op])]
    vx.compute_inline()

    # the output: a block per (batch entry, 16 rows), its elements over the lanes
    *batch, i, d = out.op.axis
    bo, ii = out.split(i, BQ)
    out.reorder(*batch, bo, ii, d)
    block = out.fuse(*batch, bo) if batch else bo
    out.bind(block, thread_axis("blockIdx.x"))
    _lanes(out, ii, d)
    _shared_fetch(s, qs, out, block, el)

    # pass 1: the row max over key chunks, each chunk's scores by mma
    mx.compute_at(out, block)
    *mb, mi = mx.op.axis
    jo, ji = mx.split(mx.op.reduce_axis[0], bkv)
    mx.reorder(*mb, jo, mi, ji)
    for t in (ms, sc, pv):
        t.set_scope("shared")
    ms.compute_at(mx, jo)
    km1 = _gemm_tile(s, ms, ms_frag, bkv, E, mma.mma_intrin(el, "float32", "nk"))[1]
    _shared_fetch(s, ks2, mx, jo, el)
    fragment_load(qf2, ms_frag, km1, mma.load_a_intrin(el), (16, 16), (16, 16))
    fragment_load(kf2, ms_frag, km1, mma.load_b_intrin(el, "nk"), (8, 16), (bkv, 16))

    # pass 2: P.[V | 1] over key chunks; each chunk's scores by mma, P rounded into shared
    pv.compute_at(out, block)
    n = Ev + EXTRA
    ko, km = _gemm_tile(s, pv, pv_frag, n, bkv, mma.mma_intrin(el, "float32", "kn"))
    sc.compute_at(pv_frag, ko)
    km2 = _gemm_tile(s, sc, sc_frag, bkv, E, mma.mma_intrin(el, "float32", "nk"))[1]
    _shared_fetch(s, ks, pv_frag, ko, el)
    fragment_load(qf, sc_frag, km2, mma.load_a_intrin(el), (16, 16), (16, 16))
    fragment_load(kf, sc_frag, km2, mma.load_b_intrin(el, "nk"), (8, 16), (bkv, 16))
    p.set_scope("shared")
    p.compute_at(pv_frag, ko)
    *pb, pi, pj = p.op.axis
    p.storage_align(pi, 16, PAD)
    _lanes(p, *pb, pi, pj)
    _shared_fetch(s, vs, pv_frag, ko, el)
    fragment_load(pf, pv_frag, km, mma.load_a_intrin(el), (16, 16), (16, 16))
    fragment_load(vf, pv_frag, km, mma.load_b_intrin(el, "kn"), (16, 8), (16, n))
