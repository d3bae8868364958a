"""The machine's measured float32 FMA peak: a loop of independent vector FMAs, JIT-compiled
with llvmlite for the host CPU, run on every core at once (ctypes releases the GIL).

    python benchmarks/peak.py          # prints GFLOP/s per core and for all cores

Twelve accumulators hide the FMA latency (4 cycles on current x86 cores, 2 pipes); the
vector width is the host's (16 lanes with AVX-512, 8 with AVX2), never assumed.
"""
from __future__ import annotations

import ctypes
import time
from concurrent.futures import ThreadPoolExecutor

import llvmlite.binding as llvm

ACCUMULATORS = 12


def _lanes(features: str) -> int:
    feats = set(features.split(","))
    return 16 if "+avx512f" in feats else 8 if "+avx" in feats else 4


def _ir(lanes: int) -> str:
    vt = f"<{lanes} x float>"
    phis, fmas, outs = [], [], []
    for a in range(ACCUMULATORS):
        phis.append(f"  %acc{a} = phi {vt} [ %init, %entry ], [ %next{a}, %loop ]")
        fmas.append(f"  %next{a} = call {vt} @llvm.fma.v{lanes}f32({vt} %acc{a}, {vt} %m, {vt} %c)")
    total = "%next0"
    for a in range(1, ACCUMULATORS):
        outs.append(f"  %sum{a} = fadd {vt} {total}, %next{a}")
        total = f"%sum{a}"
    return f"""
declare {vt} @llvm.fma.v{lanes}f32({vt}, {vt}, {vt})
define float @fma_loop(i64 %n, float %x) {{
entry:
  %v = insertelement {vt} undef, float %x, i32 0
  %init = shufflevector {vt} %v, {vt} undef, <{lanes} x i32> zeroinitializer
  %m = fadd {vt} %init, %init
  %c = fmul {vt} %init, %init
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i1, %loop ]
{chr(10).join(phis)}
{chr(10).join(fmas)}
  %i1 = add i64 %i, 1
  %done = icmp eq i64 %i1, %n
  br i1 %done, label %exit, label %loop
exit:
{chr(10).join(outs)}
  %r = extractelement {vt} {total}, i32 0
  ret float %r
}}
"""


_KEEP = []      # the engine must outlive the function pointer


def _compile():
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    cpu, features = llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten()
    lanes = _lanes(features)
    tm = llvm.Target.from_default_triple().create_target_machine(cpu=cpu, features=features, opt=2)
    mod = llvm.parse_assembly(_ir(lanes))
    mod.verify()
    engine = llvm.create_mcjit_compiler(mod, tm)
    engine.finalize_object()
    _KEEP.append(engine)
    fn = ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_int64, ctypes.c_float)(engine.get_function_address("fma_loop"))
    return fn, lanes, cpu


def fma_peak(threads: int, seconds: float = 0.3) -> dict:
    """{'per_core': GFLOP/s, 'all': GFLOP/s with `threads` threads, 'lanes': int, 'cpu': name}."""
    fn, lanes, cpu = _compile()
    flops_per_iter = 2 * lanes * ACCUMULATORS
    n = 1 << 20
    fn(n, 1.0)                                       # warm-up (and frequency ramp)

    def rate() -> float:
        best = 0.0
        for _ in range(3):
            start = time.perf_counter()
            fn(n, 1.0)
            best = max(best, n * flops_per_iter / (time.perf_counter() - start))
        return best
    while True:                                      # size a call to ~seconds/3
        start = time.perf_counter()
        fn(n, 1.0)
        if time.perf_counter() - start > seconds / 3 or n > 1 << 34:
            break
        n *= 2
    one = rate()
    with ThreadPoolExecutor(threads) as pool:
        all_ = sum(pool.map(lambda _: rate(), range(threads)))
    return {"per_core": one / 1e9, "all": all_ / 1e9, "lanes": lanes, "cpu": cpu}


if __name__ == "__main__":
    import os
    p = fma_peak(len(os.sched_getaffinity(0)))
    print(f"float32 FMA peak on {p['cpu']} ({p['lanes']} lanes): {p['per_core']:.1f} GFLOP/s per core, "
          f"{p['all']:.1f} GFLOP/s on all cores")
