"""The tensor-core GEMM's tile configurations, side by side on a real GPU: which block tile,
warp tile, k step and pipeline depth a default should take.

    python benchmarks/gpu_gemm_tiles.py                 # float16 4096^3, every configuration
    python benchmarks/gpu_gemm_tiles.py --n 8192 --element bfloat16
    python benchmarks/gpu_gemm_tiles.py --only "128x128x32 w64x64 s2" "128x256x64 w64x64 s3"

Each configuration (cuda_tensorcore.schedule_matmul's keywords) is built (NVRTC; ptxas's
registers and spills), its output checked against torch.matmul, then timed with CUDA events
against cuBLAS. Blocks may take up to --shared-kb of shared memory (default 227, what sm_90
gives a block that opts in; over 48 KB a kernel takes dynamic shared memory). Without a GPU
it builds every configuration and prints the ptxas figures only.
"""
from __future__ import annotations

import argparse
import itertools
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for path in (ROOT, os.path.join(ROOT, "benchmarks")):
    if path not in sys.path:
        sys.path.insert(0, path)

import schedlang as sl  # noqa: E402
from gpu_check import tc_gemm, time_ms  # noqa: E402
from schedlang.autoschedule import sketch_tensorcore  # noqa: E402
from schedlang.topi.cuda_tensorcore import GemmShape  # noqa: E402

KN = GemmShape("float16", "float32", "kn", (), 0, 0, 0)     # the layout is all shared_bytes reads


def shared_bytes(c: dict) -> int:
    """The pipeline's shared A and B tiles, every stage (as the tensor-core sketch counts them)."""
    return sketch_tensorcore.shared_bytes(KN, c["BM"], c["BN"], c["BK"], c["pad"], c["stages"])


def configurations(shared_limit: int):
    """Block tiles of 4 or 8 warps, warp tiles 32..64 x 32..64, k steps 16..64, 2..4 stages,
    within shared_limit bytes of shared memory."""
    out = []
    for (BM, BN), (WM, WN), BK, stages in itertools.product(
            ((128, 128), (128, 256), (256, 128), (64, 128), (128, 64), (64, 64)), ((64, 32), (32, 64), (64, 64), (32, 32)),
            (16, 32, 64), (2, 3, 4)):
        warps = (BM // WM) * (BN // WN)
        c = dict(BM=BM, BN=BN, BK=BK, WM=WM, WN=WN, pad=8, async_copy=True, stages=stages)
        if warps in (4, 8) and shared_bytes(c) <= shared_limit:
            out.append(c)
    return out


def label(c: dict) -> str:
    return f"{c['BM']}x{c['BN']}x{c['BK']} w{c['WM']}x{c['WN']} s{c['stages']}" + (" pf" if c.get("prefetch_fragments")
                                                                                else "")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=4096, help="M = N = K (default 4096)")
    p.add_argument("--element", default="float16", choices=("float16", "bfloat16"))
    p.add_argument("--limit", type=int, default=0, help="only the first N configurations (0: all)")
    p.add_argument("--shared-kb", type=int, default=227, help="shared memory a block may take, KB (default 227)")
    p.add_argument("--only", nargs="+", default=(), metavar="LABEL",
                   help='only these configurations, by label (e.g. "128x128x32 w64x64 s2")')
    p.add_argument("--prefetch", action="store_true",
                   help="double-buffer the warps' fragments (schedule_matmul's prefetch_fragments; label ' pf')")
    opts = p.parse_args(argv)
    target = sl.Target("cuda", sl.CUDAOptions(max_shared_memory_per_block=opts.shared_kb * 1024))
    import torch
    from schedlang.target.cuda.gpu import gpu_problem
    on_gpu = gpu_problem() is None
    n = opts.n
    configs = [dict(c, prefetch_fragments=True) if opts.prefetch else c for c in configurations(opts.shared_kb * 1024)]
    configs = [c for c in configs if not opts.only or label(c) in opts.only]
    configs = configs[:opts.limit or None]
    if on_gpu:
        g = torch.Generator().manual_seed(0)
        dt = getattr(torch, opts.element)
        a, b = (torch.randn(n, n, generator=g).to(dt).cuda() for _ in range(2))
        want = (a.float() @ b.float())
        base = time_ms(torch, lambda: a @ b, 50.0)
        print(f"{torch.cuda.get_device_name()}: cuBLAS {opts.element} {n}^3 {base:.3f} ms, "
              f"{2 * n ** 3 / base / 1e9:.1f} TFLOP/s", flush=True)
    rows = []
    for c in configs:
        t0 = time.perf_counter()
        try:
            k = tc_gemm(n, opts.element, c, target)
        except Exception as e:      # noqa: BLE001 - one configuration's failure is reported, the sweep goes on
            print(f"{label(c):<26} BUILD FAILED {type(e).__name__}: {str(e).splitlines()[0][:120]}", flush=True)
            continue
        info = next(iter(k.notes().values()), None)
        figures = f"{info.registers} regs, {info.spill_bytes} B spilled" if info else "no ptxas"
        line = f"{label(c):<26} {shared_bytes(c) / 1024:5.1f} KB {figures:<24} built {time.perf_counter() - t0:.1f} s"
        if on_gpu:
            got = k.run(torch, [a, b])
            err = ((got.float() - want).norm() / want.norm()).item()
            if err < 1e-2:
                ms = time_ms(torch, lambda: k.run(torch, [a, b]), 30.0)
                rows.append((ms, c))
                line += f"  {ms:7.3f} ms {2 * n ** 3 / ms / 1e9:6.1f} TFLOP/s {base / ms:5.2f}x cuBLAS"
            else:
                line += f"  WRONG RESULT (relative error {err:.1e})"
        print(line, flush=True)
    if rows:
        print("\nfastest:")
        for ms, c in sorted(rows, key=lambda r: r[0])[:8]:
            print(f"  {label(c):<26} {ms:7.3f} ms {2 * n ** 3 / ms / 1e9:6.1f} TFLOP/s {base / ms:5.2f}x cuBLAS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
