"""Golden text of the six levels of the seed's SiluAndMul, x f32[1, 32, 4096], as
`schedlang compile --ir examples/silu_and_mul.py` prints them, so that changes to the
capture, the lowerings, the default schedules or the printers are seen in review.
Refresh with `python -m pytest tests/torch/test_golden.py --update-golden`."""
from pathlib import Path

import pytest
import torch

import schedlang.torch as sl_torch
from schedlang import cli
from schedlang.cli import LEVELS
from tests.helpers import assert_golden

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden"
# A named CPU: the default schedule's vector width and the LLVM IR do not depend on the host.
TARGET = "llvm -mcpu=haswell"
SHAPE = (1, 32, 4096)


def golden_path(level: str) -> Path:
    return GOLDEN / f"torch_silu_and_mul.{level}.txt"


@pytest.fixture(scope="module")
def silu_and_mul():
    """The example's module compiled for TARGET, and its input."""
    example = cli.load_file(str(ROOT / "examples" / "silu_and_mul.py"))
    x = torch.randn(SHAPE, generator=torch.Generator().manual_seed(0))
    return sl_torch.compile(example.SiluAndMul(), (x,), target=TARGET), x


@pytest.mark.parametrize("level", list(LEVELS))
def test_golden_level(silu_and_mul, level, update_golden):
    compiled, _ = silu_and_mul
    text = compiled.ir(level).rstrip("\n") + "\n"
    assert_golden(text, golden_path(level).name, update_golden)


def test_golden_module_computes_silu_and_mul(silu_and_mul):
    """The module whose text is golden computes F.silu(left) * right."""
    compiled, x = silu_and_mul
    left, right = x.chunk(2, dim=-1)
    torch.testing.assert_close(compiled(x), torch.nn.functional.silu(left) * right, rtol=1e-5, atol=1e-6)
