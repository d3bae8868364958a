"""The c target's arithmetic has the defined results of the llvm target (README, "Defined
behaviour"), bit for bit: integer // and % by zero give 0, INT_MIN // -1 wraps, shifts by the
bit width or more give 0 (or -1), + - * wrap, float -> integer saturates (NaN gives 0), float
// and % follow numpy. The C99 computes them with the prelude's helpers, except where loop
ranges prove plain C exact; each case is checked against an exact Python model."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import schedlang as sl
from tests.cpu_targets import needs_cc
from tests.target.int_models import assert_same_bits, float_div_program, float_to_int_program, integer_ops_program

pytestmark = needs_cc
ROOT = Path(__file__).resolve().parents[3]


def run_c(args, outs, inputs):
    """{"c": the outputs of the c module of args (one root nest per output) on inputs}, and its source."""
    mod = sl.build(sl.create_schedule([o.op for o in outs]), args, target="c")
    got = [np.full(o.shape[0], 7, o.dtype_obj.numpy) for o in outs]
    mod(*inputs, *got)
    return {"c": got}, mod.get_source()


def test_integer_division_shifts_and_wrap_around_match_the_models():
    args, outs, inputs, want = integer_ops_program()
    got, src = run_c(args + outs, outs, inputs)
    for helper in ("sl_floordiv_i8(", "sl_truncmod_u64(", "sl_add_i64(", "sl_mul_u16(", "sl_shl_i32("):
        assert helper in src, helper
    assert_same_bits(got, want, outs, inputs)


@pytest.mark.parametrize("src", ["float16", "float32", "float64"])
def test_float_to_int_saturates_and_maps_nan_to_zero(src):
    args, outs, inputs, want = float_to_int_program(src)
    got, text = run_c(args, outs, inputs)
    assert f"sl_f2i_i8_{'f64' if src == 'float64' else 'f32'}(" in text
    assert_same_bits(got, want, outs, inputs)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_float_floordiv_and_mod_follow_numpy(dtype):
    args, outs, inputs, want = float_div_program(dtype)
    got, _ = run_c(args, outs, inputs)
    assert_same_bits(got, want, outs, inputs)


def test_index_arithmetic_stays_plain_c():
    """Loop ranges prove i * 8 + j in range: no wrapping helper in the addressing, while the
    user's x * 3 + 1 (any int32) gets one; a non-negative index divided by a constant is C's /."""
    A = sl.placeholder((40, 8), "int32", name="A")
    C = sl.compute((40, 8), lambda i, j: A[i, j] * 3 + 1, name="C")
    D = sl.compute((320,), lambda i: A[i // 8, i % 8], name="D")
    src = sl.build(sl.create_schedule([C.op, D.op]), [A, C, D], target="c").get_source()
    assert "C[i * 8 + j] = sl_add_i32(sl_mul_i32(A[i * 8 + j], 3), 1);" in src
    assert "sl_floordiv_i32(" not in src and "sl_floormod_i32(" not in src


# Builds the integer cases' C with UndefinedBehaviorSanitizer (abort at the first report) after
# replacing OLD by NEW in it, runs it in this child process and prints whether it matches.
UBSAN_CHILD = """
import ctypes, numpy as np, schedlang as sl
from schedlang.target.c.compile import build_library
from tests.target.int_models import integer_ops_program
args, outs, inputs, want = integer_ops_program()
mod = sl.build(sl.create_schedule([o.op for o in outs]), args + outs, target="c")
path, _ = build_library(mod.get_source().replace(OLD, NEW), mod.target,
                        ["-fsanitize=undefined,float-cast-overflow", "-fno-sanitize-recover=all"])
lib = ctypes.CDLL(str(path))
got = [np.zeros(o.shape[0], o.dtype_obj.numpy) for o in outs]
argv = (ctypes.c_void_p * (len(inputs) + len(got)))(*[x.ctypes.data for x in inputs + got])
getattr(lib, mod.name)(argv, ctypes.byref(ctypes.c_int64(0)))
print("same", all(np.array_equal(g, w) for g, w in zip(got, want)))
"""


@pytest.mark.parametrize("old, new", [("", ""), ("return (T)((U)a + (U)b);", "return a + b;")],
                         ids=["as generated", "plain + in sl_add"])
def test_the_c_defines_it_under_the_ub_sanitizer(old, new):
    """The same C compiled with UndefinedBehaviorSanitizer runs every integer case: the C computes
    them without undefined behaviour, not by the compiler's grace; with sl_add made a plain +
    (as C's own operator would be), the sanitizer stops it at INT_MAX + 1."""
    code = f"OLD, NEW = {old!r}, {new!r}\n" + UBSAN_CHILD
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
    if not old:
        assert done.returncode == 0 and "same True" in done.stdout, done.stderr[-3000:]
    else:
        assert done.returncode != 0 and "runtime error: signed integer overflow" in done.stderr, done.stderr[-3000:]
