"""Constants computed once from a module's parameters and buffers, in layouts the kernels
read fast:

- "panels": a constant [N, K] matrix (a Linear's weight) re-laid as [ceil(N / width), K,
  width] panels, so a matmul kernel reads B contiguously along its output columns
  (benchmarks/sl_kernels.py's packed register-tiled GEMM);
- "panels_kn": the same panels of a constant stored [K, N] (x @ W: GPT-2's Conv1D, a
  hand-written projection), packed from its transpose;
- "pair_panels", "pair_panels_kn": the panels of a bfloat16 weight with consecutive k in
  pairs, [ceil(N / width), K / 2, width, 2] (K even): a column's two values of a pair side by
  side, as the bfloat16 dot product (vdpbf16ps, topi/x86_intrin.py) reads them;
- "grouped_panels", "grouped_panels_kn": a stack of G such matrices, [G, N, K] (the experts of
  a mixture-of-experts layer stored as Linear weights) or [G, K, N], as [G, ceil(N / width), K,
  width]: each group's panels (ops/grouped_mm.py); "grouped_pair_panels", "grouped_pair_panels_kn":
  each group's pair panels, [G, ceil(N / width), K / 2, width, 2];
- "conv": a convolution's weight [OC, ICg, *K] as [ceil(OC / width), ICg, *K, width] blocks
  (the NCHWc kernels' packed weights: a vector of output channels innermost), optionally
  with a following eval-mode batch norm folded in (each output channel scaled by
  gamma / sqrt(var + eps), as Inductor's and TVM's FoldScaleAxis do); float32 for a
  bfloat16 weight, as "conv_tiles" and "winograd" (dtype_of);
- "conv_tiles": the same with `blocks` consecutive blocks side by side and the input
  channels in blocks of width too, [OC / (blocks * width), ICg / width, *K, width, blocks,
  width] (params: (blocks,) then the batch norm's eps): what a register tile spanning that
  many channel blocks reads, with the input channels of a block innermost in its reduction,
  one contiguous stream (conv_schedules.weight_blocks);
- "conv_pairs": a bfloat16 convolution's weight as [ceil(OC / width), ICg / 2, *K, width, 2]
  (ICg even): "conv"'s blocks with consecutive input channels in pairs, a channel's two
  values side by side, as the bfloat16 dot product reads them (ops/conv.reads_pairs: on a
  CPU with avx512bf16); folded as "conv", rounded to bfloat16 once;
- "winograd": a 3x3 convolution's weight [OC, IC, 3, 3] transformed for Winograd F(m x m,
  3 x 3), U = G w G^T in float64 (topi/winograd.py), as [(m + 2)^2, ceil(OC / width), IC,
  width] panels of the bgemm (params: (m,) then the batch norm's eps, folded as in "conv");
- "fold": a value the graph computes from state tensors alone (const_fold.py: a standardized
  convolution weight), computed by the graph's own ops in torch (params: (FoldGraph,));
  the other kinds may be made from it, after it;
- "bn_scale", "bn_shift": a batch norm's per-channel constants [C] from (var, mean, gamma,
  beta, conv_bias), the last three optional: scale = gamma / sqrt(var + eps) and shift =
  (conv_bias - mean) * scale + beta (a folded convolution's bias; conv_bias 0 when absent).

The lowering reads a placeholder (`ctx.packed(weight, width)`, `ctx.prepacked(kind, ...)`);
the compiled module computes the tensor in torch at its first call and keeps it. It is
computed again when a source changes as torch sees it: a new storage (data_ptr) or an
in-place write through the tensor (`_version`: `w.copy_(...)` or an optimizer step under
no_grad). A write through `w.data` bumps no version and is not seen (as autograd does not
see it). The copy costs one more weight's worth of memory. A compiled module's first call
maps the constants an earlier process packed from the same weights, byte for byte, instead
of packing them (pack_disk.py: its entries compare the weights' bytes).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Dict, Optional, Sequence, Tuple

from ..build_pool import build_each
from ..expr.extent import ceil_div
from ..topi.x86_intrin import PAIR
from . import pack_disk
from .dtypes import name_of
from .pack_fast import pack_panels
from .state import Version, key_of


@dataclass(frozen=True)
class PackSpec:
    """The constant of `kind` made from the state inputs source and more (None: an absent
    optional one, such as a batch norm without affine weights), with width and params."""

    source: str        # the state input (parameter, buffer, constant) it is computed from
    width: int         # columns of a panel (panels), output channels of a block (conv)
    kind: str = "panels"
    more: Tuple[Optional[str], ...] = ()
    params: Tuple = ()

    @property
    def sources(self) -> Tuple[Optional[str], ...]:
        return (self.source,) + self.more


# the panels of a matrix or of a stack of them, K whole or in pairs, stored [.., N, K] or [.., K, N]
MATRIX_PANELS = frozenset(f"{group}{pair}panels{kn}" for group in ("", "grouped_") for pair in ("", "pair_")
                          for kn in ("", "_kn"))


def panels(n: int, width: int) -> int:
    return ceil_div(n, width)


def pack(w, width: int):
    """The [ceil(N / width), K, width] panels of the 2-d torch tensor w (a fresh contiguous tensor)."""
    fast = pack_panels(w, width)      # CPU tensors: huge pages, panel by panel (pack_fast.py)
    return fast if fast is not None else _panels(w, width)


def _panels(w, width: int):
    """The [..., ceil(N / width), K, width] panels of each [N, K] matrix of the torch tensor w
    [..., N, K] (zero past N)."""
    import torch
    *lead, n, k = w.shape
    out = torch.zeros((*lead, panels(n, width), k, width), dtype=w.dtype, device=w.device)
    full = n // width
    if full:
        out[..., :full, :, :].copy_(w[..., :full * width, :].reshape(*lead, full, width, k).transpose(-1, -2))
    if n % width:                     # the last panel's rows past N stay zero
        out[..., full, :, :n % width].copy_(w[..., full * width:, :].transpose(-1, -2))
    return out


def pack_pairs(w, width: int):
    """The [..., ceil(N / width), K / 2, width, 2] pair panels of each [N, K] matrix of the torch
    tensor w [..., N, K] (K even), zero past N: one permuted copy of the weight padded to whole
    panels."""
    import torch
    *lead, n, k = w.shape
    rows = panels(n, width) * width
    if rows != n:
        w = torch.cat([w, w.new_zeros((*lead, rows - n, k))], dim=-2)
    d = len(lead)
    blocked = w.reshape(*lead, rows // width, width, k // 2, 2)
    return blocked.permute(*range(d), d, d + 2, d + 1, d + 3).contiguous()


def pack_grouped(w, width: int):
    """The [G, ceil(N / width), K, width] panels of each [N, K] matrix of the 3-d torch tensor w."""
    return _panels(w, width)


def bn_scale(gamma, var, eps: float):
    """gamma / sqrt(var + eps) in float64 (gamma None: 1), rounded once by the caller."""
    import torch
    scale = torch.rsqrt(var.double() + eps)
    return scale if gamma is None else scale * gamma.double()


def pack_conv(w, width: int, gamma=None, mean=None, var=None, eps: float = 0.0):
    """w [OC, ICg, *K] as [ceil(OC / width), ICg, *K, width] (zero past OC), each output
    channel scaled by the batch norm's gamma / sqrt(var + eps) when var is given."""
    import torch
    oc = w.shape[0]
    scale = None if var is None else bn_scale(gamma, var, eps)
    fast = pack_panels(w, width, scale)   # CPU tensors: the copy and the fold in one pass (pack_fast.py)
    if fast is not None:
        return fast
    if var is not None:
        w = (w.double() * scale.reshape((oc,) + (1,) * (w.dim() - 1))).to(w.dtype)
    blocks = panels(oc, width)
    padded = torch.zeros((blocks * width,) + tuple(w.shape[1:]), dtype=w.dtype, device=w.device)
    padded[:oc].copy_(w)
    spatial = tuple(range(2, w.dim() + 1))
    return padded.reshape((blocks, width) + tuple(w.shape[1:])).permute(0, *spatial, 1).contiguous()


def pack_conv_tiles(w, width: int, blocks: int, *bn):
    """w [OC, ICg, *K] (ICg a multiple of width) as [OC / (blocks * width), ICg / width, *K,
    width, blocks, width] (zero past OC): pack_conv's blocks of blocks * width channels, each
    split in blocks vectors of width, of the weight with its input channels blocked by width."""
    oc, icg, *kernel = w.shape
    if icg % width:
        raise ValueError(f"pack_conv_tiles: {icg} input channels are not blocks of {width}")
    blocked = w.reshape(oc, icg // width, width, *kernel).movedim(2, -1).contiguous()
    wide = pack_conv(blocked, width * blocks, *bn)
    return wide.reshape(tuple(wide.shape[:-1]) + (blocks, width))


def pack_conv_pairs(w, width: int, *bn):
    """w [OC, ICg, *K] (ICg even) as [ceil(OC / width), ICg / 2, *K, width, 2]: pack_conv's
    blocks (folded in float64 where bn is given, rounded once to w's dtype), each input
    channel pair's two values side by side."""
    oc, icg, *kernel = w.shape
    if icg % PAIR:
        raise ValueError(f"pack_conv_pairs: {icg} input channels are not pairs")
    blocks = pack_conv(w, width, *bn)                   # [OCb, ICg, *K, width]
    paired = blocks.reshape(blocks.shape[0], icg // PAIR, PAIR, *kernel, width)
    return paired.movedim(2, -1).contiguous()


def pack_winograd(w, width: int, m: int, gamma=None, mean=None, var=None, eps: float = 0.0):
    """w [OC, IC, 3, 3] as U = G w G^T of F(m x m, 3 x 3) in panels [(m + 2)^2, ceil(OC /
    width), IC, width] (zero past OC), each output channel scaled by the batch norm's gamma /
    sqrt(var + eps) when var is given; computed in float64, rounded once on the store into
    the panels."""
    import torch
    oc, ic = w.shape[:2]
    g = _winograd_g(m).to(w.device)
    alpha = m + 2
    scale = None if var is None else bn_scale(gamma, var, eps).to(w.device)
    out = torch.empty((alpha, alpha, panels(oc, width), ic, width), dtype=w.dtype, device=w.device)
    # a few panels at a time: the float64 temporaries (~3x the panels' bytes) stay small, so
    # the allocator reuses them, where whole-weight ones were fresh pages each (page faults
    # were most of the time), and the second product reads the first from the cache
    step = max(1, WINOGRAD_CHUNK // (alpha * alpha * ic * width)) * width
    for lo in range(0, oc, step):
        hi = min(oc, lo + step)
        _winograd_panels(w[lo:hi], g, None if scale is None else scale[lo:hi], out[:, :, lo // width:], width)
    return out.view(alpha * alpha, -1, ic, width)


WINOGRAD_CHUNK = 1 << 18      # elements of the panels made per step (1 MiB of float32)


def _winograd_panels(w, g, scale, out, width: int) -> None:
    """The panels of the channels of w (a whole number of panels but the last) into the
    first panels of out [alpha, alpha, P, IC, width]."""
    import torch
    n, ic = w.shape[:2]
    alpha = g.shape[0]
    # the two products of einsum("ak,oikl,bl->abio", g, w, g) as torch.einsum makes them (over
    # k, then over l: the same float64 sums, bit for bit), without its layout copies: the
    # weight copied once into float64 with k outermost, the result stored once into the
    # panels. ResNet-18's 13 Winograd weights (9.4 M elements, m = 4): 0.94-1.16 s as one
    # einsum, 0.42-0.60 as the two products of the whole weight, ~0.4 in steps (loaded,
    # Zen 3, one thread, CPU time); G's exact solve (0.04 s per weight) once per m
    w64 = torch.empty((3, n, ic, 3), dtype=torch.float64, device=w.device)
    w64.copy_(w.permute(2, 0, 1, 3))
    if scale is not None:
        w64 *= scale.reshape(1, n, 1, 1)
    t = torch.mm(g, w64.view(3, -1))                                   # [a, (o i l)]
    u = torch.mm(t.view(-1, 3), g.t()).view(alpha, n, ic, alpha)      # [a, o, i, b]
    full, tail = divmod(n, width)
    if full:
        out[:, :, :full].copy_(u[:, :full * width].view(alpha, full, width, ic, alpha).permute(0, 4, 1, 3, 2))
    if tail:                          # the last panel's lanes past OC are zero
        out[:, :, full].zero_()
        out[:, :, full, :, :tail].copy_(u[:, full * width:].permute(0, 3, 2, 1))


@lru_cache(maxsize=None)
def _winograd_g(m: int):
    """G [m + 2, 3] of F(m, 3) as a float64 tensor (exact rationals, solved once per m)."""
    import torch
    from ..topi.winograd import transform_matrices
    return torch.from_numpy(transform_matrices(m)[1])


def _bn_vector(kind: str, sources: Sequence, eps: float):
    var, mean, gamma, beta, conv_bias = sources
    scale = bn_scale(gamma, var, eps)
    if kind == "bn_scale":
        return scale.to(var.dtype)
    centered = conv_bias.double() - mean.double() if conv_bias is not None else -mean.double()
    return (centered * scale + (beta.double() if beta is not None else 0)).to(var.dtype)


def shape_of(kind: str, shapes: Sequence, width: int, params: tuple = ()) -> tuple:
    """The shape of the constant of kind (with params) made from sources of these shapes."""
    if kind in MATRIX_PANELS:                # [..., N, K] (or [..., K, N] for _kn) per matrix
        *lead, n, k = shapes[0]
        if kind.endswith("_kn"):
            n, k = k, n
        return (*lead, panels(n, width)) + ((k // 2, width, 2) if "pair" in kind else (k, width))
    if kind == "conv":
        oc, *rest = shapes[0]
        return (panels(oc, width), *rest, width)
    if kind == "conv_pairs":
        oc, icg, *kernel = shapes[0]
        return (panels(oc, width), icg // PAIR, *kernel, width, PAIR)
    if kind == "conv_tiles":
        oc, icg, *kernel = shapes[0]
        return (panels(oc, width * params[0]), icg // width, *kernel, width, params[0], width)
    if kind == "winograd":
        oc, ic = shapes[0][:2]
        return ((params[0] + 2) ** 2, panels(oc, width), ic, width)
    return tuple(next(s for s in shapes if s is not None))


# kinds whose constant is float32 where the source is bfloat16 (dtype_of)
FLOAT32_OF_BFLOAT16 = frozenset(("conv", "conv_tiles", "winograd"))


def dtype_of(kind: str, dtype) -> str:
    """The dtype of the constant of kind made from a source of dtype: a convolution's weight of
    a bfloat16 one is float32 (FLOAT32_OF_BFLOAT16): the convolution sums in float32 (ops/conv.py),
    so the packed blocks are read as they are instead of converted at every step of the register
    tile, a batch norm folded into them is kept unrounded, and a Winograd U = G w G^T too (its
    bgemm runs in float32 on float32 transforms, ops/conv_winograd.py); every other the source's."""
    dtype = str(dtype)
    return "float32" if kind in FLOAT32_OF_BFLOAT16 and dtype == "bfloat16" else dtype


def make(spec: PackSpec, tensors: Sequence):
    """The constant of spec from its source tensors (None where a source is absent)."""
    if spec.kind == "fold":                 # a value of the state alone (const_fold.py)
        return spec.params[0].run(tensors)
    if spec.kind == "panels":
        return pack(tensors[0], spec.width)
    if spec.kind == "panels_kn":
        return pack(tensors[0].t().contiguous(), spec.width)
    if spec.kind in ("pair_panels", "grouped_pair_panels"):
        return pack_pairs(tensors[0], spec.width)
    if spec.kind in ("pair_panels_kn", "grouped_pair_panels_kn"):
        return pack_pairs(tensors[0].transpose(-1, -2), spec.width)
    if spec.kind == "grouped_panels":
        return pack_grouped(tensors[0], spec.width)
    if spec.kind == "grouped_panels_kn":
        return pack_grouped(tensors[0].transpose(1, 2), spec.width)
    if spec.kind in FLOAT32_OF_BFLOAT16 and dtype_of(spec.kind, name_of(tensors[0].dtype)) == "float32":
        tensors = (tensors[0].float(),) + tuple(tensors[1:])
    if spec.kind == "conv":
        w, *bn = tensors
        return pack_conv(w, spec.width, *bn, *spec.params) if bn else pack_conv(w, spec.width)
    if spec.kind == "conv_pairs":
        w, *bn = tensors
        return pack_conv_pairs(w, spec.width, *bn, *spec.params) if bn else pack_conv_pairs(w, spec.width)
    if spec.kind == "conv_tiles":
        w, *bn = tensors
        blocks, *eps = spec.params
        return pack_conv_tiles(w, spec.width, blocks, *bn, *eps) if bn else pack_conv_tiles(w, spec.width, blocks)
    if spec.kind == "winograd":
        w, *bn = tensors
        m, *eps = spec.params
        return pack_winograd(w, spec.width, m, *bn, *eps) if bn else pack_winograd(w, spec.width, m)
    return _bn_vector(spec.kind, tensors, *spec.params)


class PackCache:
    """The packed tensors of one compiled module, each with the versions of its sources it was
    made from. disk: the first call takes what it can from the entry an earlier process
    stored (pack_disk.py) and stores one when it packed anything."""

    def __init__(self, specs: Dict[str, PackSpec], disk: bool = False):
        self.specs = dict(specs)
        self.disk = disk
        self._made: Dict[str, Tuple[object, object]] = {}
        # the folded values (kind "fold", const_fold.py) first: other constants may be made from them
        folds = {n: sp for n, sp in self.specs.items() if sp.kind == "fold"}
        rest = {n: sp for n, sp in self.specs.items() if sp.kind != "fold"}
        self._phases = [folds, rest] if folds else [rest]

    def values(self, state: Dict[str, object]) -> Dict[str, object]:
        """name -> packed tensor for every spec, computed again for a source that changed
        (the folded values first, then what is made from them)."""
        values: Dict[str, object] = {}
        for specs in self._phases:
            values.update(self._values(specs, {**state, **values} if values else state))
        return values

    def _values(self, specs: Dict[str, PackSpec], state: Dict[str, object]) -> Dict[str, object]:
        stale = []
        keys: Dict[str, tuple] = {}      # a source several constants read (a batch norm's): its key taken once
        for name, spec in specs.items():
            hit = self._made.get(name)
            if hit is None or any(s is not None and v.key != (keys[s] if s in keys else keys.setdefault(s, key_of(state[s])))
                                  for v, s in zip(hit[0], spec.sources)):
                stale.append((name, spec, [None if s is None else state[s] for s in spec.sources]))
        disk_key, found = None, {}
        if stale and not any(n in self._made for n in specs) and self.disk and pack_disk.enabled():
            disk_key = pack_disk.key_text(specs, state)
            found = pack_disk.load(disk_key, specs, state) if disk_key is not None else {}
        todo = [job for job in stale if job[0] not in found]
        # independent constants, made by a few threads (torch's copies release the GIL)
        made = dict(zip((name for name, _, _ in todo), build_each(lambda job: make(job[1], job[2]), todo)))
        made.update(found)
        for name, _, srcs in stale:
            self._made[name] = ([None if t is None else Version(t) for t in srcs], made[name])
        values = {name: self._made[name][1] for name in specs}
        if disk_key is not None and any(pack_disk.can_store(spec, state, made[name]) for name, spec, _ in todo):
            pack_disk.store(disk_key, specs, state, values)
        return values
