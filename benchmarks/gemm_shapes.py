"""The transformer GEMMs (a Linear: x[M, K] @ W[N, K]^T + bias, weight prepacked) under the
default schedule, beside torch (F.linear: oneDNN/MKL), as GFLOP/s and % of the FMA peak,
for AVX-512 code (the host) and AVX2 code (-mcpu=znver3, which runs on an AVX-512 host).

    python benchmarks/gemm_shapes.py                    # BERT-base and Llama shapes, 1 and 2 threads
    python benchmarks/gemm_shapes.py --threads 1 --shapes 128x768x768
    python benchmarks/gemm_shapes.py --isa avx512       # only the host's ISA

The peak is benchmarks/peak.py's FMA loop compiled for the same CPU as the kernel (8 lanes
for znver3, the host's width otherwise) on as many threads, timed in the same interleaved
rounds as the kernels (the cores are shared and loaded: a peak taken apart says less).
Every contender is checked against torch before it is timed; contenders of one shape and
thread count are timed side by side in interleaved rounds (harness.measure), median of rounds.
"""
from __future__ import annotations

import argparse
import ctypes
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for path in (HERE, ROOT):
    if path not in sys.path:
        sys.path.insert(0, path)

import llvmlite.binding as llvm  # noqa: E402
import torch  # noqa: E402

import harness  # noqa: E402
import peak  # noqa: E402

SHAPES = {"bert": ((128, 768, 768), (128, 768, 3072), (128, 3072, 768)),
          "llama": ((128, 2048, 2048), (128, 2048, 5632), (128, 5632, 2048))}
ISAS = {"avx512": "", "avx2": "znver3"}        # LLVM CPU name of each ISA's code ("": the host)


def peak_loop(cpu: str):
    """(fn(n, x), lanes): peak.py's FMA loop compiled for cpu ("" = the host)."""
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    name = cpu or llvm.get_host_cpu_name()
    features = llvm.get_host_cpu_features().flatten() if not cpu else ""
    lanes = peak._lanes(features) if features else 8       # znver3: AVX2, 8 float lanes
    tm = llvm.Target.from_default_triple().create_target_machine(cpu=name, features=features, opt=2)
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(peak._ir(lanes)), tm)
    engine.finalize_object()
    peak._KEEP.append(engine)
    return ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_int64, ctypes.c_float)(engine.get_function_address("fma_loop")), lanes


def peak_contender(cpu: str, threads: int, pool):
    """(fn, flops per call): the FMA loop on `threads` threads at once (ctypes drops the GIL)."""
    fn, lanes = peak_loop(cpu)
    n = 1 << 19
    if threads == 1:
        return (lambda: fn(n, 1.0)), n * 2 * lanes * peak.ACCUMULATORS
    return (lambda: list(pool.map(lambda _: fn(n, 1.0), range(threads)))), threads * n * 2 * lanes * peak.ACCUMULATORS


def linear(k: int, n: int, bias: bool = True):
    torch.manual_seed(0)
    return torch.nn.Linear(k, n, bias=bias).eval()


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--isa", nargs="+", default=list(ISAS), choices=list(ISAS))
    ap.add_argument("--shapes", nargs="+", help="MxKxN (default: BERT-base and Llama's)")
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args(argv)
    import schedlang.torch as slt
    from schedlang.target.target import Target
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes] if args.shapes else \
        [s for group in SHAPES.values() for s in group]
    isas = [isa for isa in ISAS if isa in args.isa]
    print(f"# {harness.cpu_model()}, load {harness.load_average()}; % of peak: of peak.py's FMA loop for "
          "that ISA on as many threads, timed in the same rounds; "
          "1 thread: CPU time, 2: wall time")
    print(f"# {'M x K x N':>16} thr " + " ".join(f"{c:>16}" for c in ["torch"] + isas)
          + "   GFLOP/s (% of peak), median of rounds")
    from concurrent.futures import ThreadPoolExecutor
    pool = ThreadPoolExecutor(max(args.threads))
    for threads in args.threads:
        torch.set_num_threads(threads)
        # One thread: CPU time (time slices lost to other processes do not count); more: wall
        # time (a runtime's spinning threads would count in CPU time).
        timing = harness.Timing(repeat=args.rounds, min_round_s=0.05, warmup_s=0.1,
                                clock="cpu" if threads == 1 else "wall")
        peaks = {isa: peak_contender(ISAS[isa], threads, pool) for isa in isas}
        for m, k, n in shapes:
            mod = linear(k, n)
            x = torch.randn(m, k)
            with torch.no_grad():
                want = mod(x)
                fns = {"torch": lambda: mod(x)}
                for isa in isas:
                    target = Target("llvm", cpu=ISAS[isa], num_threads=threads)
                    compiled = slt.compile(mod, (x,), target=target)
                    got = compiled(x)
                    err = (got - want).abs().max().item() / want.abs().max().item()
                    if err > 1e-4:
                        raise AssertionError(f"{isa} {m}x{k}x{n}: relative error {err:.2e}")
                    fns[isa] = (lambda c: lambda: c(x))(compiled)
                names = list(fns) + [f"peak {isa}" for isa in isas]
                results = harness.measure(list(fns.values()) + [peaks[isa][0] for isa in isas], timing)
            med = {name: r[1] for name, r in zip(names, results)}
            peak_g = {isa: peaks[isa][1] / med[f"peak {isa}"] / 1e9 for isa in isas}
            flops = 2 * m * k * n
            cells = []
            for name in fns:
                g = flops / med[name] / 1e9
                pct = "" if name == "torch" else f" {100 * g / peak_g[name]:3.0f}%"
                cells.append(f"{g:7.1f}{pct:>5}".rjust(16))
            print(f"  {f'{m}x{k}x{n}':>16} {threads:3d} " + " ".join(cells)
                  + "   peak " + ", ".join(f"{isa} {g:.0f}" for isa, g in peak_g.items()), flush=True)


if __name__ == "__main__":
    main()
