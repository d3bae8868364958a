"""Golden IR text for small programs at every level, so printer and lowering changes are
seen in review. Refresh with `python -m pytest tests/lowering/test_golden.py --update-golden`."""

import pytest

import schedlang as sl
from schedlang.topi import cpu
from tests import programs
from tests.helpers import assert_golden, check_golden_exists

LEVELS = ("tensor", "loop", "tile", "kernel")


def silu_and_mul():
    """The seed document's example: x f32[1, 32, 4096] -> silu(x[..., :2048]) * x[..., 2048:]."""
    x = sl.placeholder((1, 32, 4096), name="x")
    chunk_0 = sl.compute((1, 32, 2048), lambda i, j, k: x[i, j, k], name="chunk_0")
    chunk_1 = sl.compute((1, 32, 2048), lambda i, j, k: x[i, j, k + 2048], name="chunk_1")
    silu = sl.compute((1, 32, 2048), lambda i, j, k: chunk_0[i, j, k] * sl.sigmoid(chunk_0[i, j, k]), name="silu")
    mul = sl.compute((1, 32, 2048), lambda i, j, k: silu[i, j, k] * chunk_1[i, j, k], name="mul")
    s = sl.create_schedule(mul.op)
    for t in (chunk_0, chunk_1, silu):
        s[t].compute_inline()
    a0, a1 = mul.op.axis[1], mul.op.axis[2]
    outer, lanes = s[mul].split(a1, factor=4)
    s[mul].vectorize(lanes)
    s[mul].parallel(a0)
    return s, [x, mul]


def tiled_gemm():
    A, B, C = programs.gemm(64, 64, 32)
    return cpu.schedule_matmul_cached(sl.create_schedule(C.op), C, (16, 16), k_factor=4), [A, B, C]


def softmax():
    X, mx, ex, total, out = programs.softmax(4, 30)
    s = sl.create_schedule(out.op)
    s[ex].compute_inline()
    s[mx].compute_at(s[out], out.op.axis[0])
    s[total].compute_at(s[out], out.op.axis[0])
    jo, ji = s[out].split(out.op.axis[1], factor=8)
    s[out].vectorize(ji)
    return s, [X, out]


def padded_conv():
    X, Wt, padded, out = programs.conv2d(1, 2, 5, 6, 3, 3)
    s = sl.create_schedule(out.op)
    s[padded].compute_at(s[out], out.op.axis[2])
    return s, [X, Wt, out]


def scan_cell():
    """TVM's multi-stage scan cell: s1 at a split loop of the vectorized update, inside the scan loop."""
    X = sl.placeholder((6, 20), name="X")
    state = sl.placeholder((6, 20), name="state")
    init = sl.compute((1, 20), lambda _, i: X[0, i], name="init")
    s1 = sl.compute((6, 20), lambda t, i: state[t - 1, i] * 2, name="s1")
    s2 = sl.compute((6, 20), lambda t, i: s1[t, i] + X[t, i], name="s2")
    res = sl.scan(init, s2, state, inputs=[X], name="res")
    s = sl.create_schedule(res.op)
    xo, xi = s[s2].split(s2.op.axis[1], factor=8)
    s[s1].compute_at(s[s2], xo)
    s[s2].vectorize(xi)
    return s, [X, res]


PROGRAMS = {"silu_and_mul": silu_and_mul, "tiled_gemm": tiled_gemm, "softmax": softmax, "padded_conv": padded_conv}
PROGRAMS["scan_cell"] = scan_cell


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_golden_ir(name, level, update_golden):
    s, args = PROGRAMS[name]()
    text = sl.lower(s, args, level=level, target=sl.Target("llvm", vector_bits=256)) + "\n"
    assert_golden(text, f"{name}.{level}.txt", update_golden)


def test_missing_golden_file_fails(tmp_path):
    with pytest.raises(pytest.fail.Exception, match=r"golden output missing: .*nothing\.txt; run with --update-golden"):
        check_golden_exists(tmp_path / "nothing.txt")
