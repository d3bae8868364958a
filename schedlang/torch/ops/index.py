"""Index maps: views, reshapes, permutes, expands, slices, splits, cat, select, squeeze.

Each is one IndexMap stage: the output reads its input at mapped coordinates, with no
copy once it is inlined into its consumer (`chunk_1 = x[i, j, k + 2048]`).
"""
from __future__ import annotations

from typing import List, Sequence

import schedlang as sl
from schedlang.expr.extent import ceil_div
from schedlang.expr.nodes import Expr
from schedlang.expr.simplify import simplify

from .common import compute, is_one, norm_dim, numel, same_extent, static
from .promote import result_type
from .registry import LowerContext, Unsupported, register_lowering

INT64_MAX = 2**63 - 1


def _identity(name: str, x: sl.Tensor) -> sl.Tensor:
    return compute(x.shape, lambda i: x[tuple(i)], name)


@register_lowering("aten.clone.default", "aten.alias.default", "aten.contiguous.default",
                   "aten.lift_fresh_copy.default", "aten.detach.default")
def identity(ctx: LowerContext, x, memory_format=None):
    return _identity(ctx.name(), x)


# ---------------------------------------------------------------- view / reshape

def _infer_shape(x: sl.Tensor, shape: Sequence) -> List:
    """The target shape of a view with its -1 filled in."""
    shape = list(shape)
    holes = [d for d, e in enumerate(shape) if isinstance(e, int) and e == -1]
    if len(holes) > 1:
        raise ValueError(f"view: only one dimension can be -1, got {tuple(shape)}")
    if holes:
        known = numel([e for d, e in enumerate(shape) if d != holes[0]])
        total = numel(x.shape)
        if isinstance(total, int) and isinstance(known, int):
            if known == 0 or total % known:
                raise ValueError(f"view: shape {tuple(shape)} is invalid for an input of {total} elements")
            shape[holes[0]] = total // known
        else:
            shape[holes[0]] = simplify(sl.floordiv(total, known))
    if isinstance(numel(shape), int) and isinstance(numel(x.shape), int) and numel(shape) != numel(x.shape):
        raise ValueError(f"view: shape {tuple(shape)} is invalid for an input of shape {tuple(x.shape)}")
    return shape


def _groups(src: Sequence, dst: Sequence):
    """Pair runs of dims of src and dst with equal products (static shapes only):
    [(src dims, dst dims)], or None where they cannot be matched."""
    groups, i, j = [], 0, 0
    while i < len(src) or j < len(dst):
        si, dj, ps, pd = [], [], 1, 1
        if i < len(src):
            si.append(i); ps *= src[i]; i += 1       # noqa: E702
        if j < len(dst):
            dj.append(j); pd *= dst[j]; j += 1       # noqa: E702
        while ps != pd:
            if ps < pd and i < len(src):
                si.append(i); ps *= src[i]; i += 1   # noqa: E702
            elif pd < ps and j < len(dst):
                dj.append(j); pd *= dst[j]; j += 1   # noqa: E702
            else:
                return None
        groups.append((si, dj))
    return groups


def _reshape_index(src: Sequence, dst: Sequence, index: Sequence) -> List[Expr]:
    """The src coordinates of a dst coordinate in a row-major reshape. Equal leading and
    trailing extents map one to one (the rest then has equal sizes too)."""
    lead = 0
    while lead < min(len(src), len(dst)) - 1 and same_extent(src[lead], dst[lead]):
        lead += 1
    if lead:
        return list(index[:lead]) + _reshape_index(src[lead:], dst[lead:], index[lead:])
    tail = 0
    while tail < min(len(src), len(dst)) - 1 and same_extent(src[-1 - tail], dst[-1 - tail]):
        tail += 1
    if tail:
        return _reshape_index(src[:-tail], dst[:-tail], index[:-tail]) + list(index[len(index) - tail:])
    return _reshape_groups(src, dst, index)


def _reshape_groups(src: Sequence, dst: Sequence, index: Sequence) -> List[Expr]:
    if all(isinstance(e, int) for e in list(src) + list(dst)):
        groups = _groups(src, dst)
        if groups is not None:
            out = [None] * len(src)
            for si, dj in groups:
                out_idx = _flat_to(list(src[d] for d in si), _linear([dst[d] for d in dj], [index[d] for d in dj]))
                for d, e in zip(si, out_idx):
                    out[d] = e
            return out
    return _flat_to(list(src), _linear(list(dst), list(index)))


def _linear(shape: Sequence, index: Sequence) -> Expr:
    lin = sl.const(0)
    for e, i in zip(shape, index):
        lin = i if (isinstance(lin, Expr) and _is_zero(lin)) else lin * e + i
    return lin


def _is_zero(e) -> bool:
    return isinstance(e, sl.expr.nodes.Const) and e.value == 0


def _flat_to(shape: Sequence, lin: Expr) -> List[Expr]:
    out = []
    stride = 1
    for d in reversed(range(len(shape))):
        e = shape[d]
        if is_one(e):
            out.append(sl.const(0))
            continue
        q = lin if (isinstance(stride, int) and stride == 1) else sl.floordiv(lin, stride)
        out.append(q if d == 0 else sl.floormod(q, e))
        stride = stride * e
    return [simplify(e) for e in reversed(out)]


@register_lowering("aten.view.default", "aten.reshape.default", "aten._unsafe_view.default",
                   "aten.view_copy.default")
def view(ctx: LowerContext, x, shape):
    shape = _infer_shape(x, shape)
    if len(shape) == len(x.shape) and all(same_extent(a, b) for a, b in zip(shape, x.shape)):
        return _identity(ctx.name(), x)
    return compute(shape, lambda i: x[tuple(_reshape_index(x.shape, shape, i))], ctx.name())


# ---------------------------------------------------------------- layout

@register_lowering("aten.permute.default")
def permute(ctx: LowerContext, x, dims):
    dims = [norm_dim(d, len(x.shape)) for d in dims]
    if sorted(dims) != list(range(len(x.shape))):
        raise ValueError(f"permute: {dims} is not a permutation of the {len(x.shape)} dims")
    inverse = [dims.index(d) for d in range(len(dims))]
    return compute([x.shape[d] for d in dims], lambda i: x[tuple(i[inverse[d]] for d in range(len(dims)))],
                   ctx.name())


@register_lowering("aten.repeat.default")
def repeat(ctx: LowerContext, x, repeats):
    """x tiled repeats times along each dim (x's shape padded with leading 1s to len(repeats))."""
    repeats = [static(r, "repeat: repeats") for r in repeats]
    lead = len(repeats) - len(x.shape)
    if lead < 0 or min(repeats, default=1) < 0:
        raise ValueError(f"repeat: {len(repeats)} repeats {repeats} for a {len(x.shape)}-d tensor (at least as "
                         "many, none negative)")
    if 0 in repeats:
        raise Unsupported("repeat with a repeat of 0 (an empty result)")
    shape = [1] * lead + list(x.shape)

    def body(i):
        return x[tuple(sl.floormod(i[d], shape[d]) if shape[d] != 1 else 0 for d in range(lead, len(shape)))]
    return compute([e * r for e, r in zip(shape, repeats)], body, ctx.name())


@register_lowering("aten.diagonal.default")
def diagonal(ctx: LowerContext, x, offset=0, dim1=0, dim2=1):
    """The diagonal of dims dim1, dim2 (offset above it when positive, below when negative) as
    the last dim, those two dims dropped."""
    n = len(x.shape)
    d1, d2 = norm_dim(dim1, n, "diagonal: dim1"), norm_dim(dim2, n, "diagonal: dim2")
    if d1 == d2:
        raise ValueError(f"diagonal: dim1 and dim2 are both dim {d1}")
    offset = static(offset, "diagonal: offset")
    rows, cols = static(x.shape[d1], "diagonal: its dims"), static(x.shape[d2], "diagonal: its dims")
    length = max(0, min(rows + min(offset, 0), cols - max(offset, 0)))
    if length == 0:
        raise Unsupported("diagonal of length 0 (an empty result)")
    rest = [d for d in range(n) if d not in (d1, d2)]

    def body(i):
        index = [None] * n
        for k, d in enumerate(rest):
            index[d] = i[k]
        index[d1] = i[-1] - min(offset, 0)
        index[d2] = i[-1] + max(offset, 0)
        return x[tuple(index)]
    return compute([x.shape[d] for d in rest] + [length], body, ctx.name())


@register_lowering("aten.flip.default")
def flip(ctx: LowerContext, x, dims):
    """x read backwards along dims: out[..., i, ...] = x[..., n - 1 - i, ...]."""
    flipped = {norm_dim(d, len(x.shape), "flip: dim") for d in dims}
    if len(flipped) != len(dims):
        raise ValueError(f"flip: dims {list(dims)} name a dim twice")

    def body(i):
        return x[tuple(x.shape[d] - 1 - i[d] if d in flipped else i[d] for d in range(len(x.shape)))]
    return compute(list(x.shape), body, ctx.name())


@register_lowering("aten.unfold.default")
def unfold_windows(ctx: LowerContext, x, dimension, size, step):
    """Tensor.unfold: the windows of `size` elements every `step` along dimension, a new last
    dim: out[..., w, ..., k] = x[..., w * step + k, ...] (HaloNet's blocked attention)."""
    n = len(x.shape)
    d = norm_dim(dimension, n, "unfold: dimension") if n else 0
    extent = static(x.shape[d], "unfold: the dimension's size") if n else 1
    if size < 0 or step <= 0 or size > extent:
        raise ValueError(f"unfold: size {size} and step {step} do not fit a dimension of {extent}")
    if size == 0:
        raise Unsupported("unfold into empty windows")
    if n == 0:
        return compute([size], lambda i: x[()], ctx.name())
    shape = list(x.shape)
    shape[d] = (extent - size) // step + 1

    def body(i):
        return x[tuple(i[d] * step + i[n] if k == d else i[k] for k in range(n))]
    return compute(shape + [size], body, ctx.name())


@register_lowering("aten.transpose.int")
def transpose(ctx: LowerContext, x, dim0, dim1):
    n = len(x.shape)
    dims = list(range(n))
    if n:
        a, b = norm_dim(dim0, n), norm_dim(dim1, n)
        dims[a], dims[b] = dims[b], dims[a]
    return permute(ctx, x, dims)


@register_lowering("aten.t.default", "aten.numpy_T.default")
def t(ctx: LowerContext, x):
    if len(x.shape) > 2:
        raise ValueError(f"t: expects a tensor of at most 2 dimensions, got {len(x.shape)}")
    return permute(ctx, x, list(reversed(range(len(x.shape)))))


@register_lowering("aten.expand.default", "aten.expand_copy.default")
def expand(ctx: LowerContext, x, size, implicit=False):
    size = list(size)
    lead = len(size) - len(x.shape)
    if lead < 0:
        raise ValueError(f"expand: size {tuple(size)} has fewer dims than the tensor {tuple(x.shape)}")
    shape = []
    for d, e in enumerate(size):
        src = x.shape[d - lead] if d >= lead else None
        if isinstance(e, int) and e == -1:
            if src is None:
                raise ValueError("expand: -1 is not allowed for a new leading dimension")
            e = src
        if src is not None and not is_one(src) and not same_extent(src, e):
            raise ValueError(f"expand: dimension {d} of {tuple(x.shape)} cannot expand to {e}")
        shape.append(e)
    return compute(shape, lambda i: x[tuple(sl.const(0) if is_one(x.shape[d]) and not is_one(shape[d + lead])
                                            else i[d + lead] for d in range(len(x.shape)))], ctx.name())


@register_lowering("aten.unsqueeze.default")
def unsqueeze(ctx: LowerContext, x, dim):
    d = norm_dim(dim, len(x.shape) + 1)
    shape = list(x.shape[:d]) + [1] + list(x.shape[d:])
    return compute(shape, lambda i: x[tuple(i[:d] + i[d + 1:])], ctx.name())


@register_lowering("aten.squeeze.default", "aten.squeeze.dim", "aten.squeeze.dims")
def squeeze(ctx: LowerContext, x, dim=None):
    n = len(x.shape)
    if dim is None:
        dims = list(range(n))
    else:
        dims = [norm_dim(d, n) for d in (dim if isinstance(dim, (list, tuple)) else [dim])]
    drop = [d for d in dims if n and is_one(x.shape[d])]
    keep = [d for d in range(n) if d not in drop]

    def body(i):
        idx = [sl.const(0)] * n
        for k, d in enumerate(keep):
            idx[d] = i[k]
        return x[tuple(idx)]
    return compute([x.shape[d] for d in keep], body, ctx.name())


# ---------------------------------------------------------------- slices

def _clip(v, size, default):
    """Python's slice bound: None -> default, negative counts from the end, clamped."""
    if v is None:
        return default
    if isinstance(v, int) and isinstance(size, int):
        if v < 0:
            v += size
        return max(0, min(v, size))
    if isinstance(v, int):
        if v >= INT64_MAX // 2:
            return size
        if v == 0:
            return 0
        v = simplify(sl.max(size + v, 0)) if v < 0 else simplify(sl.min(sl.const(v), size))
    return int(v.value) if isinstance(v, sl.expr.nodes.Const) else v


def slice_tensor(name: str, x: sl.Tensor, dim: int, start, end, step: int = 1) -> sl.Tensor:
    """x[..., start:end:step, ...] along dim, as an IndexMap."""
    d = norm_dim(dim, len(x.shape))
    size = x.shape[d]
    step = static(step, "slice step")
    if step <= 0:
        raise ValueError(f"slice step must be positive, got {step}")
    lo = _clip(start, size, 0)
    hi = _clip(end, size, size)
    if isinstance(lo, int) and isinstance(hi, int):
        length = max(0, ceil_div(hi - lo, step))
        if length == 0:
            raise Unsupported("an empty slice (schedlang tensors have positive extents)")
    else:
        length = simplify(sl.max(sl.floordiv(hi - lo + (step - 1), step), 0))
    shape = list(x.shape)
    shape[d] = length

    def body(i):
        idx = list(i)
        idx[d] = i[d] * step + lo if step != 1 else (i[d] + lo if not (isinstance(lo, int) and lo == 0) else i[d])
        return x[tuple(idx)]
    return compute(shape, body, name)


@register_lowering("aten.slice.Tensor", "aten.slice_copy.Tensor")
def slice_(ctx: LowerContext, x, dim=0, start=None, end=None, step=1):
    return slice_tensor(ctx.name(), x, dim, start, end, step)


def split_sizes(size, split_size) -> List[int]:
    """torch.split's chunk sizes for an int split_size."""
    size = static(size, "split dimension")
    split_size = static(split_size, "split size")
    if split_size <= 0:
        raise ValueError(f"split size must be positive, got {split_size}")
    sizes = [split_size] * (size // split_size)
    if size % split_size or not sizes:
        sizes.append(size % split_size)
    return sizes


@register_lowering("aten.split_with_sizes.default", "aten.split_with_sizes_copy.default")
def split_with_sizes(ctx: LowerContext, x, split_sizes_, dim=0):
    d = norm_dim(dim, len(x.shape))
    sizes = [static(s, "split size") for s in split_sizes_]
    if isinstance(x.shape[d], int) and sum(sizes) != x.shape[d]:
        raise ValueError(f"split_with_sizes: sizes {sizes} do not sum to dimension {d} of size {x.shape[d]}")
    out, start = [], 0
    for k, s in enumerate(sizes):
        out.append(slice_tensor(ctx.name(str(k)), x, d, start, start + s))
        start += s
    return out


@register_lowering("aten.split.Tensor")
def split(ctx: LowerContext, x, split_size, dim=0):
    d = norm_dim(dim, len(x.shape))
    return split_with_sizes(ctx, x, split_sizes(x.shape[d], split_size), d)


@register_lowering("aten.chunk.default")
def chunk(ctx: LowerContext, x, chunks, dim=0):
    d = norm_dim(dim, len(x.shape))
    size = static(x.shape[d], "chunk dimension")
    if chunks <= 0:
        raise ValueError(f"chunk: chunks must be positive, got {chunks}")
    return split_with_sizes(ctx, x, split_sizes(size, max(1, ceil_div(size, chunks))), d)


@register_lowering("aten.select.int")
def select(ctx: LowerContext, x, dim, index):
    d = norm_dim(dim, len(x.shape))
    size = x.shape[d]
    if isinstance(index, int) and isinstance(size, int):
        if not -size <= index < size:
            raise IndexError(f"select: index {index} is out of range for dimension {d} of size {size}")
        index = index % size
    elif isinstance(index, int) and index < 0:
        index = simplify(size + index)
    shape = list(x.shape[:d]) + list(x.shape[d + 1:])
    return compute(shape, lambda i: x[tuple(i[:d]) + (sl.const(index) if isinstance(index, int) else index,)
                                      + tuple(i[d:])], ctx.name())


@register_lowering("aten.cat.default", "aten.concat.default")
def cat(ctx: LowerContext, tensors, dim=0):
    parts = [t for t in tensors if not (len(t.shape) == 1 and isinstance(t.shape[0], int) and t.shape[0] == 0)]
    if not parts:
        raise Unsupported("cat of empty tensors")
    ref = parts[0]
    d = norm_dim(dim, len(ref.shape))
    # torch promotes the tensors to their result type (the legacy empty ones count too): a
    # float16 slice beside float32 rotary halves gives float32
    dtype = result_type(*tensors)
    offsets, total = [], 0
    for t in parts:
        if len(t.shape) != len(ref.shape):
            raise ValueError(f"cat: tensors have different numbers of dims: {tuple(ref.shape)} and {tuple(t.shape)}")
        offsets.append(total)
        total = total + t.shape[d]
    shape = list(ref.shape)
    shape[d] = simplify(total) if isinstance(total, Expr) else total

    def body(i):
        value = None
        ends = offsets[1:] + [None]
        for t, off, end in reversed(list(zip(parts, offsets, ends))):
            idx = list(i)
            idx[d] = i[d] - off if not (isinstance(off, int) and off == 0) else i[d]
            read = t[tuple(idx)] if str(t.dtype) == dtype else t[tuple(idx)].astype(dtype)
            value = read if value is None else sl.if_then_else(i[d] < end, read, value)
        return value
    return compute(shape, body, ctx.name())
