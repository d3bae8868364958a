"""Random small modules (random_modules.py: chains of the ops real models use, on odd shapes)
compiled whole against eager torch; every third one bounds-checked, every fourth on one
thread. A failure prints its seed: `python -m tests.torch.random_modules SEED` replays it.
The default suite runs the first DEFAULT seeds, -m slow the rest of SEEDS and the first CUDA_SEEDS
for target="cuda" on the CPU shim."""
import pytest
import torch

import schedlang as sl
import schedlang.torch as slt
from tests.torch.random_modules import random_module

SEEDS = 120
DEFAULT = 4


def _target(seed: int) -> sl.Target:
    target = sl.Target.create("llvm")
    if seed % 3 == 0:
        target = target.with_options(bounds_check=True)
    if seed % 4 == 1:
        target = target.with_options(num_threads=1)
    return target


@pytest.mark.parametrize("seed", [pytest.param(s, marks=[] if s < DEFAULT else [pytest.mark.slow]) for s in range(SEEDS)])
def test_random_module_matches_eager(seed):
    module, x = random_module(seed)
    with torch.no_grad():
        want = module(x)
        compiled = slt.compile(module, (x,), target=_target(seed))
        got = compiled(x)
        again = compiled(x.clone())
    assert compiled.fallback_ops() == {}, f"seed {seed}: ops left in torch"
    tol = 1e-4 * max(1.0, want.abs().max().item())
    torch.testing.assert_close(got, want, rtol=1e-3, atol=tol, equal_nan=True, msg=lambda m: f"seed {seed}: {m}")
    torch.testing.assert_close(again, got, rtol=0, atol=0, equal_nan=True,
                               msg=lambda m: f"seed {seed}: a second call gave another result: {m}")


def test_the_generator_is_deterministic_and_varied():
    a, xa = random_module(5)
    b, xb = random_module(5)
    assert torch.equal(xa, xb) and [s[0] for s in a.steps] == [s[0] for s in b.steps]
    kinds = {s[0] for seed in range(40) for s in random_module(seed)[0].steps}
    assert {"mod", "fn", "save"} <= kinds


CUDA_SEEDS = 16


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(CUDA_SEEDS))
def test_random_module_on_cuda_emulated(seed):
    """The same modules for target="cuda", run by the CPU shim (the generated CUDA C under g++,
    every access bounds-checked); the larger inputs are left to the llvm test."""
    pytest.importorskip("cuda.bindings")
    module, x = random_module(seed)
    if x.numel() > 3000:
        pytest.skip("input too large for the emulator")
    with torch.no_grad():
        want = module(x)
    got = slt.compile(module, (x,), target="cuda").emulate(x, engine="shim")
    tol = 1e-4 * max(1.0, want.abs().max().item())
    torch.testing.assert_close(got, want, rtol=1e-3, atol=tol, equal_nan=True, msg=lambda m: f"seed {seed}: {m}")
