"""torch.compile(model, backend="schedlang") under no_grad / inference_mode builds what
schedlang.torch.compile builds (issue 17, item 3): parameters and buffers are the graph's
state (packed weights, fused epilogues), the composite ops schedlang lowers reach it whole,
and a parameter changed after compiling is seen at the next call, never silently stale."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import schedlang.torch as sl_torch
from schedlang.torch import dynamo, zoo


class GatedMLP(nn.Module):
    def __init__(self, d=64, h=96):
        super().__init__()
        self.gate, self.up = nn.Linear(d, h, bias=False), nn.Linear(d, h, bias=False)
        self.down = nn.Linear(h, d, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class MLP(nn.Module):
    def __init__(self, d=48, h=80):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d, h), nn.Linear(h, d)
        self.register_buffer("scale", torch.linspace(0.5, 1.5, d))

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x))) * self.scale


MODELS = {
    "mlp": (MLP, (12, 48)),                        # rows enough to pack (ops/matmul.reads_weight_in_place)
    "gated_mlp": (GatedMLP, (2, 7, 64)),           # a 3-d input: views around each linear
    "bert": (lambda: zoo.BertLayer(dim=64, heads=4, hidden=96), (1, 16, 64)),
    "llama": (lambda: zoo.LlamaLayer(dim=64, heads=4, hidden=96), (1, 16, 64)),
}


@pytest.fixture
def frozen_graphs(monkeypatch):
    """The CompiledModule behind each graph the backend compiled with its state frozen."""
    torch._dynamo.reset()
    seen = []
    real = dynamo.compile_frozen

    def spy(*args, **kwargs):
        fn = real(*args, **kwargs)
        seen.append(fn.compiled)
        return fn

    monkeypatch.setattr(dynamo, "compile_frozen", spy)
    yield seen
    torch._dynamo.reset()


def _kernels(compiled) -> int:
    return sum(line.startswith("kernel ") for line in compiled.ir("kernel").splitlines())


# llama with -m slow: bert keeps a whole transformer layer (attention, layer norms) by default.
@pytest.mark.parametrize("name", [n if n != "llama" else pytest.param(n, marks=pytest.mark.slow) for n in sorted(MODELS)])
def test_both_paths_build_the_same_kernels(frozen_graphs, name):
    make, shape = MODELS[name]
    torch.manual_seed(0)
    model = make().eval()
    x = torch.randn(shape)
    with torch.no_grad():
        got = torch.compile(model, backend="schedlang", dynamic=False)(x)
        want = model(x)
        exported = sl_torch.compile(model, (x,))
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    (frozen,) = frozen_graphs
    assert frozen.fallback_ops() == exported.fallback_ops()
    assert sorted(frozen.program.packs) == sorted(exported.program.packs) != []
    assert frozen.ir("kernel") == exported.ir("kernel")
    assert _kernels(frozen) == _kernels(exported)
    if name == "gated_mlp":
        assert _kernels(frozen) == 2          # 5 before: no packing, no fused epilogue


def test_inference_mode_freezes_too(frozen_graphs):
    torch.manual_seed(0)
    model = GatedMLP().eval()
    x = torch.randn(12, 64)         # rows enough that the weights are packed (ops/matmul.reads_weight_in_place)
    with torch.inference_mode():
        got = torch.compile(model, backend="schedlang", dynamic=False)(x)
        want = model(x)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    assert len(frozen_graphs) == 1 and frozen_graphs[0].program.packs


def test_a_parameter_changed_after_compiling_is_seen(frozen_graphs):
    """Dynamo passes the parameters at each call; the packed copies follow their versions."""
    torch.manual_seed(0)
    model = MLP().eval()
    x = torch.randn(5, 48)
    compiled = torch.compile(model, backend="schedlang", dynamic=False)
    with torch.no_grad():
        compiled(x)
        model.fc1.weight.mul_(-2.0)                         # in place: a new version, packed again
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-5)
        model.fc2.weight = nn.Parameter(torch.randn_like(model.fc2.weight))   # replaced
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-5)
        model.scale.add_(1.0)                                # a buffer, in place
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-5)
    assert len(frozen_graphs) >= 1


def test_with_gradients_parameters_stay_inputs(frozen_graphs):
    """Grad mode on: nothing is frozen (AOT autograd needs the parameters as inputs for the
    backward), and gradients still flow."""
    torch.manual_seed(0)
    model = MLP()
    x = torch.randn(3, 48)
    torch.compile(model, backend="schedlang", dynamic=False)(x).square().sum().backward()
    assert frozen_graphs == []
    assert all(p.grad is not None for p in model.parameters())


def test_a_dynamic_batch_keeps_the_state_frozen(frozen_graphs):
    torch.manual_seed(0)
    model = GatedMLP().eval()
    compiled = torch.compile(model, backend="schedlang")
    with torch.no_grad():
        for batch in (3, 5, 2):
            x = torch.randn(batch, 4, 64)
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-5)
    assert len(frozen_graphs) == 2 and all(c.program.packs for c in frozen_graphs)


def test_fold_linear_folds_what_aot_autograd_decomposes():
    """Without the composite ops kept (another torch), t + mm / addmm between views is
    folded back into one linear per layer."""
    from torch.fx.experimental.proxy_tensor import make_fx
    torch.manual_seed(0)
    model = MLP().eval()
    x = torch.randn(2, 5, 48)
    with torch.no_grad():
        gm = make_fx(lambda x, w1, b1, w2, b2: F.linear(F.linear(x, w1, b1).relu(), w2, b2),
                     tracing_mode="fake")(x, model.fc1.weight, model.fc1.bias, model.fc2.weight, model.fc2.bias)
    before = {str(n.target) for n in gm.graph.nodes if n.op == "call_function"}
    assert "aten.addmm.default" in before and "aten.linear.default" not in before
    assert dynamo.fold_linear(gm) == 2
    ops = [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]
    assert ops == ["aten.linear.default", "aten.relu.default", "aten.linear.default"], ops
    args = (x, model.fc1.weight, model.fc1.bias, model.fc2.weight, model.fc2.bias)
    with torch.no_grad():
        torch.testing.assert_close(gm(*args), model.fc2(model.fc1(x).relu()))


class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(16, 16), nn.Linear(16, 16)
        self.b.weight = self.a.weight                        # one parameter under two names

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


class Counter(nn.Module):
    """A buffer the forward updates in place: AOT autograd returns its new value."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.register_buffer("calls", torch.zeros(8))

    def forward(self, x):
        self.calls.add_(1.0)
        return self.lin(x) + self.calls


@pytest.mark.parametrize("make, shape", [(Tied, (4, 16)), (Counter, (3, 8))])
def test_tied_and_updated_state(frozen_graphs, make, shape):
    torch.manual_seed(0)
    model, reference = make().eval(), make().eval()
    reference.load_state_dict(model.state_dict())
    if make is Tied:
        reference.b.weight = reference.a.weight
    x = torch.randn(shape)
    compiled = torch.compile(model, backend="schedlang", dynamic=False)
    with torch.no_grad():
        for _ in range(2):
            torch.testing.assert_close(compiled(x), reference(x), rtol=1e-5, atol=1e-5)
    if make is Counter:
        torch.testing.assert_close(model.calls, reference.calls)
