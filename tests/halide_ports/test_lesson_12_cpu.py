# Halide's tutorial lesson 12, "Using the GPU", its CPU schedule
# (halide/Halide tutorial/lesson_12_using_the_gpu.cpp, MyPipeline::schedule_for_cpu):
#   lut(i)            = uint8(clamp(pow(i / 255, 1.2) * 255, 0, 255))
#   padded(x, y, c)   = input(clamp(x, 0, width - 1), clamp(y, 0, height - 1), c)
#   padded16(x, y, c) = uint16(padded(x, y, c))
#   sharpen(x, y, c)  = padded16(x, y, c) * 2 - (padded16(x - 1, y, c) + padded16(x, y - 1, c)
#                       + padded16(x + 1, y, c) + padded16(x, y + 1, c)) / 4
#   curved(x, y, c)   = lut(sharpen(x, y, c))
# The image is planar as Halide's Buffer (x fastest, then y, then c): numpy shape (c, y, x).
# Halide infers lut's domain from sharpen's type (uint16: 65536 entries) and padded's from
# its readers; here they are declared. padded.store_at(curved, yo) is left out (no store_at).
import numpy as np

import schedlang as sl
from tests.halide_ports.check import build_and_run, loop_nest, outline

CHANNELS, HEIGHT, WIDTH = 3, 37, 45


def _pipeline():
    inp = sl.placeholder((CHANNELS, HEIGHT, WIDTH), "uint8", name="input")
    lut = sl.compute((65536,), lambda i: sl.min(sl.max(sl.power(i.astype("float32") / 255.0, sl.const(1.2)) * 255.0,
                                                       0.0), 255.0).astype("uint8"), name="lut")
    padded = sl.compute((CHANNELS, HEIGHT + 2, WIDTH + 2),
                        lambda c, y, x: inp[c, sl.min(sl.max(y - 1, 0), HEIGHT - 1), sl.min(sl.max(x - 1, 0), WIDTH - 1)],
                        name="padded")     # shifted by one: padded[c, y + 1, x + 1] is Halide's padded(x, y, c)
    padded16 = sl.compute(padded.shape, lambda c, y, x: padded[c, y, x].astype("uint16"), name="padded16")
    sharpen = sl.compute((CHANNELS, HEIGHT, WIDTH),
                         lambda c, y, x: padded16[c, y + 1, x + 1] * 2 - (padded16[c, y + 1, x] + padded16[c, y, x + 1]
                                                                          + padded16[c, y + 1, x + 2]
                                                                          + padded16[c, y + 2, x + 1]) // 4,
                         name="sharpen")
    curved = sl.compute((CHANNELS, HEIGHT, WIDTH), lambda c, y, x: lut[sharpen[c, y, x].astype("int32")], name="curved")
    return inp, lut, padded, padded16, sharpen, curved


def _numpy(image):
    i = np.arange(65536, dtype="float32")
    lut = np.clip(np.power(i / np.float32(255), np.float32(1.2)) * np.float32(255), 0, 255).astype("uint8")
    p = np.pad(image, ((0, 0), (1, 1), (1, 1)), mode="edge").astype("uint16")
    with np.errstate(over="ignore"):
        sharpen = p[:, 1:-1, 1:-1] * np.uint16(2) - (p[:, 1:-1, :-2] + p[:, :-2, 1:-1] + p[:, 1:-1, 2:]
                                                     + p[:, 2:, 1:-1]) // np.uint16(4)
    return lut[sharpen]


def test_schedule_for_cpu():
    inp, lut, padded, padded16, sharpen, curved = _pipeline()
    s = sl.create_schedule(curved.op)
    s[lut].compute_root()
    c, y, x = curved.op.axis
    s[curved].reorder(y, x, c)                  # Halide: curved.reorder(c, x, y).bound(c, 0, 3).unroll(c)
    s[curved].unroll(c)
    yo, yi = s[curved].split(y, factor=16)
    s[curved].parallel(yo)
    s[sharpen].compute_at(s[curved], yi)
    sxo, sxi = s[sharpen].split(sharpen.op.axis[2], factor=8)      # Halide: sharpen.vectorize(x, 8)
    s[sharpen].vectorize(sxi)
    s[padded16].compute_inline()                # Halide inlines padded16 by default
    s[padded].compute_at(s[curved], yi)         # Halide: padded.store_at(curved, yo).compute_at(curved, yi)
    pxo, pxi = s[padded].split(padded.op.axis[2], factor=16)       # Halide: padded.vectorize(x, 16)
    s[padded].vectorize(pxi)
    nest = loop_nest(s, [inp, curved])
    assert nest.startswith(outline("""
        alloc lut [65536]
        for i in 0..65536
        parallel y.outer in 0..3
          for y.inner in 0..16"""))
    assert "alloc padded [3, 3, 47]" in nest and "alloc sharpen [3, 1, 45]" in nest      # one row of each per yi
    assert nest.endswith("\n    for x in 0..45\n      unrolled c_2 in 0..3")      # c innermost, unrolled
    image = np.random.default_rng(0).integers(0, 256, (CHANNELS, HEIGHT, WIDTH), dtype="uint8")
    (out,) = build_and_run(s, [inp, curved], [image], [np.empty((CHANNELS, HEIGHT, WIDTH), "uint8")])
    want = _numpy(image)
    np.testing.assert_array_equal(out, want)
    (ref,) = sl.reference([curved], {inp: image})
    np.testing.assert_array_equal(ref, want)
