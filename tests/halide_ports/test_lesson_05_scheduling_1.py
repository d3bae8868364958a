# Halide's tutorial lesson 5, "Vectorize, parallelize, unroll and tile your code"
# (halide/Halide tutorial/lesson_05_scheduling_1.cpp), as schedlang programs: the same
# gradient(x, y) = x + y and the same schedules, each checked against numpy and its loop
# nest against the order of the lesson's "equivalent C".
#
# Halide's Func gradient(x, y) stores x fastest; here it is a compute over (y, x), so the
# default loop order (y outer, x inner) is Halide's. Halide lists reorder() arguments
# innermost first and names split loops x_outer/x_inner; schedlang lists them outermost
# first and names them x.outer/x.inner. Halide's vectorize(x, 4) is split + vectorize.
import numpy as np

import schedlang as sl
from tests.halide_ports.check import build_and_run, gradient_numpy, loop_nest, outline


def _gradient(height, width, name="gradient"):
    G = sl.compute((height, width), lambda y, x: x + y, name=name)
    return G, sl.create_schedule(G.op)


def _check(G, s, height, width, nest):
    assert loop_nest(s, [G]) == outline(nest)
    (out,) = build_and_run(s, [G], [], [np.empty((height, width), "int32")])
    np.testing.assert_array_equal(out, gradient_numpy(height, width))


def test_default_row_major():
    G, s = _gradient(4, 4)
    _check(G, s, 4, 4, """
        for y in 0..4
          for x in 0..4""")


def test_reorder_column_major():
    G, s = _gradient(4, 4, "gradient_col_major")
    y, x = G.op.axis
    s[G].reorder(x, y)                          # Halide: gradient.reorder(y, x)
    _check(G, s, 4, 4, """
        for x in 0..4
          for y in 0..4""")


def test_split():
    G, s = _gradient(4, 4, "gradient_split")
    x_outer, x_inner = s[G].split(G.op.axis[1], factor=2)
    _check(G, s, 4, 4, """
        for y in 0..4
          for x.outer in 0..2
            for x.inner in 0..2""")


def test_fuse():
    G, s = _gradient(4, 4, "gradient_fused")
    y, x = G.op.axis
    s[G].fuse(y, x)                             # Halide: gradient.fuse(x, y, fused)
    _check(G, s, 4, 4, """
        for y.x.fused in 0..16""")


def test_tile_by_split_and_reorder():
    G, s = _gradient(8, 8, "gradient_tiled")
    y, x = G.op.axis
    x_outer, x_inner = s[G].split(x, factor=4)
    y_outer, y_inner = s[G].split(y, factor=4)
    s[G].reorder(y_outer, x_outer, y_inner, x_inner)    # Halide: reorder(x_inner, y_inner, x_outer, y_outer)
    _check(G, s, 8, 8, """
        for y.outer in 0..2
          for x.outer in 0..2
            for y.inner in 0..4
              for x.inner in 0..4""")


def test_vectorize():
    G, s = _gradient(4, 8, "gradient_in_vectors")
    x_outer, x_inner = s[G].split(G.op.axis[1], factor=4)
    s[G].vectorize(x_inner)
    _check(G, s, 4, 8, """
        for y in 0..4
          for x.outer in 0..2
            vectorized x.inner in 0..4""")
    kernel = sl.lower(s, [G], level="kernel")          # one 4-lane store per x.outer, as Halide's <x_vec>
    assert "g[ramp(" not in kernel and "= ramp(x.outer * 4 + y, 1, 4)   # i32x4" in kernel


def test_unroll():
    G, s = _gradient(4, 4, "gradient_unroll")
    x_outer, x_inner = s[G].split(G.op.axis[1], factor=2)
    s[G].unroll(x_inner)
    _check(G, s, 4, 4, """
        for y in 0..4
          for x.outer in 0..2
            unrolled x.inner in 0..2""")


def test_split_that_does_not_divide():
    """7 x 2 split by 3: Halide shifts the last tile inward (recomputing x = 4, 5);
    schedlang guards the tail instead (docs/differences-from-tvm.md, Halide section).
    Either way every point is computed with the right value."""
    G, s = _gradient(2, 7, "gradient_split_7x2")
    s[G].split(G.op.axis[1], factor=3)
    _check(G, s, 2, 7, """
        for y in 0..2
          for x.outer in 0..3
            for x.inner in 0..3""")
    assert "if x.outer * 3 + x.inner < 7:" in sl.lower(s, [G])


def test_fused_tiles_in_parallel():
    G, s = _gradient(8, 8, "gradient_fused_tiles")
    y, x = G.op.axis
    y_outer, x_outer, y_inner, x_inner = s[G].tile(y, x, 4, 4)   # Halide: tile(x, y, xo, yo, xi, yi, 4, 4)
    tile_index = s[G].fuse(y_outer, x_outer)
    s[G].parallel(tile_index)
    _check(G, s, 8, 8, """
        parallel y.outer.x.outer.fused in 0..4
          for y.inner in 0..4
            for x.inner in 0..4""")


def test_putting_it_all_together():
    """gradient_fast over 350 x 250: 64 x 64 tiles fused and parallel, each tiled again
    into 4 x 2 pieces, vectorized across x and unrolled across y."""
    G, s = _gradient(250, 350, "gradient_fast")
    y, x = G.op.axis
    y_outer, x_outer, y_inner, x_inner = s[G].tile(y, x, 64, 64)
    tile_index = s[G].fuse(y_outer, x_outer)
    s[G].parallel(tile_index)
    y_inner_outer, x_inner_outer, y_pairs, x_vectors = s[G].tile(y_inner, x_inner, 2, 4)
    s[G].vectorize(x_vectors)
    s[G].unroll(y_pairs)
    _check(G, s, 250, 350, """
        parallel y.outer.x.outer.fused in 0..24
          for y.inner.outer in 0..32
            for x.inner.outer in 0..16
              unrolled y.inner.inner in 0..2
                vectorized x.inner.inner in 0..4""")
