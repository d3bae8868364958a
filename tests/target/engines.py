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
    return run_engines_batch([(fns, inputs)], engines, cuda_threads)[0]


def run_engines_batch(cases: Sequence[tuple], engines=ENGINES,
                      cuda_threads: int = 8) -> List[Dict[str, List[np.ndarray]]]:
    """run_engines for each (fns, inputs) of cases, every case's computes built into one module
    per engine (the shim's g++ run, 2 s of CPU, once for all of them): for each case, engine ->
    its outputs in the order of its fns."""
    phs, outs, feeds = [], [], []
    for c, (fns, inputs) in enumerate(cases):
        n = len(inputs[0])
        p = [sl.placeholder((n,), dtype=_sl_dtype(x), name=f"x{c}_{i}") for i, x in enumerate(inputs)]
        outs.append([sl.compute((n,), lambda i, fn=fn, p=p: fn(*(q[i] for q in p)), name=f"out{c}_{k}")
                     for k, fn in enumerate(fns)])
        phs += p
        feeds += list(inputs)
    flat = [t for case in outs for t in case]
    results = {}
    for engine in engines:
        if engine == "reference":
            got = sl.reference(flat, dict(zip(phs, feeds)))
            results[engine] = [np.asarray(g, t.dtype_obj.numpy) for g, t in zip(got, flat)]
            continue
        s = sl.create_schedule([t.op for t in flat])
        if engine not in CPU_ENGINES:
            for t in flat:
                bx, tx = s[t].split(t.op.axis[0], factor=cuda_threads)
                s[t].bind(bx, sl.thread_axis("blockIdx.x"))
                s[t].bind(tx, sl.thread_axis("threadIdx.x"))
        mod = sl.build(s, phs + flat, target=engine if engine in CPU_ENGINES else "cuda")
        got = [np.zeros(int(t.shape[0]), t.dtype_obj.numpy) for t in flat]
        if engine in CPU_ENGINES:
            mod(*feeds, *got)
        elif engine == "gpu":
            got = _on_gpu(mod, feeds, got)
        else:
            mod.emulate(*feeds, *got, engine=engine)
        results[engine] = got
    split, start = [], 0
    for case in outs:
        split.append({engine: got[start:start + len(case)] for engine, got in results.items()})
        start += len(case)
    return split


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
