"""The CUDA target's arithmetic has the defined results of the llvm target (README, "Defined
behaviour"), bit for bit: float -> integer conversion saturates (NaN gives 0), integer // and %
by zero give 0, INT_MIN // -1 wraps, shifts by the bit width or more give 0 (or -1), integer
+ - * wrap (so x + 1 > x is false at INT_MAX). Each case is run by the CPU target, the CUDA C
through the shim (in-process and under UndefinedBehaviorSanitizer, which proves the C itself
defines it: NVRTC compiles the same text) and the SIMT engine, against an exact Python model."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import schedlang as sl
from tests.target.int_models import assert_same_bits, float_div_program, float_to_int_program, integer_ops_program

pytest.importorskip("cuda.bindings")

ROOT = Path(__file__).resolve().parents[3]
ENGINES = ({"engine": "shim"}, {"engine": "simt"}, {"engine": "shim", "sanitize": "undefined"})


def gpu_and_cpu_modules(args, outs):
    """The CUDA module (every output a kernel of 8-thread blocks) and the llvm module of args."""
    s = sl.create_schedule([o.op for o in outs])
    for o in outs:
        xo, xi = s[o].split(o.op.axis[0], factor=8)
        s[o].bind(xo, sl.thread_axis("blockIdx.x"))
        s[o].bind(xi, sl.thread_axis("threadIdx.x"))
    cpu = sl.build(sl.create_schedule([o.op for o in outs]), args)
    return sl.build(s, args, target="cuda"), cpu


def run_everywhere(gpu, cpu, inputs, outs):
    """{runner name: output arrays} of the CPU target and each emulation engine."""
    results = {}
    for name, mod, options in [("llvm", cpu, {})] + [(" ".join(o.values()), gpu, o) for o in ENGINES]:
        got = [np.full(o.shape[0], 7, o.dtype_obj.numpy) for o in outs]
        (mod.emulate if options else mod)(*inputs, *got, **options)
        results[name] = got
    return results


@pytest.mark.parametrize("src", ["float16", "float32", "float64"])
def test_float_to_int_saturates_like_the_cpu_target(src):
    args, outs, inputs, want = float_to_int_program(src)
    gpu, cpu = gpu_and_cpu_modules(args, outs)
    assert "sl_f2i<signed char, float>(" in gpu.get_source() or src == "float64"
    assert_same_bits(run_everywhere(gpu, cpu, inputs, outs), want, outs, inputs)


def check_integer_ops():
    """Every integer op on every integer dtype, in one module: the CPU target, the shim, the
    shim under UBSan and the SIMT engine against the Python models (and numpy's floor_divide
    and remainder). Run in a child process: before the guards, x // 0 killed it with SIGFPE."""
    args, outs, inputs, want = integer_ops_program()
    gpu, cpu = gpu_and_cpu_modules(args + outs, outs)
    src = gpu.get_source()
    for helper in ("sl_floordiv<signed char, unsigned>(", "sl_truncmod<unsigned long long, unsigned long long>(",
                   "sl_add<long long, unsigned long long>(", "sl_mul<unsigned short, unsigned>(",
                   "sl_shl<int, unsigned>("):
        assert helper in src, helper
    assert_same_bits(run_everywhere(gpu, cpu, inputs, outs), want, outs, inputs)


def test_integer_division_shifts_and_wrap_around_match_the_cpu_target():
    child = "from tests.target.cuda.test_defined_behaviour import check_integer_ops; check_integer_ops(); print('ok')"
    done = subprocess.run([sys.executable, "-c", child], env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout.strip().endswith("ok")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_float_floordiv_and_mod_follow_numpy(dtype):
    args, outs, inputs, want = float_div_program(dtype)
    gpu, cpu = gpu_and_cpu_modules(args, outs)
    assert_same_bits(run_everywhere(gpu, cpu, inputs, outs), want, outs, inputs)


def test_index_arithmetic_stays_plain_c():
    """Loop ranges prove i * 8 + j in range: no wrapping helper in the addressing, while the
    user's x * 3 + 1 (any int32) gets one."""
    A = sl.placeholder((40, 8), "int32", name="A")
    C = sl.compute((40, 8), lambda i, j: A[i, j] * 3 + 1, name="C")
    s = sl.create_schedule(C.op)
    s[C].bind(C.op.axis[0], sl.thread_axis("blockIdx.x"))
    s[C].bind(C.op.axis[1], sl.thread_axis("threadIdx.x"))
    src = sl.build(s, [A, C], target="cuda").get_source()
    assert "C[i * 8 + j] = sl_add<int, unsigned>(sl_mul<int, unsigned>(A[i * 8 + j], 3), 1);" in src


def test_the_ub_sanitizer_reports_undefined_behaviour():
    """The sanitizer build catches C's undefined overflow: the same module with sl_add made a
    plain + (as the codegen wrote before) is refused at INT_MAX + 1."""
    A = sl.placeholder((8,), "int32", name="A")
    C = sl.compute((8,), lambda i: A[i] + 1, name="C")
    gpu, _ = gpu_and_cpu_modules([A, C], [C])
    a, c = np.array([2**31 - 1] * 8, np.int32), np.zeros(8, np.int32)
    gpu.emulate(a, c, sanitize="undefined")
    assert (c == -2**31).all()
    gpu.ir["cuda"] = gpu.ir["cuda"].replace("return (T)((U)a + (U)b);", "return a + b;")
    with pytest.raises(RuntimeError, match="UndefinedBehaviorSanitizer found undefined behaviour"):
        gpu.emulate(a, c, sanitize="undefined")
