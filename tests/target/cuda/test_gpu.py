"""Real GPU launches (skipped where cuInit finds no GPU): the GPU agrees with the reference."""
import numpy as np
import pytest

import schedlang as sl
from tests.helpers import assert_close
from tests.target.cuda import schedules
from tests.target.cuda.schedules import arrays_for

pytest.importorskip("cuda.bindings")
torch = pytest.importorskip("torch")
from schedlang.target.cuda.gpu import gpu_problem  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(gpu_problem() is not None, reason=f"no GPU: {gpu_problem()}")]


@pytest.mark.parametrize("program", [schedules.elementwise, schedules.silu_and_mul, schedules.tiled_gemm,
                                     schedules.row_sum])
def test_gpu_matches_the_reference(program):
    s, args = program()
    mod = sl.build(s, args, target="cuda")
    arrays, feed = arrays_for(s, args)
    on_gpu = [torch.from_numpy(a).cuda() for a in arrays]
    mod(*on_gpu)
    torch.cuda.synchronize()
    outputs = [t for t in args if t not in feed]
    for t, want in zip(outputs, sl.reference(outputs, feed)):
        assert_close(on_gpu[args.index(t)].cpu().numpy(), want, str(t.dtype), name=t.name)


def test_gpu_call_takes_cuda_tensors_only():
    s, args = schedules.elementwise(100, 32)
    mod = sl.build(s, args, target="cuda")
    with pytest.raises(TypeError, match="numpy array; a GPU call takes torch cuda tensors"):
        mod(np.zeros(100, "float32"), np.zeros(100, "float32"))
