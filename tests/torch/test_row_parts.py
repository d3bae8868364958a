"""A Linear whose packed weight comes from memory in a model (schedules.row_parts: B of
STREAMED_B_BYTES or more) is run by threads that each take a part of the row tiles and walk
every column panel; a smaller one, one thread or too few rows per thread keep the threads on
column panels. Results against torch, odd row counts and a bounds-checked build included."""
import pytest
import torch

import schedlang as sl
import schedlang.torch as slt
from schedlang.torch.schedules import MR, ROW_PART_TILES, STREAMED_B_BYTES
from tests.helpers import guards_inside

TWO = sl.Target.create("llvm").with_options(num_threads=2)
K, N = 1024, STREAMED_B_BYTES // (1024 * 4)       # a weight of exactly STREAMED_B_BYTES


class Mlp(torch.nn.Module):
    """Llama's MLP: the gate and up Linears fused in one kernel, then the down one, a residual."""

    def __init__(self, k: int, n: int):
        super().__init__()
        self.gate, self.up = torch.nn.Linear(k, n, bias=False), torch.nn.Linear(k, n, bias=False)
        self.down = torch.nn.Linear(n, k, bias=False)

    def forward(self, x):
        return x + self.down(torch.nn.functional.silu(self.gate(x)) * self.up(x))


def _parallel_loops(compiled) -> list:
    return [line.strip() for line in compiled.ir("tile").splitlines() if line.strip().startswith("parallel ")]


def _compile(module, x, target=TWO):
    with torch.no_grad():
        compiled = slt.compile(module.eval(), (x,), target=target)
        torch.testing.assert_close(compiled(x), module(x), rtol=1e-4, atol=1e-4)
    return compiled


def _k_loop_guards(compiled) -> list:
    """The conditions inside the matmul's k loops (a register tile's FMAs under a guard)."""
    return guards_inside(compiled.ir("tile"), r"for k")


def test_a_streamed_weight_splits_the_rows_between_the_threads():
    torch.manual_seed(0)
    compiled = _compile(torch.nn.Linear(K, N), torch.randn(128, K))
    assert _parallel_loops(compiled)[0].endswith("in 0..2:"), _parallel_loops(compiled)


@pytest.mark.parametrize("rows", [128, 130, 141, 256, 258])
def test_the_parts_never_guard_the_k_loop(rows):
    """Parts split the row tiles evenly or not at all: where the padded rows make an odd number
    of tiles (256 rows: 43 of 6), a short last part would test every FMA row against the
    padding (half the GEMM's speed); those rows stay with column panels."""
    torch.manual_seed(rows)
    compiled = _compile(torch.nn.Linear(K, N), torch.randn(rows, K))
    assert not _k_loop_guards(compiled), _k_loop_guards(compiled)


def test_the_fused_gate_and_up_and_the_down_linear_split_their_rows_bounds_checked():
    torch.manual_seed(1)
    compiled = _compile(Mlp(K, N), torch.randn(128, K), TWO.with_options(bounds_check=True))
    loops = _parallel_loops(compiled)
    assert len(loops) == 2 and all(p.endswith("in 0..2:") for p in loops), loops


@pytest.mark.parametrize("rows,k,target", [
    (128, 256, TWO),                                      # a weight that stays in cache
    (128, K, TWO.with_options(num_threads=1)),            # one thread
    (2 * ROW_PART_TILES * MR - 4, K, TWO),                # too few row tiles for two parts, of any tile
])
def test_otherwise_the_threads_take_column_panels(rows, k, target):
    torch.manual_seed(2)
    compiled = _compile(torch.nn.Linear(k, N), torch.randn(rows, k), target)
    loops = _parallel_loops(compiled)
    assert loops and not loops[0].endswith("in 0..2:"), loops
