"""A schedule is its step list: it prints as Python, round-trips through JSON, and
replays on a fresh schedule of the same algorithm to the same loop nest."""
import ast
import json

import numpy as np
import pytest

import schedlang as sl
from tests import programs
from schedlang.schedule import steps as steps_mod
from schedlang.topi import cpu


# ---- algorithms and their schedules: (args, outputs, schedule(s), lower target) ----------
def gemm():
    """The TVM CPU GEMM tutorial: packed B, cache_write, tile, compute_at, split, reorder,
    unroll, vectorize, parallel."""
    A, B, packedB, C = programs.packed_gemm(32, 32, 32, bn=8)

    def schedule(s):
        cpu.schedule_matmul_packed(s, C)

    return [A, B, C], [C.op], schedule, "llvm"


def softmax():
    """Row softmax: exp inlined, max and sum computed at the output's row loop."""
    M, N = 4, 16
    x = sl.placeholder((M, N), name="x")
    k = sl.reduce_axis((0, N), name="k")
    k2 = sl.reduce_axis((0, N), name="k2")
    mx = sl.compute((M,), lambda i: sl.max(x[i, k], axis=k), name="mx")
    e = sl.compute((M, N), lambda i, j: sl.exp(x[i, j] - mx[i]), name="e")
    sm = sl.compute((M,), lambda i: sl.sum(e[i, k2], axis=k2), name="sm")
    out = sl.compute((M, N), lambda i, j: e[i, j] / sm[i], name="out")

    def schedule(s):
        s[e].compute_inline()
        i, j = s[out].op.axis
        s[mx].compute_at(s[out], i)
        s[sm].compute_at(s[out], i)
        s[out].vectorize(j)
        s[out].parallel(i)

    return [x, out], [out.op], schedule, "llvm"


def rfactor_rows():
    """A row sum whose reduction is split and factored; the partials are computed per row."""
    A, C = programs.row_sum(4, 32, name="C")
    (k,) = C.op.reduce_axis

    def schedule(s):
        ko, ki = s[C].split(k, factor=8)
        CF = s.rfactor(C, ki, factor_axis=1)
        s[CF].compute_at(s[C], s[C].op.axis[0])
        s[CF].vectorize(s[CF].op.axis[1])
        s[C].unroll(s[C].op.reduce_axis[0])

    return [A, C], [C.op], schedule, "llvm"


def cache_read_align():
    """cache_read into a tile-sized copy, storage_align, set_scope and double_buffer it (the llvm
    target ignores double_buffer), and pragmas."""
    A = sl.placeholder((16, 16), name="A")
    C = sl.compute((16, 16), lambda i, j: A[i, j] * 2, name="C")

    def schedule(s):
        AA = s.cache_read(A, "global", [C])
        xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], 4, 4)
        s[AA].compute_at(s[C], yo)
        s[AA].storage_align(s[AA].op.axis[0], 8, 1)
        s[AA].set_scope("local")
        s[AA].double_buffer()
        s[C].pragma(xo, "auto_unroll_max_step", 16)
        s[C].pragma(yo, "unroll_explicit")
        s[C].pragma(yo, "my_free_form_key", "v")

    return [A, C], [C.op], schedule, "llvm"


def pipelined():
    """A copy pipelined over three buffers (the llvm target ignores it, as double_buffer)."""
    A = sl.placeholder((16, 16), name="A")
    C = sl.compute((16, 16), lambda i, j: A[i, j] * 2, name="C")

    def schedule(s):
        AA = s.cache_read(A, "local", [C])
        xo, xi = s[C].split(C.op.axis[0], 4)
        s[AA].compute_at(s[C], xo)
        s[AA].pipeline(3)

    return [A, C], [C.op], schedule, "llvm"


def fuse_bind():
    """Fuse both axes, split, bind to blocks and threads (lowered for cuda: llvm cannot bind)."""
    A = sl.placeholder((16, 16), name="A")
    C = sl.compute((16, 16), lambda i, j: A[i, j] + 1, name="C")

    def schedule(s):
        f = s[C].fuse(*s[C].op.axis)
        bo, to = s[C].split(f, factor=32)
        s[C].bind(bo, sl.thread_axis("blockIdx.x"))
        s[C].bind(to, sl.thread_axis("threadIdx.x"))

    return [A, C], [C.op], schedule, "cuda"


def misc():
    """nparts split, fused reduction axes, compute_at undone by compute_root, a prefetch."""
    A = sl.placeholder((4, 8, 6), name="A")
    r = sl.reduce_axis((0, 8), name="r")
    q = sl.reduce_axis((0, 6), name="q")
    B = sl.compute((4, 8, 6), lambda i, j, l: A[i, j, l] * 3, name="B")
    C = sl.compute((4,), lambda i: sl.sum(B[i, r, q], axis=[r, q]), name="C")

    def schedule(s):
        rq = s[C].fuse(r, q)
        ro, ri = s[C].split(rq, nparts=3)
        s[B].compute_at(s[C], ro)
        s[B].compute_root()
        s[B].fuse(s[B].op.axis[1], s[B].op.axis[2])
        s[C].unroll(ri)
        s[C].prefetch(B, ro, 1)

    return [A, C], [C.op], schedule, "llvm"


def tensorized():
    """tensorize with a declared intrinsic (named in the step by its key)."""
    from tests.tensorize.test_tensorize import axpy_intrin, axpy_program
    A, B, C = axpy_program()
    intrin = axpy_intrin(8)

    def schedule(s):
        jo, ji = s[C].split(C.op.axis[1], factor=8)
        s[C].tensorize(ji, intrin)

    return [A, B, C], [C.op], schedule, "llvm"


CASES = {f.__name__: f for f in (gemm, softmax, rfactor_rows, cache_read_align, pipelined, fuse_bind, misc,
                                  tensorized)}


def scheduled(name):
    args, outs, schedule, target = CASES[name]()
    s = sl.create_schedule(outs)
    schedule(s)
    return s, args, outs, target


def tile_text(s, args, target):
    return sl.lower(s, args, level="tile", target=target)


# ---- (a) to_python, (b) JSON and the step list replay --------------------------------------
def replay(kind, s, outs):
    """A fresh schedule of outs given s's steps by to_python (exec'd), to_json or the step list;
    the first two print again exactly as s does."""
    fresh = sl.create_schedule(outs)
    if kind == "python":
        source = s.to_python()
        ast.parse(source)
        exec(source, {"s": fresh, "sl": sl})
        assert fresh.to_python() == source
    elif kind == "json":
        fresh.apply_json(s.to_json())
        assert fresh.to_json() == s.to_json()
    else:
        fresh.apply_steps(s.steps)
    return fresh


@pytest.mark.parametrize("kind", ["python", "json", "steps"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_replays_to_the_same_loop_nest(name, kind):
    s, args, outs, target = scheduled(name)
    fresh = replay(kind, s, outs)
    assert fresh.steps == s.steps
    assert tile_text(fresh, args, target) == tile_text(s, args, target)


@pytest.mark.parametrize("name", ["gemm", "rfactor_rows", "misc"])
def test_replayed_schedule_computes_the_reference(name):
    s, args, outs, target = scheduled(name)
    fresh = sl.create_schedule(outs).apply_json(s.to_json())
    rng = np.random.default_rng(0)
    inputs = {a: rng.standard_normal([int(d) for d in a.shape]).astype("float32") for a in args[:-1]}
    out = np.zeros([int(d) for d in args[-1].shape], "float32")
    sl.build(fresh, args)(*inputs.values(), out)
    expected = sl.reference([args[-1]], inputs)
    expected = expected[0] if isinstance(expected, (list, tuple)) else expected
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)


# ---- (c) each step round-trips ----------------------------------------------------------
def all_steps():
    out = []
    for name in sorted(CASES):
        out += scheduled(name)[0].steps
    return out


def test_every_step_round_trips_through_json():
    for step in all_steps():
        data = step.to_json()
        assert steps_mod.Step.from_json(data) == step
        assert steps_mod.Step.from_json(json.loads(json.dumps(data))) == step


def test_the_cases_cover_every_kind_of_step():
    seen = {step.primitive for step in all_steps()}
    assert seen == set(steps_mod._REGISTRY) - {""}


def test_numpy_int_factors_record_plain_ints():
    args, outs, schedule, target = misc()
    A, C = args
    s = sl.create_schedule(outs)
    s[C].split(s[C].op.axis[0], factor=np.int64(2))
    assert s.steps[-1] == steps_mod.Split("C", "i", 2, None)
    assert type(s.steps[-1].factor) is int
    json.loads(s.to_json())


def test_to_python_names_axes_as_the_primitives_do():
    # the reduce axis is already called 'i.outer', so split(i) makes 'i.outer2'
    A = sl.placeholder((8, 8), name="A")
    k = sl.reduce_axis((0, 8), name="i.outer")
    C = sl.compute((8,), lambda i: sl.sum(A[i, k], axis=k), name="C")
    s = sl.create_schedule(C.op)
    io, ii = s[C].split(s[C].op.axis[0], factor=2)
    assert io.name == "i.outer2"
    s[C].unroll(k)
    s[C].parallel(io)
    fresh = sl.create_schedule(C.op)
    exec(s.to_python(), {"s": fresh, "sl": sl})
    assert fresh.steps == s.steps
    assert sl.lower(fresh, [A, C]) == sl.lower(s, [A, C])


# ---- (d) bad JSON -----------------------------------------------------------------------
def bad(steps, version=1):
    return json.dumps({"version": version, "steps": steps})


@pytest.mark.parametrize("text, words", [
    (bad([{"primitive": "swizzle", "stage": "C"}]), ["unknown schedule step 'swizzle'", "split"]),
    # an empty name once matched the base of unroll/vectorize/parallel (issue 15, item 11)
    (bad([{"primitive": "", "stage": "C", "axis": "i"}]), ["unknown schedule step ''", "known steps: bind"]),
    (bad([{"primitive": ["split"], "stage": "C"}]), ["unknown schedule step ['split']"]),
    (bad([{"primitive": "split", "stage": "C", "axis": "i", "factor": 2, "color": "red"}]),
     ["unknown fields", "color"]),
    (bad([{"primitive": "split", "stage": "C"}]), ["missing fields", "axis"]),
    (bad([], version=2), ["version 2", "version 1"]),
    (json.dumps({"steps": []}), ["\"version\": 1"]),
    (json.dumps({"version": 1}), ["\"steps\" list"]),
    (bad(["split"]), ["JSON object"]),
    (json.dumps([1, 2]), ["\"version\": 1"]),
])
def test_bad_json_raises_value_error(text, words):
    args, outs, schedule, target = softmax()
    s = sl.create_schedule(outs)
    with pytest.raises(ValueError) as e:
        s.apply_json(text)
    for w in words:
        assert w in str(e.value)
    assert s.steps == []


def test_json_step_naming_an_unknown_axis_raises_schedule_error():
    args, outs, schedule, target = softmax()
    s = sl.create_schedule(outs)
    with pytest.raises(sl.ScheduleError) as e:
        s.apply_json(bad([{"primitive": "split", "stage": "out", "axis": "zz", "factor": 2}]))
    assert str(e.value).startswith("axis:") and "stage 'out'" in str(e.value)


def test_restore_undoes_the_primitives_since_snapshot():
    """snapshot()/restore() is the public seam the torch frontend's default schedules use to
    try a group of primitives all or nothing."""
    A, B, C = programs.gemm(16, 16, 16)
    s = sl.create_schedule(C.op)
    before = tile_text(s, [A, B, C], "llvm")
    saved = s.snapshot()
    io, ii = s[C].split(C.op.axis[0], factor=4)
    s[C].vectorize(C.op.axis[1])
    assert tile_text(s, [A, B, C], "llvm") != before
    s.restore(saved)
    assert tile_text(s, [A, B, C], "llvm") == before and s.steps == []
