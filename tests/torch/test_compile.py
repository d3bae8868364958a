"""schedlang.torch.compile on real modules against eager torch (runtime.py, lower.py)."""
import warnings

import pytest
import torch

import schedlang.torch as st
from schedlang.torch import FallbackWarning

from .modules import BatchNormTrain, DynamicViews, MaxAndIndex, Residual, SiluAndMul, WithTorchStep

torch.manual_seed(0)


def _close(got, want, tol=1e-5):
    if isinstance(want, (tuple, list)):
        assert type(got) is type(want) and len(got) == len(want)
        for g, w in zip(got, want):
            _close(g, w, tol)
        return
    assert got.dtype == want.dtype and got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("shape", [(1, 32, 4096), (3, 7, 10), (5, 2)])
def test_silu_and_mul(shape):
    m = SiluAndMul()
    x = torch.randn(shape)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        cm = st.compile(m, (x,))
    _close(cm(x), m(x))
    x2 = torch.randn(shape)
    _close(cm(x2), m(x2))                          # built once, called again
    assert len(cm.program.parts) == 1 and not cm.program.fallbacks


def test_silu_and_mul_levels():
    cm = st.compile(SiluAndMul(), (torch.randn(1, 32, 4096),))
    tensor = cm.ir("tensor")
    assert "chunk_1[i, j, k] = x[i, j, k + 2048]" in tensor
    assert "silu_sigmoid[i, j, k] = 1.0 / silu_denom[i, j, k]" in tensor
    loop = cm.ir("loop")
    assert "x[0, j, k + 2048]" in loop and "chunk_0" not in loop      # the index maps are inlined
    text = cm.ir("all")
    for level in ("torch", "tensor", "loop", "tile", "kernel", "target"):
        assert f"==== {level} ====" in text
    assert "define" in cm.ir("target")
    with pytest.raises(ValueError, match="unknown IR level"):
        cm.ir("bytecode")


def test_float16_module():
    m = SiluAndMul()
    x = torch.randn(4, 6).half()
    cm = st.compile(m, (x,))
    _close(cm(x), m(x), tol=2e-3)


@pytest.mark.filterwarnings("ignore::schedlang.torch.lower.FallbackWarning")   # sum, until torchops lands
def test_residual_with_broadcasting_parameters_and_buffers():
    m = Residual(6)
    x, y = torch.randn(4, 6), torch.randn(1, 6)
    cm = st.compile(m, (x, y))
    got = cm(x, y)
    want = m(x, y)
    assert isinstance(got, tuple)
    _close(got[0], want[0])
    assert got[1].dtype == want[1].dtype


def test_fallback_runs_in_torch_with_one_warning():
    m = WithTorchStep()
    x = torch.randn(3, 5)
    with pytest.warns(FallbackWarning, match="reverse") as record:
        cm = st.compile(m, (x,))
    assert len([w for w in record if issubclass(w.category, FallbackWarning)]) == 1
    assert cm.program.fallbacks == ["reverse"]
    assert len(cm.program.parts) == 2
    assert "# in torch (no lowering):" in cm.ir("tensor")
    _close(cm(x), m(x))


def test_dynamic_batch():
    m = SiluAndMul()
    batch = torch.export.Dim("batch")
    cm = st.compile(m, (torch.randn(2, 8),), dynamic_shapes={"x": {0: batch}})
    assert "x: (batch, 8) f32" in cm.ir("torch")
    for b in (3, 5):
        x = torch.randn(b, 8)
        _close(cm(x), m(x))


def test_dynamic_views_and_a_size_as_a_scalar():
    m = DynamicViews()
    cm = st.compile(m, (torch.randn(3, 2, 4),), dynamic_shapes={"x": {0: torch.export.Dim("b")}})
    assert "view = view(x, [b, 8])" in cm.ir("torch").replace("  ", " ").replace("  ", " ")
    assert "x[i, j // 4, j % 4]" in cm.ir("tensor")             # the batch maps one to one
    for b in (2, 6):
        x = torch.randn(b, 2, 4)
        _close(cm(x), m(x))
    with pytest.raises(ValueError, match="dimension 1"):
        cm(torch.randn(2, 3, 4))


def test_input_checks():
    cm = st.compile(SiluAndMul(), (torch.randn(2, 8),))
    with pytest.raises(TypeError, match="takes 1 input"):
        cm(torch.randn(2, 8), torch.randn(2, 8))
    with pytest.raises(TypeError, match="dtype torch.float64"):
        cm(torch.randn(2, 8, dtype=torch.float64))
    with pytest.raises(ValueError, match="shape"):
        cm(torch.randn(3, 8))
    with pytest.raises(TypeError, match="torch.Tensor"):
        cm([1.0] * 16)
    got = cm(torch.randn(8, 2).t())                # non-contiguous input: made contiguous
    assert got.shape == (2, 4)


def test_compile_fx_shares_the_lowering():
    m = SiluAndMul()
    x = torch.randn(3, 10)
    from torch.fx.experimental.proxy_tensor import make_fx
    gm = make_fx(lambda t: (m(t),), decomposition_table=st.decomposition_table())(x)
    fn = st.compile_fx(gm, [x])
    assert any(n.op == "silu" for n in fn.graph.nodes)
    got = fn(x)
    assert isinstance(got, tuple) and len(got) == 1
    _close(got[0], m(x))


def test_cuda_target_needs_a_gpu():
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    from schedlang.torch.runtime import CompiledModule
    cm = CompiledModule.__new__(CompiledModule)
    cm._device = "cuda"
    with pytest.raises(RuntimeError, match="no CUDA GPU"):
        cm(torch.randn(2))


@pytest.mark.filterwarnings("ignore::schedlang.torch.lower.FallbackWarning")
def test_compile_fx_under_aot_autograd_with_dynamic_sizes():
    """Dynamo with dynamic=True passes sizes as int arguments: they bind the size vars."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd
    built = []

    def fw(gm, example_inputs):
        built.append(st.compile_fx(gm, example_inputs))
        return make_boxed_func(built[-1])
    torch._dynamo.reset()
    m = Residual(6)
    c = torch.compile(m, backend=aot_autograd(fw_compiler=fw, decompositions=st.decomposition_table()),
                      dynamic=True)
    y = torch.randn(1, 6)
    with torch.no_grad():
        for b in (3, 7):
            x = torch.randn(b, 6)
            _close(c(x, y)[0], m(x, y)[0])
    assert len(built) == 1 and any(i.kind == "size" for i in built[0].graph.inputs)
    torch._dynamo.reset()


@pytest.mark.filterwarnings("ignore::schedlang.torch.lower.FallbackWarning")
def test_op_with_two_results():
    m = MaxAndIndex()
    x = torch.randn(3, 5, 2)
    cm = st.compile(m, (x,))
    _close(cm(x), m(x))


def test_buffer_mutation_is_refused():
    with pytest.raises(NotImplementedError, match="in place"):
        st.compile(BatchNormTrain().train(), (torch.randn(3, 4),))


class RescalesItsWeight(torch.nn.Module):
    """As transformers' RWKV in eval mode does at its first call (weights halved in place)."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        with torch.no_grad():
            self.lin.weight.div_(2.0)
        return self.lin(x)


def test_parameter_mutation_is_refused():
    """Refused by name (it was a ValueError from the output tree: 2 values for 1 output)."""
    with pytest.raises(NotImplementedError, match="lin.weight in place"):
        st.compile(RescalesItsWeight().eval(), (torch.randn(3, 4),))


@pytest.mark.filterwarnings("ignore::schedlang.torch.lower.FallbackWarning")
def test_sequential_mlp_and_eval_batchnorm():
    """nn.Sequential's parameters ("0.weight") get identifier names; eval BatchNorm reads buffers."""
    mlp = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4),
                              torch.nn.BatchNorm1d(4)).eval()
    mlp[3].running_mean.normal_()
    mlp[3].running_var.uniform_(0.5, 2.0)
    x = torch.randn(3, 8)
    cm = st.compile(mlp, (x,))
    assert "p_0_weight: (16, 8) f32   # parameter 0.weight" in cm.ir("torch")
    _close(cm(x), mlp(x))


def test_modules_is_a_read_only_view_of_the_built_parts():
    """CompiledModule.modules: the public seam the CLI reads ptxas figures through."""
    cm = st.compile(SiluAndMul(), (torch.randn(4, 6),))
    assert set(cm.modules) == {part.index for part in cm.program.parts}
    with pytest.raises(TypeError):
        cm.modules[0] = None


def test_contiguous_inputs_are_not_copied():
    cm = st.compile(SiluAndMul(), (torch.randn(4, 6),))
    (index, real), = cm.modules.items()
    seen = []

    def recording(*arrays):
        seen.append([a.data_ptr() for a in arrays])
        return real(*arrays)
    cm._modules[index] = recording
    x = torch.randn(4, 6)
    out = cm(x)
    assert seen[0][0] == x.data_ptr() and seen[0][1] == out.data_ptr()
    xt = torch.randn(6, 4).t()                     # not contiguous: one contiguous copy
    _close(cm(xt), SiluAndMul()(xt))
    assert seen[1][0] != xt.data_ptr()
