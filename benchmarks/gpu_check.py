"""The prepared GPU check: schedlang's CUDA target on a real NVIDIA GPU, in under 5 minutes.

    python benchmarks/gpu_check.py              # tests, then the timing table
    python benchmarks/gpu_check.py --no-tests   # the timing table only
    python benchmarks/gpu_check.py --quick      # smaller shapes, fewer repetitions

1. Builds every kernel of the table with the CUDA target (NVRTC; ptxas figures when ptxas is
   on PATH). Without a GPU it says so and exits 0 here: a CI-like run proves they compile.
2. Runs the GPU tests (`pytest -m gpu`) and the CUDA tests (tests/target/cuda), each in a
   child process with a time limit.
3. Times GEMM (float32; float16 in, float32 accumulation and output), SiluAndMul (float4
   loads and stores) and row softmax (cross-thread reductions) built by schedlang, against
   torch eager (torch.matmul, F.silu, torch.softmax) and torch.compile of the same, with CUDA
   events on torch's current stream; prints TFLOP/s or GB/s, and for memory-bound rows the
   fraction of the device's copy bandwidth (a device-to-device copy timed the same way).
   Each schedlang output is checked against torch before it is timed. A failure in one row
   is reported in that row and the run goes on.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass
from typing import Callable, List, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import schedlang as sl  # noqa: E402
from schedlang.topi import cuda, nn  # noqa: E402


# ---------------------------------------------------------------- schedlang GPU schedules

def gemm(n: int, dtype: str):
    """C = A @ B, n x n x n, TVM's GPU GEMM tutorial shape (topi.cuda.schedule_matmul_register_tiled):
    a 64x64 tile of C a block, 2x2 virtual threads of 8x8 threads, each thread 4x4 elements of
    each virtual thread's tile in registers; the A and B tiles of each step of 8 along k fetched
    cooperatively into shared memory, four elements a thread at a time (float4 for float32, two
    __half2 for float16). float16 inputs are accumulated in float32 and C is float32."""
    A = sl.placeholder((n, n), dtype, name="A")
    B = sl.placeholder((n, n), dtype, name="B")
    C = nn.matmul(A, B, out_dtype="float32")
    s = cuda.schedule_matmul_register_tiled(sl.create_schedule(C.op), C, tile=64, threads=8, vthreads=2, k_tile=8,
                                            fetch_vector=4)
    return s, [A, B, C]


def silu_and_mul(rows: int, d: int):
    """out[i, j] = silu(x[i, j]) * x[i, j + d]: a block of 256 threads over 1024 columns of a row,
    each thread four adjacent columns as float4 loads and stores (topi.cuda.schedule_silu_and_mul)."""
    x = sl.placeholder((rows, 2 * d), name="x")
    out = nn.silu_and_mul(x)
    return cuda.schedule_silu_and_mul(sl.create_schedule(out.op), out, threads=256, lanes=4), [x, out]


def softmax(rows: int, cols: int, threads: int = 256):
    """Row softmax, a row a block: the row max and the row sum of exponentials are cross-thread
    reductions over threadIdx.x computed at the row loop (topi.cuda.schedule_softmax)."""
    X = sl.placeholder((rows, cols), name="X")
    Y = nn.softmax(X, name="Y")
    return cuda.schedule_softmax(sl.create_schedule(Y.op), Y, threads), [X, Y]


# ---------------------------------------------------------------- the table's rows

@dataclass
class Workload:
    name: str
    shape: str
    build: Callable[[], tuple]        # () -> (schedule, args)
    inputs: Callable[[object], list]  # torch -> the input tensors on the GPU
    torch_fn: Callable[..., object]   # the torch computation (eager; compiled with torch.compile)
    work: float                       # FLOP (unit TFLOP/s) or bytes moved (unit GB/s)
    unit: str
    rtol: float = 1e-4
    atol: float = 1e-4


def workloads(quick: bool) -> List[Workload]:
    n = 2048 if quick else 4096
    rows, d = (4096, 2048) if quick else (8192, 4096)
    sm_rows, sm_cols = (2048, 4096) if quick else (4096, 4096)

    def gemm_inputs(dtype):
        def make(torch):
            g = torch.Generator(device="cuda").manual_seed(0)
            t = getattr(torch, dtype)
            return [torch.randn(n, n, generator=g, device="cuda").to(t),
                    torch.randn(n, n, generator=g, device="cuda").to(t)]
        return make

    def silu_torch(x):
        import torch.nn.functional as F
        return F.silu(x[:, :d]) * x[:, d:]

    return [
        Workload("GEMM float32", f"{n}x{n}x{n}", lambda: gemm(n, "float32"), gemm_inputs("float32"),
                 lambda a, b: a @ b, 2.0 * n ** 3, "TFLOP/s", rtol=1e-3, atol=1e-2),
        Workload("GEMM float16 (f32 acc, f32 out)", f"{n}x{n}x{n}", lambda: gemm(n, "float16"),
                 gemm_inputs("float16"), lambda a, b: (a @ b).float(), 2.0 * n ** 3, "TFLOP/s",
                 rtol=1e-2, atol=0.5),
        Workload("SiluAndMul float32", f"{rows}x{2 * d} -> {rows}x{d}", lambda: silu_and_mul(rows, d),
                 lambda torch: [torch.randn(rows, 2 * d, device="cuda")], silu_torch,
                 (rows * 2 * d + rows * d) * 4.0, "GB/s"),
        Workload("softmax float32", f"{sm_rows}x{sm_cols}", lambda: softmax(sm_rows, sm_cols),
                 lambda torch: [torch.randn(sm_rows, sm_cols, device="cuda")],
                 lambda x: x.softmax(dim=-1), 2.0 * sm_rows * sm_cols * 4, "GB/s", rtol=1e-4, atol=1e-6),
    ]


# ---------------------------------------------------------------- timing

def time_ms(torch, fn: Callable[[], object], min_ms: float) -> float:
    """Mean milliseconds a call, by CUDA events around a batch of calls on the current stream."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    once = max(start.elapsed_time(end), 1e-3)
    reps = max(3, min(1000, int(min_ms / once)))
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / reps


def copy_bandwidth(torch, min_ms: float) -> float:
    """GB/s of a device-to-device copy of 1 GiB (bytes read plus bytes written)."""
    a = torch.empty(2 ** 30, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    ms = time_ms(torch, lambda: b.copy_(a), min_ms)
    del a, b
    return 2 * 2 ** 30 / (ms * 1e-3) / 1e9


def rate(w: Workload, ms: float) -> float:
    scale = 1e12 if w.unit == "TFLOP/s" else 1e9
    return w.work / (ms * 1e-3) / scale


# ---------------------------------------------------------------- the steps

def build_all(ws: List[Workload]):
    """Each workload's CUDA module (or the exception that stopped it), printing ptxas figures."""
    built = {}
    for w in ws:
        t0 = time.perf_counter()
        try:
            s, args = w.build()
            mod = sl.build(s, args, target="cuda")
            info = mod.ptxas_info or {}
            figures = "; ".join(f"{k}: {v.registers} registers, {v.spill_bytes} B spilled, {v.shared_bytes} B shared"
                                for k, v in info.items()) or "no ptxas on PATH"
            print(f"built {w.name} {w.shape} in {time.perf_counter() - t0:.1f} s ({figures})", flush=True)
            built[w.name] = mod
        except Exception as e:          # noqa: BLE001 - one row's failure is reported, the run goes on
            print(f"BUILD FAILED {w.name}: {type(e).__name__}: {e}", flush=True)
            built[w.name] = e
    return built


def run_tests(timeout_s: int) -> None:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for what, argv in (("GPU tests (pytest -m gpu)", ["-m", "gpu"]), ("CUDA tests", ["tests/target/cuda"])):
        t0 = time.perf_counter()
        try:
            run = subprocess.run([sys.executable, "-m", "pytest", "-x", "-p", "no:cacheprovider", *argv], cwd=ROOT,
                                 env=env, capture_output=True, text=True, timeout=timeout_s)
            lines = (run.stdout + run.stderr).strip().splitlines()
            tail = "\n    ".join(lines[-15:] if run.returncode else lines[-1:])
            status = "passed" if run.returncode == 0 else f"FAILED (exit {run.returncode})"
            print(f"{what}: {status} in {time.perf_counter() - t0:.0f} s\n    {tail}", flush=True)
        except subprocess.TimeoutExpired:
            print(f"{what}: TIMED OUT after {timeout_s} s", flush=True)


def time_row(torch, w: Workload, mod, min_ms: float, copy_gbs: float, compile_torch: bool) -> None:
    def show(who: str, ms: Optional[float] = None, note: str = "") -> None:
        if ms is None:
            print(f"  {who:<22} {'-':>10} {'':>10} {note}", flush=True)
            return
        r = rate(w, ms)
        frac = f"{r / copy_gbs:6.1%} of copy" if w.unit == "GB/s" and copy_gbs == copy_gbs else ""
        print(f"  {who:<22} {ms:8.3f} ms {r:8.2f} {w.unit:<8} {frac} {note}", flush=True)

    print(f"{w.name}, {w.shape}", flush=True)
    try:
        inputs = w.inputs(torch)
        want = w.torch_fn(*inputs)
    except Exception as e:           # noqa: BLE001
        print(f"  inputs or torch reference failed: {type(e).__name__}: {e}", flush=True)
        return
    if isinstance(mod, Exception):
        show("schedlang", note=f"not built: {type(mod).__name__}: {str(mod).splitlines()[0][:120]}")
    else:
        try:
            out = torch.empty(tuple(mod.params[-1].shape), dtype=want.dtype, device="cuda")
            mod(*inputs, out)
            torch.cuda.synchronize()
            err = (out - want).abs().max().item()
            ok = torch.allclose(out, want, rtol=w.rtol, atol=w.atol)
            show("schedlang", time_ms(torch, lambda: mod(*inputs, out), min_ms),
                 f"max |error| {err:.2e}" + ("" if ok else "  WRONG RESULT"))
        except Exception as e:       # noqa: BLE001
            show("schedlang", note=f"FAILED: {type(e).__name__}: {str(e).splitlines()[0][:160]}")
            traceback.print_exc(limit=3)
    try:
        show("torch eager", time_ms(torch, lambda: w.torch_fn(*inputs), min_ms), "allocates its output")
    except Exception as e:           # noqa: BLE001
        show("torch eager", note=f"FAILED: {type(e).__name__}: {e}")
    if compile_torch:
        try:
            compiled = torch.compile(w.torch_fn)
            compiled(*inputs)
            show("torch.compile", time_ms(torch, lambda: compiled(*inputs), min_ms), "allocates its output")
        except Exception as e:       # noqa: BLE001
            show("torch.compile", note=f"FAILED: {type(e).__name__}: {str(e).splitlines()[0][:160]}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="smaller shapes, shorter timing")
    p.add_argument("--no-tests", action="store_true", help="skip the GPU and CUDA tests")
    p.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    p.add_argument("--test-timeout", type=int, default=120, help="seconds for each test run (default 120)")
    opts = p.parse_args(argv)
    t0 = time.perf_counter()

    ws = workloads(opts.quick)
    built = build_all(ws)
    from schedlang.target.cuda.gpu import gpu_problem
    problem = gpu_problem()
    if problem is not None:
        failed = [name for name, m in built.items() if isinstance(m, Exception)]
        print(f"no GPU here ({problem}): {len(built) - len(failed)} of {len(built)} kernels compiled; nothing "
              "timed. mod.emulate(*arrays, engine='shim') runs a module on the CPU.")
        return 1 if failed else 0

    import torch
    if not opts.no_tests:
        run_tests(opts.test_timeout)
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    print(f"\ndevice: {props.name}, {props.multi_processor_count} SMs, {props.total_memory / 2 ** 30:.0f} GiB; "
          f"torch {torch.__version__}; target {next(m for m in built.values() if not isinstance(m, Exception)).target}"
          if any(not isinstance(m, Exception) for m in built.values()) else f"\ndevice: {props.name}", flush=True)
    min_ms = 20.0 if opts.quick else 50.0
    try:
        copy_gbs = copy_bandwidth(torch, min_ms)
        print(f"device-to-device copy of 1 GiB: {copy_gbs:.0f} GB/s (read + written)\n", flush=True)
    except Exception as e:           # noqa: BLE001
        copy_gbs = float("nan")
        print(f"copy bandwidth not measured: {type(e).__name__}: {e}\n", flush=True)
    for w in ws:
        time_row(torch, w, built[w.name], min_ms, copy_gbs, not opts.no_compile)
    print(f"\ngpu_check done in {time.perf_counter() - t0:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
