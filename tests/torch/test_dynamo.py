"""torch.compile(module, backend="schedlang"): the Dynamo backend matches eager PyTorch, and
the graphs it compiles really go through schedlang.torch.compile_fx."""
import os
import sys
import warnings
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import schedlang.torch as sl_torch
from schedlang.torch import dynamo
from schedlang.torch.zoo import SiluAndMul

from .helpers import spy_compile_fx

ROOT = Path(__file__).resolve().parents[2]


class MLP(nn.Module):
    """Linear, GELU, Linear: parameters become graph inputs of the ATen graph."""

    def __init__(self, d_in=16, d_hidden=40, d_out=12):
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.fc2 = nn.Linear(d_hidden, d_out)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


@pytest.fixture
def compiled_graphs(monkeypatch):
    """The ATen graphs handed to schedlang.torch.compile_fx, with the target they were compiled for."""
    seen = []
    spy_compile_fx(monkeypatch, before=lambda gm, target: seen.append((gm, target)))
    yield seen
    torch._dynamo.reset()


def test_backend_name_is_registered():
    assert dynamo.BACKEND_NAME in torch._dynamo.list_backends()
    assert torch._dynamo.lookup_backend("schedlang") is not None


def test_entry_point_is_declared():
    """pip install makes backend="schedlang" resolvable without importing schedlang, through
    the group torch._dynamo.backends.registry reads."""
    import tomllib
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["torch_dynamo_backends"]["schedlang"] == "schedlang.torch.dynamo:schedlang_backend"
    assert project["scripts"]["schedlang"] == "schedlang.cli:main"


def test_entry_point_resolves_without_importing_schedlang(tmp_path):
    """What pip install gives: a distribution whose entry_points.txt names the backend. In a
    fresh process that imports only torch, backend="schedlang" loads schedlang.torch.dynamo
    through it (and the module's own registration steps aside: no duplicate name)."""
    import subprocess
    dist = tmp_path / "schedlang_entry_point_probe-0.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: schedlang-entry-point-probe\nVersion: 0.0\n")
    (dist / "entry_points.txt").write_text("[torch_dynamo_backends]\n"
                                           "schedlang = schedlang.torch.dynamo:schedlang_backend\n")
    code = ("import sys, torch\n"
            "fn = torch._dynamo.lookup_backend('schedlang')\n"
            "assert fn.__module__ == 'schedlang.torch.dynamo', fn\n"
            "assert 'schedlang' in torch._dynamo.list_backends()\n"
            "print('OK')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("OK"), proc.stdout[-3000:]


def test_silu_and_mul_matches_eager(compiled_graphs):
    model = SiluAndMul()
    x = torch.randn(2, 8, 96)
    with torch.no_grad():
        got = torch.compile(model, backend="schedlang", dynamic=False)(x)
    torch.testing.assert_close(got, model(x), rtol=1e-5, atol=1e-6)
    assert len(compiled_graphs) == 1
    gm, target = compiled_graphs[0]
    ops = {str(n.target) for n in gm.graph.nodes if n.op == "call_function"}
    assert "aten.silu.default" in ops, ops          # kept whole: schedlang lowers silu itself
    assert target == "llvm"


def test_mlp_matches_eager(compiled_graphs):
    torch.manual_seed(0)
    model = MLP().eval()
    x = torch.randn(5, 16)
    with torch.no_grad():
        compiled = torch.compile(model, backend="schedlang", dynamic=False)
        got = compiled(x)
        again = compiled(x + 1)                     # the cached compiled graph, on new values
        want, want_again = model(x), model(x + 1)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(again, want_again, rtol=1e-4, atol=1e-5)
    assert len(compiled_graphs) == 1


class WithTensorConstants(nn.Module):
    """Tensors made in forward (transformers' empty key/value cache): AOT autograd keeps them
    as attributes of its graph module, read by get_attr nodes."""

    def forward(self, x):
        cache = torch.tensor([])
        return torch.cat([cache, x], -1) * torch.tensor([1.0, 2.0, 3.0])


def test_tensor_constants_of_the_graph_module(compiled_graphs):
    x = torch.randn(4, 3)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", sl_torch.FallbackWarning)
        got = torch.compile(WithTensorConstants(), backend="schedlang", dynamic=False)(x)
    torch.testing.assert_close(got, WithTensorConstants()(x))
    (gm, _), = compiled_graphs
    assert any(n.op == "get_attr" for n in gm.graph.nodes)      # what this test is about


def test_a_dynamic_batch_after_recompiling(compiled_graphs):
    """torch.compile's default (dynamic=None) recompiles with a symbolic batch when a second
    shape arrives; the size, which AOT autograd passes as an input of its own, is read from
    the tensor instead, and one schedlang module then serves every batch."""
    torch.manual_seed(0)
    model = MLP().eval()
    compiled = torch.compile(model, backend="schedlang")
    with torch.no_grad():
        for batch in (4, 7, 2, 9):
            x = torch.randn(batch, 3, 16)                   # a reshape to (batch * 3, 16) inside
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-5)
    assert len(compiled_graphs) == 2, "static first, then one dynamic graph for all later batches"
    gm, _ = compiled_graphs[-1]
    kinds = [type(n.meta.get("val")).__name__ for n in gm.graph.nodes if n.op == "placeholder"]
    assert "SymInt" not in kinds, kinds


def test_gradients_still_flow(compiled_graphs):
    """With gradients on, schedlang compiles the forward graph and torch runs the backward."""
    torch.manual_seed(0)
    model = MLP()
    x = torch.randn(3, 16)
    torch.compile(model, backend="schedlang", dynamic=False)(x).square().sum().backward()
    got = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    model(x).square().sum().backward()
    for g, p in zip(got, model.parameters()):
        torch.testing.assert_close(g, p.grad, rtol=1e-4, atol=1e-5)
    assert compiled_graphs, "the forward graph was not compiled by schedlang"


def test_unknown_option_is_named():
    torch._dynamo.reset()
    compiled = torch.compile(SiluAndMul(), backend="schedlang", options={"targt": "cuda"})
    with pytest.raises(Exception, match="has no option 'targt'"):
        compiled(torch.randn(2, 8))
    torch._dynamo.reset()


def test_registering_twice_is_harmless():
    dynamo.register()
    assert torch._dynamo.lookup_backend("schedlang") is dynamo.schedlang_backend




class TrainedAttention(nn.Module):
    """SDPA with grouped-query heads inside a trained model: AOT autograd writes it as
    _scaled_dot_product_flash_attention_for_cpu, whose logsumexp the backward reads."""

    def __init__(self, gqa: bool):
        super().__init__()
        self.gqa = gqa
        self.proj = nn.Linear(16, 32 if gqa else 48)

    def forward(self, x):
        h = self.proj(x).view(2, 12, -1, 4).transpose(1, 2)
        q, k, v = (h[:, :4], h[:, 4:6], h[:, 6:8]) if self.gqa else (h[:, :4], h[:, 4:8], h[:, 8:12])
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=self.gqa).square().sum()


@pytest.mark.parametrize("gqa", [False, True])
def test_training_through_attention(compiled_graphs, gqa):
    """Equal gradients, and the logsumexp the backward reads comes out of the fused kernel
    (a column of its result): before, it was a second output no block could compute, and the
    whole attention kept its plain loops (with a warning; 38x slower at L=1024)."""
    torch.manual_seed(0)
    model, x = TrainedAttention(gqa), torch.randn(2, 12, 16)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*keeps its plain loops")
        torch.compile(model, backend="schedlang", dynamic=False)(x).backward()
    got = model.proj.weight.grad.clone()
    model.zero_grad()
    model(x).backward()
    torch.testing.assert_close(got, model.proj.weight.grad, rtol=1e-4, atol=1e-5)


class Heads(nn.Module):
    """Reshapes by the sequence length: trained at a second length, Dynamo recompiles with a
    symbolic length, and the forward graph returns that size for its backward."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 24)

    def forward(self, x):
        b, n, _ = x.shape
        q, k, v = self.proj(x).view(b, n, 3, 2, 4).permute(2, 0, 3, 1, 4)
        return F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, n, 8).square().mean()


def test_training_at_a_second_sequence_length(compiled_graphs):
    torch.manual_seed(0)
    model = Heads()
    compiled = torch.compile(model, backend="schedlang")
    for n in (12, 9, 7):
        x = torch.randn(2, n, 8)
        compiled(x).backward()
        got = model.proj.weight.grad.clone()
        model.zero_grad()
        model(x).backward()
        torch.testing.assert_close(got, model.proj.weight.grad, rtol=1e-4, atol=1e-6)
        model.zero_grad()


@pytest.mark.parametrize("options", [{}, {"norm_first": True, "activation": "gelu"}])
def test_transformer_encoder_fast_path_is_compiled(compiled_graphs, options):
    """In eval mode without gradients nn.TransformerEncoderLayer calls one fused op for the
    whole layer (aten._transformer_encoder_layer_fwd), which Dynamo records as is; the backend
    decomposes it (fastpath.py) into the ops torch.export gives, so nothing runs in torch."""
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True, **options)
    model = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()
    x = torch.randn(2, 10, 32)
    pad = torch.zeros(2, 10, dtype=torch.bool)
    pad[1, 7:] = True                                   # the second sequence's last 3 keys are padding
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", sl_torch.FallbackWarning)
        got = torch.compile(model, backend="schedlang")(x, src_key_padding_mask=pad)
        want = model(x, src_key_padding_mask=pad)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    ops = {str(n.target) for gm, _ in compiled_graphs for n in gm.graph.nodes}
    assert "aten._transformer_encoder_layer_fwd.default" not in ops
    assert "aten.scaled_dot_product_attention.default" in ops


class ViewsAcrossABreak(nn.Module):
    """A graph whose outputs are views of its inputs (a permute and a view, as timm's Sequencer
    hands its LSTMs), read by eager code after a graph break that relies on their strides and
    writes through them."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6, 6)
        self.seen = []

    def forward(self, x):
        b, h, w, c = x.shape
        rows = x.permute(0, 2, 1, 3).reshape(b * w, h, c)
        same = x.view(b, h, w, c)
        y = self.lin(x)
        torch._dynamo.graph_break()
        self.seen.append((rows.stride(), rows.data_ptr() == x.data_ptr(), same.data_ptr() == x.data_ptr()))
        rows.mul_(2.0)                   # a write through the view reaches x, as in eager
        return y + x


def test_graph_outputs_that_view_inputs_are_returned_as_views():
    """dynamo.input_views finds the outputs of an ATen graph that are views of its inputs, and
    with_input_views hands back those views (the input's storage, eager's strides) in place of
    the compiled module's tensors of equal values. With the copies, timm's Sequencer through
    torch.compile under no_grad differed from eager by 2e-2 (its LSTMs read such views)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    def f(x, w):
        return x.permute(0, 2, 1, 3).reshape(5, 4, 6), x * w, x

    x, w = torch.randn(1, 4, 5, 6), torch.randn(6)
    views = dynamo.input_views(make_fx(f, tracing_mode="fake")(x, w))
    assert views is not None and views[0] == [0, 2]
    copies = lambda args: [t.contiguous().clone() for t in f(*args)]     # noqa: E731  (what a module returns)
    got = dynamo.with_input_views(views, copies)([x, w])
    want = f(x, w)
    assert [g.data_ptr() == x.data_ptr() for g in got] == [True, False, True]
    assert got[0].stride() == want[0].stride() and got[2] is not None and got[2].stride() == x.stride()
    for g, e in zip(got, want):
        torch.testing.assert_close(g, e)


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_outputs_that_view_inputs_stay_views(grad):
    x = torch.randn(1, 4, 5, 6)
    model, eager = ViewsAcrossABreak().eval(), ViewsAcrossABreak().eval()
    eager.load_state_dict(model.state_dict())
    torch._dynamo.reset()
    with torch.set_grad_enabled(grad):
        xc = x.clone()
        got = torch.compile(model, backend="schedlang")(xc)
        want = eager(x.clone())
    assert model.seen == eager.seen
    torch.testing.assert_close(got.detach(), want.detach())
