"""Attention: scaled_dot_product_attention as one fused kernel's stages, and _safe_softmax
(what a decomposed SDPA keeps: softmax giving 0, not NaN, for a row masked entirely to -inf).

`fused_attention` writes the stages the attention kernel kind schedules
(torch/attention_schedule.py), each tagged with its role:

    <n>_kt[..., e, j]     = k[..., j, e]                       (K transposed: scores vectorize along j)
    <n>_q[..., i, e]      = q[..., min(i, L - 1), e]            (padded rows only: see below)
    <n>_scores[..., i, j] = sum_e q[..., i, e] * kt[..., e, j]
    x(i, j)               = score(scores)                       (scale, masks: inlined, never stored)
    <n>_max[..., i]       = max_j x
    <n>_exp[..., i, j]    = exp(x - max)
    <n>_sum[..., i]       = sum_j exp
    <n>_pv[..., i, d]     = sum_j exp * v[..., j, d]
    <n>[..., i, d]        = pv / sum

The default schedule computes all of them per block of query rows, so the [L, S] stages
hold one block of rows (linear in the sequence length), never the whole score matrix. The
output of a causal SDPA carries the attr "causal" (every key after the query's row is
masked), as does one whose mask is causal written out (causal_mask.py): the schedule skips
those keys.

On the CPU, SDPA's stages cover whole blocks: L rounded up to whole query blocks and S to
whole key tiles (padded_extents), the padded query rows reading q's last row (computed, never
stored) and the padded keys k's and v's last one under a -inf score, so that no tile of the
two products tests a row or a key against the end (a guard in their hot loops ran a
197-token ViT attention at 0.4x torch's speed). As a padded Linear does (matmul.py). The
clamped rows of q are copied per block (the "q" stage): read in the register tile, their
eight min()s became one vector LLVM took apart again at every step of the dot product.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import schedlang as sl

from .. import attention_tensorcore
from ...expr.extent import ceil_div
from ...tensor.op import REALIZE_WHOLE
from ..attention_schedule import CAUSAL, KEY_VECTORS, ROLE_TAG, TAG, query_rows
from .accum import acc_dtype, dtype_arg, is_float
from .causal_mask import hides_later_keys
from .common import broadcast_shape, compute, cpu_layouts, mismatch, norm_dim, read_broadcast, same_extent, static
from .norm import softmax_exp, softmax_of
from .reduce import all_reducer, reduced_index, reduction
from .registry import LowerContext, Unsupported, lookup, register_lowering


@register_lowering("aten._safe_softmax.default")
def safe_softmax(ctx: LowerContext, x, dim, dtype=None):
    """softmax over dim (`<name>_softmax...` stages), then 0 where the whole row is -inf
    (`<name>_masked`, an all-reduction), as torch's decomposition computes it."""
    out = dtype_arg(dtype, "_safe_softmax") or str(x.dtype)
    if not (is_float(out) and is_float(x.dtype)):
        raise Unsupported(f"_safe_softmax of {x.dtype} into {out}: floating point only")
    d = norm_dim(dim, x.ndim, "_safe_softmax: dim")
    soft = softmax_of(LowerContext(ctx.name("softmax"), ctx.target), x, d, out, False, "_safe_softmax")
    dims = (d,) if x.ndim else ()
    ninf = sl.const(float("-inf"), str(x.dtype))
    masked = reduction(x.shape, dims, True, all_reducer, lambda idx: x[tuple(idx)] == ninf, ctx.name("masked"))
    zero = sl.const(0.0, out)
    return compute(x.shape, lambda idx: sl.select(masked[reduced_index(idx, dims, True)], zero, soft[tuple(idx)]),
                   ctx.name())


# ---- the fused kernel's stages

def _reader(t: sl.Tensor, batch: Sequence, heads_ratio: int, rows=None):
    """index (batch..., row, col) -> t's element, t's batch dims broadcast to batch and, for
    grouped-query attention (heads_ratio > 1), query head h reading t's head h // ratio;
    rows: t's row count where the index runs past it (a padded stage), read as the last row."""
    def read(index):
        lead = list(index[:-2])
        if heads_ratio > 1:
            lead[-1] = sl.floordiv(lead[-1], heads_ratio)
        row = index[-2] if rows is None else sl.min(index[-2], rows - 1)
        return read_broadcast(t, tuple(batch) + tuple(t.shape[-2:]), lead + [row, index[-1]])
    return read


def padded_extents(target, score: Callable, batch, L, S, acc: str) -> Optional[tuple]:
    """(L, S) rounded up to whole blocks of the CPU schedule: L to the rows its blocks cover
    (attention_schedule.query_rows), S to whole key tiles of KEY_VECTORS vectors (whole
    vectors when it is one tile); None where nothing is padded, the sizes are symbolic, the
    target is not the CPU or the score function cannot mask padded keys (only SDPA's own
    can: a hand-written chain's masks are [L, S])."""
    if not getattr(score, "pads", False) or not cpu_layouts(target) or not (isinstance(L, int) and isinstance(S, int)):
        return None
    lanes = target.native_lanes(sl.dtypes.dtype(acc).bits)
    tile = KEY_VECTORS * lanes if S > KEY_VECTORS * lanes else lanes
    nb = math.prod(batch) if all(isinstance(e, int) for e in batch) else None
    lp, sp = query_rows(L, nb, target), ceil_div(S, tile) * tile
    return None if (lp, sp) == (L, S) else (lp, sp)


def fused_attention(ctx: LowerContext, q, k, v, score: Callable, safe: bool, heads_ratio: int = 1,
                    tensor_cores: bool = True, with_lse: bool = False) -> sl.Tensor:
    """The attention stages of q [..., L, E], k [..., S, E], v [..., S, Ev] (batch dims
    broadcast; k and v with heads_ratio times fewer heads (dim -3) for grouped-query
    attention). score(scores) gives the final scores x (an elementwise function of the raw
    dot products `scores`, [..., L, S], in the accumulation dtype: scale and masks); safe:
    a row whose scores are all -inf gives 0 (SDPA), not NaN (softmax). with_lse: the result
    is [..., L, Ev + 1] in the accumulation dtype, column Ev each row's logsumexp (what the
    backward of training graphs reads; see sdpa_flash_cpu)."""
    for name, t in (("query", q), ("key", k), ("value", v)):
        if t.ndim < 2 or not is_float(t.dtype):
            raise Unsupported(f"attention: the {name} must be a floating-point tensor of at least 2 dims, "
                              f"got {t.dtype} {tuple(t.shape)}")
    if not same_extent(q.shape[-1], k.shape[-1]) or not same_extent(k.shape[-2], v.shape[-2]):
        raise mismatch((q.shape[-1], k.shape[-1], k.shape[-2], v.shape[-2]),
                       f"attention: query {tuple(q.shape)}, key {tuple(k.shape)} and value {tuple(v.shape)} "
                       "do not fit (query and key share the last dim, key and value the sequence dim)")
    if tensor_cores and not with_lse and attention_tensorcore.applies(q, k, v, ctx.target, heads_ratio):
        return attention_tensorcore.stages(lambda shape, body, role: compute(shape, body, ctx.name(role),
                                                                             tag=ROLE_TAG + role),
                                           lambda shape, body: compute(shape, body, ctx.name(), tag=TAG),
                                           q, k, v, score, safe)
    kv_batch = [tuple(t.shape[:-2]) for t in (k, v)]
    if heads_ratio > 1:
        kv_batch = [b[:-1] + (q.shape[-3],) for b in kv_batch]
    batch = broadcast_shape(tuple(q.shape[:-2]), *kv_batch)
    L, S, E, Ev = q.shape[-2], k.shape[-2], q.shape[-1], v.shape[-1]
    acc, out_dtype = acc_dtype(q.dtype), str(q.dtype)
    padded = padded_extents(ctx.target, score, batch, L, S, acc)
    Lp, Sp = padded or (L, S)
    read_q = _reader(q, batch, 1, L if Lp != L else None)
    if Lp != L:
        qp = compute(batch + (Lp, E), lambda x: read_q(x), ctx.name("q"), tag=ROLE_TAG + "q")
        read_q = lambda x: qp[tuple(x)]      # noqa: E731
    read_k = _reader(k, batch, heads_ratio, S if Sp != S else None)
    read_v = _reader(v, batch, heads_ratio, S if Sp != S else None)
    nb = len(batch)

    def stage(shape, body, role):
        return compute(shape, body, ctx.name(role), tag=ROLE_TAG + role)

    kt = stage(batch + (E, Sp), lambda x: read_k(x[:nb] + [x[nb + 1], x[nb]]), "kt")
    e = sl.reduce_axis((0, E), name="e")
    scores = stage(batch + (Lp, Sp), lambda x: sl.sum(sl.cast(acc, read_q(x[:nb] + [x[nb], e]))
                                                      * sl.cast(acc, kt[tuple(x[:nb] + [e, x[nb + 1]])]), axis=e),
                   "scores")
    x = score(scores, (L, S)) if padded else score(scores)
    rows = batch + (Lp,)
    j = sl.reduce_axis((0, Sp), name="s")
    top = stage(rows, lambda r: sl.max(x[tuple(r) + (j,)], axis=j), "max")
    ninf, zero = sl.const(float("-inf"), acc), sl.const(0.0, acc)

    def shift(r):
        m = top[tuple(r)]
        return sl.select(m == ninf, zero, m) if safe else m   # exp(-inf - 0) = 0 in a masked row
    ex = stage(batch + (Lp, Sp), lambda y: softmax_exp(x[tuple(y)] - shift(y[:-1])), "exp")
    j2 = sl.reduce_axis((0, Sp), name="s")
    total = stage(rows, lambda r: sl.sum(ex[tuple(r) + (j2,)], axis=j2), "sum")
    j3 = sl.reduce_axis((0, Sp), name="s")
    pv = stage(batch + (Lp, Ev), lambda y: sl.sum(ex[tuple(y[:-1]) + (j3,)]
                                                  * sl.cast(acc, read_v(y[:-2] + [j3, y[-1]])), axis=j3),
               "pv")

    def result(y):
        t = total[tuple(y[:-1])]
        col = sl.min(y[-1], Ev - 1) if with_lse else y[-1]      # (column Ev reads no value)
        value = pv[tuple(y[:-1]) + (col,)] / t
        value = sl.select(t == zero, zero, value) if safe else value
        if not with_lse:
            return sl.cast(out_dtype, value)
        m = top[tuple(y[:-1])]
        return sl.select(y[-1] == Ev, sl.select(m == ninf, ninf, m + sl.log(t)), value)
    # is_causal, or a causal mask written out (tril/triu: causal_mask.py)
    causal = getattr(score, "causal", False) or hides_later_keys(score, nb, L, S, acc)
    # A causal kernel skips key chunks by its loop variables (attention_schedule._skip_masked_keys),
    # which count query rows only when the stage is realized whole (a slice of the output would
    # shrink it and shift them)
    return compute(batch + (L, Ev + 1 if with_lse else Ev), result, ctx.name(), tag=TAG,
                   attrs={CAUSAL: True, REALIZE_WHOLE: True} if causal else None)


# ---- scaled_dot_product_attention

def _sdpa_score(ctx: LowerContext, mask, scale: float, causal: bool, acc: str):
    """score(scores) for SDPA: scores * scale, plus a float mask, -inf where a bool mask is
    false or (causal) the key comes after the query. score(scores, (L, S)) of padded scores
    (padded_extents): the mask read at the last row and key past them, -inf past S."""
    def score(scores, extents=None):
        shape = scores.shape
        ninf = sl.const(float("-inf"), acc)
        sc = sl.const(scale, acc)
        L, S = extents or shape[-2:]

        def body(idx):
            value = scores[tuple(idx)] * sc
            keep = None
            if causal:
                keep = idx[-1] <= idx[-2]
            if S != shape[-1]:
                keep = idx[-1] < S if keep is None else sl.all(keep, idx[-1] < S)
            if mask is not None:
                at = list(idx[:-2]) + [sl.min(idx[-2], L - 1) if L != shape[-2] else idx[-2],
                                       sl.min(idx[-1], S - 1) if S != shape[-1] else idx[-1]]
                m = read_broadcast(mask, tuple(shape[:-2]) + (L, S), at)
                if str(mask.dtype) == "bool":
                    keep = m if keep is None else sl.all(keep, m)
                else:
                    value = value + sl.cast(acc, m)
            return value if keep is None else sl.select(keep, value, ninf)
        return compute(shape, body, ctx.name("x"))
    score.causal = causal and mask is None
    score.pads = True
    return score


def sdpa(ctx: LowerContext, q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
         enable_gqa=False, tensor_cores=True, with_lse=False) -> sl.Tensor:
    """F.scaled_dot_product_attention (eval: dropout_p must be 0) as one fused kernel (the
    tensor-core stages where they apply and tensor_cores; with_lse: fused_attention's)."""
    if dropout_p:
        raise Unsupported(f"scaled_dot_product_attention with dropout_p={dropout_p}: random dropout is not "
                          "lowered (it runs in torch; pass dropout_p=0.0 in inference)")
    if attn_mask is not None and is_causal:
        raise ValueError("scaled_dot_product_attention: attn_mask and is_causal=True cannot both be set")
    if attn_mask is not None and not (str(attn_mask.dtype) == "bool" or is_float(attn_mask.dtype)):
        raise TypeError(f"scaled_dot_product_attention: attn_mask must be bool or float, got {attn_mask.dtype}")
    if str(q.dtype) != str(k.dtype) or str(q.dtype) != str(v.dtype):
        raise ValueError(f"scaled_dot_product_attention: query, key and value must have one dtype, got "
                         f"{q.dtype}, {k.dtype}, {v.dtype}")
    ratio = 1
    if enable_gqa and q.ndim >= 3 and k.ndim >= 3 and not same_extent(q.shape[-3], k.shape[-3]):
        hq, hk = static(q.shape[-3], "query heads"), static(k.shape[-3], "key heads")
        if hq % hk:
            raise ValueError(f"scaled_dot_product_attention: {hq} query heads are not a multiple of {hk} key heads")
        ratio = hq // hk
    if scale is None:
        scale = 1.0 / math.sqrt(static(q.shape[-1], "the head dim"))
    acc = acc_dtype(q.dtype)
    return fused_attention(ctx, q, k, v, _sdpa_score(ctx, attn_mask, float(scale), bool(is_causal), acc),
                           safe=True, heads_ratio=ratio, tensor_cores=tensor_cores, with_lse=with_lse)


register_lowering("aten.scaled_dot_product_attention.default")(sdpa)


@register_lowering("aten._scaled_dot_product_flash_attention_for_cpu.default")
def sdpa_flash_cpu(ctx: LowerContext, q, k, v, dropout_p=0.0, is_causal=False, *, attn_mask=None, scale=None):
    """What CPU autograd tracing turns SDPA into: (output, logsumexp [B, H, L] float32),
    both from one fused kernel. Fewer key/value heads than query heads are
    grouped-query attention here (SDPA's enable_gqa=True became this op without the flag)."""
    gqa = q.ndim >= 3 and k.ndim >= 3 and not same_extent(q.shape[-3], k.shape[-3])
    # The logsumexp is a column of the attention's own result, computed by each block of rows
    # beside the row sums it reads: a second output could not be placed in another stage's loop.
    both = sdpa(ctx, q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa=gqa, tensor_cores=False,
                with_lse=True)
    rows, ev = tuple(both.shape[:-1]), v.shape[-1]
    out = compute(rows + (ev,), lambda y: sl.cast(str(q.dtype), both[tuple(y)]), ctx.name("out"))
    lse = compute(rows, lambda r: sl.cast("float32", both[tuple(r) + (ev,)]), ctx.name("logsumexp"))
    return out, lse



# ---- hand-written attention (attention_match.py)

@dataclass(frozen=True)
class Operand:
    """In the arguments of a matched score chain's step: the running scores (index None), or
    the chain's extra input number index (a mask)."""

    index: Optional[int] = None

    def __repr__(self) -> str:
        return "scores" if self.index is None else f"extra{self.index}"


@register_lowering("schedlang.attention")
def lower_pattern(ctx: LowerContext, q, k, v, extras, chain, safe):
    """softmax(chain(q @ k^T), -1) @ v, matched by attention_match.py: the chain's ops lowered
    on the fused kernel's dot products (their stages are inlined into it)."""
    def fill(a, value):
        if not isinstance(a, Operand):
            return a
        return value if a.index is None else extras[a.index]

    def score(scores):
        value = scores
        for n, (target, args, kwargs) in enumerate(chain):
            fn = lookup(target)
            if fn is None:
                raise Unsupported(f"attention: the score op {target} has no lowering")
            value = fn(LowerContext(ctx.name(f"score{n}"), ctx.target), *(fill(a, value) for a in args),
                       **{name: fill(a, value) for name, a in kwargs.items()})
        if len(value.shape) != len(scores.shape) or str(value.dtype) != str(scores.dtype):
            raise Unsupported(f"attention: the score ops give {value.dtype} {tuple(value.shape)}, not "
                              f"{scores.dtype} {tuple(scores.shape)}")
        return value
    return fused_attention(ctx, q, k, v, score, safe)
