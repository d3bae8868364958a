"""float16 end to end: numpy float16 arrays and torch.float16 tensors, scalar and vectorized,
math functions, and CPUs without F16C (where LLVM would call libgcc per lane: the
conversions are written out instead, and checked here on every float16 and on float32
values around every rounding boundary)."""
import numpy as np
import pytest
import torch

import schedlang as sl
from tests import programs
from tests.cpu_targets import HAS_CC, needs_cc
from tests.helpers import assert_matches_reference

TARGETS = ["llvm", "llvm -mattr=-f16c", "llvm -mcpu=x86-64"]
C = [pytest.param("c", marks=needs_cc)]       # C99: float16 as bits, converted by the prelude's functions


def bits(x) -> np.ndarray:
    return np.asarray(x).view(np.uint16)


@pytest.mark.parametrize("target", TARGETS + C)
def test_conversions_are_exact_and_round_to_nearest_even(target):
    n = 1 << 16
    rng = np.random.default_rng(0)
    halves = np.arange(n, dtype=np.uint32).astype(np.uint16).view(np.float16)
    around = halves[np.isfinite(halves)].astype(np.float32).view(np.uint32)   # every float16 value, as float bits
    k = around.size                  # | 0x1000: halfway to the next float16 (for normal ones)
    f32 = np.concatenate([around | 0x1000, around | 0x1000, around | 0x1001, around | 0x0FFF, around,
                          rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)]).view(np.float32)
    m = f32.size
    with np.errstate(invalid="ignore"):
        f64 = f32.astype(np.float64)
    f64[:k] *= 1 + 2.0 ** -40        # just above a tie (in magnitude): one rounding, not two
    f64[k:2 * k] *= 1 - 2.0 ** -40   # just below one
    A = sl.placeholder((m,), "float32", name="A")
    D = sl.placeholder((m,), "float64", name="D")
    H = sl.placeholder((n,), "float16", name="H")
    s, (B, E, C) = programs.casts((A, "float16", "B"), (D, "float16", "E"), (H, "float32", "C"), vectorize=("B", "C"))
    h = np.arange(n, dtype=np.uint32).astype(np.uint16).view(np.float16)
    b, e, c = np.zeros(m, np.float16), np.zeros(m, np.float16), np.zeros(n, np.float32)
    mod = sl.build(s, [A, D, H, B, E, C], target=target)
    with np.errstate(invalid="ignore"):
        mod(f32, f64, h, b, e, c)
    if target != "c":
        assert "__truncsfhf2" not in mod.get_source("asm") and "__extendhfsf2" not in mod.get_source("asm")
    with np.errstate(all="ignore"):
        want, want64 = f32.astype(np.float16), f64.astype(np.float16)
    nan = np.isnan(f32)
    np.testing.assert_array_equal(bits(b)[~nan], bits(want)[~nan])
    np.testing.assert_array_equal(bits(e)[~nan], bits(want64)[~nan])
    assert np.isnan(b[nan]).all() and np.isnan(e[nan]).all()
    wc = h.astype(np.float32)
    hn = np.isnan(wc)
    np.testing.assert_array_equal(c[~hn].view(np.uint32), wc[~hn].view(np.uint32))
    assert np.isnan(c[hn]).all()


@pytest.mark.parametrize("target", TARGETS[:2] + C)
@pytest.mark.parametrize("vector", [False, True])
def test_math_and_arithmetic_with_numpy_arrays(target, vector):
    n = 45
    A = sl.placeholder((3, n), "float16", name="A")
    B = sl.placeholder((3, n), "float16", name="B")
    C = sl.compute((3, n), lambda i, j: sl.exp(A[i, j]) * sl.sigmoid(B[i, j]) + sl.sqrt(sl.abs(A[i, j]))
                   - sl.tanh(B[i, j]) / (sl.abs(A[i, j]) + 1.0), name="C")
    s = sl.create_schedule(C.op)
    if vector:
        s[C].vectorize(s[C].split(C.op.axis[1], factor=16)[1])
    a = np.random.default_rng(2).standard_normal((3, n)).astype(np.float16)
    b = np.random.default_rng(3).standard_normal((3, n)).astype(np.float16)
    c = np.zeros((3, n), np.float16)
    sl.build(s, [A, B, C], target=target)(a, b, c)
    want = sl.reference([C], {A: a, B: b})[0]
    np.testing.assert_allclose(c.astype(np.float32), want.astype(np.float32), rtol=2e-3, atol=2e-3)
    assert_matches_reference(s, [A, B, C], feed={A: a, B: b})


def test_torch_float16_tensors_in_and_out():
    A = sl.placeholder((4, 40), "float16", name="A")
    B = sl.placeholder((4, 40), "float16", name="B")
    C = sl.compute((4, 40), lambda i, j: sl.exp(A[i, j]) * B[i, j] + 0.5, name="C")
    k = sl.reduce_axis((0, 40), name="k")
    S = sl.compute((4,), lambda i: sl.sum(A[i, k].astype("float32") * B[i, k].astype("float32"), axis=k), name="S")
    s = sl.create_schedule([C.op, S.op])
    s[C].vectorize(s[C].split(C.op.axis[1], factor=8)[1])
    mod = sl.build(s, [A, B, C, S], target="llvm -mattr=-f16c")
    a, b = torch.randn(4, 40, dtype=torch.float16), torch.randn(4, 40, dtype=torch.float16)
    c, sums = torch.zeros(4, 40, dtype=torch.float16), torch.zeros(4)
    mod(a, b, c, sums)
    # computed in float32 and rounded once when stored: within one float16 rounding of the exact value
    torch.testing.assert_close(c, (a.double().exp() * b.double() + 0.5).half(), rtol=1e-3, atol=1e-3)
    torch.testing.assert_close(sums, (a.float() * b.float()).sum(1), rtol=1e-5, atol=1e-5)
    with pytest.raises(TypeError, match="argument 'B' must have dtype float16, got bfloat16"):
        mod(a, b.bfloat16(), c, sums)


def test_casts_to_float16_round_once_at_the_cast():
    """A cast to float16 rounds there (as numpy's astype), from ints and doubles too."""
    i32 = np.array([2049, 4097, -2049, 65519, 65520, 70000, 2**30, 7, 0, -3], np.int32)
    f64 = np.array([1 + 2**-11 + 2**-40, 1 + 2**-11 - 2**-40, 1 + 2**-11, 1e300, -1e-300, 65519.99, 3.0,
                    np.inf, -np.inf, 2.0**-25 * 1.5], np.float64)
    n = i32.size
    I = sl.placeholder((n,), "int32", name="I")
    D = sl.placeholder((n,), "float64", name="D")
    FI = sl.compute((n,), lambda i: I[i].astype("float16").astype("float32") * 1.0, name="FI")
    FD = sl.compute((n,), lambda i: D[i].astype("float16").astype("float64") * 1.0, name="FD")
    for target in TARGETS[:2] + (["c"] if HAS_CC else []):
        for vector in (False, True):
            s = sl.create_schedule([FI.op, FD.op])
            if vector:
                s[FI].vectorize(FI.op.axis[0])
                s[FD].vectorize(FD.op.axis[0])
            fi, fd = np.zeros(n, np.float32), np.zeros(n, np.float64)
            sl.build(s, [I, D, FI, FD], target=target)(i32, f64, fi, fd)
            with np.errstate(over="ignore"):
                np.testing.assert_array_equal(fi, i32.astype(np.float16).astype(np.float32))
                np.testing.assert_array_equal(fd, f64.astype(np.float16).astype(np.float64))
            want = sl.reference([FI, FD], {I: i32, D: f64})
            np.testing.assert_array_equal(fi, want[0])
            np.testing.assert_array_equal(fd, want[1])
