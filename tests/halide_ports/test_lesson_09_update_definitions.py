# Halide's tutorial lesson 9, "Multi-pass Funcs, update definitions, and reductions"
# (halide/Halide tutorial/lesson_09_update_definitions.cpp), where it maps to schedlang.
#
# A Halide Func may have update definitions that rewrite some of its points in place
# (g(2, 1) = 42; g(x, 0) = g(x, 1)); schedlang computes are pure, so each update becomes a
# stage of its own that selects the updated points and copies the rest, scheduled as the
# lesson schedules the update (f.update(0).vectorize(...)). Reductions over an RDom become
# reduce axes (sl.sum, sl.max, sl.min; Halide's inline sum()/maximum()/minimum() are the
# same). Not ported: the histogram (histogram(input(r.x, r.y)) += 1 writes at positions
# read from the data, which a compute cannot express) and store_at; see
# docs/differences-from-tvm.md.
import numpy as np

import schedlang as sl
from tests.halide_ports.check import build_and_run, loop_nest, outline

RNG = np.random.default_rng(0)


def _run(s, out, inputs=(), arrays=()):
    (got,) = build_and_run(s, [*inputs, out], list(arrays), [np.empty(tuple(out.shape), out.dtype)])
    return got


def test_update_definitions_as_stages():
    """g(x, y) = x + y; g(2, 1) = 42; g(x, 0) = g(x, 1), over 4 x 4."""
    g0 = sl.compute((4, 4), lambda y, x: x + y, name="g")
    g1 = sl.compute((4, 4), lambda y, x: sl.if_then_else(sl.all(x == 2, y == 1), 42, g0[y, x]), name="g_update_0")
    g2 = sl.compute((4, 4), lambda y, x: sl.if_then_else(y == 0, g1[1, x], g1[y, x]), name="g_update_1")
    s = sl.create_schedule(g2.op)
    want = np.add.outer(np.arange(4), np.arange(4)).astype("int32")
    want[1, 2] = 42
    want[0] = want[1]
    np.testing.assert_array_equal(_run(s, g2), want)


def test_update_over_an_rdom_row_range():
    """f(x, y) = (x + y) / 100; f(x, r) = f(x, r) * f(x, r) for r in [0, 50)."""
    f0 = sl.compute((100, 100), lambda y, x: (x + y).astype("float32") / 100.0, name="f")
    f1 = sl.compute((100, 100), lambda y, x: sl.if_then_else(y < 50, f0[y, x] * f0[y, x], f0[y, x]), name="f_update")
    s = sl.create_schedule(f1.op)
    s[f0].compute_inline()
    want = (np.add.outer(np.arange(100), np.arange(100)) / np.float32(100)).astype("float32")
    want[:50] = want[:50] * want[:50]
    np.testing.assert_allclose(_run(s, f1), want, rtol=1e-6)


def test_scheduling_update_steps():
    """f(x, y) = x * y; f(x, 0) = f(x, 8); f(0, y) = f(8, y) + 2, with
    f.vectorize(x, 4).parallel(y); f.update(0).vectorize(x, 4); f.update(1).split(y, yo, yi, 4).parallel(yo)."""
    f0 = sl.compute((16, 16), lambda y, x: x * y, name="f")
    f1 = sl.compute((16, 16), lambda y, x: sl.if_then_else(y == 0, f0[8, x], f0[y, x]), name="f_update_0")
    f2 = sl.compute((16, 16), lambda y, x: sl.if_then_else(x == 0, f1[y, 8] + 2, f1[y, x]), name="f_update_1")
    s = sl.create_schedule(f2.op)
    xo, xi = s[f0].split(f0.op.axis[1], factor=4)
    s[f0].vectorize(xi)
    s[f0].parallel(f0.op.axis[0])
    xo, xi = s[f1].split(f1.op.axis[1], factor=4)
    s[f1].vectorize(xi)
    yo, yi = s[f2].split(f2.op.axis[0], factor=4)
    s[f2].parallel(yo)
    assert loop_nest(s, [f2]) == outline("""
        alloc f [16, 16]
        alloc f_update_0 [16, 16]
        parallel y in 0..16
          for x.outer in 0..4
            vectorized x.inner in 0..4
        for y_1 in 0..16
          for x.outer_1 in 0..4
            vectorized x.inner_1 in 0..4
        parallel y.outer in 0..4
          for y.inner in 0..4
            for x in 0..16""")
    want = np.multiply.outer(np.arange(16), np.arange(16)).astype("int32")
    want[0] = want[8]
    want[:, 0] = want[:, 8] + 2
    np.testing.assert_array_equal(_run(s, f2), want)


def test_producer_with_an_update_computed_per_consumer_point():
    """producer(x) = x * 2; producer(x) += 10; consumer(x) = 2 * producer(x): Halide
    computes the producer (both definitions) inside the consumer's loop over x."""
    p0 = sl.compute((10,), lambda x: x * 2, name="producer")
    p1 = sl.compute((10,), lambda x: p0[x] + 10, name="producer_update")
    consumer = sl.compute((10,), lambda x: 2 * p1[x], name="consumer")
    s = sl.create_schedule(consumer.op)
    s[p1].compute_at(s[consumer], consumer.op.axis[0])
    s[p0].compute_at(s[consumer], consumer.op.axis[0])
    assert "alloc producer [1]" in loop_nest(s, [consumer])      # producer_storage[1], as the lesson's C
    np.testing.assert_array_equal(_run(s, consumer), 2 * (np.arange(10) * 2 + 10))


def test_consumer_with_an_update_after_the_producer():
    """producer(x) = x * 17; consumer(x) = 2 * producer(x); consumer(x) += 50;
    producer.compute_at(consumer, x) (the pure definition's loop)."""
    producer = sl.compute((10,), lambda x: x * 17, name="producer")
    c0 = sl.compute((10,), lambda x: 2 * producer[x], name="consumer")
    c1 = sl.compute((10,), lambda x: c0[x] + 50, name="consumer_update")
    s = sl.create_schedule(c1.op)
    s[producer].compute_at(s[c0], c0.op.axis[0])
    assert loop_nest(s, [c1]) == outline("""
        alloc consumer [10]
        for x in 0..10
          alloc producer [1]
          for x_1 in 0..1
        for x_2 in 0..10""")
    np.testing.assert_array_equal(_run(s, c1), 2 * np.arange(10) * 17 + 50)


def test_reduction_with_producer_computed_at_the_reduction_loop():
    """consumer(x) = x + 10; consumer(x) += r + producer(x + r), r in [0, 5);
    producer(x) = x % 8; producer.compute_at(consumer, r)."""
    producer = sl.compute((14,), lambda x: x % 8, name="producer")
    r = sl.reduce_axis((0, 5), "r")
    consumer = sl.compute((10,), lambda x: sl.sum(r + producer[x + r], axis=r, init=x + 10), name="consumer")
    s = sl.create_schedule(consumer.op)
    s[producer].compute_at(s[consumer], r)
    assert loop_nest(s, [consumer]) == outline("""
        for x in 0..10
          for r in 0..5
            alloc producer [1]
            for x_1 in 0..1""")
    x = np.arange(10)
    want = x + 10 + sum(k + (x + k) % 8 for k in range(5))
    np.testing.assert_array_equal(_run(s, consumer), want)


def _clamped(image, name="clamped"):
    h, w = image.shape
    return sl.compute((h + 4, w + 4), lambda y, x: image[sl.min(sl.max(y - 2, 0), h - 1), sl.min(sl.max(x - 2, 0), w - 1)],
                      name=name)      # shifted by two: clamped[y + 2, x + 2] is Halide's clamped(x, y)


def test_box_blur_with_an_rdom():
    """local_sum(x, y) = 0; local_sum(x, y) += clamped(x + r.x, y + r.y), RDom r(-2, 5, -2, 5);
    blurry(x, y) = uint8(local_sum(x, y) / 25)."""
    h, w = 21, 30
    inp = sl.placeholder((h, w), "uint8", name="input")
    clamped = _clamped(inp)
    ry, rx = sl.reduce_axis((0, 5), "r.y"), sl.reduce_axis((0, 5), "r.x")
    local_sum = sl.compute((h, w), lambda y, x: sl.sum(clamped[y + ry, x + rx].astype("int32"), axis=[ry, rx]),
                           name="local_sum")
    blurry = sl.compute((h, w), lambda y, x: (local_sum[y, x] // 25).astype("uint8"), name="blurry")
    s = sl.create_schedule(blurry.op)
    s[clamped].compute_inline()
    s[local_sum].compute_at(s[blurry], blurry.op.axis[1])      # Halide's default for a reduction: at the consumer's x
    image = RNG.integers(0, 256, (h, w), dtype="uint8")
    p = np.pad(image, 2, mode="edge").astype("int32")
    want = (sum(p[dy:dy + h, dx:dx + w] for dy in range(5) for dx in range(5)) // 25).astype("uint8")
    np.testing.assert_array_equal(_run(s, blurry, [inp], [image]), want)


def test_inline_reduction_sum():
    """f1(x) = sum(r + x) * 7 over RDom r(0, 100): an inline reduction."""
    r = sl.reduce_axis((0, 100), "r")
    anon = sl.compute((10,), lambda x: sl.sum(r + x, axis=r), name="anon")
    f1 = sl.compute((10,), lambda x: anon[x] * 7, name="f1")
    s = sl.create_schedule(f1.op)
    s[anon].compute_at(s[f1], f1.op.axis[0])
    x = np.arange(10)
    np.testing.assert_array_equal(_run(s, f1), (100 * x + 4950) * 7)


def test_spread_of_a_box_with_maximum_and_minimum():
    """spread(x, y) = maximum(clamped(x + box.x, y + box.y)) - minimum(...), box 5 x 5,
    split(y, 32).parallel(yo), vectorize(x, 16), clamped computed per yi (Halide also
    store_at(spread, yo)). The two inline reductions are stages of their own here."""
    h, w = 40, 37
    inp = sl.placeholder((h, w), "uint8", name="input")
    clamped = _clamped(inp)
    by, bx = sl.reduce_axis((0, 5), "box.y"), sl.reduce_axis((0, 5), "box.x")
    hi = sl.compute((h, w), lambda y, x: sl.max(clamped[y + by, x + bx], axis=[by, bx]), name="maximum")
    by2, bx2 = sl.reduce_axis((0, 5), "box.y"), sl.reduce_axis((0, 5), "box.x")
    lo = sl.compute((h, w), lambda y, x: sl.min(clamped[y + by2, x + bx2], axis=[by2, bx2]), name="minimum")
    spread = sl.compute((h, w), lambda y, x: hi[y, x] - lo[y, x], name="spread")
    s = sl.create_schedule(spread.op)
    yo, yi = s[spread].split(spread.op.axis[0], factor=32)
    s[spread].parallel(yo)
    xo, xi = s[spread].split(spread.op.axis[1], factor=16)
    s[spread].vectorize(xi)
    for stage in (hi, lo):
        s[stage].compute_at(s[spread], yi)
    s[clamped].compute_at(s[spread], yi)
    assert "alloc clamped [5, 41]" in loop_nest(s, [inp, spread])       # 5 rows of the padded input per row
    image = RNG.integers(0, 256, (h, w), dtype="uint8")
    p = np.pad(image, 2, mode="edge")
    boxes = np.stack([p[dy:dy + h, dx:dx + w] for dy in range(5) for dx in range(5)])
    np.testing.assert_array_equal(_run(s, spread, [inp], [image]), boxes.max(0) - boxes.min(0))
