"""Every math function of Tensor IR has a CUDA rule: built for target cuda, run through the
shim (g++) and compared with the reference evaluator, in float32 and float64."""
import numpy as np
import pytest

import schedlang as sl
from schedlang.target.llvm.emit_expr import LIBM_FUNCTIONS
from tests.helpers import assert_close
from tests.target.cuda.schedules import bind

pytest.importorskip("cuda.bindings")

UNARY = sorted(n for n in LIBM_FUNCTIONS if n not in ("atan2", "fmod", "hypot", "nextafter")) + ["nearbyint"]
BINARY = ["atan2", "fmod", "hypot", "nextafter", "copysign"]
# inputs inside each function's domain
DOMAIN = {"acosh": (1.0, 4.0), "acos": (-1.0, 1.0), "asin": (-1.0, 1.0), "atanh": (-0.9, 0.9), "log10": (0.1, 9.0),
          "log1p": (-0.9, 9.0)}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", UNARY + BINARY)
def test_math_function_on_cuda(name, dtype):
    n = 77
    A = sl.placeholder((n,), dtype, name="A")
    B = sl.placeholder((n,), dtype, name="B")
    fn = getattr(sl, name)
    out = sl.compute((n,), (lambda i: fn(A[i], B[i])) if name in BINARY else (lambda i: fn(A[i])), name="out")
    s = sl.create_schedule(out.op)
    bind(s, out, *s[out].split(out.op.axis[0], factor=32))
    mod = sl.build(s, [A, B, out], target="cuda")
    rng = np.random.default_rng(0)
    lo, hi = DOMAIN.get(name, (-3.0, 3.0))
    a, b = (rng.uniform(lo, hi, n).astype(dtype) for _ in range(2))
    got = np.zeros(n, dtype)
    mod.emulate(a, b, got)
    want = sl.reference([out], {A: a, B: b})[0]
    assert_close(got, want, dtype, name=name)
