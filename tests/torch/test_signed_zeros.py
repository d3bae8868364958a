"""Negation in the PyTorch frontend against eager torch, bit for bit on signed zeros, infinities,
NaNs of both signs and subnormals: torch.neg and -x flip the sign bit (also of 0.0 and NaN);
rsub, sub from zero and x * -1 are arithmetic (a NaN result compares as NaN: IEEE leaves the
sign of an arithmetic NaN open, and LLVM may turn x * -1.0 into a negation). Eager torch
rounds every bfloat16 result through float and makes each NaN the positive 0x7fc0, even of
neg (schedlang flips its sign, as numpy's ml_dtypes does): bfloat16 NaNs compare as NaN."""
import numpy as np
import pytest
import torch

import schedlang.torch as slt
from tests.target.engines import special_values

SIGN_BIT = ("torch.neg", "-x", "neg(neg(x))", "abs(-x)")


class Negations(torch.nn.Module):
    def forward(self, x):
        return (torch.neg(x), -x, torch.neg(torch.neg(x)), torch.abs(-x),
                x * -1, torch.rsub(x, 0.0), 0.0 - x, x - 0.0, 1.0 / -x)


NAMES = SIGN_BIT + ("x * -1", "rsub(x, 0.0)", "0.0 - x", "x - 0.0", "1.0 / -x")


def _bits(t: torch.Tensor) -> np.ndarray:
    view = {2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
    return t.contiguous().view(view).numpy()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_negation_matches_eager_torch_bit_for_bit(dtype):
    x = torch.tensor(special_values(str(dtype).split(".")[1]).astype(np.float64)).to(dtype)
    x = torch.where(torch.arange(len(x)) == len(x) - 1, -x, x)     # the last NaN: its sign bit set
    want = Negations()(x)
    got = slt.compile(Negations(), (x,))(x)
    bad = []
    for name, g, w in zip(NAMES, got, want):
        assert g.dtype == w.dtype, name
        differ = _bits(g) != _bits(w)
        if name not in SIGN_BIT or dtype == torch.bfloat16:
            differ = np.where(torch.isnan(w).numpy(), ~torch.isnan(g).numpy(), differ)
        if differ.any():
            bad.append(f"{name}: at {x[torch.from_numpy(differ)].tolist()} got {g[torch.from_numpy(differ)].tolist()} "
                       f"where torch has {w[torch.from_numpy(differ)].tolist()}")
    assert not bad, "\n".join(bad)
