"""sort and topk along one dim by ranking: each element's place is the number of elements
that come before it (ties by position, so the order is stable; NaN after every number
ascending, before every number descending, as torch orders it),

    <name>_rank[..., i, ...] = sum over j of before(x[j], x[i]) or (x[j] ties x[i] and j < i)
    <name>_index[..., r, ...] = the i whose rank is r          (sum over i of i where rank == r)
    <name>[..., r, ...]       = x[..., index, ...]             (the values gathered: -0.0 and NaN kept)

That is quadratic in the dim's extent where a sort is n log n, but it is plain reductions
every schedule and target already handles; dims longer than MAX_EXTENT stay in torch, and
so does topk's unsorted mode (sorted=False: torch's order is its own).
"""
from __future__ import annotations

import schedlang as sl

from .common import compute, norm_dim, replaced, static
from .gather import clamped_index
from .registry import Unsupported, register_lowering

MAX_EXTENT = 4096


def _before(a, b, descending: bool):
    """a comes strictly before b in torch's order (NaN as the greatest value)."""
    if not a.dtype.is_float:
        return a > b if descending else a < b
    if descending:
        return sl.any(a > b, sl.all(sl.isnan(a), sl.isnan(b) == sl.const(False, "bool")))
    return sl.any(a < b, sl.all(sl.isnan(b), sl.isnan(a) == sl.const(False, "bool")))


def _ties(a, b):
    if not a.dtype.is_float:
        return a == b
    return sl.any(a == b, sl.all(sl.isnan(a), sl.isnan(b)))


def _sorted(ctx, x, dim: int, descending: bool, count: int, op: str):
    """(values, int64 indices) of the first count elements of x along dim in sorted order."""
    if x.ndim == 0:
        raise Unsupported(f"{op} of a 0-d tensor")
    d = norm_dim(dim, x.ndim, f"{op}: dim")
    n = static(x.shape[d], f"{op}: the sorted dim")
    if n > MAX_EXTENT:
        raise Unsupported(f"{op} over {n} elements (more than {MAX_EXTENT}: its ranking is quadratic)")

    def rank_body(idx):
        j = sl.reduce_axis((0, n), name="rj")
        xi, xj = x[tuple(idx)], x[replaced(idx, d, j)]
        first = sl.any(_before(xj, xi, descending), sl.all(_ties(xj, xi), j < idx[d]))
        return sl.sum(sl.select(first, sl.const(1, "int32"), sl.const(0, "int32")), axis=j)
    rank = compute(tuple(x.shape), rank_body, ctx.name("rank"))
    shape = list(x.shape)
    shape[d] = count

    def index_body(idx):
        i = sl.reduce_axis((0, n), name="ri")
        return sl.sum(sl.select(rank[replaced(idx, d, i)] == idx[d], sl.cast("int64", i), sl.const(0, "int64")), axis=i)
    index = compute(tuple(shape), index_body, ctx.name("index"))
    # the index clamped: always in range here, but not in a kernel tuned alone on random inputs
    values = compute(tuple(shape), lambda idx: x[replaced(idx, d, clamped_index(index[tuple(idx)], n))], ctx.name())
    return values, index


@register_lowering("aten.sort.default")
def sort(ctx, x, dim=-1, descending=False):
    n = static(x.shape[norm_dim(dim, x.ndim, "sort: dim")], "sort: the sorted dim") if x.ndim else 1
    return _sorted(ctx, x, dim, bool(descending), n, "sort")


@register_lowering("aten.sort.stable")
def sort_stable(ctx, x, *, stable=None, dim=-1, descending=False):
    return sort(ctx, x, dim, descending)


@register_lowering("aten.topk.default")
def topk(ctx, x, k, dim=-1, largest=True, sorted=True):
    if not sorted:
        raise Unsupported("topk with sorted=False (torch's order of the k is its own)")
    k = static(k, "topk: k")
    n = static(x.shape[norm_dim(dim, x.ndim, "topk: dim")], "topk: the dim") if x.ndim else 1
    if not 0 <= k <= n:
        raise ValueError(f"topk: k={k} is out of range for a dim of {n} elements")
    if k == 0:
        raise Unsupported("topk with k=0 (an empty result)")
    return _sorted(ctx, x, dim, bool(largest), k, "topk")
