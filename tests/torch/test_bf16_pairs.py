"""bfloat16 Linears on the bfloat16 dot product: where the target has avx512bf16, a bfloat16
weight is packed in pair panels (prepack.py's "pair_panels") and the register tile runs
vdpbf16ps (topi/x86_intrin.dot_bf16_intrin, tensorized by schedules._matmul_nn). The
numbers are checked against float32 sums of the same bfloat16 values, on a host that has
the instruction; the choice of layout and the instruction in the code for any host (built
for a named CPU, not run)."""
from __future__ import annotations

import copy
import re

import pytest
import torch
import torch.nn as nn

import schedlang as sl
import schedlang.torch as slt
from schedlang.topi.x86_intrin import bf16_dot_lanes
from schedlang.torch import prepack

INTRINSIC = "llvm.x86.avx512bf16.dpbf16ps.512"
host_has_dot = pytest.mark.skipif(not bf16_dot_lanes("llvm"), reason="this CPU has no avx512bf16")


def _kinds(compiled) -> set:
    return {spec.kind for spec in compiled.program.packs.values()}


def test_pack_pairs_layout():
    w = torch.randn(37, 6).bfloat16()
    p = prepack.pack_pairs(w, 16)
    assert tuple(p.shape) == prepack.shape_of("pair_panels", [tuple(w.shape)], 16) == (3, 3, 16, 2)
    for j in range(48):
        for k in range(6):
            want = w[j, k] if j < 37 else torch.tensor(0, dtype=torch.bfloat16)
            assert p[j // 16, k // 2, j % 16, k % 2] == want, (j, k)
    kn = prepack.make(prepack.PackSpec("w", 16, "pair_panels_kn"), [w.t().contiguous()])
    assert torch.equal(kn, p)


def test_pack_conv_pairs_layout():
    w = torch.randn(20, 6, 3).bfloat16()
    p = prepack.make(prepack.PackSpec("w", 16, "conv_pairs"), [w])
    assert tuple(p.shape) == prepack.shape_of("conv_pairs", [tuple(w.shape)], 16) == (2, 3, 3, 16, 2)
    assert p.dtype == torch.bfloat16
    for o in range(32):
        for c in range(6):
            for r in range(3):
                want = w[o, c, r] if o < 20 else torch.tensor(0, dtype=torch.bfloat16)
                assert p[o // 16, c // 2, r, o % 16, c % 2] == want, (o, c, r)


def test_reinterpret_bfloat16_bits():
    """reinterpret to and from bfloat16 is bit for bit: NaN payloads, signs and subnormals kept
    (the renderer holds bfloat16 values as floats; their bits are what a reinterpret moves)."""
    n = 8
    a = sl.placeholder((n,), "bfloat16", name="a")
    bits = sl.compute((n,), lambda i: sl.reinterpret("int16", a[i]), name="bits")
    back = sl.compute((n,), lambda i: sl.reinterpret("bfloat16", bits[i]), name="back")
    mod = sl.build(sl.create_schedule(back.op), [a, bits, back], "llvm")
    raw = torch.tensor([0x3F80, -0x4080, 0x7F81, -0x003F, 0x0001, 0x7F80, 0x7FC1, 0x1234], dtype=torch.int16)
    out_bits, out_back = torch.empty(n, dtype=torch.int16), torch.empty(n, dtype=torch.int16)
    bf16 = sl.dtype("bfloat16").numpy
    mod(raw.numpy().view(bf16), out_bits.numpy(), out_back.numpy().view(bf16))
    assert torch.equal(out_bits, raw)
    assert torch.equal(out_back, raw)


class _Addmm(nn.Module):
    """x @ W + b with W stored [K, N] (GPT-2's Conv1D): the "pair_panels_kn" packing."""

    def __init__(self, k: int, n: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(k, n) / k ** 0.5)
        self.bias = nn.Parameter(torch.randn(n))

    def forward(self, x):
        return torch.addmm(self.bias, x, self.weight)


def _case(kind: str):
    torch.manual_seed(0)
    if kind == "rows7_bias":
        return nn.Linear(64, 40), torch.randn(7, 64)
    if kind == "rows13_odd_n_no_bias":
        return nn.Linear(96, 100, bias=False), torch.randn(13, 96)
    if kind == "rows130_gelu":
        return nn.Sequential(nn.Linear(256, 192), nn.GELU()), torch.randn(130, 256)
    if kind == "batched_3d":
        return nn.Linear(128, 64), torch.randn(2, 9, 128)
    if kind == "addmm_kn":
        return _Addmm(96, 80), torch.randn(20, 96)
    raise AssertionError(kind)


CASES = ["rows7_bias", "rows13_odd_n_no_bias", "rows130_gelu", "batched_3d", "addmm_kn"]


def _reference(model, x):
    """float32 sums of the bfloat16 values (weights and input as the model holds them), rounded
    to bfloat16 once at the end."""
    return copy.deepcopy(model).float()(x.float()).bfloat16()


@host_has_dot
@pytest.mark.parametrize("kind", CASES)
def test_linear_pairs_match_float32_sums(kind):
    model, x = _case(kind)
    model = model.eval().bfloat16()
    x = x.bfloat16()
    with torch.no_grad():
        compiled = slt.compile(model, (x,))
        out = compiled(x)
        ref = _reference(model, x)
    assert "pair_panels" in _kinds(compiled) or "pair_panels_kn" in _kinds(compiled)
    assert INTRINSIC in compiled.ir("target")
    # one bfloat16 rounding of sums that differ only in float32 order: within 2 ulps
    torch.testing.assert_close(out.float(), ref.float(), rtol=2 ** -7, atol=1e-3)


class _Attention(nn.Module):
    """Self-attention as transformers writes it: the output projection reads the attention's
    [B, H, S, D] result through its head merge, k = h * D + d (runs of D along k)."""

    def __init__(self, dim: int = 128, heads: int = 4):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        return self.out(a.transpose(1, 2).reshape(b, s, d))


def _as_close_as_eager(out, eager, ref) -> None:
    """out at most twice eager bfloat16's distance from the float32 result ref (plus 2^-8),
    relative to ref's largest magnitude: roundings between kernels make the exact sums no
    reference there."""
    scale = ref.abs().max()
    ours, theirs = ((y.float() - ref).abs().max() / scale for y in (out, eager))
    assert ours <= 2 * theirs + 2 ** -8, (ours, theirs)


def _dot_kernels(compiled) -> int:
    """Functions of the LLVM IR that call the intrinsic."""
    return sum(INTRINSIC + "(" in f for f in compiled.ir("target").split("\ndefine ")[1:])


@host_has_dot
def test_output_projection_through_the_head_merge():
    """Both Linears of an attention block run the pair tile: the output projection's pair of k
    stays within one head (D even), so the intrinsic's 32-bit load of it is contiguous."""
    torch.manual_seed(5)
    model = _Attention().eval().bfloat16()
    x = torch.randn(2, 19, 128).bfloat16()
    with torch.no_grad():
        compiled = slt.compile(model, (x,))
        out, eager = compiled(x), model(x)
        ref = copy.deepcopy(model).float()(x.float())
    assert _kinds(compiled) == {"pair_panels"} and _dot_kernels(compiled) == 2
    # bfloat16 roundings between the kernels (q, k, v, the attention): as far from float32 as eager
    _as_close_as_eager(out, eager, ref)


@host_has_dot
def test_odd_k_keeps_float32_panels():
    torch.manual_seed(1)
    model = nn.Linear(63, 48).eval().bfloat16()
    x = torch.randn(16, 63).bfloat16()
    with torch.no_grad():
        compiled = slt.compile(model, (x,))
        out = compiled(x)
        ref = _reference(model, x)
    assert _kinds(compiled) == {"panels"}
    assert INTRINSIC not in compiled.ir("target")
    torch.testing.assert_close(out.float(), ref.float(), rtol=2 ** -7, atol=1e-3)


@host_has_dot
def test_torch_compile_backend_takes_pairs():
    """torch.compile(backend="schedlang") under no_grad freezes the weight as the frontend
    does: the same pair panels, the same results."""
    torch.manual_seed(2)
    model = nn.Sequential(nn.Linear(64, 96), nn.ReLU()).eval().bfloat16()
    x = torch.randn(24, 64).bfloat16()
    with torch.no_grad():
        out = torch.compile(model, backend="schedlang")(x)
        ref = _reference(model, x)
    torch.testing.assert_close(out.float(), ref.float(), rtol=2 ** -7, atol=1e-3)


@pytest.mark.parametrize("target, pairs", [("llvm -mcpu=znver4 -mattr=+avx512f,+avx512bf16", True),
                                           ("llvm -mcpu=sapphirerapids -mattr=+avx512bf16", True),
                                           ("llvm -mcpu=znver3", False), ("llvm -mcpu=skylake-avx512", False),
                                           ("llvm -mattr=-avx512bf16", False)])
def test_layout_follows_the_target(target, pairs):
    """Built (not run) for a target: pair panels and vdpbf16ps where its features have
    avx512bf16 (a named CPU's implied features are not visible from llvmlite: -mattr says
    it, as for VNNI), float32 panels where they have not, whatever this host is."""
    model = nn.Linear(64, 48).eval().bfloat16()
    x = torch.randn(16, 64).bfloat16()
    with torch.no_grad():
        compiled = slt.compile(model, (x,), target=target)
    assert ("pair_panels" in _kinds(compiled)) == pairs
    assert (INTRINSIC in compiled.ir("target")) == pairs


def test_tuning_keeps_the_tensorized_tile():
    """The whole-model tuner leaves a kernel whose default schedule tensorizes out of its tasks
    (the CPU sketches draw no tensor intrinsic: every candidate would be slower); the other
    kernels of the model stay tasks. Extracted for a target with avx512bf16, not run."""
    from schedlang.torch.tune import extract_tasks
    torch.manual_seed(4)
    model = nn.Sequential(nn.Linear(63, 96), nn.ReLU(), nn.LayerNorm(96), nn.Linear(96, 64)).eval().bfloat16()
    x = torch.randn(24, 63).bfloat16()
    with torch.no_grad():
        with_dot = slt.compile(model, (x,), target="llvm -mcpu=znver4 -mattr=+avx512f,+avx512bf16")
        without = slt.compile(model, (x,), target="llvm -mcpu=znver4")
    kinds = sorted(t.kind for t in extract_tasks(with_dot.program, with_dot.target))
    assert kinds == ["matmul", "rows"]          # the first Linear (odd K: float32 panels) and the norm
    assert sorted(t.kind for t in extract_tasks(without.program, without.target)) == ["matmul", "matmul", "rows"]


@host_has_dot
@pytest.mark.parametrize("counts, rows, kn", [([5, 0, 9], 16, False), ([37, 0, 60, 29, 1, 27], 160, False),
                                               ([50, 65, 31], 150, True)])
def test_grouped_experts_take_pairs(counts, rows, kn):
    """A mixture of experts' grouped product (ops/grouped_mm.py) in bfloat16: each expert's
    weight in pair panels, rows of mixed experts per tile or each expert's rows tile-aligned."""
    from .test_grouped_mm import Experts, _offs
    torch.manual_seed(6)
    model = Experts(len(counts), 32, 64, kn=kn, dtype=torch.bfloat16)
    x, offs = torch.randn(rows, 32).bfloat16(), _offs(counts)
    with torch.no_grad():
        compiled = slt.compile(model, (x, offs))
        out = compiled(x, offs)
        ref = copy.deepcopy(model).float()(x.float(), offs).bfloat16()
    assert _kinds(compiled) == {"grouped_pair_panels_kn" if kn else "grouped_pair_panels"}
    assert _dot_kernels(compiled) == 1
    torch.testing.assert_close(out.float(), ref.float(), rtol=2 ** -7, atol=1e-3)


def test_pairs_contiguous_reads():
    """Which activation reads hold each pair (2i, 2i + 1) of k side by side: k itself or offset
    by a slice, and a head merge k // c, k % c with c even; not a merge of odd runs, nor one
    whose inner index is offset (a pair could straddle two heads), nor a strided or leading k."""
    from schedlang.torch.schedules import pairs_contiguous
    i, k = sl.var("i"), sl.var("k")
    assert pairs_contiguous([i, k], k)
    assert pairs_contiguous([i, k + 1], k)
    assert pairs_contiguous([k // 64, i, k % 64], k)
    assert not pairs_contiguous([k // 63, i, k % 63], k)
    assert not pairs_contiguous([(k + 1) // 64, i, (k + 1) % 64], k)
    assert not pairs_contiguous([i, k * 2], k)
    assert not pairs_contiguous([k, i], k)
    assert not pairs_contiguous([k, k], k)


def test_bfloat16_winograd_convolution():
    """A bfloat16 3x3 convolution with its batch norm and ReLU runs Winograd F(4 x 4, 3 x 3) as a
    float32 one does, its transforms and bgemm in float32 (U packed float32), the result
    rounded once: as close to the float32 model as eager bfloat16 (any host)."""
    torch.manual_seed(7)
    model = nn.Sequential(nn.Conv2d(64, 64, 3, padding=1, bias=False), nn.BatchNorm2d(64), nn.ReLU())
    with torch.no_grad():
        model[1].running_mean.uniform_(-0.5, 0.5)
        model[1].running_var.uniform_(0.5, 2.0)
    model = model.eval().bfloat16()
    x = torch.randn(1, 64, 18, 18).bfloat16()
    with torch.no_grad():
        compiled = slt.compile(model, (x,))
        out, eager = compiled(x), model(x)
        ref = copy.deepcopy(model).float()(x.float())
    (name,) = [n for n, sp in compiled.program.packs.items() if sp.kind == "winograd"]
    assert re.search(rf"{name}: \(36, \d+, 64, \d+\) f32", compiled.ir("tensor"))
    _as_close_as_eager(out, eager, ref)


@pytest.mark.parametrize("case", ["1d", "1d_padded", "2d_stem"])
def test_bfloat16_unblocked_convolution_reads_float32(case):
    """A bfloat16 dense convolution whose input stays unblocked (1-d; 2-d with channels not
    whole blocks: an RGB stem) reads it converted once to float32 (a copy, or the padded copy,
    in float32) and its weight packed in float32, instead of converting both at every step of
    the register tile; as close to the float32 model as eager bfloat16 (any host; the target
    without avx512bf16, where a 1-d one would take the pair dot product)."""
    torch.manual_seed(11)
    if case == "2d_stem":
        conv, x = nn.Conv2d(3, 32, 7, stride=2, padding=3, bias=False), torch.randn(1, 3, 37, 37)
    else:
        conv, x = nn.Conv1d(48, 64, 3, stride=2, padding=1 if case == "1d_padded" else 0), torch.randn(1, 48, 101)
    model = nn.Sequential(nn.Conv1d(48, 48, 1) if case != "2d_stem" else nn.Identity(), conv, nn.GELU())
    model = model.eval().bfloat16()
    x = x.bfloat16()
    with torch.no_grad():
        compiled = slt.compile(model, (x,), target="llvm -mattr=-avx512bf16")
        out, eager = compiled(x), model(x)
        ref = copy.deepcopy(model).float()(x.float())
    (name,) = [n for n, sp in compiled.program.packs.items() if sp.kind in ("conv", "conv_tiles")
               and sp.sources[0] == "p_1_weight"]
    assert re.search(rf"{name}: \([\d, ]+\) f32", compiled.ir("tensor"))
    assert re.search(r"_(f32|pad): f32\[", compiled.ir("tile")), "the input is not converted once"
    _as_close_as_eager(out, eager, ref)


def _conv1d_case(kind: str):
    """(a bfloat16 1-d convolution model, its input). With a batch norm, a 1x1 convolution
    first, so that the pair copy reads a computed activation, as in wav2vec2's feature encoder
    (the others read the program's input: float32 sums of it are their exact reference)."""
    torch.manual_seed(12)
    if kind == "padded_stride2_gelu":
        conv, act = nn.Conv1d(48, 64, 3, stride=2, padding=1), nn.GELU()
    elif kind == "two_taps_no_pad":
        conv, act = nn.Conv1d(48, 32, 2, stride=2, bias=False), nn.ReLU()
    elif kind == "dilated_batch_norm":
        conv, act = nn.Sequential(nn.Conv1d(48, 64, 5, padding=3, dilation=2), nn.BatchNorm1d(64)), nn.ReLU()
        with torch.no_grad():
            conv[1].running_mean.uniform_(-0.5, 0.5)
            conv[1].running_var.uniform_(0.5, 2.0)
    else:
        raise AssertionError(kind)
    if kind != "dilated_batch_norm":
        return nn.Sequential(conv, act).eval().bfloat16(), torch.randn(2, 48, 53).bfloat16()
    return nn.Sequential(nn.Conv1d(30, 48, 1), conv, act).eval().bfloat16(), torch.randn(2, 30, 53).bfloat16()


@host_has_dot
@pytest.mark.parametrize("kind", ["padded_stride2_gelu", "two_taps_no_pad", "dilated_batch_norm"])
def test_conv1d_pairs_match_float32_sums(kind):
    """A bfloat16 1-d convolution's register tile runs vdpbf16ps on a pair of input channels a
    step (weight packed "conv_pairs", input from a pair copy with its padding): float32 sums of
    the same bfloat16 values, rounded once (a batch norm folded into the weight: rounded there
    too, as close to the float32 model as eager)."""
    model, x = _conv1d_case(kind)
    with torch.no_grad():
        compiled = slt.compile(model, (x,))
        out = compiled(x)
        ref = _reference(model, x)
    assert "conv_pairs" in _kinds(compiled)
    assert _dot_kernels(compiled) >= 1
    if kind == "dilated_batch_norm":
        _as_close_as_eager(out, model(x), copy.deepcopy(model).float()(x.float()))
    else:
        torch.testing.assert_close(out.float(), ref.float(), rtol=2 ** -7, atol=1e-3)


@pytest.mark.parametrize("target, pairs", [("llvm -mcpu=znver4 -mattr=+avx512f,+avx512bf16", True),
                                           ("llvm -mcpu=znver3", False)])
def test_conv1d_pair_layout_follows_the_target(target, pairs):
    """Built (not run) for a target: the pair layout and vdpbf16ps where it has avx512bf16,
    the float32 path (a float32 copy of the input, float32 weight blocks) where not."""
    model, x = _conv1d_case("padded_stride2_gelu")
    with torch.no_grad():
        compiled = slt.compile(model, (x,), target=target)
    assert ("conv_pairs" in _kinds(compiled)) == pairs
    assert (INTRINSIC in compiled.ir("target")) == pairs


@pytest.mark.parametrize("what", ["linear", "conv1d"])
def test_pairs_without_the_instruction(monkeypatch, what):
    """Pairs whose register tile is not tensorized (a read the intrinsic cannot take) keep
    their plain loops and the same sums; forced here on any host: the lowering told the target
    has the instruction, the schedule told it has not."""
    from schedlang.torch import conv_schedules, schedules
    from schedlang.torch.ops import conv, matmul
    lowering, schedule, kind = (matmul, schedules, "pair_panels") if what == "linear" else \
        (conv, conv_schedules, "conv_pairs")
    # the instruction's lanes the target's float32 vector (8 on an AVX2 host: its blocks)
    monkeypatch.setattr(lowering, "bf16_dot_lanes", lambda target: target.native_lanes(32))
    monkeypatch.setattr(schedule, "bf16_dot_lanes", lambda target: 0)
    if what == "linear":
        torch.manual_seed(3)
        model, x = nn.Sequential(nn.Linear(64, 32), nn.GELU()).eval().bfloat16(), torch.randn(19, 64).bfloat16()
    else:
        model, x = _conv1d_case("padded_stride2_gelu")
    with torch.no_grad():
        compiled = slt.compile(model, (x,))
        out = compiled(x)
        ref = _reference(model, x)
    assert kind in _kinds(compiled)
    assert INTRINSIC not in compiled.ir("target")
    torch.testing.assert_close(out.float(), ref.float(), rtol=2 ** -7, atol=1e-3)
