"""The SIMT engine (mod.emulate(..., engine="simt")): the GPU programs the CUDA tests run through
the shim, interpreted from Kernel IR against the reference evaluator; access and race checks."""
import numpy as np
import pytest

import schedlang as sl
from schedlang.target.simt import SharedMemoryRace
from tests.helpers import assert_close
from tests.target.cuda import schedules
from tests.target.cuda.schedules import arrays_for

pytest.importorskip("cuda.bindings")


def simt_and_check(s, args, **options):
    mod = sl.build(s, args, target="cuda")
    arrays, feed = arrays_for(s, args)
    result = mod.emulate(*arrays, engine="simt", **options)
    outputs = [t for t in args if t not in feed]
    for t, want in zip(outputs, sl.reference(outputs, feed)):
        assert_close(arrays[args.index(t)], want, str(t.dtype), name=t.name)
    return mod, result


PROGRAMS = {
    "elementwise_tail": lambda: schedules.elementwise(1000, 64),
    "silu_and_mul": lambda: schedules.silu_and_mul(),
    "tiled_gemm": lambda: schedules.tiled_gemm(),
    "row_sum": lambda: schedules.row_sum(),
    "shared_gemm": lambda: schedules.shared_gemm(20, 21, 19, block=(4, 8), k_tile=4),
    "shared_gemm_odd": lambda: schedules.shared_gemm(70, 50, 30),
    "shared_gemm_local_a": lambda: schedules.shared_gemm(33, 18, 21, local_a=True),
    "vthread_gemm": lambda: schedules.vthread_gemm(37, 35, 13),
    "row_sum_cross_thread": lambda: schedules.row_reduce(rows=5, cols=100, threads=32),
    "row_max_cross_thread_2d": lambda: schedules.row_reduce(rows=7, cols=300, threads=128, reducer="max",
                                                            rows_per_block=2),
    "row_min_8_threads": lambda: schedules.row_reduce(rows=9, cols=37, threads=8, reducer="min"),
    "store_predicate": lambda: schedules.row_reduce(rows=5, cols=70, threads=64, store_predicate=True),
    "softmax_fused": lambda: schedules.softmax(rows=6, cols=70),
    "softmax_unfused": lambda: schedules.softmax(rows=5, cols=45, fused=False),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_gpu_programs_against_the_reference(name):
    simt_and_check(*PROGRAMS[name]())
