"""Apache TVM peers, built with the same schedules as the schedlang kernels.

TVM is optional: `load()` returns the module or None with the reason, and every
builder here is only called when it returned the module. TVM 0.27 has no
te.create_schedule, so each schedule is written with te.create_prim_func and the
TensorIR schedule (tvm.s_tir.Schedule) using the equivalent primitives.
"""
from __future__ import annotations

import os
import re
from typing import Callable, Optional, Tuple

import numpy as np

_TVM = None
_WHY = ""


def load(num_threads: int) -> Tuple[Optional[object], str]:
    """Import TVM with its thread pool sized to num_threads: (tvm module or None, version or reason)."""
    global _TVM, _WHY
    if _TVM is None and not _WHY:
        os.environ.setdefault("TVM_NUM_THREADS", str(num_threads))
        try:
            import tvm  # noqa: F401
            import tvm.s_tir  # noqa: F401
            import tvm.topi  # noqa: F401
            from tvm import te  # noqa: F401
            _TVM = tvm
        except Exception as e:  # ImportError, or a broken install raising anything else
            first = str(e).splitlines()[0] if str(e) else ""
            _WHY = f"import tvm failed ({type(e).__name__}: {first}); pip install apache-tvm"
    return _TVM, (_TVM.__version__ if _TVM is not None else _WHY)


def _target(cpu: str, num_threads: int):
    # Name the CPU: with "native" TVM 0.27 silently picks a CPU without AVX.
    return _TVM.target.Target({"kind": "llvm", "mcpu": cpu, "num-cores": num_threads})


def _compile(sch, cpu: str, num_threads: int):
    """Compile a schedule; returns (callable, note about the vector registers the code uses)."""
    ex = _TVM.compile(sch.mod, target=_target(cpu, num_threads))
    try:
        asm = ex.mod.inspect_source("asm")
        regs = "zmm" if re.search(r"%zmm", asm) else "ymm" if re.search(r"%ymm", asm) else \
            "xmm only (no AVX: check mcpu)" if re.search(r"%xmm", asm) else "scalar"
    except Exception:
        regs = "?"
    return ex, regs


def tensor(x: np.ndarray):
    """A TVM tensor on the CPU holding a copy of x."""
    rt = _TVM.runtime
    return rt.tensor(x, _TVM.cpu()) if hasattr(rt, "tensor") else _TVM.nd.array(x, _TVM.cpu())


def checker(name: str, fn: Callable, out, ref: np.ndarray, rtol: float, atol: float) -> Callable[[], None]:
    """A check that fills the TVM tensor `out` with NaN, runs fn, and compares out with ref."""
    from harness import expect_close

    def check() -> None:
        out.copyfrom(np.full(tuple(out.shape), np.nan, np.float32))
        fn()
        expect_close(name, out.numpy(), ref, rtol, atol)
    return check


def gemm(M: int, N: int, K: int, cpu: str, num_threads: int, bn: int = 32) -> Tuple[Callable, str]:
    """The classic TVM CPU GEMM tutorial schedule (packed B, write cache, 32x32 tiles)."""
    tvm, te = _TVM, _TVM.te
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), name="k")
    packedB = te.compute((N // bn, K, bn), lambda x, y, z: B[y, x * bn + z], name="packedB")
    C = te.compute((M, N), lambda x, y: te.sum(A[x, k] * packedB[y // bn, k, tvm.tirx.indexmod(y, bn)], axis=k),
                   name="C")
    sch = tvm.s_tir.Schedule(te.create_prim_func([A, B, C]))
    c = sch.get_sblock("C")
    x, y, kk = sch.get_loops(c)
    xo, xi = sch.split(x, [None, bn])             # tile(x, y, bn, bn)
    yo, yi = sch.split(y, [None, bn])
    ko, ki = sch.split(kk, [None, 4])             # split k by 4
    sch.reorder(xo, yo, ko, xi, ki, yi)           # reorder(ko, xc, ki, yc) inside the tile
    cc = sch.cache_write(c, 0, "global")          # cache_write(C, "global") ...
    sch.reverse_compute_at(cc, yo)                # ... its write-back at yo (= compute_at(CC, yo))
    sch.unroll(ki)
    sch.vectorize(yi)
    sch.parallel(xo)
    sch.decompose_reduction(c, ko)                # zero-init outside the k loop, as te did
    p = sch.get_sblock("packedB")
    px, _, pz = sch.get_loops(p)
    sch.vectorize(pz)
    sch.parallel(px)
    return _compile(sch, cpu, num_threads)


def silu_and_mul(rows: int, cols: int, factor: int, fast_exp: bool, cpu: str, num_threads: int):
    """out[i, j] = silu(x[i, j]) * x[i, j + cols/2]; parallel rows, vectorized inner split of columns."""
    tvm, te, topi = _TVM, _TVM.te, _TVM.topi
    half = cols // 2
    x = te.placeholder((rows, cols), name="x")
    if fast_exp:
        neg = te.compute((rows, half), lambda i, j: -x[i, j], name="neg")
        e = topi.fast_exp(neg)
        out = te.compute((rows, half), lambda i, j: x[i, j] / (te.const(1.0, "float32") + e[i, j]) * x[i, j + half],
                         name="out")
        inline = [neg.op.name, e.op.name]
    else:
        out = te.compute((rows, half), lambda i, j: x[i, j] * te.sigmoid(x[i, j]) * x[i, j + half], name="out")
        inline = []
    sch = tvm.s_tir.Schedule(te.create_prim_func([x, out]))
    for name in inline:
        sch.compute_inline(sch.get_sblock(name))
    i, j = sch.get_loops(sch.get_sblock("out"))
    _, ji = sch.split(j, [None, factor])
    sch.vectorize(ji)
    sch.parallel(i)
    return _compile(sch, cpu, num_threads)


def softmax(rows: int, cols: int, factor: int, fast_exp: bool, vector_reductions: bool, cpu: str,
            num_threads: int, exp_at_row: bool = False):
    """Row softmax as stages: row max, exp (inlined), row sum, normalize; the reductions computed
    at the row loop, rows parallel, the normalize loop's inner split vectorized.
    vector_reductions: split each reduction by `factor` and rfactor the inner part into a
    vectorized `factor`-lane accumulator, as schedlang's schedule does.
    exp_at_row: compute exp once per row into a buffer at the row loop (vectorized) instead of
    inlining it into the sum and the normalize, as topi's x86 softmax schedule does."""
    tvm, te, topi = _TVM, _TVM.te, _TVM.topi
    X = te.placeholder((rows, cols), name="X")
    k = te.reduce_axis((0, cols), name="k")
    mx = te.compute((rows,), lambda i: te.max(X[i, k], axis=k), name="rowmax")
    if fast_exp:
        shifted = te.compute((rows, cols), lambda i, j: X[i, j] - mx[i], name="shifted")
        ex = topi.fast_exp(shifted)
        inline = [shifted.op.name, ex.op.name]
    else:
        ex = te.compute((rows, cols), lambda i, j: te.exp(X[i, j] - mx[i]), name="expval")
        inline = [ex.op.name]
    k2 = te.reduce_axis((0, cols), name="k2")
    tot = te.compute((rows,), lambda i: te.sum(ex[i, k2], axis=k2), name="rowsum")
    out = te.compute((rows, cols), lambda i, j: ex[i, j] / tot[i], name="softmax")
    sch = tvm.s_tir.Schedule(te.create_prim_func([X, out]))
    kept = inline[-1] if exp_at_row else None       # the exp stage itself
    for name in inline:
        if name != kept:
            sch.compute_inline(sch.get_sblock(name))
    o = sch.get_sblock("softmax")
    partial = {}
    if vector_reductions:
        # rfactor first: TIR's rfactor needs the reduction block first under its outer loop.
        for red in ("rowmax", "rowsum"):
            _, lanes = sch.split(sch.get_loops(sch.get_sblock(red))[-1], [None, factor])
            partial[red] = sch.rfactor(lanes, 0)
    for red in ("rowsum", kept, "rowmax"):       # consumers first: compute_at needs them under the loop
        for blk in (sch.get_sblock(red), partial.get(red)) if red else ():
            if blk is not None:
                sch.compute_at(blk, sch.get_loops(o)[0])
    if kept is not None:                          # the exp loop, vectorized
        e = sch.get_sblock(kept)
        _, ei = sch.split(sch.get_loops(e)[-1], [None, factor])
        sch.vectorize(ei)
    for rf in partial.values():                   # loops (row, lane, outer): make the lane innermost
        _, lane, outer = sch.get_loops(rf)
        sch.reorder(outer, lane)
        sch.vectorize(lane)
    i, j = sch.get_loops(o)[:2]
    _, ji = sch.split(j, [None, factor])
    sch.vectorize(ji)
    sch.parallel(i)
    return _compile(sch, cpu, num_threads)
