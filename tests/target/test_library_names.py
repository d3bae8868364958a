"""A module or kernel named like a C library function (exp, free, memcpy, ...) gets another
symbol (target/library_names.py): a torch model whose output op was `exp` built an entry
function named exp, and LLVM's calls to libm's exp for float64 lanes called it (a segfault)."""
import numpy as np
import pytest
import torch
import torch.nn as nn

import schedlang as sl
import schedlang.torch as slt
from schedlang.target.library_names import is_library_name
from tests.cpu_targets import HAS_CC

NAMES = ["exp", "log", "free", "memcpy", "malloc", "GOMP_parallel", "sqrtf", "C"]
FAST = {"exp", "free", "GOMP_parallel", "C"}        # the rest with -m slow (the README suite's time)


def _exp_log(name: str, n: int = 64):
    A = sl.placeholder((n,), name="A", dtype="float64")
    B = sl.compute((n,), lambda i: sl.exp(A[i]) + sl.log(sl.abs(A[i]) + 1.0), name=name)
    s = sl.create_schedule(B.op)
    o, i = s[B].split(B.op.axis[0], factor=8)
    s[B].vectorize(i)
    s[B].parallel(o)
    return s, [A, B]


@pytest.mark.parametrize("name", [n if n in FAST else pytest.param(n, marks=pytest.mark.slow) for n in NAMES])
def test_module_named_like_the_c_library_runs(name, tmp_path):
    s, args = _exp_log(name)
    a = np.random.default_rng(0).standard_normal(64)
    want = np.exp(a) + np.log(np.abs(a) + 1)
    targets = ["llvm", sl.Target.create("llvm").with_options(bounds_check=True)] + (["c"] if HAS_CC else [])
    for target in targets:
        mod = sl.build(s, args, target=target, cache=False)
        b = np.zeros(64)
        mod(a, b)
        np.testing.assert_allclose(b, want, rtol=1e-12)
    mod = sl.build(s, args, target="llvm", cache=False)
    path = str(tmp_path / f"{name}.so")
    mod.export_library(path)
    b = np.zeros(64)
    sl.load_module(path)(a, b)
    np.testing.assert_allclose(b, want, rtol=1e-12)
    # the symbol differs exactly where the name could be the library's
    assert (f"define i32 @{name}(" in mod.get_source("ll")) == (not is_library_name(name))


@pytest.mark.parametrize("fn", ["exp", pytest.param("log", marks=pytest.mark.slow), "sin",
                                pytest.param("tanh", marks=pytest.mark.slow)])
def test_torch_float64_output_op_named_like_libm(fn):
    class M(nn.Module):
        def forward(self, t):
            return getattr(torch, fn)(t.abs() + 0.5)
    x = torch.randn(3, 40, dtype=torch.float64)
    with torch.no_grad():
        got = slt.compile(M(), (x,))(x)
    torch.testing.assert_close(got, M()(x), rtol=1e-12, atol=1e-12)
