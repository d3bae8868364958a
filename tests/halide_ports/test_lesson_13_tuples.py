# Halide's tutorial lesson 13, "Tuples" (halide/Halide tutorial/lesson_13_tuples.cpp), where it
# maps to schedlang. A Func returning a Tuple is a compute with several outputs; a Tuple-valued
# reduction (argmax) is a comm_reducer over (index, value); the lesson's complex-number Mandelbrot,
# an update over an RDom of iterations, is a scan over (re, im) states, and its "first iteration
# that escapes" an argmin-like tuple reduction over the iterations. Each is built bounds-checked and
# plain (check.build_and_run) and compared with numpy.
import numpy as np
import pytest

import schedlang as sl
from tests.halide_ports.check import build_and_run


def test_a_func_of_two_values():
    """f(x, y) = Tuple(x + y, sin(x * y)) over 80 x 60: one loop nest computes both."""
    f0, f1 = sl.compute((60, 80), lambda y, x: ((x + y).astype("int32"), sl.sin((x * y).astype("float32"))), name="f")
    s = sl.create_schedule(f0.op)
    assert str(sl.lower(s, [f0, f1])).count("for x in") == 1
    a, b = build_and_run(s, [f0, f1], [], [np.zeros((60, 80), "int32"), np.zeros((60, 80), "float32")])
    y, x = np.mgrid[0:60, 0:80]
    np.testing.assert_array_equal(a, x + y)
    np.testing.assert_allclose(b, np.sin((x * y).astype("float32")), rtol=1e-5, atol=1e-6)


def test_argmax_as_a_tuple_reduction():
    inp = sl.placeholder((100,), name="input")

    def combine(x, y):
        better = y[1] > x[1]
        return sl.select(better, y[0], x[0]), sl.select(better, y[1], x[1])
    argmax = sl.comm_reducer(combine, lambda it, vt: (sl.const(0, it), sl.min_value(vt)), name="argmax")
    r = sl.reduce_axis((0, 100), "r")
    index, value = sl.compute((1,), lambda _: argmax((r.var, inp[r]), axis=r), name="arg_max")
    x = np.sin(np.arange(100) * 0.37).astype("float32")
    got_index, got_value = build_and_run(sl.create_schedule(index.op), [inp, index, value], [x],
                                         [np.zeros(1, "int32"), np.zeros(1, "float32")])
    assert got_index[0] == x.argmax() and got_value[0] == x.max()


W, H, ITERS = 21, 13, 12


def _mandelbrot():
    """(escape iteration, escaped) per pixel: z <- z^2 + c for ITERS steps, c on a 0.25 grid."""
    state_re, state_im = sl.placeholder((ITERS, H, W)), sl.placeholder((ITERS, H, W))
    zero = sl.compute((1, H, W), lambda t, y, x: sl.const(0.0, "float32"))

    def c_re(x):
        return x.astype("float32") / 4.0 - 2.5

    def c_im(y):
        return y.astype("float32") / 4.0 - 1.5
    step_re = sl.compute((ITERS, H, W), lambda t, y, x: state_re[t - 1, y, x] * state_re[t - 1, y, x]
                         - state_im[t - 1, y, x] * state_im[t - 1, y, x] + c_re(x), name="step_re")
    step_im = sl.compute((ITERS, H, W), lambda t, y, x: 2.0 * state_re[t - 1, y, x] * state_im[t - 1, y, x]
                         + c_im(y), name="step_im")
    re, im = sl.scan([zero, sl.compute((1, H, W), lambda t, y, x: sl.const(0.0, "float32"))],
                     [step_re, step_im], [state_re, state_im], name="mandelbrot")
    magnitude = sl.compute((ITERS, H, W), lambda t, y, x: re[t, y, x] * re[t, y, x] + im[t, y, x] * im[t, y, x],
                           name="magnitude")
    first = sl.comm_reducer(lambda a, b: (sl.select(a[1], a[0], b[0]), sl.any(a[1], b[1])),
                            lambda it, bt: (sl.const(ITERS - 1, it), sl.const(False, bt)), name="first_escape")
    t = sl.reduce_axis((0, ITERS), "t")
    escape, escaped = sl.compute((H, W), lambda y, x: first((t.var, magnitude[t, y, x] > 4.0), axis=t), name="escape")
    return escape, escaped, magnitude


def _want():
    zr, zi = np.zeros((H, W), "float32"), np.zeros((H, W), "float32")
    c_re = (np.arange(W, dtype="float32") / 4.0 - 2.5)[None, :]
    c_im = (np.arange(H, dtype="float32") / 4.0 - 1.5)[:, None]
    escape, escaped = np.full((H, W), ITERS - 1), np.zeros((H, W), bool)
    with np.errstate(over="ignore", invalid="ignore"):
        for k in range(ITERS):
            if k:
                zr, zi = zr * zr - zi * zi + c_re, 2.0 * zr * zi + c_im
            hit = (zr * zr + zi * zi > 4.0) & ~escaped
            escape[hit], escaped = k, escaped | hit
    return escape, escaped


@pytest.mark.parametrize("scheduled", [False, True], ids=["default", "rows_parallel_magnitude_inlined"])
def test_mandelbrot_of_complex_numbers(scheduled):
    escape, escaped, magnitude = _mandelbrot()
    s = sl.create_schedule(escape.op)
    if scheduled:
        s[magnitude].compute_inline()
        s[escape].parallel(escape.op.axis[0])
    got, got_escaped = build_and_run(s, [escape, escaped], [], [np.zeros((H, W), "int32"), np.zeros((H, W), "bool")])
    want, want_escaped = _want()
    assert 0 < want_escaped.sum() < H * W          # some pixels escape, some do not
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got_escaped, want_escaped)
