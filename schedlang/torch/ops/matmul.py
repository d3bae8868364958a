"""mm, bmm, addmm, linear, matmul (and mv, dot) as sum reductions over k.

The reduction accumulates in float32 for float16/bfloat16 (as torch's CPU kernels);
a bias, alpha/beta and the cast back are an elementwise stage after it (`<name>_mm`
then `<name>`), which fusion puts in the matmul's kernel. linear reads its weight
[N, K] as it is stored (no transposed copy), or, on the CPU when the weight is a
parameter and reads_weight_in_place says no, as [N / nr, K, nr] panels the compiled
module packs once (prepack.py), so the kernel reads B contiguously along its output
columns; a bfloat16 one, on a CPU with the bfloat16 dot product (avx512bf16), as
[N / nr, K / 2, nr, 2] pair panels, which the register tile multiplies with vdpbf16ps
(reads_pairs)."""
from __future__ import annotations

from typing import Callable, Optional, Sequence, Tuple

import schedlang as sl
from schedlang.expr.functor import uses_var
from schedlang.expr.nodes import Expr
from schedlang.tensor.op import TensorRead

from ...expr.extent import ceil_div
from ...topi.x86_intrin import PAIR, bf16_dot_lanes
from ..fuse import TRANSPOSED_TAG
from ..schedules import pairs_contiguous, panel_width, read_through_views, register_rows, unit_stride
from .accum import acc_and_result_names, acc_dtype, cast_stage, require_float
from .common import axis_names, broadcast_shape, compute, cpu_layouts, is_one, mismatch, read_broadcast, same_extent
from .registry import Unsupported, register_lowering

IN_PLACE_ROWS = 8        # a Linear of at most this many rows reads its weight in place (AVX2)
IN_PLACE_ROWS_WIDE = 4   # ... with 32 vector registers (AVX-512)
TRANSPOSE_ROWS = 8       # a product of fewer rows reads a k-contiguous B as it is (padded_contract)


def _operands(op: str, *tensors: sl.Tensor) -> str:
    """The common float dtype of the operands (torch's matmuls take one dtype)."""
    require_float(op, *tensors)
    dtypes = {str(t.dtype) for t in tensors}
    if len(dtypes) != 1:
        raise Unsupported(f"{op} of mixed dtypes {', '.join(sorted(dtypes))} is not lowered")
    return dtypes.pop()


def _check_k(op: str, ka, kb) -> None:
    if not same_extent(ka, kb):
        raise mismatch((ka, kb), f"{op}: the contracted extents differ ({ka} and {kb})")


def contract(shape: Sequence, k, read_a: Callable, read_b: Callable, dtype: str, name: str) -> sl.Tensor:
    """out[idx] = sum over k of read_a(idx, k) * read_b(idx, k), accumulated in dtype (the
    reduce axis is k, or r where k names an axis of out)."""
    r = sl.reduce_axis((0, k), name="r" if "k" in axis_names(len(shape)) else "k")
    return compute(shape, lambda idx: sl.sum(sl.cast(dtype, read_a(idx, r)) * sl.cast(dtype, read_b(idx, r)),
                                             axis=r), name)


def padded_contract(ctx, shape: Sequence, k, read_a: Callable, read_b: Callable, b_dtype: str, acc: str,
                    name: str) -> sl.Tensor:
    """contract(...) of two activations, or on the CPU, where static rows or columns are not
    whole register tiles, the product padded to whole tiles (rows past A's read as its last
    row, columns past B's as 0 under a masked read) and its [..., M, N] part as a stage
    reading it: a tile short of M or N guarded each of its rows and its vector of columns
    inside the k loop, and every tile kept its accumulators in memory (1 x 511 x 512 x 509:
    35 GFLOP/s against 208 at 512), as the padded Linear avoids (_padded_linear). A single
    row (a vector times a matrix) is left as it is. A B stored with k contiguous (k_major:
    a @ b.transpose(-1, -2), scores written by hand) is first copied to [..., K, N padded],
    one kernel of its own, so the product runs the nn register tile instead of the nt one's
    horizontal sums of k lanes per output (a 2-core Xeon VM, AVX-512, two threads:
    12 x 197 x 64 x 197 50 -> 99 GFLOP/s, 12 x 128 x 64 x 128 70 -> 150, 511 x 512 x 509
    119 -> 193; torch 99-206)."""
    target = ctx.target
    *lead, m, n = shape
    if not cpu_layouts(target) or not all(isinstance(e, int) for e in (m, n, k)) or m < 2:
        return contract(shape, k, read_a, read_b, acc, name)
    padded = _padded_shape(target, tuple(shape), panel_width(target, n))   # the default schedule's tile
    mp, np_ = padded[-2:]
    zero = sl.const(0, b_dtype)

    def rows_clamped(idx, r):
        return read_a(list(idx[:-2]) + [sl.min(idx[-2], m - 1), idx[-1]], r)

    def cols_masked(idx, r):
        return sl.if_then_else(idx[-1] < n, read_b(idx, r), zero) if np_ != n else read_b(idx, r)
    if m >= TRANSPOSE_ROWS and k_major(shape, read_b):
        # B stored [..., N, K] (a @ b.transpose(-1, -2)): one copy of it [..., K, N padded],
        # and the product runs the nn kernel
        bt = compute(tuple(lead) + (k, np_), lambda idx: cols_masked(list(idx[:-2]) + [0, idx[-1]], idx[-2]),
                     ctx.name("b_t"), tag=TRANSPOSED_TAG)
        cols = lambda idx, r: bt[tuple(idx[:-2]) + (r, idx[-1])]   # noqa: E731
    else:
        cols = cols_masked
    whole = (mp, np_) == (m, n)
    p = contract(tuple(lead) + (mp, np_), k, rows_clamped if mp != m else read_a, cols, acc,
                 name if whole else ctx.name("mm"))
    return p if whole else compute(shape, lambda idx: p[tuple(idx)], name)


def k_major(shape: Sequence, read_b: Callable) -> bool:
    """Whether a product's B operand, read through its chain of views (computes whose body is
    one read), is stored with k contiguous and n not (b.transpose(-1, -2) of a [..., N, K]
    tensor), and indexed by every batch dim of the product (no broadcast B)."""
    idx = [sl.var(f"i{d}") for d in range(len(shape))]
    r = sl.var("r")
    read = read_b(idx, r)
    if not isinstance(read, TensorRead):
        return False
    read = read_through_views(read, lambda op: True)
    if not read.indices:
        return False
    last = read.indices[-1]
    used = lambda v: any(uses_var(i, v) for i in read.indices)  # noqa: E731
    return (unit_stride(last, r) and not uses_var(last, idx[-1]) and used(idx[-1])
            and all(used(v) for v, e in zip(idx[:-2], shape[:-2]) if not is_one(e)))


def finish(ctx, product: sl.Tensor, out: str, epilogue: Optional[Callable[[list, Expr], Expr]] = None) -> sl.Tensor:
    """The result of dtype out from the accumulated product: the product itself, or an
    elementwise `<name>` applying epilogue(index, value) and the cast back."""
    if epilogue is None:
        return cast_stage(product, out, ctx.name())
    return compute(product.shape, lambda idx: sl.cast(out, epilogue(idx, product[tuple(idx)])), ctx.name())


def _product_name(ctx, acc: str, out: str, has_epilogue: bool) -> str:
    return ctx.name("mm") if has_epilogue else acc_and_result_names(ctx.name(), acc, out)[0]


@register_lowering("aten.mm.default")
def mm(ctx, a, b):
    out = _operands("mm", a, b)
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"mm: expected 2-d operands, got {a.ndim}-d and {b.ndim}-d")
    _check_k("mm", a.shape[1], b.shape[0])
    acc = acc_dtype(out)
    shape = (a.shape[0], b.shape[1])
    p = _parameter_product(ctx, a, b, shape, acc, out)
    if p is not None:
        return p
    p = padded_contract(ctx, shape, a.shape[1], lambda idx, k: a[idx[0], k],
                        lambda idx, k: b[k, idx[1]], str(b.dtype), acc, _product_name(ctx, acc, out, False))
    return finish(ctx, p, out)


@register_lowering("aten.bmm.default")
def bmm(ctx, a, b):
    out = _operands("bmm", a, b)
    if a.ndim != 3 or b.ndim != 3 or not same_extent(a.shape[0], b.shape[0]):
        raise ValueError(f"bmm: expected 3-d operands with one batch, got {list(a.shape)} and {list(b.shape)}")
    _check_k("bmm", a.shape[2], b.shape[1])
    acc = acc_dtype(out)
    p = padded_contract(ctx, (a.shape[0], a.shape[1], b.shape[2]), a.shape[2], lambda idx, k: a[idx[0], idx[1], k],
                        lambda idx, k: b[idx[0], k, idx[2]], str(b.dtype), acc, _product_name(ctx, acc, out, False))
    return finish(ctx, p, out)


def _scalar(value, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Unsupported(f"addmm: {what}={value!r} is not a number")
    return value


def _bias_epilogue(bias, shape, acc: str, beta=1, alpha=1):
    """alpha * product + beta * bias (bias broadcast to shape); beta = 0 ignores the bias."""
    def epilogue(idx, value):
        if alpha != 1:
            value = value * sl.const(float(alpha), acc)
        if bias is None or beta == 0:
            return value
        b = sl.cast(acc, read_broadcast(bias, shape, idx))
        return value + (b if beta == 1 else b * sl.const(float(beta), acc))
    return epilogue


@register_lowering("aten.addmm.default")
def addmm(ctx, bias, a, b, *, beta=1, alpha=1):
    out = _operands("addmm", bias, a, b)
    beta, alpha = _scalar(beta, "beta"), _scalar(alpha, "alpha")
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"addmm: expected 2-d mat1 and mat2, got {a.ndim}-d and {b.ndim}-d")
    _check_k("addmm", a.shape[1], b.shape[0])
    shape = (a.shape[0], b.shape[1])
    if broadcast_shape(bias.shape, shape) != shape:
        raise ValueError(f"addmm: the input of shape {list(bias.shape)} does not broadcast to {list(shape)}")
    acc = acc_dtype(out)
    epilogue = _bias_epilogue(bias, shape, acc, beta, alpha)
    p = _parameter_product(ctx, a, b, shape, acc, out, epilogue)     # GPT-2's Conv1D: addmm(bias, x, W)
    if p is not None:
        return p
    p = contract(shape, a.shape[1], lambda idx, k: a[idx[0], k], lambda idx, k: b[k, idx[1]], acc, ctx.name("mm"))
    return finish(ctx, p, out, epilogue)


@register_lowering("aten.linear.default")
def linear(ctx, x, weight, bias=None):
    out = _operands("linear", *(t for t in (x, weight, bias) if t is not None))
    if weight.ndim != 2 or x.ndim < 1:
        raise Unsupported(f"linear with a {weight.ndim}-d weight and a {x.ndim}-d input is not lowered")
    _check_k("linear", x.shape[-1], weight.shape[1])
    shape = tuple(x.shape[:-1]) + (weight.shape[0],)
    if bias is not None and broadcast_shape(bias.shape, shape) != shape:
        raise ValueError(f"linear: the bias of shape {list(bias.shape)} does not broadcast to {list(shape)}")
    acc = acc_dtype(out)
    epilogue = None if bias is None else _bias_epilogue(bias, shape, acc)
    m = shape[-2] if len(shape) > 1 and isinstance(shape[-2], int) else None
    packed = _packed_read(ctx, weight, static_rows(shape[:-1]), m, x=x)
    if packed is not None:
        return _packed_product(ctx, x, *packed, shape, acc, out, epilogue)
    p = contract(shape, x.shape[-1], lambda idx, k: x[tuple(idx[:-1]) + (k,)], lambda idx, k: weight[idx[-1], k],
                 acc, _product_name(ctx, acc, out, bias is not None))
    return finish(ctx, p, out, epilogue)


def _parameter_product(ctx, x, w, shape: tuple, acc: str, out: str, epilogue=None) -> Optional[sl.Tensor]:
    """x @ w of a parameter w stored [K, N] (mm, addmm, matmul of a 2-d w) as a Linear
    computes it, from w's packed panels (_packed_read's kn), or None where w is not packed
    (not a parameter, another target, or read in place)."""
    m = shape[-2] if isinstance(shape[-2], int) else None
    packed = _packed_read(ctx, w, static_rows(shape[:-1]), m, kn=True, x=x)
    return None if packed is None else _packed_product(ctx, x, *packed, shape, acc, out, epilogue)


def _packed_product(ctx, x, read_w: Callable, nr: int, shape: tuple, acc: str, out: str, epilogue) -> sl.Tensor:
    """x times a weight read from its packed panels of width nr, with the epilogue (or none)
    and the cast to out: padded to whole tiles where shape is not (_padded_linear)."""
    padded = _padded_shape(ctx.target, shape, nr)
    if padded != shape:
        return _padded_linear(ctx, x, read_w, shape, padded, acc, out, epilogue)
    p = contract(shape, x.shape[-1], lambda idx, k: x[tuple(idx[:-1]) + (k,)], read_w,
                 acc, _product_name(ctx, acc, out, epilogue is not None))
    return finish(ctx, p, out, epilogue)


def static_rows(lead) -> Optional[int]:
    """The number of rows of the leading dims lead, or None when one is symbolic."""
    rows = 1
    for e in lead:
        if not isinstance(e, int):
            return None
        rows *= e
    return rows


def _packed_read(ctx, weight, rows: Optional[int], m: Optional[int] = None,
                 kn: bool = False, x=None) -> Optional[Tuple[Callable, int]]:
    """(weight[j, k] read from its packed panels, the panel width nr) for a parameter on a
    target whose backend prepacks_weights (the CPU) unless it reads it in place
    (reads_weight_in_place), or None. kn: the weight is stored [K, N] (weight[k, j]), as
    x @ W multiplies it, and packed from its transpose (prepack.py's "panels_kn"); read in
    place it is the nn kernel's B, rows contiguous along the output columns. x: the
    activation it multiplies; where reads_pairs holds, the weight's pair panels."""
    target = ctx.target
    n, k = weight.shape[::-1] if kn else weight.shape
    if not cpu_layouts(target) or not isinstance(n, int):
        return None
    if isinstance(k, int) and reads_weight_in_place(target, rows, k):
        return None
    k = k if isinstance(k, int) else None
    nr = panel_width(target, n, m, k)      # m: the rows _padded_shape pads
    if x is not None and reads_pairs(target, x, weight, k, nr):
        packed = ctx.prepacked("pair_panels_kn" if kn else "pair_panels", (weight,), nr)
        if packed is not None:
            return (lambda idx, k: packed[idx[-1] // nr, k // PAIR, idx[-1] % nr, k % PAIR]), nr
    packed = ctx.prepacked("panels_kn", (weight,), nr) if kn else ctx.packed(weight, nr)
    if packed is None:
        return None
    return (lambda idx, k: packed[idx[-1] // nr, k, idx[-1] % nr]), nr


def reads_pairs(target, x, weight, k: Optional[int], nr: int) -> bool:
    """Whether a product of the bfloat16 activation x and the bfloat16 parameter weight
    multiplies k's pairs at once (vdpbf16ps: twice the float32 FMA's multiply-adds per
    instruction; schedules.pair_width): the target has the instruction, k is even, the panel
    is whole vectors of it, and x, read through its views, holds each pair of k side by side
    (schedules.pairs_contiguous: the pair of a row is one 32-bit load; attention's output
    through its head merge too). Measured (2-core Zen 4, two threads): a 132 x 768 x 768
    tile alone 410 GFLOP/s against the float32 FMA peak's 227 (torch's oneDNN bfloat16: 380)."""
    lanes = bf16_dot_lanes(target)
    if not lanes or k is None or k % PAIR or nr % lanes or str(weight.dtype) != "bfloat16" \
            or str(x.dtype) != "bfloat16":
        return False
    idx = [sl.var(f"i{d}") for d in range(x.ndim - 1)]
    r = sl.var("r")
    read = read_through_views(x[tuple(idx) + (r,)], lambda op: True)
    return pairs_contiguous(read.indices, r)


def reads_weight_in_place(target, m, k) -> bool:
    """Whether a Linear of m rows (None: symbolic) with a constant [N, k] weight reads it as
    stored (schedules._matmul_nt) rather than packed in panels: no packed copy to make at
    the first call (time and first-touched pages) nor to keep (memory). Measured
    (benchmarks/linear_inplace.py, one Zen 3 core, AVX2, CPU time; in place / packed time):
    M = 1 and 8 at K = 2048 and 5632: 0.60-0.83 (in place faster); M = 128 at K = 2048 and
    5632 (Llama's shapes): 1.01-1.07, at K = 768 (BERT-base) 1.06-1.10. The whole Llama
    "full" (M = 128) read in place took 2.5-2.7 s of CPU per forward against 1.6-1.8 packed:
    its output projection reads attention's output through the head split (k = h * D + d),
    which the in-place schedule did not take for contiguous, so it fell to the scalar rows
    kernel (5.6x packed's time; schedules.runs_along now takes it). One Llama layer (dim 2048,
    M = 128, one Zen 1 core, CPU time) now reads in place in 1.07x packed's time (was 1.5x),
    the rest its fused gate/up kernel (1.2x: two matmuls share the tile's registers). So on
    AVX2 only a Linear of at most IN_PLACE_ROWS rows reads in place. With AVX-512 (a 2-core
    Xeon VM, two threads, both ways in one process, time in place / packed): M = 1 at
    768 x 3072, 3072 x 768, 2048 x 5632, 5632 x 2048, 4096 x 4096: 0.87, 0.88, 0.87, 0.76,
    0.84; M = 2-4 at 768 x 3072 to 5632 x 2048: 0.77-0.95; M = 6 (2048 x 2048) 1.08, M = 8
    (2048 x 5632) 1.11; a weight kept in L2 (768 x 768, M = 1 and 4) 1.10-1.14, there with
    ~40 us of call overhead in either: so IN_PLACE_ROWS_WIDE there."""
    return m is not None and m <= (IN_PLACE_ROWS_WIDE if target.native_registers() >= 32 else IN_PLACE_ROWS)


def _padded_shape(target, shape: tuple, nr: int) -> tuple:
    """shape with its columns rounded up to whole panels of nr and, for a static row count,
    its rows to whole register tiles (schedules.register_rows): the product a Linear
    computes, so that no tile of the matmul kernel needs a guard in its k loop."""
    if len(shape) < 2:
        return shape
    *lead, m, n = shape
    n_pad = ceil_div(n, nr) * nr
    if isinstance(m, int):
        mr = register_rows(target, nr)
        if m > mr:
            m = ceil_div(m, mr) * mr
    return tuple(lead) + (m, n_pad)


def _padded_linear(ctx, x, read_w: Callable, shape: tuple, padded: tuple, acc: str, out: str, epilogue):
    """A Linear whose product covers padded (whole panels, whole register tiles), its rows
    past x's read as x's last row (computed, never stored), then the result: the product's
    shape part, with the epilogue (the bias) or without."""
    last = x.shape[-2] - 1
    clamp = padded[-2] != shape[-2]

    def read_x(idx, k):
        row = sl.min(idx[-2], last) if clamp else idx[-2]
        return x[tuple(idx[:-2]) + (row, k)]
    p = contract(padded, x.shape[-1], read_x, read_w, acc, ctx.name("mm"))
    epilogue = epilogue or (lambda idx, value: value)
    return compute(shape, lambda idx: sl.cast(out, epilogue(idx, p[tuple(idx)])), ctx.name())


@register_lowering("aten.matmul.default")
def matmul(ctx, a, b):
    """torch.matmul: 1-d operands are a row (a) or a column (b) whose dim is dropped from the
    result; batch dims broadcast."""
    out = _operands("matmul", a, b)
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError("matmul: both operands need at least one dimension")
    _check_k("matmul", a.shape[-1], b.shape[0] if b.ndim == 1 else b.shape[-2])
    batch = broadcast_shape(a.shape[:-2], b.shape[:-2])
    rows = (a.shape[-2],) if a.ndim > 1 else ()
    cols = (b.shape[-1],) if b.ndim > 1 else ()
    shape = batch + rows + cols

    def read_a(idx, k):
        lead = _batch_index(a.shape[:-2], batch, idx[:len(batch)])
        return a[lead + tuple(idx[len(batch):len(batch) + len(rows)]) + (k,)]

    def read_b(idx, k):
        lead = _batch_index(b.shape[:-2], batch, idx[:len(batch)])
        return b[lead + (k,) + tuple(idx[len(batch) + len(rows):])]
    acc = acc_dtype(out)
    p = _parameter_product(ctx, a, b, shape, acc, out) if rows and cols and b.ndim == 2 else None
    if p is not None:
        return p
    if rows and cols:
        p = padded_contract(ctx, shape, a.shape[-1], read_a, read_b, str(b.dtype), acc,
                            _product_name(ctx, acc, out, False))
    else:
        p = contract(shape, a.shape[-1], read_a, read_b, acc, _product_name(ctx, acc, out, False))
    return finish(ctx, p, out)


def _batch_index(own: Sequence, batch: Sequence, idx: Sequence) -> tuple:
    """The index into an operand's batch dims own of the broadcast batch index idx."""
    if not own:
        return ()
    lead = len(batch) - len(own)
    return tuple(0 if is_one(e) and not is_one(batch[lead + d]) else idx[lead + d] for d, e in enumerate(own))


@register_lowering("aten.mv.default")
def mv(ctx, a, v):
    if a.ndim != 2 or v.ndim != 1:
        raise ValueError(f"mv: expected a 2-d matrix and a 1-d vector, got {a.ndim}-d and {v.ndim}-d")
    return matmul(ctx, a, v)


@register_lowering("aten.dot.default")
def dot(ctx, a, b):
    if a.ndim != 1 or b.ndim != 1:
        raise ValueError(f"dot: expected 1-d operands, got {a.ndim}-d and {b.ndim}-d")
    return matmul(ctx, a, b)
