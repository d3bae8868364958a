"""Grouped matrix products, the experts of a mixture-of-experts layer: out[s] = x[s] @ w[g(s)]
for rows s sorted by group, where offs (cumulative row counts, one per group) says where each
group's rows end: `aten._grouped_mm` (2-d x 3-d, as F.grouped_mm calls it for bfloat16) and
`transformers.grouped_mm_fallback` (the custom op transformers' MoE layers call under
torch.export for other dtypes; its eager body is a loop of torch.mm over the groups).

The group of each row is a stage of its own, `<name>_group`: the number of offs at or below the
row (torch's loop gives row s to the first group whose end is past it). A row past offs[-1]
belongs to no group and is 0 (torch's _grouped_mm leaves it unwritten, the fallback zeroes it);
its weight read is clamped to the last group, so no offs, however malformed, reads out of
bounds. The product is a matmul whose B is indexed by the row's group: on the CPU, where the
weight is a parameter (or a transpose of one), it is read from per-group panels [G, N / nr, K,
nr] packed once (prepack.py "grouped_panels"), as a Linear reads its weight, so the default
matmul schedule tiles it. Rows of several groups in one register tile each load their own
group's panel row at every k step; where the rows are many, each group's rows start a tile of
their own instead (_tiled), and a tile loads one panel row for all its rows.

Measured (2 threads, a 2-core Zen 4; 256 rows sorted over 8 groups, K 1024, N 2048): rows of
mixed groups per tile 110 GFLOP/s, tile-aligned groups 173 (300 rows computed for 256), a dense
Linear of the same size 216, torch's loop of mm 81-94.
"""
from __future__ import annotations

from typing import Callable, Optional, Tuple

import schedlang as sl
from schedlang.expr.nodes import Cast
from schedlang.tensor.op import PlaceholderOp, TensorRead

from ...expr.extent import ceil_div
from ..fuse import ROW_GROUP_TAG
from ..schedules import panel_width, read_through_views, register_rows
from .accum import acc_dtype
from .common import compute, cpu_layouts, same_extent, static
from .matmul import PAIR, _operands, _padded_shape, contract, reads_pairs
from .registry import Unsupported, register_lowering

# The tile-aligned product (_tiled) computes up to min(groups, rows) * (mr - 1) more rows than
# the input's; it is taken where the input has at least this many times as many rows.
TILED_MIN_RATIO = 2


def _row_groups(ctx, offs, rows, groups: int) -> sl.Tensor:
    """[rows] int32: how many of offs are at most the row (groups: none)."""
    e = sl.reduce_axis((0, groups), name="g")
    return compute((rows,), lambda idx: sl.sum(sl.cast("int32", sl.cast("int64", offs[e]) <= sl.cast("int64", idx[0])),
                                               axis=e), ctx.name("group"), tag=ROW_GROUP_TAG)


def _weight_source(w) -> Optional[Tuple[object, bool]]:
    """(P, kn) where w [G, K, N] is a placeholder P (kn: True, stored [G, K, N]) or P's last two
    dims swapped (kn: False, P stored [G, N, K] as a Linear's weights per group); else None."""
    g, k, n = (sl.var(nm) for nm in ("g", "k", "n"))
    read = read_through_views(TensorRead(w, (g, k, n)), lambda op: True)
    if not isinstance(read.tensor.op, PlaceholderOp) or len(read.indices) != 3:
        return None
    got = [_uncast(i) for i in read.indices]
    if all(a is b for a, b in zip(got, (g, k, n))):
        return read.tensor, True
    if all(a is b for a, b in zip(got, (g, n, k))):
        return read.tensor, False
    return None


def _uncast(e):
    while isinstance(e, Cast):
        e = e.value
    return e


def _packed_weight(ctx, x, w, m: int) -> Optional[Tuple[Callable, int]]:
    """(read(group, j, k) of w from its per-group packed panels, nr), or None where w is not a
    (transposed) parameter of static shape on a target that packs weights. The panels hold
    pairs of k where the product of x and w takes the bfloat16 pair tile (reads_pairs)."""
    if not cpu_layouts(ctx.target) or not all(isinstance(e, int) for e in w.shape):
        return None
    source = _weight_source(w)
    if source is None:
        return None
    p, kn = source
    _, k, n = w.shape
    nr = panel_width(ctx.target, n, m, k)
    if reads_pairs(ctx.target, x, p, k, nr):      # bfloat16 on a CPU with vdpbf16ps (ops/matmul.py)
        packed = ctx.prepacked("grouped_pair_panels_kn" if kn else "grouped_pair_panels", (p,), nr)
        if packed is not None:
            return (lambda g, j, kk: packed[g, j // nr, kk // PAIR, j % nr, kk % PAIR]), nr
    packed = ctx.prepacked("grouped_panels_kn" if kn else "grouped_panels", (p,), nr)
    if packed is None:
        return None
    return (lambda g, j, kk: packed[g, j // nr, kk, j % nr]), nr


def grouped_mm(ctx, x, w, offs, op: str) -> sl.Tensor:
    if x.ndim != 2 or w.ndim != 3:
        raise Unsupported(f"{op} of a {x.ndim}-d input and a {w.ndim}-d weight is not lowered (2-d x 3-d is)")
    if offs is None or offs.ndim != 1 or str(offs.dtype) not in ("int32", "int64"):
        raise Unsupported(f"{op} without 1-d integer offsets is not lowered")
    out = _operands(op, x, w)
    if not same_extent(x.shape[1], w.shape[1]):
        raise ValueError(f"{op}: the input's {x.shape[1]} columns differ from the weight's {w.shape[1]} rows")
    groups = static(w.shape[0], f"{op}: the number of groups")
    if not same_extent(offs.shape[0], groups):
        raise ValueError(f"{op}: {offs.shape[0]} offsets for {groups} groups")
    rows, k = x.shape
    shape = (rows, w.shape[2])
    acc = acc_dtype(out)
    group = _row_groups(ctx, offs, rows, groups)
    packed = _packed_weight(ctx, x, w, rows if isinstance(rows, int) else None)
    if packed is not None:
        read, nr = packed
        padded = _padded_shape(ctx.target, shape, nr)
        mr = register_rows(ctx.target, nr)
        if isinstance(rows, int) and rows >= TILED_MIN_RATIO * min(groups, rows) * (mr - 1):
            return _tiled(ctx, x, offs, group, read, (_tiled_rows(rows, groups, mr), padded[1]), mr, shape, acc, out)
    else:
        read, padded = (lambda g, j, kk: w[g, kk, j]), shape
    clamp = padded[0] != rows

    def row(i):
        return sl.min(i, rows - 1) if clamp else i

    def read_w(idx, kk):
        return read(_clamp(group[row(idx[0])], groups), idx[1], kk)
    p = contract(padded, k, lambda idx, kk: x[row(idx[0]), kk], read_w, acc, ctx.name("mm"))
    zero = sl.const(0, acc)
    return compute(shape, lambda idx: sl.cast(out, sl.select(group[idx[0]] < groups, p[idx[0], idx[1]], zero)),
                   ctx.name())


def _clamp(i, n: int):
    """Index i clamped into [0, n): every index read from a tensor is, so that a kernel tuned
    alone (its index tensors random inputs, kernel_tasks.py) reads in bounds too."""
    return sl.min(sl.max(i, sl.const(0, "int32")), sl.const(n - 1, "int32"))


def _tiled_rows(rows: int, groups: int, mr: int) -> int:
    """Rows of the tile-aligned product: each group's rows rounded up to whole tiles of mr."""
    return ceil_div(rows + min(groups, rows) * (mr - 1), mr) * mr


def _tiled(ctx, x, offs, group, read, padded: tuple, mr: int, shape: tuple, acc: str, out: str) -> sl.Tensor:
    """The grouped product with each group's rows starting a register tile of mr rows: every
    row of a tile then reads B from one group, which the tile reads once per k step for all
    its rows (B[tile_group[r // mr], ...], the same address in every row), where rows of
    different groups in one tile load a B row each. The product's row r is the input row
    row_of[r] (its tile's group's start plus r's place in the group's tiles); the result reads
    the product's row of each input row back."""
    rows, groups, i32 = shape[0], offs.shape[0], "int32"
    c = lambda v: sl.const(v, i32)          # noqa: E731

    def end(e):                             # where group e's rows end (clamped into the input)
        return sl.min(sl.max(sl.cast(i32, offs[e]), c(0)), c(rows))

    def start(e):
        return sl.select(e > 0, end(sl.max(e - 1, 0)), c(0))

    def count(e):
        return sl.max(end(e) - start(e), c(0))
    f = sl.reduce_axis((0, groups), name="f")
    # first[g]: the product's first row of group g (groups before it, each in whole tiles)
    first = compute((groups + 1,), lambda idx: sl.sum(sl.select(f < sl.cast(i32, idx[0]),
                                                                sl.floordiv(count(f) + c(mr - 1), c(mr)) * c(mr), c(0)),
                                                      axis=f), ctx.name("first"), tag=ROW_GROUP_TAG)
    t = sl.reduce_axis((0, groups), name="t")
    tile_group = compute((padded[0] // mr,), lambda idx: sl.sum(sl.cast(i32, first[t + 1] <= sl.cast(i32, idx[0]) * c(mr)),
                                                                axis=t), ctx.name("tile_group"), tag=ROW_GROUP_TAG)

    def row_of_body(idx):
        r = sl.cast(i32, idx[0])
        g = _clamp(tile_group[idx[0] // mr], groups)
        return sl.min(sl.max(start(g) + r - first[g], c(0)), c(rows - 1))
    row_of = compute((padded[0],), row_of_body, ctx.name("row_of"), tag=ROW_GROUP_TAG)
    p = contract(padded, x.shape[1], lambda idx, kk: x[_clamp(row_of[idx[0]], rows), kk],
                 lambda idx, kk: read(_clamp(tile_group[idx[0] // mr], groups), idx[1], kk), acc, ctx.name("mm"))
    zero = sl.const(0, acc)

    def body(idx):
        g = group[idx[0]]
        gc = _clamp(g, groups)
        at = sl.min(sl.max(first[gc] + sl.cast(i32, idx[0]) - start(gc), c(0)), c(padded[0] - 1))
        return sl.cast(out, sl.select(g < groups, p[at, idx[1]], zero))
    return compute(shape, body, ctx.name())


@register_lowering("aten._grouped_mm.default")
def aten_grouped_mm(ctx, x, w, offs=None, bias=None, out_dtype=None):
    if bias is not None:
        raise Unsupported("_grouped_mm with a bias is not lowered")
    if out_dtype is not None and str(out_dtype).replace("torch.", "") != str(x.dtype):
        raise Unsupported(f"_grouped_mm with out_dtype {out_dtype} is not lowered")
    return grouped_mm(ctx, x, w, offs, "_grouped_mm")


@register_lowering("transformers.grouped_mm_fallback.default")
def transformers_grouped_mm(ctx, x, w, offs):
    return grouped_mm(ctx, x, w, offs, "grouped_mm_fallback")
