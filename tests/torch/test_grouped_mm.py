"""Grouped matrix products (ops/grouped_mm.py) and histc (ops/histogram.py), the ops of a
mixture-of-experts layer as transformers writes it: compiled whole, bounds-checked and for
the host, against eager torch; both forms of the product (rows of a tile from one group,
rows of mixed groups), empty groups, rows past the last offset, weights stored either way
round or given as inputs, bfloat16 through F.grouped_mm, malformed offsets read in bounds."""
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import schedlang.torch as st
from schedlang.torch.ops import LowerContext, Unsupported, lookup
from schedlang.torch.ops.histogram import histc as histc_lowering

from ..helpers import CHECKED
from .helpers import check_lowering, compile_each, distinct_builds, requires_bfloat16
from .test_conv import HOST

torch.manual_seed(0)


def _fallback_op():
    """torch.ops.transformers.grouped_mm_fallback: transformers' own where it is installed,
    else the same op defined here (the loop of torch.mm over the groups it runs in eager)."""
    try:
        import transformers.integrations.moe  # noqa: F401
    except Exception:
        pass
    try:
        return torch.ops.transformers.grouped_mm_fallback
    except (AttributeError, RuntimeError):
        pass

    def body(x, w, offs):
        out = torch.zeros(x.shape[0], w.shape[2], dtype=x.dtype)
        start = 0
        for i, end in enumerate(offs.tolist()):
            if start != end:
                torch.mm(x[start:end], w[i], out=out[start:end])
            start = end
        return out
    torch.library.custom_op("transformers::grouped_mm_fallback", body, mutates_args=(),
                            schema="(Tensor input, Tensor weight, Tensor offs) -> Tensor")
    torch.library.register_fake("transformers::grouped_mm_fallback",
                                lambda x, w, offs: x.new_empty(x.shape[0], w.shape[2]))
    return torch.ops.transformers.grouped_mm_fallback


GROUPED = _fallback_op()


class Experts(nn.Module):
    """x @ w[g] per group of rows; w a parameter stored [G, N, K] (transposed for the product,
    as transformers' experts are) or [G, K, N] (kn)."""

    def __init__(self, groups, k, n, kn=False, dtype=torch.float32):
        super().__init__()
        self.kn = kn
        shape = (groups, k, n) if kn else (groups, n, k)
        self.w = nn.Parameter(torch.randn(shape, dtype=dtype) / k ** 0.5)
        self.eval()

    def forward(self, x, offs):
        return GROUPED(x, self.w if self.kn else self.w.transpose(-2, -1), offs)


class ExpertsOfInput(nn.Module):
    def forward(self, x, w, offs):
        return GROUPED(x, w, offs)


def _offs(counts):
    return torch.cumsum(torch.tensor(counts), 0).to(torch.int32)


def _compiled(model, inputs, tol=1e-4):
    """Each build (bounds-checked, host) with no op in torch, checked against eager."""
    with torch.no_grad():
        want = model(*inputs)
    cms = []
    with warnings.catch_warnings():
        warnings.simplefilter("error", st.FallbackWarning)
        for _, cm in compile_each(model, inputs, distinct_builds((CHECKED, HOST))):
            with torch.no_grad():
                got = cm(*inputs)
            torch.testing.assert_close(got, want, rtol=tol, atol=tol)
            cms.append(cm)
    return cms[-1]


# rows per group (empty groups, rows past the last offset: sum < rows), k, n
CASES = {
    "few_rows": ([2, 0, 3], 7, 5, 9),
    "rows_past_offsets": ([3, 1], 6, 12, 20),
    "tiles_of_one_group": ([37, 0, 60, 29, 1, 27], 160, 33, 40),
    "one_group_all_rows": ([0, 150, 0], 150, 16, 70),
    "tiles_rows_past_offsets": ([50, 65, 31], 150, 24, 48),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("kn", [False, True])
def test_grouped_product_matches_eager(name, kn):
    counts, rows, k, n = CASES[name]
    model = Experts(len(counts), k, n, kn=kn)
    cm = _compiled(model, (torch.randn(rows, k), _offs(counts)))
    tensor_ir = cm.ir("tensor")
    assert "grouped_panels" in tensor_ir                      # the weight packed per group
    assert ("_tile_group" in tensor_ir) == (rows >= 150)      # tile-aligned where rows outnumber the groups' tiles


def test_weight_given_as_input():
    counts, rows, k, n = [5, 9, 0, 18], 32, 19, 23
    w = torch.randn(len(counts), k, n)
    _compiled(ExpertsOfInput(), (torch.randn(rows, k), w, _offs(counts)))


def test_symbolic_rows():
    """Rows as a symbolic size (the simple form: the tile-aligned one needs them static), built
    bounds-checked, called at two sizes (its B read once was a vector of indices, which the
    panel's prefetch took for one address)."""
    model = Experts(4, 64, 128)
    rows = torch.export.Dim("rows")
    for target in distinct_builds((CHECKED, HOST)):
        cm = st.compile(model, (torch.randn(40, 64), _offs([10, 5, 20, 5])), target=target,
                        dynamic_shapes=({0: rows}, None))
        for counts in ([10, 5, 20, 5], [3, 0, 9, 1]):
            x, offs = torch.randn(sum(counts), 64), _offs(counts)
            with torch.no_grad():
                torch.testing.assert_close(cm(x, offs), model(x, offs), rtol=1e-4, atol=1e-4)


def test_float64():
    model = Experts(3, 9, 11, dtype=torch.float64)
    _compiled(model, (torch.randn(50, 9, dtype=torch.float64), _offs([10, 25, 15])), tol=1e-10)


def test_malformed_offsets_stay_in_bounds():
    """Offsets that decrease, pass the rows or are negative: torch's loop gives no defined
    result; the product reads only in bounds (the checked build) and is finite."""
    model = Experts(4, 8, 16)
    x = torch.randn(48, 8)
    offs = torch.tensor([30, 5, 100, -7], dtype=torch.int32)
    for _, cm in compile_each(model, (x, offs), [CHECKED]):
        with torch.no_grad():
            assert torch.isfinite(cm(x, offs)).all()


@requires_bfloat16
def test_bfloat16_through_f_grouped_mm():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.randn(3, 24, 16, dtype=torch.bfloat16) / 4)

        def forward(self, x, offs):
            return F.grouped_mm(x, self.w.transpose(-2, -1), offs=offs)
    x = torch.randn(48, 16, dtype=torch.bfloat16)
    _compiled(M().eval(), (x, _offs([20, 0, 28])), tol=2e-2)


class MoE(nn.Module):
    """A mixture-of-experts MLP as transformers' grouped experts compute it (top-k routing,
    rows sorted by expert, histc counts, grouped gate/up and down products, the inverse
    permutation scattered with index_put)."""

    def __init__(self, dim=32, hidden=48, experts=4, top=2):
        super().__init__()
        self.top, self.experts = top, experts
        self.router = nn.Linear(dim, experts, bias=False)
        self.gate_up = nn.Parameter(torch.randn(experts, 2 * hidden, dim) / dim ** 0.5)
        self.down = nn.Parameter(torch.randn(experts, dim, hidden) / hidden ** 0.5)
        self.eval()

    def forward(self, x):
        tokens = x.shape[0]
        weights, ids = torch.topk(self.router(x).softmax(-1), self.top, dim=-1)
        weights = (weights / weights.sum(-1, keepdim=True)).reshape(-1)
        ids, perm = torch.sort(ids.reshape(-1))
        rows = x[perm // self.top]
        counts = torch.histc(ids.float(), bins=self.experts, min=0, max=self.experts - 1)
        offs = torch.cumsum(counts, dim=0, dtype=torch.int32)
        gate, up = GROUPED(rows, self.gate_up.transpose(-2, -1), offs).chunk(2, dim=-1)
        h = GROUPED(F.silu(gate) * up, self.down.transpose(-2, -1), offs) * weights[perm].unsqueeze(-1)
        inverse = torch.empty_like(perm)
        inverse[perm] = torch.arange(perm.shape[0])
        return h[inverse].view(tokens, self.top, -1).sum(1)


@pytest.mark.parametrize("tokens", [5, 40])
def test_moe_block_compiles_whole(tokens):
    cm = _compiled(MoE(), (torch.randn(tokens, 32),))
    assert len(cm.program.parts) == 1


_histc = torch.ops.aten.histc.default


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_histc_matches_torch(dtype):
    x = torch.randn(3, 50, dtype=dtype) * 2
    x[0, :8] = torch.tensor([0.0, 1.0, 2.0, 3.0, float("nan"), -1.0, 3.0001, 2.9999999], dtype=dtype)
    x[1, :4] = torch.tensor([float("inf"), float("-inf"), 0.99999994, 1.0000001], dtype=dtype)
    check_lowering(_histc, (x, 3, 0, 3))
    check_lowering(_histc, (x, 7, -1.5, 2.25))
    check_lowering(_histc, (x, 1, -1, 1))
    check_lowering(_histc, (torch.arange(12, dtype=dtype) % 5, 5, 0, 4))     # experts' ids: exact


def test_histc_not_lowered():
    """The data's own range (min == max), integers and too much work run in torch; a bad
    range is the ValueError torch raises."""
    import schedlang as sl
    x = sl.placeholder((10,), "float32", name="x")
    with pytest.raises(Unsupported):
        histc_lowering(LowerContext("h"), x, 4, 0, 0)
    with pytest.raises(Unsupported):
        histc_lowering(LowerContext("h"), sl.placeholder((10,), "int64", name="i"), 4, 0, 3)
    with pytest.raises(Unsupported):
        histc_lowering(LowerContext("h"), sl.placeholder((1 << 20,), "float32", name="y"), 100, 0, 1)
    with pytest.raises(ValueError):
        histc_lowering(LowerContext("h"), x, 4, 3, 0)
    assert lookup("aten.histc.default") is histc_lowering


def test_cuda_target_emulated():
    """The mixture-of-experts block for the cuda target (the product reads each row's group's
    weight as it is: no packing there), run by both emulators."""
    pytest.importorskip("cuda.bindings")
    from .test_cuda_emulate import check_emulated, compile_cuda
    model = MoE(dim=16, hidden=16, experts=3)
    x = torch.randn(6, 16)
    check_emulated(compile_cuda(model, (x,)), model, (x,), engines=("shim", "simt"), tol=1e-4)


def test_tuned_whole(tmp_path):
    """Tuned whole: each kernel alone reads its index tensors as random inputs, which every
    index read clamps (the search's reference check raised before)."""
    model, x = MoE(), torch.randn(40, 32)
    with torch.no_grad():
        cm = st.compile(model, (x,), tune=12, log=str(tmp_path / "moe.jsonl"), timeout=60)
        torch.testing.assert_close(cm(x), model(x), rtol=1e-4, atol=1e-4)


def test_every_kernel_alone_reads_in_bounds():
    """Each kernel of the MoE block run alone on random inputs (as the tuner measures and checks
    it: its index inputs random too) matches the reference evaluator, which raises on a read
    out of bounds: every index read is clamped (a top-k's values read at its ranks was not,
    and test_tuned_whole failed when the search happened to pick that kernel)."""
    from schedlang.autoschedule import check_against_reference
    from schedlang.torch.schedules import default_schedule
    from schedlang.torch.tune import extract_tasks
    with torch.no_grad():
        cm = st.compile(MoE(), (torch.randn(40, 32),))
    tasks = extract_tasks(cm.program, cm.target)
    assert len(tasks) > 10
    for kt in tasks:
        s = default_schedule(kt.task.outputs, kt.task.target)
        assert check_against_reference(kt.task, s) is None, kt.name


class SortedFirst(Experts):
    """A step in torch before the product (a sort of more elements than the lowering ranks)."""

    def forward(self, x, offs):
        return super().forward(torch.sort(x.flatten()).values.view(x.shape), offs)


def test_a_transposed_weight_read_after_a_torch_step_is_still_packed():
    """The transposed expert weight, a view of the state made in the first part, is lowered again
    in the part that reads it (lower.py's input_views): there the product still sees the
    parameter and reads it packed, and no part writes the transposed copy out."""
    counts, rows, k, n = [37, 0, 60, 29, 1, 27], 160, 33, 40
    model = SortedFirst(len(counts), k, n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", st.FallbackWarning)
        cm = st.compile(model, (torch.randn(rows, k), _offs(counts)))
    x, offs = torch.randn(rows, k), _offs(counts)
    with torch.no_grad():
        torch.testing.assert_close(cm(x, offs), model(x, offs), rtol=1e-4, atol=1e-4)
    assert len(cm.program.parts) == 2
    assert "grouped_panels" in cm.ir("tensor")
    assert not any(name.startswith("transpose") for p in cm.program.parts for name, _ in p.outputs)


def test_the_inverse_permutation_of_a_long_sort_is_a_sort():
    """4200 routed rows: more than the sort lowering ranks, so the sorts run in torch and the
    rows' inverse permutation (index_put of arange at the sort's indices, n^2 compares in gather
    form) is a sort of the permutation (inverse_permutation.py)."""
    model, x = MoE(dim=16, hidden=16, experts=4), torch.randn(2100, 16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", st.FallbackWarning)
        cm = st.compile(model, (x,))
    with torch.no_grad():
        torch.testing.assert_close(cm(x), model(x), rtol=1e-4, atol=1e-4)
    ir = cm.ir("tensor")
    assert "index_put_argsort = sort(" in ir and "index_put_last" not in ir     # no n^2 gather form
