"""Causal masks written out (ops/causal_mask.py): tril/triu masks and arange comparisons, in
hand-written attention and as SDPA's attn_mask, make the attention kernel skip the masked
keys as is_causal does; masks that are not causal (a later key visible, bottom-right
alignment, a row with no key kept, a multiplied mask, one causal in one batch only, a mask
from an input) do not. Every
case against eager torch, bounds-checked."""
import math
import re

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import schedlang as sl
from tests.helpers import CHECKED
from tests.torch.test_attention import check

torch.manual_seed(0)
MIN = torch.finfo(torch.float32).min


@pytest.fixture(autouse=True)
def _inference():
    with torch.no_grad():
        yield


def _rows_and_keys(q, k):
    L, S = q.shape[-2], k.shape[-2]
    return torch.arange(L)[:, None], torch.arange(S)[None, :]


def _scores(q, k):
    return q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])


MASKS = {
    # causal, as model code writes it
    "masked_fill_tril": lambda q, k, v: torch.softmax(_scores(q, k).masked_fill(
        ~torch.tril(torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool)), float("-inf")), -1) @ v,
    "where_arange_min": lambda q, k, v: torch.softmax(torch.where(
        _rows_and_keys(q, k)[1] <= _rows_and_keys(q, k)[0], _scores(q, k), MIN), -1) @ v,
    "add_triu": lambda q, k, v: torch.softmax(
        _scores(q, k) + torch.triu(torch.full((q.shape[-2], k.shape[-2]), float("-inf")), 1), -1) @ v,
    "sdpa_bool_tril": lambda q, k, v: F.scaled_dot_product_attention(
        q, k, v, attn_mask=torch.tril(torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool))),
    "sdpa_float_min": lambda q, k, v: F.scaled_dot_product_attention(
        q, k, v, attn_mask=torch.triu(torch.full((q.shape[-2], k.shape[-2]), MIN), 1)),
    # not causal
    "one_later_key": lambda q, k, v: torch.softmax(_scores(q, k).masked_fill(
        ~torch.tril(torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool), 1), float("-inf")), -1) @ v,
    "bottom_right": lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=torch.tril(
        torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool), k.shape[-2] - q.shape[-2])),
    "first_row_empty": lambda q, k, v: torch.softmax(       # row 0 all finfo.min: a uniform row in eager
        _scores(q, k) + torch.triu(torch.full((q.shape[-2], k.shape[-2]), MIN)), -1) @ v,
    "multiplied": lambda q, k, v: torch.softmax(
        _scores(q, k) * torch.tril(torch.ones(q.shape[-2], k.shape[-2])), -1) @ v,
    "per_batch": lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=torch.stack([   # causal in
        torch.tril(torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool)),                    # batch 0 only
        torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool)])[:, None]),
}
CAUSAL = {"masked_fill_tril", "where_arange_min", "add_triu", "sdpa_bool_tril", "sdpa_float_min"}


class Attention(nn.Module):
    def __init__(self, kind: str):
        super().__init__()
        self.fn = MASKS[kind]

    def forward(self, q, k, v):
        return self.fn(q, k, v)


def _skips(compiled, target):
    """The guards of key chunk loops by a bound that moves with the query block."""
    chunk = 2 * target.native_lanes(32)
    return [b for b in re.findall(rf"if [\w.]+ \* {chunk} < (.+):", compiled.ir("tile")) if not b.isdigit()]


# every mask on the host; on AVX2 one causal mask by default (the same kernels), the rest with -m slow
@pytest.mark.parametrize("kind, isa", [
    pytest.param(kind, isa, id=f"{kind}-{isa}",
                 marks=[pytest.mark.slow] if isa == "avx2" and kind != "sdpa_float_min" else [])
    for isa in ("host", "avx2") for kind in sorted(MASKS)])
def test_written_out_causal_masks_skip_the_masked_keys(kind, isa):
    lq = 40 if kind == "bottom_right" else 70
    q, k, v = torch.randn(2, 2, lq, 16), torch.randn(2, 2, 70, 16), torch.randn(2, 2, 70, 16)
    target = CHECKED if isa == "host" else sl.Target.create("llvm -mcpu=haswell").with_options(bounds_check=True)
    compiled = check(Attention(kind), (q, k, v), target=target)
    (out,) = [t for p in compiled.program.parts for _, t in p.outputs]
    assert bool(dict(out.op.attrs).get("causal")) == (kind in CAUSAL)
    assert bool(_skips(compiled, target)) == (kind in CAUSAL)


def test_a_mask_from_an_input_is_not_assumed_causal():
    """Its values may change between calls: the keys are all computed, even when it is causal."""
    class FromInput(nn.Module):
        def forward(self, q, k, v, mask):
            return torch.softmax(_scores(q, k) + mask, -1) @ v
    q = torch.randn(1, 2, 70, 16)
    mask = torch.triu(torch.full((70, 70), float("-inf")), 1)
    compiled = check(FromInput(), (q, q, q, mask))
    other = torch.zeros(70, 70)
    torch.testing.assert_close(compiled(q, q, q, other), FromInput()(q, q, q, other), rtol=1e-5, atol=1e-5)
    assert _skips(compiled, CHECKED) == []



class SlicedCausal(nn.Module):
    """A causal attention whose output rows are read from an offset (a slice, as a model
    dropping its first token does): the kernel's key skipping must count absolute query rows."""

    def __init__(self, kind: str, rows: slice):
        super().__init__()
        self.fn, self.rows = MASKS[kind], rows

    def forward(self, q, k, v):
        return self.fn(q, k, v)[:, :, self.rows]


ROW_SLICES = {"1:": slice(1, None), "17:40": slice(17, 40), "33::2": slice(33, None, 2)}


# one slice of each by default (17:40: both ends inside the rows); the rest with -m slow
@pytest.mark.parametrize("kind, rows", [
    pytest.param(kind, ROW_SLICES[r], id=f"{kind}-{r}",
                 marks=[pytest.mark.slow] if r != "17:40" else [])
    for kind in ("sdpa_bool_tril", "masked_fill_tril") for r in ROW_SLICES])
def test_causal_attention_read_from_a_row_offset_matches_eager(kind, rows):
    q, k, v = torch.randn(1, 2, 70, 16), torch.randn(1, 2, 70, 16), torch.randn(1, 2, 70, 16)
    compiled = check(SlicedCausal(kind, rows), (q, k, v))
    # the attention is realized whole, so its loops count query rows from 0, and still skips keys
    assert _skips(compiled, sl.Target.create("llvm"))
    (out,) = [t for p in compiled.program.parts for _, t in p.outputs]
    assert out.shape[-2] == len(range(70)[rows])
