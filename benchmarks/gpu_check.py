"""The prepared GPU check: schedlang's CUDA target on a real NVIDIA GPU, in under 5 minutes on an H200.

    python benchmarks/gpu_check.py              # the table, the emulation check, the auto-schedule
    python benchmarks/gpu_check.py --quick      # small shapes, short timing, a short search (CI)
    python benchmarks/gpu_check.py --tests      # also the GPU tests (pytest -m gpu) first

1. Builds every kernel of the table (NVRTC; ptxas figures: registers, spills, shared memory).
2. Times each against its baseline with CUDA events on torch's current stream, after checking
   its output against torch:
     tensor-core GEMM float16 / bfloat16 (mma.sync, ldmatrix, cp.async pipeline; two tile
       configurations) 4096^3 and 8192^3      vs torch.matmul (cuBLAS)
     Linear float16 (the torch frontend's default schedule: tensor cores, bias fused)
                                               vs F.linear (cuBLAS)
     GEMM float32 on CUDA cores                vs cuBLAS with TF32 off
     SiluAndMul float32 (float4)               vs a device-to-device copy of the same bytes
     softmax float32 (cross-thread reductions) vs a copy
     fused attention float16 on tensor cores (torch frontend: mma.sync Q.K^T and P.V, float32
       softmax statistics; full and causal)   vs torch SDPA
     conv2d float16 on tensor cores (torch frontend: implicit GEMM, im2col in the shared fetch)
                                               vs F.conv2d (cuDNN)
3. The emulation check: the kernels at small shapes run on the GPU and on the CPU (the SIMT
   engine: the same Kernel IR, the fragments' real lane layouts) and the results are compared.
4. A 64-trial auto-schedule of a float32 GEMM with a CUDA target, candidates timed on the GPU
   with CUDA events (autoschedule/gpu_estimate.py: time_on_gpu), against cuBLAS.
5. One ratio table: schedlang's speed over the baseline's (1.0 = as fast).
A failure in one row is reported in that row and the run goes on.

Without a GPU it builds every kernel, fails on a spill or a build error, runs the emulation
half at small shapes against torch on the CPU, and exits 0 when all of that passed.
"""
from __future__ import annotations

import argparse
import copy
import os
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, field
from typing import Callable, List, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import schedlang as sl  # noqa: E402
from schedlang.topi import cuda, cuda_tensorcore, nn  # noqa: E402

# The tensor-core GEMM's tile configurations (cuda_tensorcore.schedule_matmul's keywords): a
# 128 x 128 block, K by 32 in two cp.async stages, of 4 warps of 64 x 64 or 8 of 64 x 32
# (ptxas, sm_90: 164 and 123 registers, no spills, 37 KB shared): the fastest two of the 108
# configurations benchmarks/gpu_gemm_tiles.py timed on an H200 (results-gpu-h200.txt).
TC_TILES = {"128x128x64 w64x64 s2": dict(BM=128, BN=128, BK=64, WM=64, WN=64, pad=8, async_copy=True, stages=2),
            "128x128x64 w64x64 s3": dict(BM=128, BN=128, BK=64, WM=64, WN=64, pad=8, async_copy=True, stages=3)}
# (their shared stages take up to 105 KB: a block over 48 KB opts in to sm_90's 227 KB)
TC_TARGET = sl.Target("cuda", sl.CUDAOptions(max_shared_memory_per_block=227 * 1024))
SMALL_TC_TILES = dict(BM=64, BN=64, BK=32, WM=32, WN=32, pad=8, async_copy=True, stages=2)


# ---------------------------------------------------------------- kernels

class DSLKernel:
    """A module built from a DSL schedule; the output (its last argument) allocated once."""

    def __init__(self, s, args, target="cuda"):
        self.mod = sl.build(s, args, target=target)
        self.out = args[-1]

    def notes(self) -> dict:
        return self.mod.ptxas_info or {}

    def source(self) -> str:
        return self.mod.get_source()

    def run(self, torch, inputs):
        out = getattr(self, "_out", None)
        if out is None or out.device != inputs[0].device:
            out = self._out = torch.empty(tuple(self.out.shape), dtype=getattr(torch, str(self.out.dtype)),
                                          device=inputs[0].device)
        self.mod(*inputs, out)
        return out

    def emulate(self, torch, inputs):
        """On the SIMT engine; bfloat16 as ml_dtypes' numpy arrays (torch has no numpy bfloat16)."""
        def array(x):
            return x.float().numpy().astype(sl.dtype("bfloat16").numpy) if x.dtype == torch.bfloat16 else x.numpy()
        out = array(torch.zeros(tuple(self.out.shape), dtype=getattr(torch, str(self.out.dtype))))
        self.mod.emulate(*[array(x) for x in inputs], out, engine="simt")
        return torch.from_numpy(out.astype("float32")).to(getattr(torch, str(self.out.dtype)))


class FrontendKernel:
    """A torch module compiled by schedlang.torch with target="cuda" (its default schedules)."""

    def __init__(self, module, inputs, target="cuda"):
        import schedlang.torch as st
        self.module = module
        self.compiled = st.compile(module, inputs, target=target)

    def notes(self) -> dict:
        info = {}
        for mod in self.compiled.modules.values():
            info.update(getattr(mod, "ptxas_info", None) or {})
        return info

    def source(self) -> str:
        return self.compiled.ir("target")

    def run(self, torch, inputs):
        return self.compiled(*inputs)

    def emulate(self, torch, inputs):
        return self.compiled.emulate(*inputs, engine="simt")


def tc_gemm(n: int, element: str, tiles: dict, target="cuda"):
    """C (float32) = A @ B on tensor cores, n x n x n, A and B of element (cuda_tensorcore.gemm)."""
    return DSLKernel(*cuda_tensorcore.gemm(n, n, n, element, "float32", "kn", **tiles), target=target)


def simt_gemm(n: int):
    """float32 C = A @ B on CUDA cores, TVM's GPU GEMM tutorial schedule (64 x 64 a block, 2 x 2
    virtual threads of 8 x 8 threads, 4 x 4 elements a thread, float4 fetches)."""
    A, B = sl.placeholder((n, n), name="A"), sl.placeholder((n, n), name="B")
    C = nn.matmul(A, B)
    s = cuda.schedule_matmul_register_tiled(sl.create_schedule(C.op), C, tile=64, threads=8, vthreads=2, k_tile=8,
                                            fetch_vector=4)
    return DSLKernel(s, [A, B, C])


def silu_and_mul(rows: int, d: int):
    x = sl.placeholder((rows, 2 * d), name="x")
    out = nn.silu_and_mul(x)
    return DSLKernel(cuda.schedule_silu_and_mul(sl.create_schedule(out.op), out, threads=256, lanes=4), [x, out])


def softmax(rows: int, cols: int):
    X = sl.placeholder((rows, cols), name="X")
    Y = nn.softmax(X, name="Y")
    return DSLKernel(cuda.schedule_softmax(sl.create_schedule(Y.op), Y, 256), [X, Y])


def _torch_modules():
    import torch
    import torch.nn.functional as F

    class Attention(torch.nn.Module):
        def __init__(self, causal=False):
            super().__init__()
            self.causal = causal

        def forward(self, q, k, v):
            return F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
    return torch, Attention


# ---------------------------------------------------------------- the rows

@dataclass
class Row:
    name: str
    shape: str
    build: Callable[[object], object]           # (device) -> kernel (DSLKernel / FrontendKernel)
    inputs: Callable[[object, str], list]       # (torch, device) -> input tensors
    reference: Callable[..., object]            # torch's computation of the output (checked against)
    baseline: str                               # what the ratio compares with
    work: float                                 # FLOP, or bytes moved
    unit: str                                   # "TFLOP/s" or "GB/s"
    rtol: float = 1e-4
    atol: float = 1e-4
    baseline_fn: Optional[Callable[..., object]] = None     # timed instead of reference (a copy)
    setup: Optional[Callable[[object], None]] = None        # torch switches before the baseline
    kernel: object = field(default=None, repr=False)


def _randn(shape, dtype, seed=0):
    def make(torch, device):
        g = torch.Generator().manual_seed(seed)
        return torch.randn(*shape, generator=g).to(getattr(torch, dtype)).to(device)
    return make


def _inputs(*makers):
    return lambda torch, device: [m(torch, device) for m in makers]


def _no_tf32(torch):
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


def _copy_of(first_input_bytes: Callable[[list], int]):
    """The baseline of a memory-bound row: a device-to-device copy of as many bytes as it moves."""
    def fn(*inputs):
        buf = _COPY_BUFFERS.get(first_input_bytes(inputs))
        if buf is None:
            import torch
            n = first_input_bytes(inputs) // 2
            buf = _COPY_BUFFERS[first_input_bytes(inputs)] = (torch.empty(n, dtype=torch.uint8, device="cuda"),
                                                               torch.empty(n, dtype=torch.uint8, device="cuda"))
        return buf[1].copy_(buf[0])
    return fn


_COPY_BUFFERS: dict = {}


def rows(small: bool) -> List[Row]:
    """The table's rows; small: shapes that the emulation engines run in seconds."""
    torch, Attention = _torch_modules()
    import torch.nn.functional as F
    out: List[Row] = []
    gemm_sizes = (256,) if small else (4096, 8192)
    for n in gemm_sizes:
        for element in ("float16", "bfloat16"):
            tiles = {"64x64x32 s2": SMALL_TC_TILES} if small else TC_TILES
            for label, t in tiles.items():
                out.append(Row(f"GEMM {element} tensor cores {label}", f"{n}^3",
                               lambda dev, n=n, e=element, t=t: tc_gemm(n, e, t, TC_TARGET),
                               _inputs(_randn((n, n), element), _randn((n, n), element, 1)),
                               lambda a, b: a @ b, "cuBLAS", 2.0 * n ** 3, "TFLOP/s", rtol=1e-2, atol=0.1 if
                               element == "float16" else 0.5))
    n = 128 if small else 4096
    out.append(Row("GEMM float32 CUDA cores", f"{n}^3", lambda dev, n=n: simt_gemm(n),
                   _inputs(_randn((n, n), "float32"), _randn((n, n), "float32", 1)), lambda a, b: a @ b,
                   "cuBLAS, no TF32", 2.0 * n ** 3, "TFLOP/s", rtol=1e-3, atol=1e-2, setup=_no_tf32))
    m, k, h = (64, 128, 64) if small else (4096, 4096, 4096)

    def linear(dev, m=m, k=k, h=h, target="cuda"):
        torch.manual_seed(0)
        lin = torch.nn.Linear(k, h).half().to(dev).requires_grad_(False)
        return FrontendKernel(lin, [torch.zeros(m, k, dtype=torch.float16, device=dev)], target)
    out.append(Row("Linear float16 (frontend default)", f"{m}x{k} -> {h}", linear,
                   _inputs(_randn((m, k), "float16")), None, "cuBLAS (F.linear)", 2.0 * m * k * h, "TFLOP/s",
                   rtol=1e-2, atol=0.1))
    # the same with shared memory beyond 48 KB a block: 128 x 128 blocks (tensorcore_schedules.LARGE)
    out.append(Row("Linear float16 (frontend, 227 KB shared)", f"{m}x{k} -> {h}",
                   lambda dev: linear(dev, target=TC_TARGET), _inputs(_randn((m, k), "float16")), None,
                   "cuBLAS (F.linear)", 2.0 * m * k * h, "TFLOP/s", rtol=1e-2, atol=0.1))
    rows_, d = (64, 1024) if small else (8192, 4096)
    out.append(Row("SiluAndMul float32", f"{rows_}x{2 * d} -> {rows_}x{d}", lambda dev: silu_and_mul(rows_, d),
                   _inputs(_randn((rows_, 2 * d), "float32")), lambda x: F.silu(x[:, :d]) * x[:, d:], "copy",
                   rows_ * 3 * d * 4.0, "GB/s", baseline_fn=_copy_of(lambda i: rows_ * 3 * d * 4)))
    sr, sc = (64, 1024) if small else (4096, 4096)
    out.append(Row("softmax float32", f"{sr}x{sc}", lambda dev: softmax(sr, sc), _inputs(_randn((sr, sc), "float32")),
                   lambda x: x.softmax(dim=-1), "copy", 2.0 * sr * sc * 4, "GB/s", rtol=1e-4, atol=1e-6,
                   baseline_fn=_copy_of(lambda i: 2 * sr * sc * 4)))
    b, hd, L, D = (1, 2, 64, 32) if small else (4, 16, 1024, 64)
    qkv = [_randn((b, hd, L, D), "float16", seed) for seed in range(3)]

    for causal in (False, True):
        def attention(dev, causal=causal):
            return FrontendKernel(Attention(causal), [torch.zeros(b, hd, L, D, dtype=torch.float16, device=dev)
                                                      for _ in qkv])
        out.append(Row(f"attention float16 tensor cores{' causal' if causal else ''} (frontend)",
                       f"{b}x{hd}x{L}x{D}", attention, _inputs(*qkv),
                       lambda q, k, v, causal=causal: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
                       "torch SDPA", 4.0 * b * hd * L * L * D / (2 if causal else 1), "TFLOP/s", rtol=1e-2, atol=1e-2))
    n, c, hw, oc = (1, 16, (7, 9), 32) if small else (8, 64, (56, 56), 64)

    def conv(dev):
        torch.manual_seed(0)
        module = torch.nn.Conv2d(c, oc, 3, padding=1).half().to(dev).requires_grad_(False)
        return FrontendKernel(module, [torch.zeros(n, c, *hw, dtype=torch.float16, device=dev)])
    out.append(Row("conv2d 3x3 float16 tensor cores (frontend)", f"{n}x{c}x{hw[0]}x{hw[1]} -> {oc}", conv,
                   _inputs(_randn((n, c, *hw), "float16")), None, "cuDNN (F.conv2d)",
                   2.0 * n * oc * hw[0] * hw[1] * c * 9, "TFLOP/s", rtol=1e-2, atol=5e-2))
    return out


# ---------------------------------------------------------------- steps

def build_all(rs: List[Row], device: str) -> int:
    """Each row's kernel (or the exception that stopped it), with ptxas figures; returns the
    number of failures (a build error, a kernel that spills registers, a tensor-core row
    whose CUDA C has no mma.sync)."""
    failed = 0
    for r in rs:
        t0 = time.perf_counter()
        try:
            r.kernel = r.build(device)
            info = r.kernel.notes()
            spills = [k for k, v in info.items() if v.spill_bytes]
            figures = "; ".join(f"{k}: {v.registers} registers, {v.spill_bytes} B spilled, {v.shared_bytes} B shared"
                                for k, v in info.items()) or "no ptxas figures"
            print(f"built {r.name} {r.shape} in {time.perf_counter() - t0:.1f} s ({figures})", flush=True)
            if spills:
                print(f"  SPILLS in {', '.join(spills)}", flush=True)
                failed += 1
            if "tensor cores" in r.name and "mma.sync.aligned" not in r.kernel.source():
                print("  NOT ON TENSOR CORES (no mma.sync in its CUDA C)", flush=True)
                failed += 1
        except Exception as e:          # noqa: BLE001 - one row's failure is reported, the run goes on
            print(f"BUILD FAILED {r.name}: {type(e).__name__}: {str(e).splitlines()[0][:200]}", flush=True)
            r.kernel = e
            failed += 1
    return failed


def _reference(r: Row, inputs):
    if r.reference is not None:
        return r.reference(*inputs)
    return r.kernel.module(*inputs)        # a frontend row: the eager module itself


def _compare(torch, got, want, r: Row):
    err = (got.float() - want.float()).abs().max().item()
    return err, torch.allclose(got.float(), want.float(), rtol=r.rtol, atol=r.atol)


def emulation_check(torch, rs: List[Row], on_gpu: bool) -> int:
    """Each small row on the SIMT engine against torch on the CPU in float32 (and, with a GPU,
    against the same kernel on the GPU); returns the number of mismatches."""
    bad = 0
    print("\nemulation (SIMT engine) at small shapes" + (", compared with the GPU" if on_gpu else ""), flush=True)
    for r in rs:
        if isinstance(r.kernel, Exception) or r.kernel is None:
            continue
        try:
            t0 = time.perf_counter()
            inputs = r.inputs(torch, "cpu")
            if isinstance(r.kernel, FrontendKernel) and on_gpu:
                cpu = FrontendKernel(copy.deepcopy(r.kernel.module).cpu(), inputs)
            else:
                cpu = r.kernel
            got = cpu.emulate(torch, inputs)
            module = cpu.module if isinstance(cpu, FrontendKernel) else None
            want = (r.reference(*[x.float() for x in inputs]) if r.reference is not None
                    else copy.deepcopy(module).float()(*[x.float() for x in inputs]))
            err, ok = _compare(torch, got, want, r)
            line = f"  {r.name:<42} vs torch (float32): max |error| {err:.2e}{'' if ok else '  MISMATCH'}"
            bad += not ok
            if on_gpu:
                gpu = r.kernel.run(torch, [x.cuda() for x in inputs]).cpu()
                diff = (gpu.float() - got.float()).abs().max().item()
                same = torch.allclose(gpu.float(), got.float(), rtol=r.rtol, atol=r.atol)
                line += f"; GPU vs emulated: max |difference| {diff:.2e}{'' if same else '  MISMATCH'}"
                bad += not same
            print(line + f" ({time.perf_counter() - t0:.1f} s)", flush=True)
        except Exception as e:       # noqa: BLE001
            print(f"  {r.name}: FAILED {type(e).__name__}: {str(e).splitlines()[0][:200]}", flush=True)
            bad += 1
    return bad


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


def rate(r: Row, ms: float) -> float:
    return r.work / (ms * 1e-3) / (1e12 if r.unit == "TFLOP/s" else 1e9)


@dataclass
class Result:
    name: str
    shape: str
    ms: Optional[float]
    baseline: str
    baseline_ms: Optional[float]
    note: str = ""


def time_row(torch, r: Row, min_ms: float) -> Result:
    res = Result(r.name, r.shape, None, r.baseline, None)
    try:
        inputs = r.inputs(torch, "cuda")
        if r.setup is not None:
            r.setup(torch)
        want = _reference(r, inputs)
    except Exception as e:           # noqa: BLE001
        res.note = f"inputs or torch reference failed: {type(e).__name__}: {e}"
        return res
    if isinstance(r.kernel, Exception):
        res.note = f"not built: {type(r.kernel).__name__}"
    else:
        try:
            got = r.kernel.run(torch, inputs)
            torch.cuda.synchronize()
            err, ok = _compare(torch, got, want, r)
            res.note = f"max |error| {err:.2e}" + ("" if ok else "  WRONG RESULT (not timed)")
            if ok:                   # only a checked kernel is timed
                res.ms = time_ms(torch, lambda: r.kernel.run(torch, inputs), min_ms)
        except Exception as e:       # noqa: BLE001
            res.note = f"FAILED: {type(e).__name__}: {str(e).splitlines()[0][:160]}"
            traceback.print_exc(limit=3)
    try:
        base = r.baseline_fn or r.reference or r.kernel.module
        res.baseline_ms = time_ms(torch, lambda: base(*inputs), min_ms)
    except Exception as e:           # noqa: BLE001
        res.note += f"; baseline FAILED: {type(e).__name__}: {e}"
    if res.ms is not None:
        print(f"{r.name:<42} {r.shape:<22} {res.ms:8.3f} ms {rate(r, res.ms):8.1f} {r.unit:<8} "
              f"({r.baseline}: {res.baseline_ms or float('nan'):8.3f} ms)  {res.note}", flush=True)
    else:
        print(f"{r.name:<42} {r.shape:<22} {res.note}", flush=True)
    return res


def auto_schedule_row(torch, trials: int, n: int, timeout_s: float) -> Result:
    """A float32 GEMM auto-scheduled for the CUDA target, each candidate timed on the GPU with
    CUDA events; the best's time against cuBLAS without TF32."""
    import tempfile
    res = Result(f"auto_schedule GEMM float32 ({trials} trials)", f"{n}^3", None, "cuBLAS, no TF32", None)
    try:
        A, B = sl.placeholder((n, n), name="A"), sl.placeholder((n, n), name="B")
        C = nn.matmul(A, B)
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory() as tmp:
            s, args = sl.auto_schedule([C], target="cuda", trials=trials, log=os.path.join(tmp, "gemm.jsonl"),
                                       seed=0, verbose=0, timeout=timeout_s)
        kernel = DSLKernel(s, args)
        a, b = (torch.randn(n, n, device="cuda") for _ in range(2))
        _no_tf32(torch)
        got = kernel.run(torch, [a, b])
        err = (got - a @ b).abs().max().item()
        res.note = f"searched in {time.perf_counter() - t0:.0f} s; max |error| {err:.2e}"
        if err < 1e-2:
            res.ms = time_ms(torch, lambda: kernel.run(torch, [a, b]), 20.0)
        res.baseline_ms = time_ms(torch, lambda: a @ b, 20.0)
    except Exception as e:           # noqa: BLE001
        res.note = f"FAILED: {type(e).__name__}: {str(e).splitlines()[0][:160]}"
    print(f"{res.name:<42} {res.shape:<22} {res.ms or float('nan'):8.3f} ms  {res.note}", flush=True)
    return res


def ratio_table(results: List[Result]) -> None:
    """schedlang's speed over the baseline's, one line a row."""
    print(f"\n{'row':<42} {'shape':<22} {'schedlang ms':>12} {'baseline':<18} {'base ms':>9} {'ratio':>6}")
    for r in results:
        ms = f"{r.ms:12.3f}" if r.ms else f"{'-':>12}"
        base = f"{r.baseline_ms:9.3f}" if r.baseline_ms else f"{'-':>9}"
        ratio = f"{r.baseline_ms / r.ms:6.2f}" if r.ms and r.baseline_ms else f"{'-':>6}"
        print(f"{r.name:<42} {r.shape:<22} {ms} {r.baseline:<18} {base} {ratio}", flush=True)


def run_tests(timeout_s: int) -> None:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.perf_counter()
    try:
        run = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-m", "gpu"],
                             cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout_s)
        lines = (run.stdout + run.stderr).strip().splitlines()
        tail = "\n    ".join(lines[-15:] if run.returncode else lines[-1:])
        status = "passed" if run.returncode == 0 else f"FAILED (exit {run.returncode})"
        print(f"GPU tests (pytest -m gpu): {status} in {time.perf_counter() - t0:.0f} s\n    {tail}", flush=True)
    except subprocess.TimeoutExpired:
        print(f"GPU tests: TIMED OUT after {timeout_s} s", flush=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small shapes, short timing and search")
    p.add_argument("--tests", action="store_true", help="run the GPU tests (pytest -m gpu) first")
    p.add_argument("--no-tests", "--no-compile", action="store_true",
                   help="accepted for older command lines: tests run only with --tests, torch.compile is not timed")
    p.add_argument("--test-timeout", type=int, default=120, help="seconds for the test run (default 120)")
    p.add_argument("--trials", type=int, default=64, help="auto-schedule trials (default 64; --quick 8)")
    opts = p.parse_args(argv)
    t0 = time.perf_counter()
    from schedlang.target.cuda.gpu import gpu_problem
    import torch
    problem = gpu_problem()
    device = "cuda" if problem is None else "cpu"

    table = rows(small=opts.quick)
    failed = build_all(table, device)
    small = table if opts.quick else rows(small=True)
    if small is not table:
        failed += build_all(small, device)
    if problem is not None:
        bad = emulation_check(torch, small, on_gpu=False)
        print(f"no GPU here ({problem}): {len(table) - failed} of {len(table)} kernels compiled without spills; "
              f"{len(small) - bad} of {len(small)} emulated kernels match torch; nothing timed.")
        return 1 if failed or bad else 0

    if opts.tests:
        run_tests(opts.test_timeout)
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    print(f"\ndevice: {props.name}, {props.multi_processor_count} SMs, {props.total_memory / 2 ** 30:.0f} GiB; "
          f"torch {torch.__version__}", flush=True)
    emulation_check(torch, small, on_gpu=True)
    print("", flush=True)
    min_ms = 20.0 if opts.quick else 50.0
    results = [time_row(torch, r, min_ms) for r in table]
    trials = 8 if opts.quick and opts.trials == 64 else opts.trials
    results.append(auto_schedule_row(torch, trials, 512 if opts.quick else 1024, 60.0 if opts.quick else 120.0))
    ratio_table(results)
    print(f"\ngpu_check done in {time.perf_counter() - t0:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
