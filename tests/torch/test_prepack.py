"""Linear layers with pre-packed weights (schedlang/torch/prepack.py): eager's results on odd
shapes (tails of the 4 x 16 register tile), the packed copy made once and made again when
the parameter changes, and the kernel's inner loop the same as the hand register-tiled GEMM
of benchmarks/sl_kernels.py (the one measured at ~94% of FMA peak)."""
import importlib.util
import pathlib
import re

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import schedlang as sl
import schedlang.torch as slt
from schedlang.torch.ops import matmul
from schedlang.torch.prepack import pack
from schedlang.torch.zoo import SwiGLUMLP

from ..helpers import CHECKED
from .helpers import compile_cases, compile_each

HOST = sl.Target.create("llvm")


class Residual(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.lin = nn.Linear(n, n)

    def forward(self, x):
        return x + torch.relu(self.lin(x))


def check(model, *inputs, rtol=1e-4, atol=1e-4):
    """Compiled for the host and bounds-checked: eager's result; returns the host module."""
    with torch.no_grad():
        want = model(*inputs)
    for _, cm in compile_each(model, inputs, (CHECKED, HOST)):     # captured once
        torch.testing.assert_close(cm(*inputs), want, rtol=rtol, atol=atol)
    return cm


def test_pack_layout():
    w = torch.arange(37 * 5, dtype=torch.float32).reshape(37, 5)
    p = pack(w, 16)
    assert p.shape == (3, 5, 16) and p.is_contiguous()
    j, k = torch.meshgrid(torch.arange(37), torch.arange(5), indexing="ij")
    assert torch.equal(p[j // 16, k, j % 16], w)
    assert not p[2, :, 5:].any(), "rows past N are zero"


ODD_SHAPES = [(37, 129, 37), (5, 16, 129), (1, 7, 3), (64, 33, 17), (2, 2053, 70), (9, 131, 77)]   # m, k, n


_ODD_LINEARS: dict = {}


def _odd_linears(bias: bool, in_place: bool):
    """(eager's results, each build's results and its packed weights' sources) of a Linear per
    shape of ODD_SHAPES compiled as one module (helpers.compile_cases), bounds-checked and for
    the host, with reads_weight_in_place forced to in_place: made once for the tests of each
    shape."""
    if (bias, in_place) not in _ODD_LINEARS:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(matmul, "reads_weight_in_place", lambda *a: in_place)
            torch.manual_seed(0)
            linears = [nn.Linear(k, n, bias=bias) for _, k, n in ODD_SHAPES]
            want, builds = compile_cases(linears, [torch.randn(m, k) for m, k, _ in ODD_SHAPES], (CHECKED, HOST))
        _ODD_LINEARS[bias, in_place] = want, [(got, [spec.source for spec in cm.program.packs.values()])
                                              for _, cm, got in builds]
    return _ODD_LINEARS[bias, in_place]


# with a bias and weights read in place, and neither, by default; the mixed pairs with -m slow
@pytest.mark.parametrize("m,k,n", ODD_SHAPES)
@pytest.mark.parametrize("bias, in_place", [(False, False), pytest.param(True, False, marks=pytest.mark.slow),
                                            pytest.param(False, True, marks=pytest.mark.slow), (True, True)])
def test_linear_odd_shapes(m, k, n, bias, in_place):
    """Packed and read in place (ops/matmul.reads_weight_in_place forced each way): tails of
    M, N and K of both register tiles, N past a block of the in-place kernel's column tiles.
    Each shape's Linear is checked in a module of all the shapes (_odd_linears)."""
    i = ODD_SHAPES.index((m, k, n))
    want, builds = _odd_linears(bias, in_place)
    for got, sources in builds:
        torch.testing.assert_close(got[i], want[i], rtol=1e-4, atol=1e-4)
        assert [s for s in sources if s.startswith(f"each_{i}_")] == ([] if in_place else [f"each_{i}_weight"])


def test_in_place_where_measured_faster():
    """A few rows read the weight in place: up to 8 on AVX2, up to 4 on AVX-512."""
    avx2 = sl.Target.create("llvm -mcpu=haswell")
    assert matmul.reads_weight_in_place(avx2, 1, 768) and matmul.reads_weight_in_place(avx2, 8, 5632)
    assert not matmul.reads_weight_in_place(avx2, 128, 2048) and not matmul.reads_weight_in_place(avx2, None, 768)
    avx512 = sl.Target.create("llvm -mcpu=skylake-avx512")
    assert matmul.reads_weight_in_place(avx512, 1, 2048) and matmul.reads_weight_in_place(avx512, 4, 768)
    assert not matmul.reads_weight_in_place(avx512, 8, 2048) and not matmul.reads_weight_in_place(avx512, None, 768)
    torch.manual_seed(0)
    cm = check(nn.Linear(2048, 5).eval(), torch.randn(3, 2048))
    assert not cm.program.packs


class HeadsOut(nn.Module):
    """Attention's output projection: heads [B, H, S, D] read as [B, S, H * D], plus a residual."""

    def __init__(self, heads, dim):
        super().__init__()
        self.heads, self.o = heads, nn.Linear(heads * dim, heads * dim, bias=False)

    def forward(self, att, res):
        b, h, s, d = att.shape
        return res + self.o(att.transpose(1, 2).reshape(b, s, h * d))


@pytest.mark.parametrize("in_place", [False, True])
def test_output_projection_through_the_head_split_is_register_tiled(in_place, monkeypatch):
    """The input read through the head split (k = h * D + d: contiguous in runs of D) still
    takes the register-tiled kernel read in place, k-vectors contiguous: it fell to the scalar
    rows schedule before, which made a whole Llama read in place 1.5x slower than packed."""
    monkeypatch.setattr(matmul, "reads_weight_in_place", lambda *a: in_place)
    torch.manual_seed(0)
    cm = check(HeadsOut(2, 32).eval(), torch.randn(1, 2, 5, 32), torch.randn(1, 5, 64))
    assert [s.source for s in cm.program.packs.values()] == ([] if in_place else ["o_weight"])
    kernel = cm.ir("kernel")
    assert ".rf[" in kernel or not in_place, "the k-vector partial sums of the in-place tile"
    assert "// x" not in kernel and "% x" not in kernel, "no per-lane index arithmetic (a gather)"


def test_swiglu_and_residual_epilogues_stay_fused():
    torch.manual_seed(0)
    cm = check(SwiGLUMLP(48, 129).eval(), torch.randn(37, 48))
    assert len(cm.program.packs) == 3
    loops = cm.ir("tile")
    assert loops.count("parallel") == 2, "gate, up and silu * mul are one kernel, down another"
    assert "exp(" in loops.split("parallel")[1], "silu is applied in the gate/up kernel"
    cm = check(Residual(40).eval(), torch.randn(3, 5, 40))
    assert cm.ir("tile").count("parallel") == 1, "bias, relu and the residual add are the matmul's epilogue"


class ReluMLP(nn.Module):
    """OPT's feed-forward: fc1, ReLU, fc2, residual."""

    def __init__(self, d, hidden):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d, hidden), nn.Linear(hidden, d)

    def forward(self, x):
        return x + self.fc2(torch.relu(self.fc1(x)))


def test_a_relu_between_linears_is_the_first_ones_epilogue():
    """A ReLU (a select by value) read by the next Linear is fc1's epilogue, not inlined into
    fc2's k loop, where it ran per row and k step of every register tile (OPT-125m's fc2 took
    1.4x BERT's); two kernels, the second's reduction with no select."""
    torch.manual_seed(0)
    cm = check(ReluMLP(48, 96).eval(), torch.randn(1, 37, 48))
    kernels = cm.ir("tile").split("parallel")[1:]
    assert len(kernels) == 2
    assert "select(" in kernels[0] and "select(" not in kernels[1]


def test_float16_weights():
    torch.manual_seed(0)
    check(nn.Linear(24, 19).half().eval(), torch.randn(6, 24).half(), rtol=2e-3, atol=2e-3)


class Conv1D(nn.Module):
    """GPT-2's Conv1D: addmm(bias, x, W) of a weight stored [K, N]; and x @ W of another."""

    def __init__(self, k, n):
        super().__init__()
        self.weight, self.bias = nn.Parameter(torch.randn(k, n) / k ** 0.5), nn.Parameter(torch.randn(n))
        self.proj = nn.Parameter(torch.randn(n, k) / n ** 0.5)

    def forward(self, x):
        h = torch.addmm(self.bias, x.reshape(-1, x.shape[-1]), self.weight).relu()
        return h @ self.proj


@pytest.mark.parametrize("m,k,n", [(37, 129, 37), (128, 64, 100), (3, 40, 70), (9, 131, 77)])
def test_weights_stored_k_by_n_are_packed(m, k, n):
    """addmm and mm with a parameter [K, N] (x @ W) pack it from its transpose ("panels_kn")
    and run the packed, padded kernel, as a Linear's [N, K] weight does; a few rows read it in
    place (the nn kernel, W's rows contiguous along the columns). Odd shapes, bounds-checked."""
    torch.manual_seed(m)
    cm = check(Conv1D(k, n).eval(), torch.randn(1, m, k))
    packs = sorted((spec.source, spec.kind) for spec in cm.program.packs.values())
    in_place = matmul.reads_weight_in_place(HOST, m, k)
    assert packs == ([] if in_place else [("proj", "panels_kn"), ("weight", "panels_kn")])


def test_weight_that_is_an_input_is_not_packed():
    class F_(nn.Module):
        def forward(self, x, w):
            return F.linear(x, w)
    torch.manual_seed(0)
    cm = check(F_(), torch.randn(7, 9), torch.randn(5, 9))
    assert not cm.program.packs


def test_packed_once_and_again_when_the_parameter_changes():
    torch.manual_seed(0)
    lin = nn.Linear(20, 33).eval()
    x = torch.randn(16, 20)         # rows enough that the weight is packed (ops/matmul.reads_weight_in_place)
    cm = slt.compile(lin, (x,))
    cm(x)
    made = dict(cm._packs._made)
    assert made
    cm(x)
    assert all(cm._packs._made[n][1] is made[n][1] for n in made), "a second call packs again"
    with torch.no_grad():
        lin.weight.mul_(-2)                    # in place, as an optimizer step: a new _version
        want = lin(x)
    torch.testing.assert_close(cm(x), want, rtol=1e-4, atol=1e-4)
    assert all(cm._packs._made[n][1] is not made[n][1] for n in made)


# Scalar integer arithmetic (addresses, the loop counter): its form follows how each kernel's
# indices were written (a Linear's rows are padded, the hand kernel's are not), not the tile.
_SCALAR_INT = re.compile(r"^%v = (getelementptr|trunc|sext|zext|add|sub|mul|shl|or) (float|i8|i32|i64)\b")


def _k_loops(ll: str):
    """The self-looping blocks of LLVM IR that multiply float vectors (the k loops of the
    register tiles), with value names, metadata, wrap flags and scalar integer arithmetic left
    out: the loads, broadcasts, multiply-adds and prefetches."""
    loops = []
    for block in re.split(r"\n(?=[\w.]+:)", ll):
        label = block.split(":", 1)[0]
        if f"label %{label}" not in block or "fmul" not in block or "x float>" not in block:
            continue
        lines = []
        for line in block.splitlines()[1:]:
            line = re.sub(r"%[\w.]+", "%v", line.split(", !")[0].split(" !")[0])
            line = re.sub(r"\b(inbounds|nuw|nsw) ", "", line).strip()
            if not _SCALAR_INT.match(line):
                lines.append(line)
        loops.append(lines)
    return loops


def _hand_kernels():
    path = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "sl_kernels.py"
    spec = importlib.util.spec_from_file_location("sl_kernels", path)
    kernels = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(kernels)
    return kernels


@pytest.mark.parametrize("cpu", ["skylake-avx512", "haswell"])
def test_inner_loop_is_the_hand_register_tiled_gemm(cpu):
    """A Linear's k loop (and each of SwiGLU's gate and up) is gemm_register_tiled's, instruction
    for instruction: mr x nr vector accumulators in registers (6 x 16 with AVX2, 6 x 64 with
    AVX-512: schedules.register_rows, panel_width), mr broadcasts of A, one contiguous load of
    packed B, mr multiply-adds of nr lanes (fused into FMAs by the backend) and the prefetch of
    B's panel row PREFETCH_AHEAD steps ahead a k step, K_UNROLL steps a loop. 48 rows: whole tiles of 6 on both targets, so neither kernel has a tail."""
    from schedlang.torch.schedules import K_UNROLL, panel_width, register_rows
    target = sl.Target.create(f"llvm -mcpu={cpu}")
    nr = panel_width(target, 64)
    mr = register_rows(target, nr)
    hand = _k_loops(_hand_kernels().gemm_register_tiled(target, 48, 64, 64, mr=mr, nr=nr).get_source("ll.opt"))
    assert hand and sum(line.startswith(f"%v = fmul contract <{nr} x float>") for line in hand[0]) == mr * K_UNROLL
    lines = nr * 4 // 64     # the panel row PREFETCH_AHEAD steps ahead, a prefetch per cache line
    assert sum("call void @llvm.prefetch" in line for line in hand[0]) == lines * K_UNROLL
    x = torch.randn(48, 64)
    cm = slt.compile(nn.Linear(64, 64, bias=False).eval(), (x,), target=target)
    assert _k_loops(cm._module(cm.program.parts[0]).get_source("ll.opt"))[0] == hand[0]
    cm = slt.compile(SwiGLUMLP(64, 64).eval(), (x,), target=target)
    loops = _k_loops(cm._module(cm.program.parts[0]).get_source("ll.opt"))
    assert sum(loop == hand[0] for loop in loops) >= 3, "gate, up and down each run the hand k loop"
