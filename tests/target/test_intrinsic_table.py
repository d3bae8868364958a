"""Every intrinsic of the algorithm language (tensor.intrin.INTRINSICS, enumerated, so a new one
without a rule on some target fails here) built for llvm and for cuda (NVRTC compiles the CUDA C)
and run on llvm, the reference evaluator, and CUDA C through the shim and the SIMT interpreter,
against numpy on ordinary and special values, for each dtype the intrinsic takes: exact
functions bit for bit, the others within a tolerance but with numpy's sign of a zero result."""
import functools
import math

import numpy as np
import pytest

import schedlang as sl
from schedlang.tensor.intrin import INTRINSICS
from tests.target.engines import FLOAT_DTYPES, bits, np_dtype, run_engines_batch, special_values

pytest.importorskip("cuda.bindings")
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")   # numpy on inf and nan

_INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


def _unary(name, ref):
    return (lambda x, y, e: getattr(sl, name)(x)), (lambda x, y, e: ref(x))


def _binary(name, ref):
    return (lambda x, y, e: getattr(sl, name)(x, y)), (lambda x, y, e: ref(x, y))


def _f(fn):
    """numpy's float16/bfloat16 value of fn: computed in float32 and rounded, as schedlang computes."""
    def ref(*args):
        dt = args[0].dtype
        if dt.itemsize == 2:
            return np.asarray(fn(*(a.astype(np.float32) if a.dtype == dt else a for a in args))).astype(dt)
        return fn(*args)
    return ref


# name -> (schedlang builder, numpy's value, exact): the builders take (x, y, e), e an int32.
FLOAT = {
    "exp": _unary("exp", np.exp), "log": _unary("log", np.log), "sqrt": _unary("sqrt", np.sqrt),
    "rsqrt": _unary("rsqrt", lambda x: 1 / np.sqrt(x)), "tanh": _unary("tanh", np.tanh),
    "sigmoid": _unary("sigmoid", lambda x: 1 / (1 + np.exp(-x))),
    "erf": _unary("erf", np.vectorize(math.erf, otypes=[np.float64])), "abs": _unary("abs", np.abs),
    "floor": _unary("floor", np.floor), "ceil": _unary("ceil", np.ceil), "round": _unary("round", np.rint),
    "pow": _binary("power", np.power), "exp2": _unary("exp2", np.exp2), "log2": _unary("log2", np.log2),
    "sin": _unary("sin", np.sin), "cos": _unary("cos", np.cos), "trunc": _unary("trunc", np.trunc),
    "exp10": _unary("exp10", lambda x: np.power(x.dtype.type(10), x)), "log10": _unary("log10", np.log10),
    "log1p": _unary("log1p", np.log1p), "tan": _unary("tan", np.tan), "atan": _unary("atan", np.arctan),
    "atan2": _binary("atan2", np.arctan2), "cosh": _unary("cosh", np.cosh), "sinh": _unary("sinh", np.sinh),
    "acos": _unary("acos", np.arccos), "asin": _unary("asin", np.arcsin), "acosh": _unary("acosh", np.arccosh),
    "asinh": _unary("asinh", np.arcsinh), "atanh": _unary("atanh", np.arctanh),
    "fmod": _binary("fmod", np.fmod), "hypot": _binary("hypot", np.hypot),
    "nextafter": _binary("nextafter", np.nextafter), "copysign": _binary("copysign", np.copysign),
    "nearbyint": _unary("nearbyint", np.rint),
    "ldexp": ((lambda x, y, e: sl.ldexp(x, e)), (lambda x, y, e: np.ldexp(x, e))),
    "neg": ((lambda x, y, e: -x), (lambda x, y, e: np.negative(x))),
}
# Results that are exact (no rounding of a transcendental function): compared bit for bit.
EXACT = {"abs", "floor", "ceil", "round", "trunc", "fmod", "nextafter", "copysign", "nearbyint", "ldexp", "neg"}
PREDICATES = {"isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite}
BIT_COUNTS = {"popcount": lambda v: bin(v).count("1"), "clz": lambda v, bits: bits - v.bit_length()}
# 16-bit floats compute in float32: nextafter would step in float32 and round back (a TypeError).
NOT_16_BIT = {"nextafter"}
TOL = {"float16": 2e-3, "bfloat16": 1.6e-2, "float32": 2e-6, "float64": 1e-13}


def test_every_intrinsic_has_a_check_here():
    """A new intrinsic needs a line in one of these tables (and a rule on every target)."""
    checked = set(FLOAT) | set(PREDICATES) | set(BIT_COUNTS)
    assert set(INTRINSICS) == checked, f"unchecked: {set(INTRINSICS) - checked}, unknown: {checked - set(INTRINSICS)}"


def _operands(dtype):
    v = np.concatenate([special_values(dtype), np.array([-0.75, 0.5, 2.0, 0.3, -3.0, 10.0], np_dtype(dtype))])
    x, y = (a.ravel().copy() for a in np.meshgrid(v, v))
    e = np.resize(np.array([0, 1, -1, 3, -20, 200, -200, 7], np.int32), x.size)
    return x, y, e


def _float_names(dtype):
    return [n for n in FLOAT if not (n in NOT_16_BIT and dtype in ("float16", "bfloat16"))]


@functools.cache
def _float_results():
    """dtype -> run_engines' results of its intrinsics: every float dtype's built as one module
    per engine (one g++ run for the shim, one NVRTC and LLVM compile, not four)."""
    cases = [([FLOAT[n][0] for n in _float_names(dtype)] +
              [(lambda x, y, e, p=p: getattr(sl, p)(x)) for p in PREDICATES], list(_operands(dtype)))
             for dtype in FLOAT_DTYPES]
    return dict(zip(FLOAT_DTYPES, run_engines_batch(cases)))


def _int_operands(dtype):
    info = np.iinfo(dtype)
    return np.array([0, 1, 2, 3, 5, 127, info.max, info.min, info.max // 3, info.min + 1], dtype=dtype)


@functools.cache
def _bit_count_results():
    """dtype -> run_engines' results of popcount and clz, every integer dtype in one module per engine."""
    cases = [([sl.popcount, sl.clz], [_int_operands(dtype)]) for dtype in _INT_DTYPES]
    return dict(zip(_INT_DTYPES, run_engines_batch(cases)))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_float_intrinsics_on_every_engine_match_numpy(dtype):
    names = _float_names(dtype)
    x, y, e = _operands(dtype)
    results = _float_results()[dtype]
    bad = []
    for k, name in enumerate(names):
        want = np.asarray(_f(FLOAT[name][1])(x, y, e), np_dtype(dtype))
        for engine, got in results.items():
            g, w = got[k], want
            if name in EXACT:
                differ = np.where(np.isnan(w), ~np.isnan(g), bits(g) != bits(w))
            else:
                g64, w64 = g.astype(np.float64), w.astype(np.float64)
                close = np.isclose(g64, w64, rtol=TOL[dtype], atol=TOL[dtype] * 1e-3, equal_nan=True)
                differ = ~(close | (g64 == w64))
                differ |= (w64 == 0) & (np.signbit(g64) != np.signbit(w64))     # sin(-0.0) is -0.0
            if differ.any():
                at = np.flatnonzero(differ)[:4]
                bad.append(f"{name} on {engine}: at x={x[at]}, y={y[at]}, e={e[at]} got {g[at]}, numpy {w[at]}")
    for k, (name, ref) in enumerate(PREDICATES.items()):
        for engine, got in results.items():
            if not np.array_equal(got[len(names) + k], ref(x)):
                bad.append(f"{name} on {engine}: got {got[len(names) + k]}")
    assert not bad, f"{dtype}:\n" + "\n".join(bad)


@pytest.mark.parametrize("dtype", _INT_DTYPES)
def test_bit_counts_on_every_engine_match_python(dtype):
    x = _int_operands(dtype)
    results = _bit_count_results()[dtype]
    width = np.dtype(dtype).itemsize * 8
    unsigned = [int(v) % (1 << width) for v in x]
    want = [np.array([BIT_COUNTS["popcount"](v) for v in unsigned], dtype),
            np.array([BIT_COUNTS["clz"](v, width) for v in unsigned], dtype)]
    for engine, got in results.items():
        for name, g, w in zip(BIT_COUNTS, got, want):
            np.testing.assert_array_equal(g, w, err_msg=f"{name} of {dtype} on {engine}")


def test_nextafter_of_16_bit_floats_is_refused():
    for dtype in ("float16", "bfloat16"):
        with pytest.raises(TypeError, match="nextafter of .* cast the operands to float32"):
            sl.nextafter(sl.var("x", dtype), sl.var("y", dtype))
