"""The Linear register tile per vector ISA: pinned for AVX2 (6 x 16, twelve ymm accumulators,
no spill and no guard in the k loop, whatever M), and eager's results on odd shapes (tails in
M, N and K, a batch dim, with and without bias) for AVX2 and AVX-512 code: run where the
host can, built (and its tile checked) where it cannot."""
import re

import pytest
import torch
import torch.nn as nn

import schedlang as sl
import schedlang.torch as slt
from schedlang.target.llvm.cpus import why_not_runnable
from schedlang.target.llvm.jit import host_cpu
from schedlang.torch.schedules import panel_width, register_rows, tail_free_rows

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
    assert (panel_width(t512, 768), register_rows(t512, panel_width(t512, 768))) == (32, 8)


@pytest.mark.parametrize("m", [128, 48, 7 * 6 + 1])
def test_avx2_k_loop_is_twelve_fmas_without_spills(m):
    """M = 128 (not a multiple of 6) too: the product is padded to whole tiles, so the k loop is
    the same twelve FMAs, two B loads and six broadcasts, nothing on the stack."""
    _, x, cm = _compiled(AVX2, m, 64, 80)
    cm.ir("all")
    (module,) = cm.modules.values()
    loop = _k_loop_asm(module.get_source("asm"))
    assert loop.count("vfmadd231ps") == 12 and loop.count("ymm") >= 36, loop
    assert loop.count("vbroadcastss") == 6 and "rsp" not in loop and "zmm" not in loop, loop


@pytest.mark.parametrize("target", [AVX2, AVX512])
@pytest.mark.parametrize("m,k,n,bias,lead", [
    (128, 64, 80, True, ()),      # M tail of 6, padded
    (7, 5, 3, True, ()),          # fewer rows and columns than a tile
    (13, 33, 17, False, ()),      # tails everywhere, no bias
    (100, 70, 50, True, ()),      # M tail of 6 and of 8, N tail of 16 and 32
    (9, 31, 40, True, (2,)),      # a batch dim
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
