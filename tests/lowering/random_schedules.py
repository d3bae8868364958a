"""Small programs and a generator of random valid schedules for them.

The schedule-invariance tests (test_invariance.py) build every generated schedule and
compare its output with the reference evaluator. Replay one case from the command line:

    python -m tests.lowering.random_schedules PROGRAM SEED   # e.g. gemm_13x7x33 12345

which prints the schedule as Python, every IR level, and the mismatch of a normal and
a bounds-checked build. (The tests print the seed of a failing case.)

The generator only uses public primitives and only makes calls it believes valid, so a
ScheduleError from one of its calls is a generator bug or a compiler bug:

1. dataflow: the re-layout of the auto-scheduler's tile_relayout sketch (legal.relayout_axis:
   a conv2d's weights copied with the output channel split and its inner part innermost),
   cache_read (readers = all or some consumers), cache_write (before the stage
   is scheduled), rfactor (after splitting/fusing reduction axes), compute_inline of
   injective intermediate stages;
2. loops: split (factor or nparts, dividing or not, larger than the extent), tile, fuse
   of adjacent loops of one kind, reorder (any permutation of any subset); then a few
   more cache_reads, for readers whose loops are already scheduled;
3. compute_at of a stage at any loop of its only (non-inlined) consumer, then more
   loop transformations of that consumer (the attached stage follows its loop) and
   now and then compute_root again;
4. annotations: parallel (one data-parallel loop per stage, never inside another
   parallel loop, also not through compute_at), vectorize (a data-parallel loop inside
   the parallel one and outside every attach point), unroll (small loops), the pragma
   auto_unroll_max_step, storage_align on intermediate buffers.
"""
from __future__ import annotations

import random
import sys
import zlib
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional

import numpy as np

import schedlang as sl
from schedlang.schedule import legal
from schedlang.schedule.legal import PRAGMA_STEPS, effective_consumers, is_compute, is_live, is_reduction
from schedlang.tensor.axis import REDUCE
from schedlang.topi import nn
from tests import programs

# ---------------------------------------------------------------------------------------
# Programs
# ---------------------------------------------------------------------------------------


@dataclass
class Program:
    """A program to schedule: its inputs, outputs, how to draw inputs, and tolerances."""

    name: str
    inputs: List[sl.Tensor]
    outputs: List[sl.Tensor]
    draw: Callable[[np.random.Generator], List[np.ndarray]]
    rtol: float = 1e-4
    atol: float = 1e-4     # relative to max(1, max |reference|)
    notes: str = ""

    @property
    def args(self) -> List[sl.Tensor]:
        return list(self.inputs) + list(self.outputs)

    def schedule(self) -> sl.Schedule:
        return sl.create_schedule([o.op for o in self.outputs])


def _uniform(shape, dtype="float32", lo=-1.0, hi=1.0):
    return lambda rng: rng.uniform(lo, hi, size=shape).astype(dtype)


def _ints(shape, lo=-9, hi=10):
    return lambda rng: rng.integers(lo, hi, size=shape).astype("int32")


def _draw_all(*drawers):
    return lambda rng: [d(rng) for d in drawers]


def gemm(M, N, K, dtype="float32") -> Program:
    A, B, C = programs.gemm(M, N, K, dtype)
    if dtype == "int32":
        draw = _draw_all(_ints((M, K)), _ints((K, N)))
        return Program(f"gemm_i32_{M}x{N}x{K}", [A, B], [C], draw, rtol=0, atol=0)
    return Program(f"gemm_{M}x{N}x{K}", [A, B], [C], _draw_all(_uniform((M, K)), _uniform((K, N))))


def gemm_packed(M, N, K, bn) -> Program:
    """The TVM CPU GEMM tutorial: B packed into (N/bn, K, bn) panels by an IndexMap."""
    A, B, _, C = programs.packed_gemm(M, N, K, bn)
    return Program(f"gemm_packed_{M}x{N}x{K}_bn{bn}", [A, B], [C], _draw_all(_uniform((M, K)), _uniform((K, N))))


def conv2d(CI, H, W, CO, KH, KW, pad) -> Program:
    """NCHW conv (batch 1 dropped), stride 1, zero padding through if_then_else."""
    data = sl.placeholder((CI, H, W), name="data")
    weight = sl.placeholder((CO, CI, KH, KW), name="weight")
    PH, PW = H + 2 * pad, W + 2 * pad
    padded = sl.compute((CI, PH, PW), lambda c, y, x: sl.if_then_else(
        sl.all(y >= pad, y < H + pad, x >= pad, x < W + pad), data[c, y - pad, x - pad], sl.const(0.0, "float32")),
        name="pad")
    OH, OW = PH - KH + 1, PW - KW + 1
    rc = sl.reduce_axis((0, CI), name="rc")
    rh = sl.reduce_axis((0, KH), name="rh")
    rw = sl.reduce_axis((0, KW), name="rw")
    out = sl.compute((CO, OH, OW), lambda f, y, x: sl.sum(
        padded[rc, y + rh, x + rw] * weight[f, rc, rh, rw], axis=[rc, rh, rw]), name="conv")
    draw = _draw_all(_uniform((CI, H, W)), _uniform((CO, CI, KH, KW)))
    return Program(f"conv2d_{CI}x{H}x{W}_co{CO}_k{KH}{KW}_p{pad}", [data, weight], [out], draw)


def softmax(R, C) -> Program:
    """Row softmax as four stages: row max, exp, row sum, normalize."""
    X = sl.placeholder((R, C), name="X")
    k1 = sl.reduce_axis((0, C), name="k1")
    mx = sl.compute((R,), lambda i: sl.max(X[i, k1], axis=k1), name="rowmax")
    ex = sl.compute((R, C), lambda i, j: sl.exp(X[i, j] - mx[i]), name="expx")
    k2 = sl.reduce_axis((0, C), name="k2")
    sm = sl.compute((R,), lambda i: sl.sum(ex[i, k2], axis=k2), name="rowsum")
    out = sl.compute((R, C), lambda i, j: ex[i, j] / sm[i], name="softmax")
    return Program(f"softmax_{R}x{C}", [X], [out], _draw_all(_uniform((R, C), lo=-4, hi=4)))


def eltwise_chain(N, M, dtype="float32") -> Program:
    """out[i, j] = exp(A[j, i]) * b[j] + 1: a transpose (IndexMap), a broadcast, two elementwise stages."""
    A = sl.placeholder((N, M), dtype, name="A")
    b = sl.placeholder((N,), dtype, name="b")
    T = sl.compute((M, N), lambda i, j: A[j, i], name="AT")
    E = sl.compute((M, N), lambda i, j: sl.exp(T[i, j]) * b[j], name="E")
    out = sl.compute((M, N), lambda i, j: E[i, j] + sl.const(1.0, dtype), name="out")
    draw = _draw_all(_uniform((N, M), dtype), _uniform((N,), dtype))
    if dtype == "float16":   # inlining skips the float16 rounding of intermediates
        return Program(f"eltwise_f16_{N}x{M}", [A, b], [out], draw, rtol=4e-3, atol=4e-3)
    return Program(f"eltwise_{N}x{M}", [A, b], [out], draw)


def row_reduce(R, C, kind="sum", dtype="float32") -> Program:
    X = sl.placeholder((R, C), dtype, name="X")
    out = nn.row_reduce(X, kind, name=f"row{kind}")
    if dtype == "int32":
        return Program(f"row{kind}_i32_{R}x{C}", [X], [out], _draw_all(_ints((R, C), -1000, 1000)), rtol=0, atol=0)
    lo, hi = (0.6, 1.5) if kind == "prod" else (-1.0, 1.0)
    return Program(f"row{kind}_{R}x{C}", [X], [out], _draw_all(_uniform((R, C), dtype, lo, hi)))


def blur(H, W, dtype="float32") -> Program:
    """The Halide blur: a 3-tap average over x, then over y."""
    A = sl.placeholder((H + 2, W + 2), dtype, name="A")
    third = sl.const(1.0 / 3.0, dtype)
    bx = sl.compute((H + 2, W), lambda y, x: (A[y, x] + A[y, x + 1] + A[y, x + 2]) * third, name="blur_x")
    by = sl.compute((H, W), lambda y, x: (bx[y, x] + bx[y + 1, x] + bx[y + 2, x]) * third, name="blur_y")
    name = "blur" if dtype == "float32" else f"blur_{dtype.replace('float', 'f')}"
    tol = 1e-12 if dtype == "float64" else 1e-5
    return Program(f"{name}_{H}x{W}", [A], [by], _draw_all(_uniform((H + 2, W + 2), dtype)), rtol=tol, atol=tol)


def int_mix(R, C) -> Program:
    """int32: a transpose, an elementwise stage with // and %, a row max over it."""
    X = sl.placeholder((C, R), "int32", name="X")
    T = sl.compute((R, C), lambda i, j: X[j, i], name="XT")
    Y = sl.compute((R, C), lambda i, j: T[i, j] * 3 + (T[i, j] + j) % 7 - i // 2, name="Y")
    k = sl.reduce_axis((0, C), name="k")
    out = sl.compute((R,), lambda i: sl.max(Y[i, k], axis=k), name="ymax")
    return Program(f"intmix_{R}x{C}", [X], [out], _draw_all(_ints((C, R), -50, 50)), rtol=0, atol=0)


def masked_reductions(R, C) -> Program:
    """Two outputs of one schedule: a custom comm_reducer (max of |x|) and a sum, both
    with where= conditions that depend on the row (triangular masks)."""
    X = sl.placeholder((R, C), name="X")
    absmax = sl.comm_reducer(lambda a, b: sl.max(sl.abs(a), sl.abs(b)), lambda dt: sl.const(0.0, dt), name="absmax")
    k1 = sl.reduce_axis((0, C), name="k1")
    amax = sl.compute((R,), lambda i: absmax(X[i, k1], axis=k1, where=k1 <= i + 3), name="amax")
    k2 = sl.reduce_axis((0, C), name="k2")
    tri = sl.compute((R,), lambda i: sl.sum(X[i, k2] * X[i, k2], axis=k2, where=k2 >= i), name="trisum")
    return Program(f"masked_{R}x{C}", [X], [amax, tri], _draw_all(_uniform((R, C))))


def gemm_int8(M, N, K) -> Program:
    """Quantized GEMM: int8 inputs widened to int32 products and sums."""
    A = sl.placeholder((M, K), "int8", name="A")
    B = sl.placeholder((K, N), "int8", name="B")
    k = sl.reduce_axis((0, K), name="k")
    C = sl.compute((M, N), lambda i, j: sl.sum(A[i, k].astype("int32") * B[k, j].astype("int32"), axis=k), name="C")
    draw = lambda rng: [rng.integers(-128, 128, size=(M, K)).astype("int8"),
                        rng.integers(-128, 128, size=(K, N)).astype("int8")]
    return Program(f"gemm_i8_{M}x{N}x{K}", [A, B], [C], draw, rtol=0, atol=0)


def layernorm(R, C) -> Program:
    """Row sum, mean (elementwise), row variance (a reduction reading the mean),
    normalize with rsqrt and a broadcast scale and shift."""
    X = sl.placeholder((R, C), name="X")
    gamma = sl.placeholder((C,), name="gamma")
    beta = sl.placeholder((C,), name="beta")
    inv_c = sl.const(1.0 / C, "float32")
    k1 = sl.reduce_axis((0, C), name="k1")
    total = sl.compute((R,), lambda i: sl.sum(X[i, k1], axis=k1), name="rowsum")
    mean = sl.compute((R,), lambda i: total[i] * inv_c, name="mean")
    k2 = sl.reduce_axis((0, C), name="k2")
    var = sl.compute((R,), lambda i: sl.sum((X[i, k2] - mean[i]) * (X[i, k2] - mean[i]), axis=k2), name="var")
    out = sl.compute((R, C), lambda i, j: (X[i, j] - mean[i]) * sl.rsqrt(var[i] * inv_c + sl.const(1e-5, "float32"))
                     * gamma[j] + beta[j], name="layernorm")
    draw = _draw_all(_uniform((R, C), lo=-2, hi=3), _uniform((C,)), _uniform((C,)))
    return Program(f"layernorm_{R}x{C}", [X, gamma, beta], [out], draw)


def index_maps(R, C1, C2) -> Program:
    """IndexMaps only, then one elementwise stage: a concat (if_then_else over two inputs),
    a transpose, and reads at strided and modular coordinates."""
    X = sl.placeholder((R, C1), name="X")
    Y = sl.placeholder((R, C2), name="Y")
    C = C1 + C2
    cat = sl.compute((R, C), lambda i, j: sl.if_then_else(j < C1, X[i, j], Y[i, j - C1]), name="concat")
    T = sl.compute((C, R), lambda i, j: cat[j, i], name="T")
    out = sl.compute((C // 2, R), lambda i, j: T[2 * i, j] - T[2 * i + 1, j] * X[j, (i * 5) % C1], name="mix")
    return Program(f"indexmaps_{R}x{C1}_{C2}", [X, Y], [out], _draw_all(_uniform((R, C1)), _uniform((R, C2))))


def tuple_outputs(R, C) -> Program:
    """A multi-output elementwise stage (two outputs in one loop nest) feeding a tuple
    reduction (argmax: index and value), whose two outputs are the program's outputs.
    Integers, distinct per row: no ties, so every reduction order picks the same index."""
    X = sl.placeholder((R, C), "int32", name="X")
    idx = sl.placeholder((R, C), "int32", name="idx")
    times4, minus7 = sl.compute((R, C), lambda i, j: (X[i, j] * 4, X[i, j] - 7), name="parts")

    argmax = programs.arg_reducer()
    k = sl.reduce_axis((0, C), name="k")
    am0, am1 = sl.compute((R,), lambda i: argmax((idx[i, k], times4[i, k] - minus7[i, k]), axis=k), name="amax")
    draw = lambda rng: [rng.permuted(np.tile(np.arange(-C, C, 2, dtype="int32"), (R, 1)), axis=1),
                        rng.permuted(np.tile(np.arange(C, dtype="int32"), (R, 1)), axis=1)]
    return Program(f"tuple_outputs_{R}x{C}", [X, idx], [am0, am1], draw, rtol=0, atol=0)


def all_programs() -> Dict[str, Program]:
    progs = [
        gemm(13, 7, 33), gemm(1, 33, 13), gemm(7, 13, 1), gemm(7, 16, 5, "int32"), gemm_int8(5, 17, 11),
        gemm_packed(7, 24, 13, 8),
        conv2d(3, 7, 7, 4, 3, 3, 1),
        softmax(7, 33), layernorm(5, 37),
        eltwise_chain(13, 7), eltwise_chain(7, 33, "float16"),
        row_reduce(13, 33, "sum"), row_reduce(5, 37, "max", "int32"), row_reduce(1, 64, "sum"),
        row_reduce(7, 13, "prod"), index_maps(9, 12, 5),
        blur(13, 7), blur(7, 33, "float64"),
        int_mix(7, 13), masked_reductions(9, 13), tuple_outputs(7, 13),
    ]
    return {p.name: p for p in progs}


# ---------------------------------------------------------------------------------------
# The random schedule generator
# ---------------------------------------------------------------------------------------

SCOPES = ("global", "shared", "local")


def case_seed(program: str, index: int) -> int:
    """A stable seed per (program, case index), independent of PYTHONHASHSEED."""
    return zlib.crc32(f"{program}/{index}".encode()) & 0x7FFFFFFF


class Generator:
    """Draws one random valid schedule (see the module docstring for what it draws)."""

    def __init__(self, program: Program, seed: int):
        self.program = program
        self.seed = seed
        self.rng = random.Random(seed)
        self.s = program.schedule()
        self.cache_stages = set()

    def _split_args(self, st, ivar) -> Dict[str, int]:
        """Random split arguments for loop ivar of stage st: factor= or nparts=."""
        value = legal.random_factor(self.rng, st.static_extents()[ivar])
        return {"factor": value} if self.rng.random() < 0.7 else {"nparts": value}

    def run(self) -> sl.Schedule:
        self.dataflow()
        for st in list(self.s.stages):
            if is_live(st):
                self.loops(st)
        self.late_cache_read()
        self.attach()
        self.annotate()
        return self.s

    # ---- 1. dataflow -----------------------------------------------------------------
    def dataflow(self) -> None:
        rng, s = self.rng, self.s
        for st in list(s.stages):      # re-lay out the inputs of a conv2d's channel vector (legal.relayout_axis)
            found = legal.relayout_axis(st) if is_compute(st) else None
            if found and rng.random() < 0.3:
                for tensor, dim in found[1]:
                    copy = s[s.cache_read(tensor, "global", [st])]
                    axes = list(copy.op.axis)
                    outer, inner = copy.split(axes[dim], factor=legal.random_factor(rng, int(axes[dim].dom.extent)))
                    copy.reorder(*axes[:dim], outer, *axes[dim + 1:], inner)
                    self.cache_stages.add(s[s.cache_write(copy.op.output(0), "global")].name)
                    copy.compute_inline()
        for st in list(s.stages):      # cache_read inputs and intermediates
            readers = [c for c in s._consumers(st) if c.attach_type != "inline"]   # a re-layout inlined one
            if st.is_output or st.attach_type == "inline" or not readers or rng.random() > 0.2:
                continue
            if rng.random() < 0.3 and len(readers) > 1:
                readers = rng.sample(readers, rng.randint(1, len(readers)))
            t = s.cache_read(st.op.output(0), rng.choice(SCOPES), [s[c] for c in readers])
            self.cache_stages.add(s[t].name)
        for st in list(s.stages):      # cache_write and rfactor, in a random mix
            if not is_compute(st) or st.attach_type == "inline":
                continue
            if rng.random() < 0.2 and not st.relations:
                outputs = [st.op.output(i) for i in range(st.op.num_outputs)]
                t = s.cache_write(outputs if len(outputs) > 1 else outputs[0], rng.choice(SCOPES))
                t = t[0] if isinstance(t, list) else t
                self.cache_stages.add(s[t].name)
                st = s[t]
            if is_reduction(st) and rng.random() < 0.3:
                self.rfactor(st)
        for st in list(s.stages):      # compute_inline injective intermediates
            if (legal.can_inline(st) and st.attach_type != "inline"
                    and rng.random() < (0.15 if st.name in self.cache_stages else 0.45)):
                st.compute_inline()

    def late_cache_read(self) -> None:
        """cache_read after the readers' loops are scheduled (they keep their schedule)."""
        rng, s = self.rng, self.s
        for st in list(s.stages):
            readers = [c for c in s._consumers(st) if c.attach_type != "inline"]
            if st.is_output or st.attach_type != "root" or not readers or rng.random() > 0.1:
                continue
            t = s.cache_read(st.op.output(0), rng.choice(SCOPES), readers)
            self.cache_stages.add(s[t].name)

    def rfactor(self, st) -> None:
        rng = self.rng
        red = [a for a in st.leaf_iter_vars if a.kind == REDUCE]
        if len(red) > 1 and rng.random() < 0.3:       # fuse some adjacent reduction axes first
            i = rng.randrange(len(red) - 1)
            n = rng.randint(2, len(red) - i)
            st.fuse(*red[i:i + n])
            red = [a for a in st.leaf_iter_vars if a.kind == REDUCE]
        axis = rng.choice(red)
        if rng.random() < 0.8:
            outer, inner = st.split(axis, **self._split_args(st, axis))
            axis = rng.choice([outer, inner])
        self.s.rfactor(st.op.output(0), axis, rng.randint(0, len(st.op.axis)))

    # ---- 2. loop structure ----------------------------------------------------------------
    def loops(self, st, count: Optional[int] = None) -> None:
        rng = self.rng
        for _ in range(rng.choice([0, 1, 2, 2, 3, 4, 5]) if count is None else count):
            leaves = list(st.leaf_iter_vars)
            ext = st.static_extents()
            op = rng.choice(["split", "split", "split", "tile", "fuse", "reorder", "reorder"])
            if op == "split":
                a = rng.choice(leaves)
                st.split(a, **self._split_args(st, a))
            elif op == "tile" and len(leaves) >= 2:
                x, y = rng.sample(leaves, 2)
                st.tile(x, y, legal.random_factor(rng, ext[x]), legal.random_factor(rng, ext[y]))
            elif op == "fuse":
                runs = legal.fusable_runs(leaves)
                if runs:
                    i = rng.choice(runs)
                    n = 2
                    while i + n < len(leaves) and leaves[i + n].kind == leaves[i].kind and rng.random() < 0.4:
                        n += 1
                    st.fuse(*leaves[i:i + n])
            elif op == "reorder" and len(leaves) >= 2:
                if rng.random() < 0.6:
                    order = leaves[:]
                    rng.shuffle(order)
                else:
                    order = rng.sample(leaves, rng.randint(2, len(leaves)))
                st.reorder(*order)

    # ---- 3. compute_at ---------------------------------------------------------------
    def attach(self) -> None:
        rng, s = self.rng, self.s
        for st in reversed(list(s.stages)):     # consumers first
            if not is_live(st) or st.is_output or rng.random() > 0.45:
                continue
            consumers = effective_consumers(s, st)
            if len(consumers) != 1:
                continue
            target = consumers[0]
            st.compute_at(target, rng.choice(target.leaf_iter_vars))
        for st in list(s.stages):   # reshape loops that stages are computed at (they follow)
            if is_live(st) and any(c.attach_stage is st for c in s.stages) and rng.random() < 0.3:
                self.loops(st, rng.randint(1, 2))
        for st in list(s.stages):   # and send a few attached stages back to the root
            if st.attach_type == "at" and rng.random() < 0.08:
                st.compute_root()

    # ---- 4. annotations --------------------------------------------------------------
    def annotate(self) -> None:
        rng, s = self.rng, self.s
        live = [st for st in s.stages if is_live(st)]
        for st in sorted(live, key=legal.attach_depth):     # outer stages first
            leaves = list(st.leaf_iter_vars)
            ext = st.static_extents()
            par_pos = -1
            if not legal.inside_parallel(st) and rng.random() < 0.4:
                cands = legal.parallel_candidates(st)
                if cands:
                    par_pos = rng.choice(cands)
                    st.parallel(leaves[par_pos])
            if rng.random() < 0.5:
                cands = legal.vectorize_candidates(s, st, par_pos)
                if cands:
                    # mostly the innermost loop, sometimes another one
                    i = cands[-1] if rng.random() < 0.6 else rng.choice(cands)
                    st.vectorize(leaves[i])
            budget = legal.MAX_UNROLL_PRODUCT
            for a in leaves:
                if legal.may_unroll(st, a, budget) and rng.random() < 0.2:
                    st.unroll(a)
                    budget //= ext[a]
            if rng.random() < 0.15:
                st.pragma(rng.choice(leaves), "auto_unroll_max_step", rng.choice(PRAGMA_STEPS))
            align_p = 0.5 if st.name in self.cache_stages else 0.15
            if not st.is_output and len(st.op.axis) >= 2 and rng.random() < align_p:
                dim = rng.choice(list(st.op.axis)[:-1])
                factor = rng.choice([1, 2, 4, 8, 16, 3, 5])
                st.storage_align(dim, factor, rng.randrange(factor))


def random_schedule(program: Program, seed: int) -> sl.Schedule:
    return Generator(program, seed).run()


# ---------------------------------------------------------------------------------------
# Running a case
# ---------------------------------------------------------------------------------------

def _sentinel(dtype: np.dtype):
    return np.nan if dtype.kind == "f" else -123456789


def checked_target() -> sl.Target:
    """The host CPU target with every load and store checked against its buffer."""
    return sl.Target.create("llvm").with_options(bounds_check=True)


def run_case(program: Program, s: sl.Schedule, seed: int, target="llvm") -> Optional[str]:
    """Build s, run it on random inputs and compare with the reference; None when it
    matches, else a description of the mismatch."""
    rng = np.random.default_rng(seed)
    inputs = program.draw(rng)
    expected = sl.reference(program.outputs, dict(zip(program.inputs, inputs)))
    mod = sl.build(s, program.args, target=target)
    outs = [np.full(o.shape, _sentinel(np.dtype(o.dtype)), dtype=o.dtype) for o in program.outputs]
    copies = [x.copy() for x in inputs]
    mod(*inputs, *outs)
    problems = []
    for x, c, t in zip(inputs, copies, program.inputs):
        if not np.array_equal(x, c):
            problems.append(f"input {t.name} was modified")
    for got, want, t in zip(outs, expected, program.outputs):
        problems += compare(got, want, program.rtol, program.atol, t.name)
    return "\n".join(problems) or None


def compare(got: np.ndarray, want: np.ndarray, rtol: float, atol: float, name: str) -> List[str]:
    got64, want64 = got.astype(np.float64), want.astype(np.float64)
    scale = max(1.0, float(np.max(np.abs(want64)))) if want.size else 1.0
    bad = ~(np.abs(got64 - want64) <= rtol * np.abs(want64) + atol * scale)
    if not bad.any():
        return []
    idx = np.argwhere(bad)
    first = tuple(int(v) for v in idx[0])
    return [f"{name}: {len(idx)} of {got.size} elements differ (rtol={rtol}, atol={atol}*{scale:.3g}); "
            f"first at {first}: got {got[first]!r}, expected {want[first]!r}; "
            f"bad indices (first 8): {[tuple(int(v) for v in i) for i in idx[:8]]}"]


def replay(program_name: str, seed: int, show_ir: bool = True) -> None:
    program = all_programs()[program_name]
    s = random_schedule(program, seed)
    print(f"# program {program_name}, seed {seed}\n{s.to_python()}\n")
    if show_ir:
        print(sl.lower(s, program.args, level="all"))
    print("build:", run_case(program, s, seed) or "OK: matches the reference")
    print("bounds-checked build:", run_case(program, s, seed, checked_target()) or "OK: matches the reference")


if __name__ == "__main__":
    replay(sys.argv[1], int(sys.argv[2]), show_ir="--no-ir" not in sys.argv)
