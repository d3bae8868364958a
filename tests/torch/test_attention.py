"""Fused attention (ops/attention.py, attention_match.py, attention_schedule.py):
F.scaled_dot_product_attention and the hand-written softmax(q @ k^T ...) @ v compiled to one
kernel, against eager torch for odd sequence lengths, head dims that are not a multiple of
the vector width, masks, causal, grouped-query attention and float64; bounds-checked builds;
one kernel per attention and no [S, S] buffer in the lowered program; the CUDA default
schedule emulated at tiny sizes."""
import math
import re
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import schedlang as sl
import schedlang.torch as st
from schedlang.torch.attention_match import AttentionPattern, match_attention
from schedlang.torch.attention_schedule import QUERY_BLOCK
from tests.helpers import CHECKED, guards_inside

torch.manual_seed(0)


@pytest.fixture(autouse=True)
def _inference():
    with torch.no_grad():
        yield


class SDPA(nn.Module):
    def __init__(self, **kwargs):
        super().__init__()
        self.kwargs = kwargs

    def forward(self, q, k, v, *mask):
        return F.scaled_dot_product_attention(q, k, v, *mask, **self.kwargs)


class HandWritten(nn.Module):
    """BERT's attention as model code writes it: scores scaled by a division, an additive mask."""

    def forward(self, q, k, v, mask):
        s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        return torch.softmax(s + mask, dim=-1) @ v


class HandWrittenCausal(nn.Module):
    """GPT-2's: a scale multiplied in, the causal mask from tril and masked_fill."""

    def forward(self, q, k, v):
        n = q.shape[-2]
        s = torch.matmul(q, k.transpose(-2, -1)) * (q.shape[-1] ** -0.5)
        mask = torch.tril(torch.ones(n, n, dtype=torch.bool))
        return torch.softmax(s.masked_fill(~mask, float("-inf")), dim=-1) @ v


class Plain(nn.Module):
    def forward(self, q, k, v):
        return torch.softmax(q @ k.permute(0, 2, 1), -1) @ v


def compile_whole(module, inputs, target=CHECKED):
    """Compiled with no op in torch, as one part; bounds-checked by default (every access
    inside its buffer, else an IndexError after the call)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", st.FallbackWarning)
        compiled = st.compile(module, inputs, target=target)
    assert compiled.fallback_ops() == {} and len(compiled.program.parts) == 1
    return compiled


def attention_kernels(compiled) -> int:
    return compiled.ir("kernel").count("\nkernel ")


def local_sizes(compiled):
    """The element counts of every buffer the kernels allocate."""
    return [int(n) for n in re.findall(r"(?:local|global) \w+: \w+\[(\d+)\]", compiled.ir("kernel"))]


def check(module, inputs, tol=1e-5, target=CHECKED):
    compiled = compile_whole(module, inputs, target)
    got, want = compiled(*inputs), module(*inputs)
    assert got.dtype == want.dtype and got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=tol, atol=tol)
    return compiled


SHAPES = [(1, 1, 1, 1, 8), (1, 2, 7, 7, 8), (2, 3, 33, 33, 64), (1, 2, 130, 130, 80), (1, 2, 5, 33, 8),
          (2, 1, 33, 7, 80)]
# In the default suite: a query-block tail (33 = 2 x 16 + 1) at d = 64, more keys than queries
# causal, fewer keys than queries at d = 80; every other shape and causality with -m slow.
FAST = {((2, 3, 33, 33, 64), False), ((1, 2, 5, 33, 8), True), ((2, 1, 33, 7, 80), False)}


@pytest.mark.parametrize("shape, causal", [
    pytest.param(shape, causal, id=f"{'x'.join(map(str, shape))}-{causal}",
                 marks=[] if (shape, causal) in FAST else [pytest.mark.slow])
    for causal in (False, True) for shape in SHAPES])
def test_sdpa_matches_eager(shape, causal):
    b, h, lq, sk, d = shape
    q, k, v = torch.randn(b, h, lq, d), torch.randn(b, h, sk, d), torch.randn(b, h, sk, d)
    compiled = check(SDPA(is_causal=causal), (q, k, v))
    assert attention_kernels(compiled) == 1
    # a block of query rows (and K transposed), never the whole score matrix (keys padded to
    # whole tiles of two vectors)
    assert max(local_sizes(compiled)) <= max(QUERY_BLOCK, d) * max(sk + 2 * CHECKED.native_lanes(32), d)


# "bool" with -m slow: "bool_empty_row" takes the same boolean mask path (and a row of nothing).
@pytest.mark.parametrize("mask_kind", ["float", pytest.param("bool", marks=pytest.mark.slow), "bool_empty_row",
                                       "broadcast", "shifted_windows"])
def test_sdpa_with_masks(mask_kind):
    b, h, n, d = 2, 3, 33, 8
    q, k, v = (torch.randn(b, h, n, d) for _ in range(3))
    if mask_kind == "float":
        mask = torch.randn(b, h, n, n)
    elif mask_kind == "shifted_windows":  # Swin's -100 where windows meet: subnormal exps, flushed to 0
        mask = torch.randn(1, h, n, n) + torch.where(torch.rand(b, 1, n, n) < 0.5, -100.0, 0.0)
    elif mask_kind == "broadcast":       # a padding mask [B, 1, 1, S], BERT's extended mask
        mask = torch.zeros(b, 1, 1, n)
        mask[1, ..., 20:] = torch.finfo(torch.float32).min
    else:
        mask = torch.rand(n, n) > 0.3
        mask[:, 0] = True
        if mask_kind == "bool_empty_row":
            mask[5] = False              # SDPA gives 0 for a row with nothing to attend to
    check(SDPA(), (q, k, v, mask))


def test_sdpa_scale_gqa_float64_and_non_square():
    q, k, v = torch.randn(1, 4, 9, 16), torch.randn(1, 2, 13, 16), torch.randn(1, 2, 13, 24)
    check(SDPA(scale=0.3, enable_gqa=True), (q, k, v))
    check(SDPA(is_causal=True, enable_gqa=True), (q, k, v))
    q, k, v = (torch.randn(2, 2, 17, 8, dtype=torch.float64) for _ in range(3))
    check(SDPA(is_causal=True), (q, k, v), tol=1e-12)
    q, k, v = torch.randn(7, 8), torch.randn(5, 8), torch.randn(5, 3)   # no batch dims
    check(SDPA(), (q, k, v))


# bfloat16 with -m slow: float16 takes the same widen-compute-narrow path.
@pytest.mark.parametrize("dtype,tol", [(torch.float16, 2e-3), pytest.param(torch.bfloat16, 1.6e-2,
                                                                          marks=pytest.mark.slow)])
def test_sdpa_half_precision_computes_in_float32(dtype, tol):
    q, k, v = (torch.randn(1, 2, 33, 8, dtype=dtype) for _ in range(3))
    check(SDPA(is_causal=True), (q, k, v), tol=tol)


def test_sdpa_refusals():
    q = torch.randn(1, 2, 7, 8)
    with pytest.warns(st.FallbackWarning, match="dropout_p"):
        compiled = st.compile(SDPA(dropout_p=0.5), (q, q, q))
    assert compiled.fallback_ops() == {"scaled_dot_product_attention": 1}
    mask = torch.zeros(7, 7)
    with pytest.raises(Exception, match="is_causal"):     # torch.export refuses it first, as eager does
        st.compile(SDPA(is_causal=True), (q, q, q, mask))


@pytest.mark.parametrize("name", ["bert", "gpt2"])
def test_hand_written_attention_is_one_node_and_one_kernel(name):
    b, h, n, d = 2, 3, 33, 8
    q, k, v = (torch.randn(b, h, n, d) for _ in range(3))
    if name == "bert":
        module, inputs = HandWritten(), (q, k, v, torch.randn(b, 1, 1, n))
    else:
        module, inputs = HandWrittenCausal(), (q, k, v)
    compiled = check(module, inputs)
    ops = [node.op for node in compiled.program.graph.nodes]
    assert ops.count("attention") == 1 and "softmax" not in ops and "matmul" not in ops, ops
    assert attention_kernels(compiled) == 1 and max(local_sizes(compiled)) < n * n


def test_hand_written_plain_and_its_nan_rows():
    q, k, v = (torch.randn(3, 7, 8) for _ in range(3))
    check(Plain(), (q, k, v))
    # softmax of a row of -inf is NaN in eager; the fused kernel keeps that (SDPA's 0 is not softmax's)
    mask = torch.zeros(1, 1, 7)
    mask[..., :] = float("-inf")
    got = compile_whole(HandWritten(), (q[None], k[None], v[None], mask))(q[None], k[None], v[None], mask)
    assert torch.isnan(got).all()


def test_hand_written_attention_through_dynamo_is_fused():
    """AOT autograd writes the matmuls as expand, view, bmm, view: matched all the same."""
    import schedlang.torch.dynamo  # noqa: F401  (registers the backend)
    from schedlang.torch import runtime
    q, k, v = (torch.randn(2, 3, 9, 8) for _ in range(3))
    mask = torch.randn(2, 1, 1, 9)
    built = []
    init = runtime.CompiledModule.__init__

    def spy(self, *args, **kwargs):
        init(self, *args, **kwargs)
        built.append(self)
    runtime.CompiledModule.__init__ = spy
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", st.FallbackWarning)
            got = torch.compile(HandWritten(), backend="schedlang")(q, k, v, mask)
    finally:
        runtime.CompiledModule.__init__ = init
    torch.testing.assert_close(got, HandWritten()(q, k, v, mask), rtol=1e-5, atol=1e-5)
    (compiled,) = built
    assert [n.op for n in compiled.program.graph.nodes] == ["attention"]


def test_the_pattern_needs_single_reader_intermediates():
    class ScoresToo(nn.Module):
        def forward(self, q, k, v):
            s = q @ k.transpose(-1, -2)
            return torch.softmax(s, -1) @ v, s.sum()
    q = torch.randn(2, 5, 8)
    graph = st.capture(ScoresToo(), (q, q, q))
    assert match_attention(graph) is graph
    check_value = ScoresToo()(q, q, q)
    compiled = st.compile(ScoresToo(), (q, q, q))
    for g, w in zip(compiled(q, q, q), check_value):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)


def test_matched_node_runs_in_torch_as_the_hand_written_ops():
    """The matched node's target is what runs should its lowering refuse: the original ops."""
    q, k, v = (torch.randn(2, 3, 9, 8) for _ in range(3))
    mask = torch.randn(2, 1, 1, 9)
    graph = match_attention(st.capture(HandWritten(), (q, k, v, mask)))
    (node,) = [n for n in graph.nodes if n.op == "attention"]
    assert isinstance(node.target, AttentionPattern)
    got = node.target(q, k, v, [mask], **node.kwargs)
    torch.testing.assert_close(got, HandWritten()(q, k, v, mask), rtol=1e-6, atol=1e-6)


def test_cuda_schedule_emulated():
    pytest.importorskip("cuda.bindings")
    q, k, v = torch.randn(1, 2, 9, 8), torch.randn(1, 2, 7, 8), torch.randn(1, 2, 7, 8)
    module = _CausalAndNot()       # one module: one NVRTC build and one g++ run for the shim
    compiled = compile_whole(module, (q, k, v), target="cuda")
    kernels = compiled.ir("kernel").split("\nkernel ")[1:]
    assert kernels and all("blockIdx.x" in body for body in kernels), kernels
    for engine in ("shim", "simt"):
        got = compiled.emulate(q, k, v, engine=engine)
        for g, w in zip(got, module(q, k, v), strict=True):
            torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)


class _CausalAndNot(nn.Module):
    """Causal and plain SDPA of the same q, k, v, side by side (two attention kernels)."""

    def __init__(self):
        super().__init__()
        self.causal, self.plain = SDPA(is_causal=True), SDPA()

    def forward(self, q, k, v):
        return self.causal(q, k, v), self.plain(q, k, v)


CAUSAL_SHAPES = {"parallel-chunks": ((1, 1), 150, 150, 64), "no-batch-dims": ((), 150, 150, 32),
                 "one-chunk": ((2, 3), 100, 40, 16), "more-keys": ((1, 2), 40, 150, 24)}


# every numbering on the host, one on AVX2 by default; the other three on AVX2 with -m slow
@pytest.mark.parametrize("lead, lq, sk, d, isa", [
    pytest.param(*shape, isa, id=f"{isa}-{name}",
                 marks=[pytest.mark.slow] if isa == "avx2" and name != "one-chunk" else [])
    for isa in ("host", "avx2") for name, shape in CAUSAL_SHAPES.items()])
def test_causal_attention_skips_the_masked_key_chunks(lead, lq, sk, d, isa):
    """Causal SDPA: each block of query rows computes only the key chunks up to its last row
    (rounded up to two vectors), in every stage alike; against eager torch, bounds-checked,
    for the three numberings of the query blocks (parallel chunks of a fused task loop, no
    batch dims, one chunk) and more keys than queries."""
    q, k, v = torch.randn(*lead, lq, d), torch.randn(*lead, sk, d), torch.randn(*lead, sk, d)
    target = CHECKED if isa == "host" else sl.Target.create("llvm -mcpu=haswell").with_options(bounds_check=True)
    compiled = check(SDPA(is_causal=True), (q, k, v), target=target)
    chunk = 2 * target.native_lanes(32)

    def skips(c):      # guards of a key chunk loop by a bound that moves with the query block
        return [b for b in re.findall(rf"if [\w.]+ \* {chunk} < (.+):", c.ir("tile")) if not b.isdigit()]
    assert len(skips(compiled)) >= 2      # the scores' and the exp's (the reductions: per key or vector)
    assert skips(compile_whole(SDPA(is_causal=False), (q, k, v), target)) == []


# ---- whole blocks: SDPA's stages padded to whole query blocks and key tiles (ops/attention.py)

AVX2_CHECKED = sl.Target.create("llvm -mcpu=haswell").with_options(bounds_check=True)


def _product_loop_guards(compiled) -> list:
    """The conditions inside the two products' reduction loops (the scores' over the head
    dim e, the value product's over the keys s): a guard there tests every step."""
    return guards_inside(compiled.ir("tile"), r"for (e|s) in ")


@pytest.mark.parametrize("shape, target", [
    pytest.param((1, 2, 37, 37, 64), CHECKED, id="tails"),             # 37 rows and keys: 48 and 64
    pytest.param((1, 1, 197, 197, 64), CHECKED, id="vit"),             # ViT-B/16's 196 patches + CLS
    pytest.param((2, 2, 5, 7, 16), CHECKED, id="tiny"),                # one block of 8 rows, one vector of keys
    pytest.param((1, 2, 20, 77, 80), CHECKED, id="d80"),               # a head dim of five AVX-512 vectors
    pytest.param((1, 2, 37, 50, 72), CHECKED, id="d72"),               # not whole vectors: two-vector tiles
    pytest.param((1, 2, 37, 37, 64), AVX2_CHECKED, id="avx2"),
])
def test_padded_sdpa_has_no_guard_in_its_products(shape, target):
    """Rows and keys that are not whole blocks and tiles compute padded ones (the rows from
    q's last row, copied per block; the keys from k's and v's last one, scored -inf), so no
    step of the two products tests an index against the end; against eager torch,
    bounds-checked."""
    b, h, lq, sk, d = shape
    q, k, v = torch.randn(b, h, lq, d), torch.randn(b, h, sk, d), torch.randn(b, h, sk, d)
    compiled = check(SDPA(), (q, k, v), target=target)
    guards = _product_loop_guards(compiled)
    if d % target.native_lanes(32) == 0:
        assert guards == [], guards
    else:                                  # the value product's last column tile only
        assert guards and all(f"< {d}" in g for g in guards), guards
    if lq % 8:                             # rows padded: the blocks' copies of q
        assert "_q: " in compiled.ir("tile")


@pytest.mark.parametrize("mask_kind", ["float", "bool", "broadcast", "causal"])
def test_padded_sdpa_reads_masks_inside_them(mask_kind):
    """A mask [L, S] of padded scores is read at its last row and key past them (a
    bounds-checked build raises otherwise), and padded keys stay -inf under every mask."""
    b, h, n, d = 2, 2, 37, 16
    q, k, v = (torch.randn(b, h, n, d) for _ in range(3))
    if mask_kind == "causal":
        compiled = check(SDPA(is_causal=True), (q, k, v))
    else:
        mask = {"float": torch.randn(b, h, n, n), "bool": torch.rand(n, n) > 0.3,
                "broadcast": torch.zeros(b, 1, 1, n).masked_fill(torch.arange(n) >= 30, float("-inf"))}[mask_kind]
        if mask_kind == "bool":
            mask[:, 0] = True
        compiled = check(SDPA(), (q, k, v, mask))
    assert not [g for g in _product_loop_guards(compiled) if "< 37" in g]


def test_padded_rows_of_a_hand_written_attention_keep_their_shape():
    """A hand-written chain's masks are [L, S]: its stages are not padded (guards instead)."""
    q, k, v = (torch.randn(2, 3, 37, 16) for _ in range(3))
    compiled = check(HandWritten(), (q, k, v, torch.randn(2, 1, 37, 37)))
    assert "_q: " not in compiled.ir("tile")
