"""The matmul register tile sized to the register file (schedules.register_rows, panel_width):
AVX2 and AVX-512 code (both run on an AVX-512 host), odd shapes and tails, packed weights
with the fused epilogue, against torch and the reference evaluator."""
import pytest
import torch

import schedlang as sl
import schedlang.torch as slt
from schedlang.torch.schedules import panel_width, register_rows
from tests.helpers import assert_matches_reference, guards_inside
from tests.torch import frontend_like as P
from tests.torch.test_schedules import scheduled

HOST = sl.Target.create("llvm")
AVX512 = HOST if HOST.native_lanes(32) >= 16 else None
TARGETS = {"avx2": sl.Target.create("llvm -mcpu=haswell"),
           "avx512": AVX512 or pytest.skip("no AVX-512 host", allow_module_level=True)}


def test_tile_follows_the_register_file():
    avx2, avx512 = TARGETS["avx2"], sl.Target.create("llvm -mcpu=skylake-avx512")
    assert (register_rows(avx2, panel_width(avx2, 768)), panel_width(avx2, 768)) == (6, 16)    # BLIS's Haswell/Zen 6 x 16
    assert (register_rows(avx512, panel_width(avx512, 768)), panel_width(avx512, 768)) == (6, 64)    # AOCL-BLIS's Zen 4 6 x 64
    assert panel_width(avx512, 20) == 20 and register_rows(avx512, 20) == 8    # two zmm columns
    assert register_rows(avx512, 64) == 6          # 4 column vectors: 6 rows fill 24 + 5 of 32 registers
    assert register_rows(avx512, 32) == 8 and register_rows(avx512.with_options(vector_registers=16), 32) == 6  # the file, not the ISA


class Block(torch.nn.Module):
    """A Linear (weight prepacked) with the GELU and residual epilogue of a transformer MLP."""

    def __init__(self, k: int, n: int):
        super().__init__()
        self.fc = torch.nn.Linear(k, n)
        self.res = torch.nn.Linear(k, n, bias=False)

    def forward(self, x):
        return torch.nn.functional.gelu(self.fc(x)) + self.res(x)


@pytest.mark.parametrize("isa", list(TARGETS))
@pytest.mark.parametrize("m,k,n", [(1, 37, 45), (7, 19, 70), (129, 40, 33)])
def test_packed_linear_epilogue_odd_shapes(isa, m, k, n):
    torch.manual_seed(m)
    mod = Block(k, n).eval()
    x = torch.randn(m, k)
    with torch.no_grad():
        got = slt.compile(mod, (x,), target=TARGETS[isa])(x)
        torch.testing.assert_close(got, mod(x), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("isa", list(TARGETS))
@pytest.mark.parametrize("shape", [(129, 45, 29), (7, 33, 17), (1, 70, 9)])
def test_matmul_nn_odd_shapes(isa, shape):
    s, args, _ = scheduled(P.matmul_nn, *shape, target=TARGETS[isa])
    assert_matches_reference(s, args)


class Product(torch.nn.Module):
    """a @ b of two activations (torch.matmul: mm, bmm or matmul in the exported graph)."""

    def forward(self, a, b):
        return a @ b


@pytest.mark.parametrize("isa", list(TARGETS))
@pytest.mark.parametrize("lead, m, k, n", [((), 511, 64, 509), ((3,), 97, 33, 50), ((2, 3), 7, 13, 100),
                                           ((2,), 128, 64, 128)])
def test_a_product_of_activations_pads_to_whole_tiles(isa, lead, m, k, n):
    """Rows and columns that are not whole register tiles: the product covers whole tiles (A's
    last row read again, B's columns past its end read as 0 under a mask), so no guard sits in
    the k loop; against torch, bounds-checked."""
    torch.manual_seed(m)
    a, b = torch.randn(*lead, m, k), torch.randn(*lead, k, n)
    target = TARGETS[isa].with_options(bounds_check=True)
    with torch.no_grad():
        compiled = slt.compile(Product(), (a, b), target=target)
        torch.testing.assert_close(compiled(a, b), a @ b, rtol=1e-4, atol=1e-4)
    assert guards_inside(compiled.ir("tile"), r"for r in ") == []


class ProductNT(torch.nn.Module):
    """a @ b.transpose(-1, -2) of two activations: B stored with k contiguous."""

    def forward(self, a, b):
        return a @ b.transpose(-1, -2)


class PermutedNT(torch.nn.Module):
    """Scores as a hand-written attention computes them, through the head split and permute
    (not an attention: no softmax follows)."""

    def forward(self, q, k):
        b, s, _ = q.shape
        q = q.view(b, s, 4, -1).permute(0, 2, 1, 3)
        k = k.view(b, s, 4, -1).permute(0, 2, 1, 3)
        return (q @ k.transpose(-2, -1)).tanh()


@pytest.mark.parametrize("isa", list(TARGETS))
@pytest.mark.parametrize("lead, m, k, n", [((), 511, 64, 509), ((3,), 97, 33, 50), ((2,), 128, 64, 128),
                                           ((2, 3), 9, 13, 100), ((), 7, 16, 40)])
def test_a_product_with_b_transposed_runs_the_nn_kernel(isa, lead, m, k, n):
    """B stored [..., N, K] is copied once to [..., K, N padded] and the product runs the nn
    register tile (no horizontal sums of k lanes, no guard in the k loop); fewer rows than
    TRANSPOSE_ROWS read it as it is. Against torch, bounds-checked."""
    from schedlang.torch.ops.matmul import TRANSPOSE_ROWS
    torch.manual_seed(m)
    a, b = torch.randn(*lead, m, k), torch.randn(*lead, n, k)
    target = TARGETS[isa].with_options(bounds_check=True)
    with torch.no_grad():
        compiled = slt.compile(ProductNT(), (a, b), target=target)
        torch.testing.assert_close(compiled(a, b), a @ b.transpose(-1, -2), rtol=1e-4, atol=1e-4)
    tile_ir = compiled.ir("tile")
    assert ("matmul_b_t" in tile_ir) == (m >= TRANSPOSE_ROWS)
    if m >= TRANSPOSE_ROWS:
        assert guards_inside(tile_ir, r"for r in ") == []


@pytest.mark.parametrize("isa", list(TARGETS))
def test_permuted_scores_read_k_transposed_once(isa):
    torch.manual_seed(0)
    q, k = torch.randn(2, 37, 64), torch.randn(2, 37, 64)
    target = TARGETS[isa].with_options(bounds_check=True)
    with torch.no_grad():
        compiled = slt.compile(PermutedNT(), (q, k), target=target)
        torch.testing.assert_close(compiled(q, k), PermutedNT()(q, k), rtol=1e-4, atol=1e-4)
    assert compiled.fallback_ops() == {} and "_b_t" in compiled.ir("tile")
