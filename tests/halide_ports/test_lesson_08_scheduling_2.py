# Halide's tutorial lesson 8, "Scheduling multi-stage pipelines"
# (halide/Halide tutorial/lesson_08_scheduling_2.cpp), as schedlang programs:
#   producer(x, y) = sin(x * y)
#   consumer(x, y) = (producer(x, y) + producer(x, y + 1) + producer(x + 1, y) + producer(x + 1, y + 1)) / 4
# with the lesson's schedules, checked against numpy, with the loop nest and the producer's
# buffer (Halide's bounds inference: a 5 x 2 box per scanline, 5 x 5 per 4 x 4 tile).
#
# Halide infers the producer's domain from the consumer; a schedlang compute declares it
# (one row and column more than the consumer). Halide's store_root()/store_at() (storage
# hoisted above the loop that computes, with sliding-window reuse and storage folding) has
# no schedlang counterpart: those schedules are ported without it, computing the producer
# at the same loop (same results, more sin calls); see docs/differences-from-tvm.md.
import numpy as np

import schedlang as sl
from tests.halide_ports.check import build_and_run, loop_nest, outline


def _pipeline(height, width, name):
    producer = sl.compute((height + 1, width + 1), lambda y, x: sl.sin((x * y).astype("float32")),
                          name=f"producer_{name}")
    consumer = sl.compute((height, width), lambda y, x: (producer[y, x] + producer[y + 1, x] + producer[y, x + 1]
                                                         + producer[y + 1, x + 1]) / 4, name=f"consumer_{name}")
    return producer, consumer, sl.create_schedule(consumer.op)


def _numpy(height, width):
    y, x = np.mgrid[0:height + 1, 0:width + 1]
    p = np.sin((x * y).astype("float32"))
    return (p[:-1, :-1] + p[1:, :-1] + p[:-1, 1:] + p[1:, 1:]) / 4


def _check(s, consumer, height, width, nest=None):
    if nest is not None:
        assert loop_nest(s, [consumer]) == outline(nest)
    (out,) = build_and_run(s, [consumer], [], [np.empty((height, width), "float32")])
    np.testing.assert_allclose(out, _numpy(height, width), rtol=1e-5, atol=1e-6)


def test_default_schedule_inlines_the_producer():
    producer, consumer, s = _pipeline(4, 4, "default")
    s[producer].compute_inline()      # Halide's default; schedlang's default is compute_root
    _check(s, consumer, 4, 4, """
        for y in 0..4
          for x in 0..4""")
    assert str(sl.lower(s, [consumer])).count("sin(") == 4       # 4 calls of sin per point, as the lesson counts


def test_compute_root():
    producer, consumer, s = _pipeline(4, 4, "root")
    s[producer].compute_root()
    _check(s, consumer, 4, 4, """
        alloc producer_root [5, 5]
        for y in 0..5
          for x in 0..5
        for y_1 in 0..4
          for x_1 in 0..4""")


def test_compute_at_scanline():
    producer, consumer, s = _pipeline(4, 4, "y")
    s[producer].compute_at(s[consumer], consumer.op.axis[0])
    _check(s, consumer, 4, 4, """
        for y in 0..4
          alloc producer_y [2, 5]
          for y_1 in 0..2
            for x in 0..5
          for x_1 in 0..4""")


def test_store_root_compute_at_scanline_without_store_root():
    """producer.store_root().compute_at(consumer, y): the computation at y is ported, the
    sliding-window storage is not (a 5 x 2 box is computed per scanline, not 5 x 1)."""
    producer, consumer, s = _pipeline(4, 4, "root_y")
    s[producer].compute_at(s[consumer], consumer.op.axis[0])
    _check(s, consumer, 4, 4)


def test_compute_at_pixel():
    """producer.store_root().compute_at(consumer, x), without store_root: a 2 x 2 box per pixel."""
    producer, consumer, s = _pipeline(4, 4, "root_x")
    s[producer].compute_at(s[consumer], consumer.op.axis[1])
    _check(s, consumer, 4, 4, """
        for y in 0..4
          for x in 0..4
            alloc producer_root_x [2, 2]
            for y_1 in 0..2
              for x_1 in 0..2""")


def test_tiles():
    producer, consumer, s = _pipeline(8, 8, "tile")
    y, x = consumer.op.axis
    y_outer, x_outer, y_inner, x_inner = s[consumer].tile(y, x, 4, 4)   # Halide: tile(x, y, xo, yo, xi, yi, 4, 4)
    s[producer].compute_at(s[consumer], x_outer)
    _check(s, consumer, 8, 8, """
        for y.outer in 0..2
          for x.outer in 0..2
            alloc producer_tile [5, 5]
            for y in 0..5
              for x in 0..5
            for y.inner in 0..4
              for x.inner in 0..4""")


def test_mixed_parallel_vectorized():
    """consumer split by 16 rows in parallel and vectorized by 4; the producer computed per
    row (Halide: store_at(consumer, yo), compute_at(consumer, yi)) and vectorized by 4."""
    producer, consumer, s = _pipeline(160, 160, "mixed")
    y, x = consumer.op.axis
    yo, yi = s[consumer].split(y, factor=16)
    s[consumer].parallel(yo)
    xo, xi = s[consumer].split(x, factor=4)       # Halide: consumer.vectorize(x, 4)
    s[consumer].vectorize(xi)
    s[producer].compute_at(s[consumer], yi)
    pxo, pxi = s[producer].split(producer.op.axis[1], factor=4)
    s[producer].vectorize(pxi)
    _check(s, consumer, 160, 160, """
        parallel y.outer in 0..10
          for y.inner in 0..16
            alloc producer_mixed [2, 161]
            for y in 0..2
              for x.outer in 0..41
                vectorized x.inner in 0..4
            for x.outer_1 in 0..40
              vectorized x.inner_1 in 0..4""")
