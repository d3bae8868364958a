"""Tests for schedlang.target.llvm.mathlib: JIT each math function and check it.

The functions are compiled with llvmlite through a tiny harness of our own
(``@map`` applies one function to an array, a vector at a time) and compared
with float64 references rounded to float32: numpy for exp/log/tanh/sigmoid and
the stdlib's math.erf for erf.
"""
from __future__ import annotations

import ctypes
import functools
import importlib.util
import math
import pathlib
import re
import struct

import numpy as np
import pytest
import llvmlite.binding as llvm

try:
    from schedlang.target.llvm.mathlib import (
        MATH_FUNCTIONS, _f32_hex, math_declarations, math_function)
except ImportError:  # the package may be half-written by others: load the file itself
    _path = pathlib.Path(__file__).resolve().parents[2] / "schedlang/target/llvm/mathlib.py"
    _spec = importlib.util.spec_from_file_location("_sl_mathlib", _path)
    _mathlib = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_mathlib)
    MATH_FUNCTIONS, _f32_hex = _mathlib.MATH_FUNCTIONS, _mathlib._f32_hex
    math_declarations, math_function = _mathlib.math_declarations, _mathlib.math_function

llvm.initialize_native_target()
llvm.initialize_native_asmprinter()
llvm.initialize_native_asmparser()

_AVX512 = "+avx512f" in llvm.get_host_cpu_features().flatten()
# lane counts; (lanes, True): the AVX-512 form scaling exp's result by vscalefps (on such hosts)
LANES = (1, 8, 16) + (((1, True), (8, True), (16, True), (32, True), (48, True)) if _AVX512 else ())
F32 = np.float32
TINY = F32(2.0 ** -149)  # smallest subnormal
INF, NAN = F32(np.inf), F32(np.nan)
MAXF = np.finfo(F32).max

_erf64 = np.vectorize(math.erf, otypes=[np.float64])


def _sigmoid64(x):
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


REFERENCE = {"exp": np.exp, "log": np.log, "log1p": np.log1p, "tanh": np.tanh,
             "sigmoid": _sigmoid64, "erf": _erf64}


# --- harness ---------------------------------------------------------------

def _target_machine(cpu: str = "", features: str = ""):
    """The host's target machine, or one for a named CPU (whose code is only read, never run)."""
    target = llvm.Target.from_default_triple()
    if not cpu:
        cpu, features = llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten()
    return target.create_target_machine(cpu=cpu, features=features, opt=3)


def _optimized(tm, text: str):
    mod = llvm.parse_assembly(text)
    mod.verify()
    pto = llvm.create_pipeline_tuning_options(speed_level=3)  # no size_level in 0.50
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)
    mod.verify()
    return mod


def _module_text(name: str, lanes: int, scalef: bool) -> str:
    symbol, definition = math_function(name, lanes, scalef)
    ty = "float" if lanes == 1 else f"<{lanes} x float>"
    wrapper = f"""
define void @map(ptr noalias %in, ptr noalias %out, i64 %n) {{
entry:
  %count = udiv i64 %n, {lanes}
  %empty = icmp eq i64 %count, 0
  br i1 %empty, label %done, label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %next, %loop ]
  %offset = mul i64 %i, {lanes}
  %src = getelementptr float, ptr %in, i64 %offset
  %v = load {ty}, ptr %src, align 4
  %r = call {ty} {symbol}({ty} %v)
  %dst = getelementptr float, ptr %out, i64 %offset
  store {ty} %r, ptr %dst, align 4
  %next = add i64 %i, 1
  %more = icmp ult i64 %next, %count
  br i1 %more, label %loop, label %done
done:
  ret void
}}
"""
    return "\n".join(math_declarations(lanes, scalef)) + "\n\n" + definition + wrapper


class _Compiled:
    """One optimised, JIT-compiled module with its @map entry point."""

    def __init__(self, name: str, lanes: int, scalef: bool = False):
        self.lanes = lanes
        self.tm = _target_machine()
        self.mod = _optimized(self.tm, _module_text(name, lanes, scalef))
        self.asm = self.tm.emit_assembly(self.mod)
        self.engine = llvm.create_mcjit_compiler(self.mod, self.tm)
        self.engine.finalize_object()
        proto = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)
        self._map = proto(self.engine.get_function_address("map"))

    def __call__(self, x) -> np.ndarray:
        x = np.asarray(x, dtype=F32).ravel()
        padded = np.zeros(-(-x.size // self.lanes) * self.lanes, dtype=F32)
        padded[:x.size] = x
        out = np.full_like(padded, np.nan)
        self._map(padded.ctypes.data, out.ctypes.data, padded.size)
        return out[:x.size]


@functools.lru_cache(maxsize=None)
def compiled(name: str, lanes) -> _Compiled:
    """lanes: a lane count, or (lanes, scalef)."""
    return _Compiled(name, *lanes) if isinstance(lanes, tuple) else _Compiled(name, lanes)


def reference(name: str, x) -> np.ndarray:
    """The float64 result rounded to float32, as float64 for error arithmetic."""
    with np.errstate(all="ignore"):
        return REFERENCE[name](np.asarray(x, dtype=F32).astype(np.float64)).astype(F32).astype(np.float64)


def errors(name: str, lanes: int, x):
    """(max absolute error, max relative error) of the JIT'd function on x."""
    got = compiled(name, lanes)(x).astype(np.float64)
    want = reference(name, x)
    assert np.all(np.isfinite(got) == np.isfinite(want)), x[np.isfinite(got) != np.isfinite(want)]
    fin = np.isfinite(want)
    abs_err = np.abs(got[fin] - want[fin])
    rel_err = abs_err / np.maximum(np.abs(want[fin]), np.finfo(F32).tiny)
    return abs_err.max(), rel_err.max()


def rng():
    return np.random.default_rng(1234)


def uniform(lo, hi, n=100_000):
    return rng().uniform(lo, hi, n).astype(F32)


def log_uniform(lo, hi, n=100_000):
    return np.exp(rng().uniform(np.log(lo), np.log(hi), n)).astype(F32)


def same(got, want) -> bool:
    """Bitwise-meaningful equality: nan matches nan, and the sign of zero counts."""
    got, want = np.asarray(got, F32), np.asarray(want, F32)
    both_nan = np.isnan(got) & np.isnan(want)
    equal = (got == want) & (np.signbit(got) == np.signbit(want))
    return bool(np.all(both_nan | equal))


# --- text-level checks -------------------------------------------------------

def test_f32_hex_rounds_to_float32():
    assert _f32_hex(1.0) == "0x3FF0000000000000"
    assert _f32_hex(-2.0) == "0xC000000000000000"
    assert _f32_hex(0.1) == "0x3FB99999A0000000"  # float32(0.1), not double 0.1
    assert _f32_hex(float("inf")) == "0x7FF0000000000000"
    bits = int(_f32_hex(math.pi), 16)
    assert struct.unpack("<d", struct.pack("<Q", bits))[0] == float(F32(math.pi))


@pytest.mark.parametrize("scalef", [False, True])
@pytest.mark.parametrize("lanes", [1, 4, 8, 16, 32, 48, 64])
def test_definitions_concatenate_and_verify(lanes, scalef):
    texts = [math_function(name, lanes, scalef) for name in sorted(MATH_FUNCTIONS)]
    ty = "float" if lanes == 1 else f"<{lanes} x float>"
    suffix = "f32" if lanes == 1 else f"v{lanes}f32"
    for name, (symbol, text) in zip(sorted(MATH_FUNCTIONS), texts):
        assert symbol == f"@sl.{name}.{suffix}"
        assert text.startswith(f"define internal {ty} {symbol}({ty} %x) alwaysinline nounwind {{")
        assert "#" not in text and "nnan" not in text and "ninf" not in text
        assert "@sl." not in text.replace(symbol, "")  # self-contained
    module = "\n".join(math_declarations(lanes, scalef)) + "\n" + "\n".join(t for _, t in texts)
    llvm.parse_assembly(module).verify()


def test_bad_arguments():
    with pytest.raises(ValueError):
        math_function("cosh", 8)
    with pytest.raises(ValueError):
        math_function("exp", 0)
    with pytest.raises(ValueError):
        math_declarations(-1)


@pytest.mark.parametrize("lanes", [1, 8, 16, 32])
def test_avx512_exp_scales_by_vscalefps(lanes):
    """Compiled for an AVX-512 CPU whatever the host (the accuracy tests run it where the host can)."""
    tm = _target_machine("skylake-avx512")
    asm = tm.emit_assembly(_optimized(tm, _module_text("exp", lanes, True)))
    assert "vscalef" in asm and "call" not in asm.split("map:")[-1].split("ret")[0]


@pytest.mark.parametrize("name", sorted(MATH_FUNCTIONS))
def test_native_code_has_no_libm_calls(name):
    asm = compiled(name, 16).asm
    calls = re.findall(r"\bcall\w*\s+([^\s]+)", asm)
    assert not [c for c in calls if re.search(r"exp|log|tanh|erf", c)], calls
    if "+fma" in llvm.get_host_cpu_features().flatten():
        assert calls == [], calls  # fully inlined, fmas included
    assert re.search(r"\bv\w+ps\b", asm)  # packed single-precision instructions


# --- accuracy ----------------------------------------------------------------

@pytest.mark.parametrize("lanes", LANES)
def test_exp_accuracy(lanes):
    for lo, hi in ((-87.0, 88.0), (-10.0, 10.0), (-1.0, 1.0), (-1e-3, 1e-3)):
        _, rel = errors("exp", lanes, uniform(lo, hi))
        assert rel <= 2e-7, (lo, hi, rel)
    # Subnormal results: within one subnormal step of the rounded reference.
    x = uniform(-103.97, -87.4)
    got = compiled("exp", lanes)(x).astype(np.float64)
    assert np.max(np.abs(got - reference("exp", x))) <= float(TINY)


@pytest.mark.parametrize("lanes", LANES)
def test_exp_special_values(lanes):
    exact = np.array([0.0, -0.0, INF, -INF, NAN, 88.73, 100.0, 1e30, MAXF,
                      -104.0, -200.0, -1e30, -MAXF, TINY, -TINY], dtype=F32)
    want = np.array([1, 1, INF, 0, NAN, INF, INF, INF, INF, 0, 0, 0, 0, 1, 1], dtype=F32)
    assert same(compiled("exp", lanes)(exact), want), compiled("exp", lanes)(exact)
    # Just below the overflow threshold ln(FLT_MAX) ~ 88.7228: finite and accurate.
    near = np.array([1.0, 88.72, 88.7228], dtype=F32)
    got = compiled("exp", lanes)(near)
    assert np.allclose(got, reference("exp", near), rtol=2e-7, atol=0), got


@pytest.mark.parametrize("lanes", LANES)
def test_log_accuracy(lanes):
    for x in (log_uniform(1e-30, 1e30), uniform(0.5, 2.0), uniform(0.99, 1.01),
              log_uniform(np.finfo(F32).tiny, 1e-36), log_uniform(1e30, MAXF),
              log_uniform(float(TINY), float(np.finfo(F32).tiny))):  # subnormal inputs
        _, rel = errors("log", lanes, x)
        assert rel <= 2e-7, (x.min(), x.max(), rel)


@pytest.mark.parametrize("lanes", LANES)
def test_log_special_values(lanes):
    x = np.array([0.0, -0.0, -1.0, -INF, INF, NAN, 1.0, TINY, MAXF, -TINY], dtype=F32)
    want = np.array([-INF, -INF, NAN, NAN, INF, NAN, 0.0, -103.27893, 88.72284, NAN], dtype=F32)
    got = compiled("log", lanes)(x)
    exact = [0, 1, 2, 3, 4, 5, 6, 9]
    assert same(got[exact], want[exact]), got
    assert np.allclose(got[[7, 8]], want[[7, 8]], rtol=2e-7, atol=0), got


@pytest.mark.parametrize("lanes", LANES)
def test_log1p_accuracy(lanes):
    """Relative accuracy near 0 too (1 + x rounds away most of x's digits there)."""
    for x in (uniform(-0.999, 1.0), log_uniform(1e-30, 1e-3), -log_uniform(1e-30, 1e-3),
              uniform(-1e-3, 1e-3), log_uniform(1.0, 1e30), log_uniform(1e30, MAXF),
              -log_uniform(1e-7, 0.999999)):
        _, rel = errors("log1p", lanes, x)
        assert rel <= 3e-7, (x.min(), x.max(), rel)


@pytest.mark.parametrize("lanes", LANES)
def test_log1p_special_values(lanes):
    x = np.array([0.0, -0.0, -1.0, -2.0, -INF, INF, NAN, TINY, -TINY, MAXF], dtype=F32)
    want = np.array([0.0, -0.0, -INF, NAN, NAN, INF, NAN, TINY, -TINY, 88.72284], dtype=F32)
    got = compiled("log1p", lanes)(x)
    exact = [0, 1, 2, 3, 4, 5, 6, 7, 8]
    assert same(got[exact], want[exact]), got
    assert np.allclose(got[[9]], want[[9]], rtol=2e-7, atol=0), got


@pytest.mark.parametrize("lanes", LANES)
def test_tanh_accuracy(lanes):
    for lo, hi in ((-100.0, 100.0), (-10.0, 10.0), (-1.0, 1.0), (0.6, 0.7)):
        abs_err, _ = errors("tanh", lanes, uniform(lo, hi))
        assert abs_err <= 1.5e-7, (lo, hi, abs_err)
    # Small arguments keep their relative accuracy (no 1 - (1 - x) cancellation).
    for x in (uniform(-0.625, 0.625), log_uniform(1e-30, 0.6), -log_uniform(1e-30, 0.6)):
        _, rel = errors("tanh", lanes, x)
        assert rel <= 2e-7, rel


@pytest.mark.parametrize("lanes", LANES)
def test_tanh_special_values(lanes):
    x = np.array([0.0, -0.0, INF, -INF, NAN, 10.0, -10.0, 50.0, -50.0, MAXF, -MAXF, TINY, -TINY],
                 dtype=F32)
    want = np.array([0.0, -0.0, 1, -1, NAN, 1, -1, 1, -1, 1, -1, TINY, -TINY], dtype=F32)
    assert same(compiled("tanh", lanes)(x), want), compiled("tanh", lanes)(x)


@pytest.mark.parametrize("lanes", LANES)
def test_sigmoid_accuracy(lanes):
    for lo, hi in ((-100.0, 100.0), (-10.0, 10.0), (-1.0, 1.0)):
        abs_err, _ = errors("sigmoid", lanes, uniform(lo, hi))
        assert abs_err <= 1e-7, (lo, hi, abs_err)
    # Relative accuracy down to where the result becomes subnormal.
    _, rel = errors("sigmoid", lanes, uniform(-87.0, 20.0))
    assert rel <= 3.5e-7, rel


@pytest.mark.parametrize("lanes", LANES)
def test_sigmoid_special_values(lanes):
    x = np.array([0.0, -0.0, INF, -INF, NAN, 100.0, -200.0, MAXF, -MAXF, TINY], dtype=F32)
    want = np.array([0.5, 0.5, 1, 0, NAN, 1, 0, 1, 0, 0.5], dtype=F32)
    assert same(compiled("sigmoid", lanes)(x), want), compiled("sigmoid", lanes)(x)


@pytest.mark.parametrize("lanes", LANES)
def test_erf_accuracy(lanes):
    for lo, hi in ((-100.0, 100.0), (-5.0, 5.0), (-1.0, 1.0), (3.5, 4.0)):
        abs_err, _ = errors("erf", lanes, uniform(lo, hi))
        assert abs_err <= 1.2e-7, (lo, hi, abs_err)
    _, rel = errors("erf", lanes, log_uniform(1e-30, 1.0))
    assert rel <= 2.5e-7, rel


@pytest.mark.parametrize("lanes", LANES)
def test_erf_special_values(lanes):
    x = np.array([0.0, -0.0, INF, -INF, NAN, 4.0, -4.0, 100.0, MAXF, -MAXF], dtype=F32)
    want = np.array([0.0, -0.0, 1, -1, NAN, 1, -1, 1, 1, -1], dtype=F32)
    assert same(compiled("erf", lanes)(x), want), compiled("erf", lanes)(x)
