"""IEEE semantics of negation and of every rewrite near it, bit for bit against numpy on
signed zeros, infinities, NaNs of both signs and subnormals: llvm, the reference evaluator,
and CUDA C through the shim and the SIMT interpreter, for float16/bfloat16/float32/float64.

-x flips the sign bit (numpy's negative): 0.0 - x is not -x (0.0 - 0.0 is +0.0), x + 0.0 is
not x (-0.0 + 0.0 is +0.0), x * 0.0 is not 0.0 (nan, inf, -x), x - x is not 0.0.

IEEE 754 defines the sign of a NaN only for the sign-bit operations (negate, abs, copysign);
an arithmetic operation returns some NaN, and LLVM treats `-0.0 - x` and `-x` alike. So NaN
results compare bit for bit where the expression is made of sign-bit operations (SIGN_BIT),
and as NaN otherwise; every other result compares bit for bit."""
import functools

import numpy as np
import pytest

import schedlang as sl
from schedlang.expr.simplify import simplify
from tests.target.engines import FLOAT_DTYPES, bits, np_dtype, run_engines, run_engines_batch, special_values

pytest.importorskip("cuda.bindings")
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")   # numpy on inf and nan


def _c(value, x):
    return sl.const(value, x.dtype)


# name -> (schedlang expression of the operands, numpy's value); each a single operation of
# the dtype, or a chain whose every step is exact, so numpy's answer is the one answer.
UNARY = {
    "-x": (lambda x: -x, np.negative),
    "0.0 - x": (lambda x: _c(0.0, x) - x, lambda x: np.subtract(x.dtype.type(0.0), x)),
    "-0.0 - x": (lambda x: _c(-0.0, x) - x, lambda x: np.subtract(x.dtype.type(-0.0), x)),
    "x - 0.0": (lambda x: x - _c(0.0, x), lambda x: np.subtract(x, x.dtype.type(0.0))),
    "x + 0.0": (lambda x: x + _c(0.0, x), lambda x: np.add(x, x.dtype.type(0.0))),
    "0.0 + x": (lambda x: _c(0.0, x) + x, lambda x: np.add(x.dtype.type(0.0), x)),
    "x + -0.0": (lambda x: x + _c(-0.0, x), lambda x: np.add(x, x.dtype.type(-0.0))),
    "x * 1.0": (lambda x: x * _c(1.0, x), lambda x: np.multiply(x, x.dtype.type(1.0))),
    "x * -1.0": (lambda x: x * _c(-1.0, x), lambda x: np.multiply(x, x.dtype.type(-1.0))),
    "x * 0.0": (lambda x: x * _c(0.0, x), lambda x: np.multiply(x, x.dtype.type(0.0))),
    "x / 1.0": (lambda x: x / _c(1.0, x), lambda x: np.divide(x, x.dtype.type(1.0))),
    "x - x": (lambda x: x - x, lambda x: np.subtract(x, x)),
    "-(-x)": (lambda x: -(-x), lambda x: x),
    "1.0 / -x": (lambda x: _c(1.0, x) / -x, lambda x: np.divide(x.dtype.type(1.0), np.negative(x))),
    "abs(x)": (sl.abs, np.abs),
    "-(nan)": (lambda x: -_c(float("nan"), x), lambda x: np.full_like(x, np.negative(x.dtype.type(np.nan)))),
    "-(0.0)": (lambda x: -_c(0.0, x), lambda x: np.full_like(x, -0.0)),
    "select(x < 0, -x, x)": (lambda x: sl.select(x < _c(0.0, x), -x, x),
                             lambda x: np.where(x < 0, np.negative(x), x)),
    "if_then_else(1 < 2, -x, x)": (lambda x: sl.if_then_else(sl.const(1) < sl.const(2), -x, x), np.negative),
}
SIGN_BIT = {"-x", "-(-x)", "-(nan)", "-(0.0)", "abs(x)", "select(x < 0, -x, x)", "if_then_else(1 < 2, -x, x)", "copysign(x, y)"}
BINARY = {
    "copysign(x, y)": (sl.copysign, np.copysign),
    "x - -y": (lambda x, y: x - -y, lambda x, y: np.subtract(x, np.negative(y))),
    "-x * y": (lambda x, y: -x * y, lambda x, y: np.multiply(np.negative(x), y)),
}


def _pairs(dtype):
    v = special_values(dtype)
    x, y = np.meshgrid(v, v)
    return x.ravel().copy(), y.ravel().copy()


def _mismatches(got, want, what, nan_bits=True):
    """Lines naming the values where got's bits differ from want's (NaN only as NaN unless nan_bits)."""
    differ = bits(got) != bits(want)
    if not nan_bits:
        differ = np.where(np.isnan(want), ~np.isnan(got), differ)
    at = np.flatnonzero(differ)
    return [f"{what}: at inputs {at[:6]} got bits {bits(got)[at][:6]} where numpy has {bits(want)[at][:6]}"] \
        if at.size else []


@functools.cache
def _engine_results():
    """(dtype, "unary" or "binary") -> run_engines' results for that test: every dtype's unary
    and binary expressions built as one module per engine (one g++ run for the shim, not eight)."""
    keys, cases = [], []
    for dtype in FLOAT_DTYPES:
        keys += [(dtype, "unary"), (dtype, "binary")]
        cases += [([UNARY[n][0] for n in UNARY], [special_values(dtype)]),
                  ([BINARY[n][0] for n in BINARY] + [sl.min, sl.max], list(_pairs(dtype)))]
    return dict(zip(keys, run_engines_batch(cases)))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_unary_sign_rewrites_match_numpy_bit_for_bit(dtype):
    x = special_values(dtype)
    names = list(UNARY)
    results = _engine_results()[dtype, "unary"]
    bad = []
    for k, name in enumerate(names):
        want = np.asarray(UNARY[name][1](x), np_dtype(dtype))
        for engine, got in results.items():
            bad += _mismatches(got[k], want, f"{name} on {engine}", nan_bits=name in SIGN_BIT)
    assert not bad, f"{dtype}:\n" + "\n".join(bad)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_binary_sign_rewrites_and_min_max_match_numpy(dtype):
    """min/max: numpy's minimum/maximum propagate NaN; which zero min(+0.0, -0.0) returns numpy
    leaves open (its float16 and float32 loops differ), so ties of zeros compare as values."""
    x, y = _pairs(dtype)
    names = list(BINARY)
    results = _engine_results()[dtype, "binary"]
    ties = (x == 0) & (y == 0)
    bad = []
    for engine, got in results.items():
        for k, name in enumerate(names):
            want = np.asarray(BINARY[name][1](x, y), np_dtype(dtype))
            bad += _mismatches(got[k], want, f"{name} on {engine}", nan_bits=name in SIGN_BIT)
        for op, fn, value in (("min", np.minimum, got[-2]), ("max", np.maximum, got[-1])):
            want = fn(x, y)
            bad += _mismatches(value[~ties], want[~ties], f"{op} on {engine}", nan_bits=False)
            if not (value[ties] == 0).all():
                bad.append(f"{op} on {engine}: a tie of zeros gave {value[ties]}")
    assert not bad, f"{dtype}:\n" + "\n".join(bad)


def test_negation_is_not_a_subtraction_from_zero():
    """The node and its printed text say which one a program computes."""
    x = sl.var("x", "float32")
    assert str(-x) == "-x" and str(sl.const(0.0) - x) == "0.0 - x"
    assert str(-sl.var("i")) == "-i"       # integers: 0 - i is -i
    assert str(-sl.const(float("nan"))) == "-nan" and str(sl.const(-0.0)) == "-0.0"
    assert simplify(-(-x)) is x
    folded = simplify(-sl.const(0.0))
    assert isinstance(folded, sl.expr.nodes.Const) and np.signbit(folded.value)
    with pytest.raises(TypeError, match="negation of the bool"):
        -sl.const(True)


def test_generated_code_negates_with_fneg_and_unary_minus():
    A = sl.placeholder((8,), "float32", name="A")
    B = sl.compute((8,), lambda i: -(-A[i] * A[i]) - -A[i], name="B")
    s = sl.create_schedule(B.op)
    s[B].bind(B.op.axis[0], sl.thread_axis("threadIdx.x"))
    src = sl.build(s, [A, B], target="cuda").get_source("cuda")
    assert "B[i] = -(-A[i] * A[i]) - -A[i];" in src      # never `--`, C's decrement
    llvm = sl.build(sl.create_schedule(B.op), [A, B], target="llvm").get_source("ll")
    assert "fneg float" in llvm and llvm.count("fsub") == 1      # the one subtraction written


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_negation_on_a_gpu(dtype):
    """On a real GPU (skipped without one): the sign-bit operations give numpy's bits (a GPU's
    arithmetic NaN is its canonical NaN, so NaNs compare as NaN)."""
    from schedlang.target.cuda.gpu import gpu_problem
    if gpu_problem() is not None:
        pytest.skip(f"no GPU: {gpu_problem()}")
    x = special_values(dtype)
    names = ["-x", "-(-x)", "abs(x)", "1.0 / -x", "0.0 - x"]
    (got,) = run_engines([UNARY[n][0] for n in names], [x], engines=("gpu",)).values()
    bad = []
    for k, name in enumerate(names):
        bad += _mismatches(got[k], np.asarray(UNARY[name][1](x), np_dtype(dtype)), name, nan_bits=False)
    assert not bad, f"{dtype}:\n" + "\n".join(bad)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_vectorized_negation_flips_the_sign_bit(dtype):
    """-x in vectorized loops: llvm's fneg on vectors, CUDA C's sl_neg on float4/float2."""
    x = np.resize(special_values(dtype), 64)
    A = sl.placeholder((64,), dtype, name="A")
    B = sl.compute((64,), lambda i: -A[i] * sl.const(2.0, dtype) - A[i], name="B")
    C = sl.compute((64,), lambda i: -A[i], name="C")
    want = {"B": np.negative(x).astype(np.float32) * 2 - x.astype(np.float32), "C": np.negative(x)}
    for target in ("llvm", "cuda"):
        s = sl.create_schedule([B.op, C.op])
        for t in (B, C):
            o, v = s[t].split(t.op.axis[0], factor=4 if dtype == "float32" else 2)
            if target == "cuda":
                bo, to = s[t].split(o, factor=4)
                s[t].bind(bo, sl.thread_axis("blockIdx.x"))
                s[t].bind(to, sl.thread_axis("threadIdx.x"))
            s[t].vectorize(v)
        mod = sl.build(s, [A, B, C], target=target)
        if target == "cuda":
            assert "sl_neg(" in mod.get_source("cuda")
        for engine in (("llvm",) if target == "llvm" else ("shim", "simt")):
            got = {"B": np.zeros(64, dtype), "C": np.zeros(64, dtype)}
            if engine == "llvm":
                mod(x, got["B"], got["C"])
            else:
                mod.emulate(x, got["B"], got["C"], engine=engine)
            bad = _mismatches(got["C"], want["C"], f"-x on {engine}")
            bad += _mismatches(got["B"], want["B"].astype(dtype), f"-x * 2 - x on {engine}", nan_bits=False)
            assert not bad, "\n".join(bad)
