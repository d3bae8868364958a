"""Values of the module's state alone folded into constants (torch/const_fold.py): a
standardized convolution weight (NF-Nets', BiT's), weight normalization, a position bias
gathered from a table; computed again when a parameter changes; random values and plain
views of a weight are not folded."""
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import schedlang as sl
import schedlang.torch as st
from schedlang.torch.const_fold import fold_plan

HOST = sl.Target.create("llvm")


class StdConv(nn.Conv2d):
    """timm's ScaledStdConv2d: each filter standardized (a batch norm in training mode over
    the weight), scaled by a gain, at every forward."""

    def __init__(self, cin, cout, k, **kw):
        super().__init__(cin, cout, k, padding=k // 2, **kw)
        self.gain = nn.Parameter(torch.rand(cout, 1, 1, 1) + 0.5)
        self.scale = (cin * k * k) ** -0.5

    def forward(self, x):
        w = F.batch_norm(self.weight.reshape(1, self.out_channels, -1), None, None,
                         weight=(self.gain * self.scale).view(-1), training=True, momentum=0.0, eps=1e-6)
        return F.conv2d(x, w.reshape_as(self.weight), self.bias, self.stride, self.padding, self.dilation, self.groups)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = StdConv(3, 32, 3)
        self.conv2 = StdConv(32, 32, 3, groups=2)
        self.head = nn.utils.parametrizations.weight_norm(nn.Linear(32, 10))
        self.table = nn.Parameter(torch.randn(7, 10))
        self.register_buffer("index", torch.randint(0, 7, (10,)))

    def forward(self, x):
        y = F.relu(self.conv2(F.relu(self.conv1(x))))
        bias = self.table[self.index, torch.arange(10)]          # a gather of the state alone
        return self.head(y.mean((2, 3))) + bias


def _compiled(model, x, strict=True):
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error" if strict else "ignore", st.FallbackWarning)
        return st.compile(model, (x,), target=HOST)


def test_state_alone_values_are_folded_and_packed():
    torch.manual_seed(0)
    model, x = Model().eval(), torch.randn(2, 3, 9, 11)
    cm = _compiled(model, x)
    with torch.no_grad():
        torch.testing.assert_close(cm(x), model(x), rtol=1e-4, atol=1e-4)
    packs = cm.program.packs
    folds = {n for n, sp in packs.items() if sp.kind == "fold"}
    assert len(folds) >= 4, packs            # two conv weights, the normalized head weight, the bias
    convs = [sp for sp in packs.values() if sp.kind in ("conv", "conv_tiles")]
    assert len(convs) == 2 and all(sp.source in folds for sp in convs)   # packed from the folded weights
    assert cm.program.fallbacks == []


def test_a_folded_value_is_computed_again_when_a_parameter_changes():
    torch.manual_seed(0)
    model, x = Model().eval(), torch.randn(1, 3, 8, 8)
    cm = _compiled(model, x)
    with torch.no_grad():
        cm(x)
        model.conv1.weight.mul_(-2.0)            # in place: a new version
        model.conv2.gain.add_(1.0)
        model.table.data = torch.randn(7, 10)     # a new tensor
        torch.testing.assert_close(cm(x), model(x), rtol=1e-4, atol=1e-4)


def test_through_torch_compile():
    torch.manual_seed(0)
    model, x = Model().eval(), torch.randn(1, 3, 8, 8)
    torch._dynamo.reset()
    with torch.no_grad():
        got = torch.compile(model, backend="schedlang")(x)
        torch.testing.assert_close(got, model(x), rtol=1e-4, atol=1e-4)


class Noisy(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6, 4)

    def forward(self, x):
        return F.linear(x, self.lin.weight.t().t(), self.lin.bias) + torch.rand_like(self.lin.bias) * 0


def test_random_values_and_plain_views_are_not_folded():
    model, x = Noisy().eval(), torch.randn(3, 6)
    graph = st.capture(model, (x,))
    plan = fold_plan(graph)
    assert not plan.roots, plan.roots      # rand_like: drawn at each call; t().t(): a view of the weight
    cm = _compiled(model, x, strict=False)     # (rand_like runs in torch)
    with torch.no_grad():
        torch.testing.assert_close(cm(x), model(x), rtol=1e-5, atol=1e-5)
