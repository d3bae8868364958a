"""Defined behaviour of arithmetic (README, "Defined behaviour"): IEEE floating point unless
fast math is asked for, numpy's results for integer and float division and modulo (by zero
too), wrap-around integers, refused literals and sizes that do not fit."""
from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import schedlang as sl

ROOT = Path(__file__).resolve().parents[2]


def elementwise(f, dtypes, n=8, vectorize=False, target="llvm", pragma=False):
    """Build C[i] = f(A0[i], A1[i], ...), one input per dtype; returns (module, output dtype)."""
    inputs = [sl.placeholder((n,), name=f"A{k}", dtype=dt) for k, dt in enumerate(dtypes)]
    C = sl.compute((n,), lambda i: f(*(A[i] for A in inputs)), name="C")
    s = sl.create_schedule(C.op)
    if vectorize:
        s[C].vectorize(s[C].op.axis[0])
    if pragma:
        s[C].pragma(s[C].op.axis[0], "fast_math", True)
    return sl.build(s, inputs + [C], target=target), C.dtype_obj.numpy


def run(f, *arrays, **kw):
    """f built on the arrays (one input each), run; returns (output, module)."""
    mod, out_dtype = elementwise(f, [a.dtype.name for a in arrays], arrays[0].size, **kw)
    c = np.zeros(arrays[0].size, out_dtype)
    mod(*arrays, c)
    return c, mod


def same_bits(got, want):
    got, want = np.asarray(got), np.asarray(want)
    if got.dtype.kind == "f":
        both_nan = np.isnan(got) & np.isnan(want)
        return bool(np.all(both_nan | (got.view(f"u{got.itemsize}") == want.view(f"u{want.itemsize}"))))
    return np.array_equal(got, want)


# ---- floating point ----------------------------------------------------------------------

ROUNDING = [
    ("magic", lambda x, y: (x + 1.5 * 2**23) - 1.5 * 2**23 + y * 0.0),
    ("1e8", lambda x, y: (x + 1e8) - 1e8 + y * 0.0),
    ("cancel", lambda x, y: (x * y) - (x * y) + x * 3.0),
    ("contract", lambda x, y: x * y + 1.0),
]


@pytest.mark.parametrize("vectorize", [False, True])
@pytest.mark.parametrize("name,f", ROUNDING, ids=[n for n, _ in ROUNDING])
def test_float_arithmetic_is_ieee_by_default(name, f, vectorize):
    a = np.array([0.3, 1.7, 2.5, -0.5, 3.5, 4.25, 0.1, 7.0], np.float32)
    b = np.array([1.1, 3.3, 1e-3, 7.7, 1 / 3, 0.7, 9.9, 1.0 + 2**-23], np.float32)
    got, _ = run(f, a, b, vectorize=vectorize)
    assert same_bits(got, f(a, b))


def test_user_float_ops_carry_no_fast_math_flags():
    mod, _ = elementwise(lambda x, y: (x + 1e8) * y - 1e8 / y, ["float32"] * 2)
    text = mod.get_source("ll")
    ops = re.findall(r"= (fadd|fsub|fmul|fdiv) (\w+ )*float ", text)
    assert len(ops) == 4 and all(flags == "" for _, flags in ops), ops


@pytest.mark.parametrize("vectorize", [False, True])
@pytest.mark.parametrize("how", ["target", "pragma"])
def test_fast_math_opts_in_to_reassociation(how, vectorize):
    a = np.array([0.3, 1.7, 2.5, -0.5, 3.5, 4.25, 0.1, 7.0], np.float32)
    target = sl.Target.create("llvm").with_options(fast_math=True) if how == "target" else "llvm"
    got, mod = run(lambda x: (x + 1.5 * 2**23) - 1.5 * 2**23, a, target=target, pragma=how == "pragma",
                   vectorize=vectorize)
    assert "reassoc" in mod.get_source("ll")
    np.testing.assert_array_equal(got, a)     # (x + c) - c folded to x: what fast math allows


def test_fast_math_pragma_is_recorded_and_replays():
    A = sl.placeholder((8,), name="A")
    C = sl.compute((8,), lambda i: A[i] * 2.0, name="C")
    s = sl.create_schedule(C.op)
    s[C].pragma(C.op.axis[0], "fast_math", True)
    assert "fast_math" in str(s)
    assert "fast_math(" in sl.lower(s, [A, C], level="kernel")


def gemm_module(target="llvm"):
    import sys as _sys
    _sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import sl_kernels
    finally:
        _sys.path.pop(0)
    return sl_kernels.gemm(sl.Target.create(target), 64, 64, 64)


def test_gemm_reduction_keeps_fma_contraction():
    mod = gemm_module()
    ll = mod.get_source("ll")
    assert re.search(r"fmul contract <\d+ x float>", ll)             # the reduction's a * b
    assert re.search(r"fadd reassoc nsz contract <\d+ x float>", ll)   # its accumulate
    if "+fma" in sl.Target.create("llvm").features.split(","):
        assert "vfmadd" in mod.get_source("asm")


def test_reduction_sum_matches_numpy():
    n, k = 16, 64
    A = sl.placeholder((n, k), name="A")
    r = sl.reduce_axis((0, k), name="r")
    C = sl.compute((n,), lambda i: sl.sum(A[i, r] * A[i, r], axis=r), name="C")
    s = sl.create_schedule(C.op)
    a = np.random.default_rng(0).standard_normal((n, k)).astype(np.float32)
    c = np.zeros(n, np.float32)
    sl.build(s, [A, C])(a, c)
    np.testing.assert_allclose(c, (a * a).sum(1), rtol=1e-5)


FLOAT_A = np.array([1, -1, np.inf, 1, 0, -0.0, 5, 1, -7.5, 7.5, np.nan, -np.inf], np.float32)
FLOAT_B = np.array([0.1, np.inf, 1, 0, 0, 3, -0.0, -np.inf, 2, -2, 1, 3], np.float32)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("vectorize", [False, True])
@pytest.mark.parametrize("op", ["floordiv", "floormod"])
def test_float_floordiv_and_mod_follow_numpy(op, vectorize, dtype):
    f = (lambda x, y: x // y) if op == "floordiv" else (lambda x, y: x % y)
    want_fn = np.floor_divide if op == "floordiv" else np.mod
    a, b = FLOAT_A.astype(dtype), FLOAT_B.astype(dtype)
    got, _ = run(f, a, b, vectorize=vectorize)
    with np.errstate(all="ignore"):
        want = want_fn(a, b)
    assert same_bits(got, want), (got, want)


# ---- integers ------------------------------------------------------------------------------

def int_operands(dtype):
    info = np.iinfo(dtype)
    a = [5, -5, 7, -7, 0, 3, info.min, info.max, 100, -100, info.min, 1]
    b = [0, 0, -1, 2, 0, -2, -1, -1, 7, 7, 1, info.max]
    return np.array(a, np.int64).astype(dtype), np.array(b, np.int64).astype(dtype)


CHILD = """
import numpy as np, schedlang as sl
OPS = {"floordiv": lambda x, y: x // y, "floormod": lambda x, y: x % y,
       "truncdiv": sl.truncdiv, "truncmod": sl.truncmod}

def c_div(a, b):       # C's truncating / and %, with x / 0 = x % 0 = 0 and INT_MIN / -1 wrapping
    q = np.where(b == 0, 0, np.trunc(a.astype(np.float64) / np.where(b == 0, 1, b).astype(np.float64)))
    q = q.astype(np.int64) if a.dtype.kind == "i" else q.astype(np.uint64)
    q = q.astype(a.dtype)   # wraps INT_MIN / -1 (exact: float64 holds these quotients for 8/16/32 bits)
    return q, np.where(b == 0, 0, a - q * b).astype(a.dtype)

for dtype in ("int8", "int32", "int64", "uint8", "uint32"):
    for vec in (False, True):
        for name in OPS:
            if name.startswith("trunc") and dtype == "int64":
                continue       # the float64 oracle above is exact only up to 32 bits
            A = sl.placeholder((12,), name="A", dtype=dtype)
            B = sl.placeholder((12,), name="B", dtype=dtype)
            f = OPS[name]
            C = sl.compute((12,), lambda i: f(A[i], B[i]), name="C")
            s = sl.create_schedule(C.op)
            if vec:
                s[C].vectorize(C.op.axis[0])
            info = np.iinfo(dtype)
            a = np.array([5, -5, 7, -7, 0, 3, info.min, info.max, 100, -100, info.min, 1]).astype(dtype)
            b = np.array([0, 0, -1, 2, 0, -2, -1, -1, 7, 7, 1, info.max]).astype(dtype)
            c = np.zeros(12, dtype)
            sl.build(s, [A, B, C])(a, b, c)
            with np.errstate(all="ignore"):
                if name.startswith("trunc"):
                    want = c_div(a, b)[name == "truncmod"]
                else:
                    want = (np.floor_divide if name == "floordiv" else np.mod)(a, b)
            assert np.array_equal(c, want), (dtype, vec, name, c, want)
            assert np.array_equal(sl.reference([C], {A: a, B: b})[0], want), (dtype, name, "reference")
print("ok")
"""


def test_integer_division_by_zero_and_int_min_by_minus_one_give_numpy_results():
    # In a child process: on a build without the guards, x // 0 and INT_MIN // -1 raise SIGFPE.
    # C's truncdiv/truncmod get the same defined results at 0 and -1 divisors.
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(CHILD)], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "ok"


@pytest.mark.parametrize("dtype", ["int32", "int8", "uint16", "int64"])
def test_integer_division_matches_the_reference_evaluator(dtype):
    a, b = int_operands(dtype)
    A = sl.placeholder((a.size,), name="A", dtype=dtype)
    B = sl.placeholder((a.size,), name="B", dtype=dtype)
    C = sl.compute((a.size,), lambda i: A[i] // B[i] + A[i] % B[i], name="C")
    ref = sl.reference([C], {A: a, B: b})[0]
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(ref, np.floor_divide(a, b) + np.mod(a, b))


def test_literal_zero_divisor_is_refused():
    A = sl.placeholder((8,), name="A", dtype="int32")
    for f in (lambda i: A[i] // 0, lambda i: A[i] % 0, lambda i: sl.floordiv(A[i], 0), lambda i: A[i] / 0,
              lambda i: sl.truncdiv(A[i], 0), lambda i: sl.truncmod(A[i], 0)):
        with pytest.raises(ValueError, match=r"division by the constant zero in '(trunc(div|mod)\()?A\[i\]"):
            sl.compute((8,), f)
    B = sl.placeholder((8,), name="B")
    sl.compute((8,), lambda i: B[i] / 0.0)          # IEEE: inf or nan, not an error


@pytest.mark.parametrize("vectorize", [False, True])
def test_comparisons_follow_wrap_around(vectorize):
    a = np.array([2**31 - 1, 3, -2**31, 0, 2**31 - 1, 7, 8, 9], np.int32)
    got, _ = run(lambda x: sl.select(x + 1 > x, 1, 0), a, vectorize=vectorize)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(got, (a + np.int32(1) > a).astype(np.int32))


def test_index_arithmetic_keeps_nsw_where_loop_ranges_prove_it():
    A = sl.placeholder((64, 64), name="A")
    C = sl.compute((64, 64), lambda i, j: A[i, j] * 2.0, name="C")
    ll = sl.build(sl.create_schedule(C.op), [A, C]).get_source("ll")
    assert re.search(r"= (mul|add) nsw i32 %i", ll)      # i * 64 + j, with i, j < 64


def test_user_integer_arithmetic_carries_no_nsw():
    mod, _ = elementwise(lambda x, y: x * y + x - 3, ["int32"] * 2)
    user = [line for line in mod.get_source("ll").splitlines() if re.search(r"= (add|sub|mul)\b", line)
            and "%i" not in line.split("=")[0] and "i.next" not in line]
    assert user and not any(" nsw" in line for line in user), user


def test_integer_arithmetic_wraps_like_numpy():
    a = np.array([2**31 - 1, -2**31, 123456789, -1, 46341, 65536, 7, 0], np.int32)
    b = np.array([1, -1, 1000, 2**31 - 1, 46341, 65536, -7, 0], np.int32)
    got, _ = run(lambda x, y: (x * y + x) * 4 // 4 - y, a, b)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(got, (a * b + a) * np.int32(4) // np.int32(4) - b)


@pytest.mark.parametrize("dtype,literal,op", [("uint8", 300, "add"), ("int8", -129, "mul"), ("int32", 2**40, "mul"),
                                             ("uint32", -1, "sub")])
def test_literals_that_do_not_fit_the_dtype_are_refused(dtype, literal, op):
    A = sl.placeholder((8,), name="A", dtype=dtype)
    fn = {"add": lambda x: x + literal, "mul": lambda x: x * literal, "sub": lambda x: x - literal}[op]
    with pytest.raises(ValueError, match=rf"{literal} does not fit dtype {dtype}"):
        sl.compute((8,), lambda i: fn(A[i]))


def test_out_of_range_constant_casts_are_refused():
    with pytest.raises(ValueError, match="300 does not fit dtype uint8"):
        sl.const(300).astype("uint8")
    with pytest.raises(ValueError, match="nan to int32"):
        sl.const(float("nan")).astype("int32")
    assert sl.const(255).astype("uint8").value == 255


def test_invert_of_unsigned():
    a = np.array([0, 1, 200, 255], np.uint8)
    got, _ = run(lambda x: ~x, a)
    np.testing.assert_array_equal(got, ~a)


# ---- sizes ---------------------------------------------------------------------------------

def test_reduce_axis_beyond_int32_is_refused():
    with pytest.raises(ValueError, match=r"reduce_axis 'k' .*2147483652 iterations.*int32"):
        sl.reduce_axis((0, 2**31 + 4), name="k")


def test_fused_loop_beyond_int32_is_refused():
    k = sl.reduce_axis((0, 2**16), name="k")
    k2 = sl.reduce_axis((0, 2**16), name="k2")
    C = sl.compute((1,), lambda i: sl.sum((k % 7 + k2).astype("float32"), axis=[k, k2]), name="C")
    s = sl.create_schedule(C.op)
    s[C].fuse(k, k2)
    with pytest.raises(sl.LoweringError, match=r"loop 'k.k2.fused' runs 4294967296 iterations"):
        sl.build(s, [C])
