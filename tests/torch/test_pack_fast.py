"""prepack.py's fast panel path (torch/pack_fast.py): the same tensor as the general path
for every tail (N below, at and past a multiple of the width) and dtype, convolution
blocks with and without a folded batch norm bit for bit as torch computes them, no
autograd record with grad mode on, and PackCache's constants made by several threads equal
to those made one by one."""
import pytest
import torch

from schedlang.torch import prepack
from schedlang.torch.pack_fast import pack_panels
from schedlang.torch.prepack import PackCache, PackSpec


def general(w, width):
    """The general path: a column-strided view of w takes it (pack_panels answers None)."""
    n, k = w.shape
    wt = torch.zeros(n, 2 * k, dtype=w.dtype)[:, ::2]
    wt.copy_(w)
    assert pack_panels(wt, width) is None
    return prepack.pack(wt, width)


@pytest.mark.parametrize("n", [1, 15, 16, 17, 48, 61])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
def test_same_as_general_path(n, dtype):
    w = torch.randn(n, 7).to(dtype)
    fast = pack_panels(w, 16)
    assert fast is not None and fast.is_contiguous()
    assert fast.dtype == dtype and torch.equal(fast, general(w, 16))


def test_lazily_negated_source():
    """A tensor with torch's negative bit (no numpy view): packed in torch, values negated."""
    w = torch.randn(40, 5)
    neg = torch._neg_view(w)
    assert neg.is_neg() and neg.is_contiguous()
    assert torch.equal(pack_panels(neg, 16), general(-w, 16))


def test_no_grad_record():
    w = torch.randn(33, 9, requires_grad=True)
    with torch.enable_grad():
        p = pack_panels(w, 8)
    assert not p.requires_grad and p.grad_fn is None
    assert torch.equal(p, general(w.detach(), 8))


def test_cache_packs_many_at_once():
    state = {f"w{i}": torch.randn(20 + 13 * i, 11) for i in range(5)}
    cache = PackCache({f"p{i}": PackSpec(f"w{i}", 8) for i in range(5)})
    got = cache.values(state)
    for i in range(5):
        assert torch.equal(got[f"p{i}"], general(state[f"w{i}"], 8))
    assert all(cache.values(state)[n] is got[n] for n in got), "made once"
    with torch.no_grad():
        state["w3"].mul_(2)                    # an in-place write: w3's panels made again, only those
    again = cache.values(state)
    assert torch.equal(again["p3"], general(state["w3"], 8))
    assert all(again[n] is got[n] for n in got if n != "p3")


def general_conv(w, width, gamma=None, mean=None, var=None, eps=0.0):
    """pack_conv's general path, in torch: the fold in float64, a zero-padded copy, a permute."""
    oc = w.shape[0]
    if var is not None:
        scale = prepack.bn_scale(gamma, var, eps)
        w = (w.double() * scale.reshape((oc,) + (1,) * (w.dim() - 1))).to(w.dtype)
    padded = torch.zeros((prepack.panels(oc, width) * width,) + tuple(w.shape[1:]), dtype=w.dtype)
    padded[:oc].copy_(w)
    blocks = padded.reshape((-1, width) + tuple(w.shape[1:]))
    return blocks.permute(0, *range(2, w.dim() + 1), 1).contiguous()


@pytest.mark.parametrize("oc", [1, 7, 8, 9, 24, 29])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("folded", [False, True])
def test_conv_blocks_same_as_general_path(oc, dtype, folded):
    torch.manual_seed(oc)
    w = torch.randn(oc, 3, 3, 2).to(dtype)
    bn = (torch.rand(oc) + 0.5, torch.randn(oc), torch.rand(oc) * 1e-3, 1e-5) if folded else ()
    got = prepack.pack_conv(w, 8, *bn)
    assert got.shape == (prepack.panels(oc, 8), 3, 3, 2, 8) and got.is_contiguous() and got.dtype == dtype
    assert torch.equal(got, general_conv(w, 8, *bn)), "bit for bit (the fold rounded once)"
    assert (pack_panels(w, 8) is not None) == (dtype != torch.bfloat16), "numpy's dtypes take the fast path"


def test_large_weights_full_panels_by_the_kernel(tmp_path, monkeypatch):
    """pack_kernel.py's transposer packs a large weight's full panels (the kernel cache on):
    the same tensor as the general path, the tail panel by numpy; weights it does not take
    (K not a multiple of 8, a width not one of 8, float64, the kernel cache off) are packed
    as before."""
    from schedlang import disk
    from schedlang.torch import pack_kernel
    monkeypatch.setenv(disk.ENV, str(tmp_path / "cache"))
    monkeypatch.setenv(disk.CODE_CACHE_ENV, "1")
    monkeypatch.setattr(pack_kernel, "MIN_ELEMENTS", 0)
    calls = []
    real = pack_kernel.transposer

    def transposer(width, dtype):
        module = real(width, dtype)
        calls.append((width, dtype, module is not None))
        return module
    monkeypatch.setattr(pack_kernel, "transposer", transposer)
    torch.manual_seed(0)
    w = torch.randn(40, 24)                  # two full panels of 16 and a tail of 8
    assert torch.equal(pack_panels(w, 16), general(w, 16))
    assert calls == [(16, "float32", True)]
    state = {f"w{i}": torch.randn(16 * (i + 1) + i, 8 * (i + 2)) for i in range(4)}
    got = PackCache({f"p{i}": PackSpec(f"w{i}", 16) for i in range(4)}).values(state)    # by a few threads
    assert all(torch.equal(got[f"p{i}"], general(state[f"w{i}"], 16)) for i in range(4))
    del calls[1:]
    for w, width in ((torch.randn(40, 20), 16), (torch.randn(36, 24), 12), (torch.randn(40, 24).double(), 16)):
        assert torch.equal(pack_panels(w, width), general(w, width))
    assert len(calls) == 1, "not taken: numpy's copy"
    monkeypatch.setenv(disk.CODE_CACHE_ENV, "0")
    assert pack_kernel.transposer(16, "float32") is None, "no kernel built without the kernel cache"


def einsum_winograd(w, width, m, gamma=None, mean=None, var=None, eps=0.0):
    """pack_winograd as first written: one float64 einsum, rounded, then zero-padded panels."""
    from schedlang.topi.winograd import transform_matrices
    oc, ic = w.shape[:2]
    w64 = w.double()
    if var is not None:
        w64 = w64 * prepack.bn_scale(gamma, var, eps).reshape(oc, 1, 1, 1)
    g = torch.from_numpy(transform_matrices(m)[1])
    alpha = m + 2
    u = torch.einsum("ak,oikl,bl->abio", g, w64, g).to(w.dtype).reshape(alpha * alpha, ic, oc)
    out = torch.zeros((alpha * alpha, ic, prepack.panels(oc, width) * width), dtype=w.dtype)
    out[:, :, :oc] = u
    return out.reshape(alpha * alpha, ic, -1, width).permute(0, 2, 1, 3).contiguous()


@pytest.mark.parametrize("oc,ic", [(1, 1), (15, 3), (16, 5), (17, 2), (40, 9), (300, 64)])
@pytest.mark.parametrize("m", [2, 4, 6])
@pytest.mark.parametrize("folded", [False, True])
def test_winograd_panels_same_as_einsum(oc, ic, m, folded):
    """The two products in einsum's order (over k, then l) give its float64 sums bit for bit,
    made in steps of a few panels (300 x 64: steps of 256, 112 and 64 channels for m = 2, 4, 6,
    the last one partial)."""
    torch.manual_seed(oc * 7 + m)
    w = torch.randn(oc, ic, 3, 3)
    bn = (torch.rand(oc) + 0.5, torch.randn(oc), torch.rand(oc) + 1e-3, 1e-5) if folded else ()
    got = prepack.pack_winograd(w, 16, m, *bn)
    assert got.shape == ((m + 2) ** 2, prepack.panels(oc, 16), ic, 16) and got.is_contiguous()
    assert torch.equal(got, einsum_winograd(w, 16, m, *bn))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_winograd_panels_other_dtypes(dtype):
    torch.manual_seed(3)
    w = torch.randn(20, 4, 3, 3).to(dtype)
    got = prepack.pack_winograd(w, 8, 4)
    assert got.dtype == dtype and torch.equal(got, einsum_winograd(w, 8, 4))


@pytest.mark.slow
def test_winograd_panels_of_resnet_weights_same_as_einsum():
    """Every 3x3 weight of ResNet-18 and ResNet-50 (their initialisation) at both widths."""
    from schedlang.torch import zoo
    for name in ("resnet18", "resnet50"):
        model, _ = zoo.build(name, "full")
        for mod in model.modules():
            if isinstance(mod, torch.nn.Conv2d) and mod.kernel_size == (3, 3) and mod.groups == 1:
                w = mod.weight.detach()
                for width, m in ((16, 4), (8, 2)):
                    assert torch.equal(prepack.pack_winograd(w, width, m), einsum_winograd(w, width, m))
