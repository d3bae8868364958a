"""The model zoo (schedlang.torch.zoo) at tiny sizes, compiled whole and compared with eager
torch; the ops each model still runs in torch are recorded here. The CNNs run no convolution,
batch norm or pooling in torch, the transformers one fused attention kernel per layer: those
checks live here too, so that each model is captured and compiled once (helpers.zoo_compiled
and zoo_coverage keep them per process, and --dist loadfile may run two files on two workers)."""
import re
import warnings

import pytest
import torch

import schedlang.torch as st
from schedlang.torch import zoo

from .helpers import zoo_compiled, zoo_coverage


@pytest.fixture(autouse=True)
def _inference():
    """The compiled modules compute no gradients: call them (and eager) as inference does."""
    with torch.no_grad():
        yield


CNN: set = set()      # convolution and eval batch norm are lowered (ops/conv.py, ops/norm.py)
CNN_OPS = {"convolution", "_native_batch_norm_legit_no_training"}
# What each model may still run in torch (not lowered yet); the transformers run nothing.
STILL_IN_TORCH = {
    "resnet18": CNN,
    "resnet50": CNN,
    "mobilenet_v2": CNN,
    "bert": set(), "gpt2": set(), "llama": set(),
}
# Ops these models produce that are lowered: they must never fall back.
LOWERED = {"hardtanh", "relu6", "arange", "any", "all", "embedding", "constant_pad_nd", "logical_not", "where",
           "full", "scalar_tensor", "full_like", "softmax", "layer_norm", "rms_norm", "linear", "matmul", "gelu",
           "silu", "cos", "sin", "cat", "mean", "relu", "add", "mul", "eq", "le", "sub", "logical_and",
           "max_pool2d_with_indices", "avg_pool2d", "_adaptive_avg_pool2d", "adaptive_max_pool2d"}


# resnet50 (a second ResNet: its bottlenecks' 1x1s), gpt2 and llama (further transformers) are
# compiled with -m slow; resnet18 and mobilenet_v2 keep the CNNs in the default suite and bert the
# transformers (test_llama_through_dynamo_compiles_whole still compiles a whole llama there, and
# test_attention.py GPT-2's hand-written causal attention).
SLOW_MODELS = {"resnet50", "gpt2", "llama"}


def _names(names):
    return [pytest.param(n, marks=pytest.mark.slow) if n in SLOW_MODELS else n for n in names]


@pytest.mark.parametrize("name", _names(sorted(zoo.MODELS)))
def test_zoo_model_matches_eager(name):
    """Compiled once per process (helpers.zoo_compiled: other files compile the same tiny
    models); a FallbackWarning is expected only for a model that still runs ops in torch."""
    model, compiled, caught = zoo_compiled(name)
    if not STILL_IN_TORCH[name]:
        assert not [w for w in caught if issubclass(w.category, st.FallbackWarning)], \
            [str(w.message) for w in caught]
    fallbacks = compiled.fallback_ops()
    assert set(fallbacks) <= STILL_IN_TORCH[name], f"{name}: new ops in torch: {fallbacks}"
    assert not set(fallbacks) & LOWERED, f"{name}: lowered ops fall back: {fallbacks}"
    if not STILL_IN_TORCH[name]:
        assert len(compiled.program.parts) == 1, f"{name}: {len(compiled.program.parts)} parts"
    assert fallbacks == zoo_coverage(name)
    got = compiled(*model.inputs)
    assert got.dtype == model.want.dtype and got.shape == model.want.shape
    torch.testing.assert_close(got, model.want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2"])
def test_zoo_cnns_run_no_convolution_or_batch_norm_in_torch(name):
    """The compile test_zoo_model_matches_eager checks (helpers.zoo_compiled, once per process)."""
    model, cm, caught = zoo_compiled(name)
    # no kernel keeps plain loops (a UserWarning); a FallbackWarning (pooling) is another matter
    plain = [str(w.message) for w in caught if issubclass(w.category, UserWarning)
             and not issubclass(w.category, st.FallbackWarning)]
    assert not plain, plain
    assert not set(cm.fallback_ops()) & CNN_OPS, cm.fallback_ops()
    assert not any(spec.kind == "bn_scale" for spec in cm.program.packs.values()), "every batch norm is folded"
    with torch.no_grad():
        torch.testing.assert_close(cm(*model.inputs), model.want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", _names(["resnet18", "resnet50", "mobilenet_v2"]))
def test_zoo_cnns_run_no_pooling_in_torch(name):
    counts = zoo_coverage(name)     # once per process (helpers.zoo_coverage, as above)
    assert not [op for op in counts if "pool" in op or "upsample" in op], counts


@pytest.mark.parametrize("name", _names(["bert", "gpt2", "llama"]))
def test_zoo_transformers_use_one_fused_attention_kernel(name):
    """The compile test_zoo_model_matches_eager checks (helpers.zoo_compiled), whole: no FallbackWarning."""
    model, compiled, caught = zoo_compiled(name, "llvm")
    assert not [w for w in caught if issubclass(w.category, st.FallbackWarning)], [str(w.message) for w in caught]
    assert compiled.fallback_ops() == {} and len(compiled.program.parts) == 1
    module, inputs = model.module, model.inputs
    tensor_ir = compiled.ir("tensor")
    layers = sum(1 for m in module.modules() if type(m).__name__ in ("BertLayer", "GPT2Block", "LlamaLayer"))
    assert len(re.findall(r"^\w+_pv\[", tensor_ir, re.M)) == layers
    kernels = compiled.ir("kernel")
    # every attention stage lives in one kernel per layer: the kernel that computes the exp also
    # computes the scores and the value product
    for body in kernels.split("\nkernel ")[1:]:
        assert ("_exp" in body) == ("_scores" in body) == ("_pv" in body)
    assert sum("_exp" in body for body in kernels.split("\nkernel ")[1:]) == layers
    torch.testing.assert_close(compiled(*inputs), model.want, rtol=1e-4, atol=1e-4)


def test_zoo_build_is_seeded_and_checks_its_arguments():
    a, xa = zoo.build("gpt2")
    b, xb = zoo.build("gpt2")
    assert torch.equal(xa[0], xb[0])
    assert all(torch.equal(p, q) for p, q in zip(a.state_dict().values(), b.state_dict().values()))
    assert not a.training
    with pytest.raises(ValueError, match="unknown model"):
        zoo.build("vgg")
    with pytest.raises(ValueError, match="unknown size"):
        zoo.build("gpt2", "huge")


def test_llama_through_dynamo_compiles_whole():
    """torch.compile(model, backend="schedlang") sees the same ops (arange, embedding, any ...)."""
    import schedlang.torch.dynamo  # noqa: F401  (registers the backend)
    module, inputs = zoo.build("llama")
    with warnings.catch_warnings():
        warnings.simplefilter("error", st.FallbackWarning)
        fast = torch.compile(module, backend="schedlang")
        got = fast(*inputs)
    torch.testing.assert_close(got, module(*inputs), rtol=1e-4, atol=1e-4)
