"""The three workloads and their contenders: schedlang and its peers on the same arrays.

Each builder returns a Workload: its inputs, one preallocated output per contender, a
check per contender against an independent reference, and the work per call (FLOP or
bytes). Optional peers (torch.compile, numba, TVM) come back as skipped rows with the
reason when they are not available.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional

import numpy as np
import torch

import sl_kernels
import torch_peers
import tvm_peers
from harness import Contender, Timing, expect_close, skipped

VEC_FACTORS = (8, 16, 32)


@dataclass
class Context:
    """What every workload needs to know about the run."""

    cores: int
    cpu: str                                    # LLVM CPU name, e.g. znver3
    vector_bits: int                            # 256 with AVX2, 512 with AVX-512
    sl_target: object                           # sl.Target for the schedlang kernels
    timing: Timing
    tvm: Optional[object]                       # the tvm module, or None
    tvm_why: str                                # version, or why TVM is unavailable
    compile_failed: Dict[str, str]              # torch.compile key -> reason it is skipped
    use_compile: bool = True
    use_numba: bool = True
    compile_note: str = "inductor, default mode"


@dataclass
class Workload:
    title: str
    unit: str                                   # "GFLOP/s" or "GB/s"
    shape: str
    work: float                                 # FLOP or bytes per call
    contenders: List[Contender] = field(default_factory=list)


def _checked(name: str, fn: Callable[[], object], out, read: Callable[[], np.ndarray], ref: np.ndarray,
             rtol: float, atol: float) -> Callable[[], None]:
    """A check that poisons `out` with NaN, runs fn, and compares read() with ref."""
    def check() -> None:
        if isinstance(out, np.ndarray):
            out.fill(np.nan)
        elif isinstance(out, torch.Tensor):
            out.fill_(float("nan"))
        fn()
        expect_close(name, read(), ref, rtol, atol)
    return check


def _torch_compile(ctx: Context, key: str, name: str, args: tuple, out, ref, rtol, atol) -> Contender:
    if not ctx.use_compile:
        return skipped(name, "torch.compile disabled (--no-compile)")
    if key in ctx.compile_failed:
        return skipped(name, ctx.compile_failed[key])
    try:
        fn_c = torch_peers.compiled(key.split(":")[0])
        fn_c(*args)
    except Exception as e:  # compile errors surface on the first call
        return skipped(name, f"torch.compile failed: {type(e).__name__}: {str(e).splitlines()[0][:120]}")
    fn = lambda: fn_c(*args)  # noqa: E731
    return Contender(name, fn, ctx.compile_note, _checked(name, fn, out, out.numpy, ref, rtol, atol))


def _optional(name: str, why_missing: Optional[str], build: Callable[[], Contender]) -> Contender:
    """An optional peer (TVM, numba): skipped when unavailable or when building it fails.
    A peer that builds but computes a wrong result still fails the run, in its check."""
    if why_missing:
        return skipped(name, why_missing)
    try:
        return build()
    except Exception as e:
        return skipped(name, f"building it failed: {type(e).__name__}: {(str(e).splitlines() or [''])[0][:120]}")


def _no_tvm(ctx: Context) -> Optional[str]:
    return None if ctx.tvm is not None else ctx.tvm_why


# ---------------------------------------------------------------- GEMM

def gemm(ctx: Context, n: int) -> Workload:
    rng = np.random.default_rng(0)
    a = rng.random((n, n), dtype=np.float32)
    b = rng.random((n, n), dtype=np.float32)
    ref = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
    tol = dict(rtol=1e-4, atol=1e-3)
    w = Workload(f"GEMM float32 C = A @ B, M = N = K = {n}", "GFLOP/s", f"{n}x{n}x{n}", 2.0 * n ** 3)
    out = lambda: np.empty((n, n), np.float32)  # noqa: E731

    f = sl_kernels.gemm(ctx.sl_target, n, n, n)
    c = out()
    fn = lambda f=f, c=c: f(a, b, c)  # noqa: E731
    w.contenders.append(Contender("schedlang", fn, "TVM tutorial schedule (packed B, bn=32, write cache)",
                                  _checked("schedlang", fn, c, lambda c=c: c, ref, **tol), is_schedlang=True))

    f, c = sl_kernels.gemm_register_tiled(ctx.sl_target, n, n, n), out()
    fn = lambda f=f, c=c: f(a, b, c)  # noqa: E731
    acc = f"{4 * 16 * 32 // ctx.vector_bits} {'zmm' if ctx.vector_bits == 512 else 'ymm'} accumulators"
    w.contenders.append(Contender("schedlang (register-tiled)", fn,
                                  f"extra, not the tutorial: 4x16 tile, k loop outside, {acc}",
                                  _checked("schedlang register-tiled", fn, c, lambda c=c: c, ref, **tol),
                                  is_schedlang=True))

    c = out()
    fn = lambda c=c: np.matmul(a, b, out=c)  # noqa: E731
    w.contenders.append(Contender("numpy", fn, f"np.matmul(out=), {_numpy_blas()}",
                                  _checked("numpy", fn, c, lambda c=c: c, ref, **tol)))

    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    tc = torch.empty(n, n)
    fn = lambda: torch.mm(ta, tb, out=tc)  # noqa: E731
    w.contenders.append(Contender("torch", fn, "torch.mm(out=)", _checked("torch", fn, tc, tc.numpy, ref, **tol)))

    tc2 = torch.empty(n, n)
    cc = _torch_compile(ctx, f"gemm:{n}", "torch.compile", (ta, tb, tc2), tc2, ref, **tol)
    if not cc.skipped:
        cc.note += "; extern mm into a temp, then copied into out"
    w.contenders.append(cc)

    w.contenders.append(_optional("numba", None if ctx.use_numba else "disabled (--no-numba)",
                                  lambda: _numba_gemm(ctx, a, b, out(), ref, tol)))
    w.contenders.append(_optional("TVM", _no_tvm(ctx), lambda: _tvm_gemm(ctx, a, b, ref, tol)))
    return w


def _numpy_blas() -> str:
    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        return f"{blas.get('name', '?')} {blas.get('version', '')}".strip()
    except Exception:
        return "numpy's BLAS"


def _numba_gemm(ctx: Context, a, b, c, ref, tol) -> Contender:
    import numba
    numba.set_num_threads(ctx.cores)

    @numba.njit(parallel=True, cache=False)
    def gemm_ikj(a, b, c):
        m, k = a.shape
        n = b.shape[1]
        for i in numba.prange(m):
            for j in range(n):
                c[i, j] = 0.0
            for p in range(k):
                aip = a[i, p]
                for j in range(n):
                    c[i, j] += aip * b[p, j]

    fn = lambda: gemm_ikj(a, b, c)  # noqa: E731
    fn()                                                  # compiles
    return Contender("numba", fn, "prange(i), k, j loops (no tiling)", _checked("numba", fn, c, lambda: c, ref, **tol))


def _tvm_gemm(ctx: Context, a, b, ref, tol) -> Contender:
    n = a.shape[0]
    f, regs = tvm_peers.gemm(n, n, n, ctx.cpu, ctx.cores)
    ta, tb = tvm_peers.tensor(a), tvm_peers.tensor(b)
    tc = tvm_peers.tensor(np.zeros((n, n), np.float32))
    fn = lambda: f(ta, tb, tc)  # noqa: E731
    return Contender("TVM", fn, f"same tutorial schedule (s_tir), mcpu={ctx.cpu}, {regs}",
                     tvm_peers.checker("TVM", fn, tc, ref, **tol))


# ---------------------------------------------------------------- SiluAndMul

def silu_and_mul(ctx: Context, rows: int = 8192, cols: int = 8192) -> Workload:
    half = cols // 2
    rng = np.random.default_rng(1)
    x = rng.standard_normal((rows, cols), dtype=np.float32)
    x1, x2 = x[:, :half], x[:, half:]
    x64 = x1.astype(np.float64)
    ref = (x64 / (1.0 + np.exp(-x64)) * x2).astype(np.float32)
    del x64
    tol = dict(rtol=1e-5, atol=1e-6)
    nbytes = x.nbytes + rows * half * 4
    w = Workload(f"SiluAndMul float32 out[i, j] = silu(x[i, j]) * x[i, j + {half}], x {rows}x{cols}", "GB/s",
                 f"{rows}x{cols}->{rows}x{half}", float(nbytes))
    out = lambda: np.empty((rows, half), np.float32)  # noqa: E731

    sl_c = Contender("schedlang", note="parallel rows, vectorized inner split; polynomial exp", is_schedlang=True)
    for v in VEC_FACTORS:
        f, o = sl_kernels.silu_and_mul(ctx.sl_target, rows, cols, v), out()
        fn = lambda f=f, o=o: f(x, o)  # noqa: E731
        sl_c.variants[f"vec {v}"] = fn
        sl_c.variant_checks[f"vec {v}"] = _checked(f"schedlang vec {v}", fn, o, lambda o=o: o, ref, **tol)
    w.contenders.append(sl_c)

    o = out()
    fn = lambda: np.multiply(x1 / (1.0 + np.exp(-x1)), x2, out=o)  # noqa: E731
    w.contenders.append(Contender("numpy", fn, "x1/(1+exp(-x1))*x2: allocates 4 temporaries; 1 thread",
                                  _checked("numpy", fn, o, lambda: o, ref, **tol)))
    o2, tmp = out(), np.empty((rows, half), np.float32)

    def numpy_chain():
        np.negative(x1, out=tmp)
        np.exp(tmp, out=tmp)
        np.add(tmp, 1.0, out=tmp)
        np.divide(x1, tmp, out=tmp)
        np.multiply(tmp, x2, out=o2)
    w.contenders.append(Contender("numpy (out= chain)", numpy_chain, "one preallocated temp, 5 passes; 1 thread",
                                  _checked("numpy chain", numpy_chain, o2, lambda: o2, ref, **tol)))

    tx = torch.from_numpy(x)
    tx1, tx2 = tx[:, :half], tx[:, half:]
    to, ttmp = torch.empty(rows, half), torch.empty(rows, half)

    def torch_eager():
        torch.ops.aten.silu.out(tx1, out=ttmp)
        torch.mul(ttmp, tx2, out=to)
    w.contenders.append(Contender("torch", torch_eager, "aten.silu.out into a preallocated temp, then mul(out=)",
                                  _checked("torch", torch_eager, to, to.numpy, ref, **tol)))
    to2 = torch.empty(rows, half)
    w.contenders.append(_torch_compile(ctx, f"silu:{rows}x{cols}", "torch.compile", (tx, to2), to2, ref, **tol))

    for fast in (True, False):
        name = "TVM fast_exp" if fast else "TVM te.sigmoid"
        w.contenders.append(_optional(name, _no_tvm(ctx), lambda: _tvm_silu(ctx, name, x, fast, ref, tol)))
    return w


def _tvm_silu(ctx: Context, name: str, x, fast: bool, ref, tol) -> Contender:
    rows, cols = x.shape
    tx = tvm_peers.tensor(x)
    c = Contender(name, note=("topi.fast_exp: x/(1+fast_exp(-x))*y" if fast else
                              "te default exp (LLVM expf)") + ", parallel rows, vectorized split")
    for v in VEC_FACTORS:
        f, regs = tvm_peers.silu_and_mul(rows, cols, v, fast, ctx.cpu, ctx.cores)
        to = tvm_peers.tensor(np.zeros((rows, cols // 2), np.float32))
        fn = lambda f=f, to=to: f(tx, to)  # noqa: E731
        c.variants[f"vec {v}"] = fn
        c.variant_checks[f"vec {v}"] = tvm_peers.checker(f"{name} vec {v}", fn, to, ref, **tol)
    c.note += f", {regs}"
    return c


# ---------------------------------------------------------------- softmax

def softmax(ctx: Context, rows: int = 4096, cols: int = 4096) -> Workload:
    rng = np.random.default_rng(2)
    x = rng.standard_normal((rows, cols), dtype=np.float32)
    x64 = x.astype(np.float64)
    e64 = np.exp(x64 - x64.max(axis=1, keepdims=True))
    ref = (e64 / e64.sum(axis=1, keepdims=True)).astype(np.float32)
    del x64, e64
    tol = dict(rtol=1e-5, atol=1e-9)
    w = Workload(f"Row softmax float32 {rows}x{cols} (softmax over each row)", "GB/s", f"{rows}x{cols}",
                 2.0 * x.nbytes)
    out = lambda: np.empty((rows, cols), np.float32)  # noqa: E731

    for vec_red in (True, False):
        name = "schedlang" if vec_red else "schedlang (scalar reductions)"
        c = Contender(name, note=("rfactor'd vector max/sum" if vec_red else
                                  "max/sum loops scalar in Kernel IR, vectorized by LLVM (reassoc adds)") +
                      ", exp inlined twice, compute_at row, parallel rows", is_schedlang=True)
        for v in VEC_FACTORS:
            f, o = sl_kernels.softmax(ctx.sl_target, rows, cols, v, vec_red), out()
            fn = lambda f=f, o=o: f(x, o)  # noqa: E731
            c.variants[f"vec {v}"] = fn
            c.variant_checks[f"vec {v}"] = _checked(f"{name} vec {v}", fn, o, lambda o=o: o, ref, **tol)
        w.contenders.append(c)

    o = out()

    def numpy_softmax():
        e = np.exp(x - x.max(axis=1, keepdims=True))
        np.divide(e, e.sum(axis=1, keepdims=True), out=o)
    w.contenders.append(Contender("numpy", numpy_softmax, "allocates 2 temporaries; 1 thread",
                                  _checked("numpy", numpy_softmax, o, lambda: o, ref, **tol)))

    tx = torch.from_numpy(x)
    to = torch.empty(rows, cols)
    fn = lambda: torch.ops.aten._softmax.out(tx, -1, False, out=to)  # noqa: E731
    w.contenders.append(Contender("torch (_softmax.out)", fn, "aten._softmax.out: preallocated output",
                                  _checked("torch _softmax.out", fn, to, to.numpy, ref, **tol)))
    holder = {}

    def torch_alloc():
        holder["y"] = torch.softmax(tx, dim=-1)
    w.contenders.append(Contender("torch.softmax", torch_alloc, "no out=: allocates its output every call",
                                  lambda: (torch_alloc(), expect_close("torch.softmax", holder["y"].numpy(), ref,
                                                                       **tol))))
    to2 = torch.empty(rows, cols)
    w.contenders.append(_torch_compile(ctx, f"softmax:{rows}x{cols}", "torch.compile", (tx, to2), to2, ref, **tol))

    for fast, vec_red in ((True, True), (True, False), (False, True)):
        name = "TVM " + ("fast_exp" if fast else "te.exp") + ("" if vec_red else " (scalar reductions)")
        w.contenders.append(_optional(name, _no_tvm(ctx),
                                      lambda: _tvm_softmax(ctx, name, x, fast, vec_red, ref, tol)))
    return w


def _tvm_softmax(ctx: Context, name: str, x, fast: bool, vec_red: bool, ref, tol) -> Contender:
    rows, cols = x.shape
    tx = tvm_peers.tensor(x)
    c = Contender(name, note=("topi.fast_exp" if fast else "te default exp (LLVM expf)") +
                  (", rfactor'd vector max/sum" if vec_red else ", scalar max/sum") + ", same schedule as schedlang's")
    for v in VEC_FACTORS:
        f, regs = tvm_peers.softmax(rows, cols, v, fast, vec_red, ctx.cpu, ctx.cores)
        to = tvm_peers.tensor(np.zeros((rows, cols), np.float32))
        fn = lambda f=f, to=to: f(tx, to)  # noqa: E731
        c.variants[f"vec {v}"] = fn
        c.variant_checks[f"vec {v}"] = tvm_peers.checker(f"{name} vec {v}", fn, to, ref, **tol)
    c.note += f", {regs}"
    return c
