# Halide's tutorial lesson 18, "Factoring an associative reduction using rfactor"
# (halide/Halide tutorial/lesson_18_parallel_associative_reductions.cpp), where it maps to
# schedlang. The lesson's histogram, histogram(input(r.x, r.y) / 32) += 1, writes at positions
# read from the data, which a compute cannot express (lesson 9's port says so); it is ported
# as the count each bucket gets, hist(i) = sum over r of (input(r) / 32 == i), a reduction over
# the same domain that rfactor factors the same ways: by rows (the intermediate parallel over
# them), by columns (vectorized across them), by 4 x 4 tiles (Halide's rfactor of two RVars is
# TVM's rfactor of their fused loop), and over a predicated domain (RDom::where is sum's
# where=). Each is built bounds-checked and plain and compared with numpy.
import numpy as np
import pytest

import schedlang as sl
from tests.halide_ports.check import build_and_run, loop_nest, outline

H, W, BUCKETS = 8, 8, 8
IMAGE = np.random.default_rng(18).integers(0, 256, (H, W)).astype("uint8")


def _histogram(name, where=None):
    inp = sl.placeholder((H, W), dtype="uint8", name="input")
    ry, rx = sl.reduce_axis((0, H), "ry"), sl.reduce_axis((0, W), "rx")
    hist = sl.compute((BUCKETS,), lambda i: sl.sum(sl.if_then_else((inp[ry, rx] / 32).astype("int32") == i, 1, 0),
                                                   axis=[ry, rx], where=None if where is None else where(ry, rx)),
                      name=name)
    return inp, hist


def _want(mask=None):
    buckets = (IMAGE // 32) if mask is None else (IMAGE // 32)[mask]
    return np.bincount(buckets.ravel(), minlength=BUCKETS).astype("int32")


def _run(s, inp, hist):
    (got,) = build_and_run(s, [inp, hist], [IMAGE], [np.zeros(BUCKETS, "int32")])
    return got


def test_serial_histogram_with_its_buckets_vectorized():
    inp, hist = _histogram("hist_serial")
    s = sl.create_schedule(hist.op)
    s[hist].vectorize(hist.op.axis[0])
    np.testing.assert_array_equal(_run(s, inp, hist), _want())


def test_rfactor_by_rows_runs_the_rows_in_parallel():
    """intermediate = histogram.update().rfactor(r.y, y); intermediate.compute_root().update().parallel(y)."""
    inp, hist = _histogram("hist_rfactor_par")
    s = sl.create_schedule(hist.op)
    ry, _ = hist.op.reduce_axis
    intermediate = s.rfactor(hist, ry)
    y, x = s[intermediate].op.axis
    s[intermediate].parallel(y)
    s[intermediate].vectorize(x)
    s[hist].vectorize(hist.op.axis[0])
    assert loop_nest(s, [inp, hist]) == outline("""
        alloc hist_rfactor_par.rf [8, 8]
        parallel ry in 0..8
          vectorized i in 0..8
            for rx in 0..8
        vectorized i_1 in 0..8
          for ry_1 in 0..8
    """)
    np.testing.assert_array_equal(_run(s, inp, hist), _want())


def test_rfactor_by_columns_vectorizes_across_them():
    """intermediate = histogram.update().rfactor(r.x, u); its update vectorized over u: an
    independent histogram per column, the columns the vector lanes."""
    inp, hist = _histogram("hist_rfactor_vec")
    s = sl.create_schedule(hist.op)
    _, rx = hist.op.reduce_axis
    intermediate = s.rfactor(hist, rx)
    u, x = s[intermediate].op.axis
    s[intermediate].reorder(x, s[intermediate].op.reduce_axis[0], u)
    s[intermediate].vectorize(u)
    s[hist].vectorize(hist.op.axis[0])
    assert "vectorized rx in 0..8" in loop_nest(s, [inp, hist])
    np.testing.assert_array_equal(_run(s, inp, hist), _want())


@pytest.mark.parametrize("tile", [4, 3])         # 3: tiles that do not divide the 8 x 8 domain
def test_rfactor_by_tiles_runs_the_tiles_in_parallel(tile):
    """histogram.update().split(r.x, ...).split(r.y, ...); rfactor({{rx_outer, u}, {ry_outer, v}}):
    a histogram per tile, the tiles in parallel."""
    inp, hist = _histogram("hist_rfactor_tile")
    s = sl.create_schedule(hist.op)
    ry, rx = hist.op.reduce_axis
    rxo, rxi = s[hist].split(rx, factor=tile)
    ryo, ryi = s[hist].split(ry, factor=tile)
    s[hist].reorder(ryo, rxo, ryi, rxi)
    tiles = s[hist].fuse(ryo, rxo)
    intermediate = s.rfactor(hist, tiles)
    t, x = s[intermediate].op.axis
    s[intermediate].parallel(t)
    s[intermediate].vectorize(x)
    n = -(-H // tile) * -(-W // tile)
    assert f"alloc hist_rfactor_tile.rf [{n}, 8]" in loop_nest(s, [inp, hist])
    np.testing.assert_array_equal(_run(s, inp, hist), _want())


def test_rfactor_of_a_predicated_domain():
    """The lesson: rfactor is most useful where the RDom has a predicate (RDom::where): the
    circle of lesson 17, (x - 3)^2 + (y - 3)^2 <= 10, factored by rows."""
    inp, hist = _histogram("hist_circle", where=lambda ry, rx: (rx - 3) * (rx - 3) + (ry - 3) * (ry - 3) <= 10)
    s = sl.create_schedule(hist.op)
    ry, _ = hist.op.reduce_axis
    intermediate = s.rfactor(hist, ry)
    s[intermediate].parallel(s[intermediate].op.axis[0])
    y, x = np.mgrid[0:H, 0:W]
    np.testing.assert_array_equal(_run(s, inp, hist), _want((x - 3) ** 2 + (y - 3) ** 2 <= 10))
