"""The Linear register tile per vector ISA: pinned for AVX2 (6 x 16, twelve ymm accumulators,
no spill and no guard in the k loop, whatever M; 4 x 24 where that pads the product less), and
eager's results on odd shapes (tails in M, N and K, a batch dim, with and without bias, a GELU
epilogue) for AVX2 and AVX-512 code: run where the host can, built (and its tile checked) where
it cannot."""
import re

import pytest
import torch
import torch.nn as nn

import schedlang as sl
import schedlang.torch as slt
from schedlang.target.llvm.cpus import why_not_runnable
from schedlang.target.llvm.jit import host_cpu
from schedlang.torch.schedules import (K_BLOCK_PANEL_BYTES, K_UNROLL, KC, PANEL_L2_BYTES, k_block, panel_width,
                                       register_rows, tail_free_rows)

AVX2, AVX512 = "llvm -mcpu=znver3", "llvm -mcpu=znver4"


def _k_loop_asm(asm: str) -> str:
    """The machine code of the self-looping block with the most FMAs (the register tile's k loop)."""
    loops = []
    for block in re.split(r"\n(?=\.LBB\w+:)", asm):
        back = re.search(r"\n\s*j\w+\s+" + re.escape(block.split(":")[0]) + r"\b", block)
        if block.startswith(".LBB") and back:
            loops.append(block[:back.end()])      # up to the branch back to its start
    return max(loops, key=lambda b: b.count("vfmadd"), default="")


def _compiled(target, m, k, n, bias=True, lead=()):
    torch.manual_seed(m * 1000 + k * 10 + n)
    model = nn.Linear(k, n, bias=bias).eval()
    x = torch.randn(*lead, m, k)
    return model, x, slt.compile(model, (x,), target=sl.Target.create(target))


def test_avx2_tile_is_6_by_16():
    t = sl.Target.create(AVX2)
    nr = panel_width(t, 768)
    assert (nr, register_rows(t, nr)) == (16, 6)
    assert tail_free_rows(6, 128) == 4 and tail_free_rows(6, 132) == 6 and tail_free_rows(6, 5) == 6
    t512 = sl.Target.create(AVX512)
    assert (panel_width(t512, 768), register_rows(t512, panel_width(t512, 768))) == (64, 6)


def test_avx2_wide_panel_where_it_pads_less():
    """With a Linear's rows m and reduction k, AVX2 takes 4 x 24 (as many accumulators) where it
    computes fewer padded outputs and its K x 24 panel fits PANEL_L2_BYTES; AVX-512 (32
    registers) takes 6 x 64 wherever the output has four vectors of columns (k_block keeps a
    long reduction's panel in L2)."""
    t = sl.Target.create(AVX2)
    assert panel_width(t, 768, 128, 768) == 24 and register_rows(t, 24) == 4      # 128 rows: none padded
    assert panel_width(t, 2048, 128, 2048) == 24                                  # N pads to 2064 < 132 rows
    assert panel_width(t, 768, 120, 768) == 16             # 6 divides 120: a tie keeps 6 x 16
    assert panel_width(t, 80, 128, 64) == 16               # 80 columns pad to 96: more than 132 rows
    assert panel_width(t, 768, 128, 3072) == 16            # a 288 KB panel: over the L2 budget
    assert 3072 * 24 * 4 > PANEL_L2_BYTES >= 2048 * 24 * 4
    assert panel_width(t, 768) == panel_width(t, 768, None, 768) == 16           # rows unknown
    assert panel_width(t, 20, 128, 64) == 16 and panel_width(t, 10, 128, 64) == 10   # narrow outputs
    t512 = sl.Target.create(AVX512)
    for n, m, k in ((768, 96, 768), (768, 197, 3072)):
        assert panel_width(t512, n, m, k) == panel_width(t512, n) == min(n, 64)     # no less padding with 48


def test_avx512_narrow_panel_where_it_pads_less():
    """With 32 registers, a Linear takes 8 x 48 (as many accumulators as 6 x 64) where it computes
    fewer padded outputs, whatever its reduction's length; rows unknown keep 6 x 64."""
    t = sl.Target.create(AVX512)
    for k in (768, 3072, 5632):
        assert panel_width(t, 768, 128, k) == 48 and register_rows(t, 48) == 8   # 128 rows: none padded
    assert panel_width(t, 5632, 128, 2048) == 48           # N pads to 5664 < 132 rows
    assert panel_width(t, 3072, 32, 768) == 48             # 6 rows pad 32 to 36
    assert panel_width(t, 768, 120, 768) == 64             # 6 divides 120: a tie keeps 6 x 64
    assert panel_width(t, 80, 3, 64) == 48                 # 80 columns: two panels of 48, not of 64
    assert panel_width(t, 768) == panel_width(t, 768, None, 768) == 64


def test_avx2_wide_k_loop_is_twelve_fmas_without_spills():
    """The 4 x 24 tile (M = 128, N = 96) is three ymm columns, not a <24 x float> vector: twelve
    FMAs, three B loads and four broadcasts a k step (K_UNROLL steps a loop), nothing on the stack."""
    _, x, cm = _compiled(AVX2, 128, 64, 96)
    cm.ir("all")
    (module,) = cm.modules.values()
    loop = _k_loop_asm(module.get_source("asm"))
    assert loop.count("vfmadd231ps") == 12 * K_UNROLL and loop.count("vbroadcastss") == 4 * K_UNROLL, loop
    assert loop.count("vmovups") + loop.count("vmovaps") == 3 * K_UNROLL, loop
    assert "rsp" not in loop and "zmm" not in loop, loop


@pytest.mark.parametrize("m", [128, 48, 7 * 6 + 1])
def test_avx2_k_loop_is_twelve_fmas_without_spills(m):
    """M = 128 (not a multiple of 6) too: the product is padded to whole tiles, so the k loop is
    the same twelve FMAs, two B loads and six broadcasts a k step, nothing on the stack; K = 66
    (K_UNROLL does not divide it) is not unrolled."""
    for k, steps in ((64, K_UNROLL), (66, 1)):
        _, x, cm = _compiled(AVX2, m, k, 80)
        cm.ir("all")
        (module,) = cm.modules.values()
        loop = _k_loop_asm(module.get_source("asm"))
        assert loop.count("vfmadd231ps") == 12 * steps and loop.count("ymm") >= 36 * steps, loop
        assert loop.count("vbroadcastss") == 6 * steps and "rsp" not in loop and "zmm" not in loop, loop


@pytest.mark.parametrize("target", [AVX2, AVX512])
@pytest.mark.parametrize("m,k,n,bias,lead", [
    (128, 64, 80, True, ()),      # M tail of 6, padded
    (7, 5, 3, True, ()),          # fewer rows and columns than a tile
    (13, 33, 17, False, ()),      # tails everywhere, no bias
    (100, 70, 50, True, ()),      # M tail of 6 and of 8, N tail of 16 and 32
    (9, 31, 40, True, (2,)),      # a batch dim
    (101, 70, 70, True, ()),      # AVX2 4 x 24: M tail of 4, N tail of 24
    (12, 70, 70, False, ()),      # AVX2 4 x 24, no bias (3 row tiles)
    (8, 31, 46, True, (2,)),      # AVX2 4 x 24, a batch dim, N tail
])
def test_odd_shapes_match_eager(target, m, k, n, bias, lead):
    model, x, cm = _compiled(target, m, k, n, bias, lead)
    t = sl.Target.create(target)
    why = why_not_runnable(t.cpu, t.features, *host_cpu())
    if why is not None:
        cm.ir("all")                                  # built (no illegal instruction run)
        (module,) = cm.modules.values()
        assert _k_loop_asm(module.get_source("asm")).count("vfmadd231ps") > 0
        pytest.skip(f"{target}: built only, the host cannot run it ({why})")
    with torch.no_grad():
        torch.testing.assert_close(cm(x), model(x), rtol=1e-4, atol=1e-4)


class GeluResidual(nn.Module):
    """A transformer MLP's first Linear with its GELU, and a residual Linear: the epilogue of
    the wide tile (three vectors of 8) computes erf on each."""

    def __init__(self, k: int, n: int):
        super().__init__()
        self.fc, self.res = nn.Linear(k, n), nn.Linear(k, n, bias=False)

    def forward(self, x):
        return nn.functional.gelu(self.fc(x)) + self.res(x)


@pytest.mark.parametrize("m,k,n", [(128, 40, 72), (37, 33, 70)])
def test_avx2_wide_tile_gelu_epilogue_matches_eager(m, k, n):
    t = sl.Target.create(AVX2)
    assert panel_width(t, n, m, k) == 24
    why = why_not_runnable(t.cpu, t.features, *host_cpu())
    if why is not None:
        pytest.skip(f"{AVX2}: the host cannot run it ({why})")
    torch.manual_seed(m)
    model = GeluResidual(k, n).eval()
    x = torch.randn(m, k)
    with torch.no_grad():
        torch.testing.assert_close(slt.compile(model, (x,), target=t)(x), model(x), rtol=1e-4, atol=1e-4)


def test_k_block_where_the_panel_outgrows_l2():
    """A long reduction's k loop in blocks of a divisor of K up to KC that K_UNROLL divides, only
    where a K x nr panel is over K_BLOCK_PANEL_BYTES and the column panels keep the threads busy."""
    t = sl.Target.create("llvm -mcpu=znver4 -num-cores=2")

    class MM:                      # k_block reads the matmul's reduce axis only
        def __init__(self, k):
            a, kk = sl.placeholder((4, k), name="a"), sl.reduce_axis((0, k), name="k")
            self.op = sl.compute((4,), lambda i: sl.sum(a[i, kk], axis=kk), name="mm").op

    assert 2048 * 64 * 4 <= K_BLOCK_PANEL_BYTES < 3072 * 64 * 4
    assert k_block(MM(5632), 64, 32, t) == KC and k_block(MM(3072), 64, 12, t) == KC
    assert k_block(MM(11008), 64, 12, t) == 344            # 11008 = 2^8 x 43: 8 x 43
    assert k_block(MM(2048), 64, 32, t) is None            # a 512 KB panel stays whole
    assert k_block(MM(3001), 64, 32, t) is None            # K_UNROLL does not divide it
    assert k_block(MM(3072), 64, 3, t) is None             # 3 panels for 2 threads
    assert k_block(MM(3072), 16, 48, t) is None            # AVX2's 16-wide panel: 192 KB


@pytest.mark.parametrize("target,m,k,n,lead,blocks", [
    (AVX512, 70, 3072, 200, (), 6),      # blocks of 512, an M tail, an N tail of 8 in the last panel
    (AVX512, 24, 2772, 260, (2,), 7),    # blocks of 396 (2772 = 7 x 396), a batch dim
    (AVX2, 13, 8320, 80, (), 20),        # AVX2: a 16-wide panel of 8320 rows, blocks of 416
])
def test_k_blocked_linear_matches_eager(target, m, k, n, lead, blocks):
    model, x, cm = _compiled(target + " -num-cores=2", m, k, n, True, lead)
    assert re.search(rf"for \w+\.outer in 0\.\.{blocks}:", str(cm.ir("tile")))     # the k blocks
    t = sl.Target.create(target)
    why = why_not_runnable(t.cpu, t.features, *host_cpu())
    if why is not None:
        pytest.skip(f"{target}: built only, the host cannot run it ({why})")
    with torch.no_grad():
        torch.testing.assert_close(cm(x), model(x), rtol=1e-4, atol=1e-4)
