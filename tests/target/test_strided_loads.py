"""Vector loads of a small constant stride (target/llvm/strided.py: one masked contiguous
load and a shuffle instead of a gather): values against numpy for strides 2-4 and -1 (a row
read backwards), dtypes of each width, whole-vector and tail-guarded (predicated) loops; the
LLVM IR has no gather for them (and keeps one for a larger stride); arrays pressed against
an inaccessible page (a child process runs them) are never read past their last wanted
element, at either end."""
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import schedlang as sl

ROOT = Path(__file__).resolve().parents[2]


def strided(n: int, stride: int, offset: int, dtype: str, factor: int):
    """out[i] = x[stride * i + offset] * 2 (+1 for ints), the loop split by factor and vectorized."""
    size = stride * (n - 1) + offset + 1          # the last element read is the array's last
    x = sl.placeholder((size,), name="x", dtype=dtype)
    two = sl.const(2, dtype)
    out = sl.compute((n,), lambda i: x[i * stride + offset] * two, name="out")
    s = sl.create_schedule(out.op)
    if factor < n:
        _, inner = s[out].split(out.op.axis[0], factor=factor)
    else:
        inner = out.op.axis[0]
    s[out].vectorize(inner)
    return s, x, out


@pytest.mark.parametrize("stride", [2, 3, 4])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int8", "int32"])
@pytest.mark.parametrize("n, factor", [(29, 16), (7, 7), (40, 64)])
def test_strided_vector_loads_match_numpy(stride, dtype, n, factor):
    s, x, out = strided(n, stride, 1, dtype, factor)
    mod = sl.build(s, [x, out])
    xs = (np.arange(x.shape[0]) % 50).astype(dtype)
    got = np.zeros(n, dtype=dtype)
    mod(xs, got)
    np.testing.assert_array_equal(got, xs[1::stride][:n] * np.asarray(2, dtype=dtype))


def backwards(n: int, dtype: str, factor: int):
    """out[i] = x[n - 1 - i] * 2: the loop split by factor and vectorized (a stride -1 ramp)."""
    x = sl.placeholder((n,), name="x", dtype=dtype)
    out = sl.compute((n,), lambda i: x[n - 1 - i] * sl.const(2, dtype), name="out")
    s = sl.create_schedule(out.op)
    inner = s[out].split(out.op.axis[0], factor=factor)[1] if factor < n else out.op.axis[0]
    s[out].vectorize(inner)
    return s, x, out


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int8", "int32"])
@pytest.mark.parametrize("n, factor", [(29, 16), (7, 7), (40, 64), (64, 32)])
def test_backwards_vector_loads_match_numpy(dtype, n, factor):
    s, x, out = backwards(n, dtype, factor)
    mod = sl.build(s, [x, out])
    xs = (np.arange(n) % 50).astype(dtype)
    got = np.zeros(n, dtype=dtype)
    mod(xs, got)
    np.testing.assert_array_equal(got, xs[::-1] * np.asarray(2, dtype=dtype))
    if dtype == "float32":
        ir = mod.ir["llvm"]
        assert "masked.gather" not in ir and ".reversed" in ir, ir


def test_the_ir_has_a_wide_masked_load_not_a_gather():
    s, x, out = strided(29, 2, 0, "float32", 16)
    ir = sl.build(s, [x, out]).ir["llvm"]
    assert "masked.gather" not in ir and "llvm.masked.load.v32f32" in ir
    s, x, out = strided(29, 5, 0, "float32", 16)          # a wider stride stays a gather
    assert "masked.gather" in sl.build(s, [x, out]).ir["llvm"]


SCRIPT = textwrap.dedent('''
    import numpy as np
    import schedlang as sl
    from tests.target.guarded_memory import guarded_array
    from tests.target.test_strided_loads import strided

    for stride in (2, 3, 4):
        for n, factor in ((29, 16), (16, 16), (7, 7)):
            s, x, out = strided(n, stride, stride - 1, "float32", factor)
            mod = sl.build(s, [x, out])
            for at_end in (True, False):
                xs = guarded_array(x.shape, np.float32, at_end)
                xs[...] = np.arange(x.shape[0])
                got = guarded_array(out.shape, np.float32, at_end)
                mod(xs, got)
                np.testing.assert_array_equal(got, xs[stride - 1::stride] * 2)
    from tests.target.test_strided_loads import backwards
    for n, factor in ((29, 16), (16, 16), (7, 7)):
        s, x, out = backwards(n, "float32", factor)
        mod = sl.build(s, [x, out])
        for at_end in (True, False):
            xs = guarded_array(x.shape, np.float32, at_end)
            xs[...] = np.arange(n)
            got = guarded_array(out.shape, np.float32, at_end)
            mod(xs, got)
            np.testing.assert_array_equal(got, xs[::-1] * 2)
    print("all inside")
''')


def test_strided_loads_never_read_past_the_last_wanted_element():
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"child failed (rc={done.returncode}; -11 is a fault):\n{done.stdout}\n{done.stderr}"
    assert "all inside" in done.stdout
