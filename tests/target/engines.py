"""Run one elementwise expression on every engine (llvm, the reference evaluator, CUDA C
through the g++ shim and through the SIMT interpreter, the c target where a C compiler is found) over given input arrays, and
special float values to feed it (signed zeros, infinities, NaNs of both signs, subnormals)."""
from __future__ import annotations

from typing import Callable, Dict, List, Sequence

import ml_dtypes
import numpy as np

import schedlang as sl

from tests.cpu_targets import HAS_CC

ENGINES = ("llvm", "reference", "shim", "simt") + (("c",) if HAS_CC else ())
CPU_ENGINES = ("llvm", "c")     # built for the CPU and called directly
FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")


def np_dtype(dtype: str) -> np.dtype:
    return np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)


def special_values(dtype: str) -> np.ndarray:
    """+-0, +-inf, NaNs of both signs, +-the least subnormal, +-the largest value and a few
    ordinary numbers, in dtype."""
    dt = np_dtype(dtype)
    info = ml_dtypes.finfo(dt)
    tiny = float(info.smallest_subnormal)
    values = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 1.5, -2.5, 0.1, tiny, -tiny,
                       float(info.max), -float(info.max), float(info.smallest_normal), 3.0], dtype=dt)
    nan = values[4:5].copy()
    return np.concatenate([values, np.negative(nan)])     # -nan: the sign bit of a NaN set


def bits(a: np.ndarray) -> np.ndarray:
    """The raw bits of a float array, as unsigned integers of its width."""
    a = np.ascontiguousarray(a)
    return a.view(f"u{a.dtype.itemsize}")


def run_engines(fns: Sequence[Callable], inputs: Sequence[np.ndarray], engines=ENGINES,
                cuda_threads: int = 8) -> Dict[str, List[np.ndarray]]:
    """Each fn(*reads) as one compute over the 1-d inputs (of one length), all of them built as
    one module on each engine (one compile): engine -> the outputs, in the order of fns."""
    n = len(inputs[0])
    phs = [sl.placeholder((n,), dtype=_sl_dtype(x), name=f"x{i}") for i, x in enumerate(inputs)]
    outs = [sl.compute((n,), lambda i, fn=fn: fn(*(p[i] for p in phs)), name=f"out{k}") for k, fn in enumerate(fns)]
    results = {}
    for engine in engines:
        if engine == "reference":
            got = sl.reference(outs, dict(zip(phs, inputs)))
            results[engine] = [np.asarray(g, t.dtype_obj.numpy) for g, t in zip(got, outs)]
            continue
        s = sl.create_schedule([t.op for t in outs])
        if engine not in CPU_ENGINES:
            for t in outs:
                bx, tx = s[t].split(t.op.axis[0], factor=cuda_threads)
                s[t].bind(bx, sl.thread_axis("blockIdx.x"))
                s[t].bind(tx, sl.thread_axis("threadIdx.x"))
        mod = sl.build(s, phs + outs, target=engine if engine in CPU_ENGINES else "cuda")
        got = [np.zeros(n, t.dtype_obj.numpy) for t in outs]
        if engine in CPU_ENGINES:
            mod(*inputs, *got)
        elif engine == "gpu":
            got = _on_gpu(mod, list(inputs), got)
        else:
            mod.emulate(*inputs, *got, engine=engine)
        results[engine] = got
    return results


def _on_gpu(mod, inputs, outputs):
    """Run mod on the GPU (torch cuda tensors holding the arrays' bits) and read the outputs back."""
    import torch
    kinds = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
    tensors = [torch.from_numpy(bits(a).view(f"i{a.dtype.itemsize}") if a.dtype.kind not in "iub" else a).cuda()
               for a in inputs + outputs]
    mod(*[t.view(_torch_dtype(a)) for t, a in zip(tensors, inputs + outputs)])
    torch.cuda.synchronize()
    return [t.cpu().view(kinds[a.dtype.itemsize]).numpy().view(a.dtype)
            for t, a in zip(tensors[len(inputs):], outputs)]


def _torch_dtype(a: np.ndarray):
    import torch
    return torch.bfloat16 if a.dtype == np.dtype(ml_dtypes.bfloat16) else getattr(torch, str(a.dtype))


def _sl_dtype(x: np.ndarray) -> str:
    return "bfloat16" if x.dtype == np.dtype(ml_dtypes.bfloat16) else str(x.dtype)
