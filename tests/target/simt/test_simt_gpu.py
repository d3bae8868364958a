"""On a real GPU (skipped where cuInit finds none): the SIMT engine gives the GPU's results, and its
occupancy is the driver's (cuOccupancyMaxActiveBlocksPerMultiprocessor) for the same registers."""
import numpy as np
import pytest

import schedlang as sl
from schedlang.target.simt.occupancy import occupancy
from tests.helpers import assert_close
from tests.target.cuda.schedules import arrays_for
from tests.target.simt.test_simt import PROGRAMS

pytest.importorskip("cuda.bindings")
torch = pytest.importorskip("torch")
from schedlang.target.cuda.gpu import gpu_problem  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(gpu_problem() is not None, reason=f"no GPU: {gpu_problem()}")]


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_simt_matches_the_gpu_and_its_occupancy(name):
    from cuda.bindings import driver
    s, args = PROGRAMS[name]()
    mod = sl.build(s, args, target="cuda")
    arrays, feed = arrays_for(s, args)
    on_gpu = [torch.from_numpy(a.copy()).cuda() for a in arrays]
    mod(*on_gpu)
    torch.cuda.synchronize()
    report = mod.emulate(*arrays, engine="simt", profile=True)
    for t in args:
        if t not in feed:
            i = args.index(t)
            assert_close(arrays[i], on_gpu[i].cpu().numpy(), str(t.dtype), name=t.name)
    major = driver.cuDeviceGetAttribute(driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                        driver.cuDeviceGet(torch.cuda.current_device())[1])[1]
    minor = driver.cuDeviceGetAttribute(driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                                        driver.cuDeviceGet(torch.cuda.current_device())[1])[1]
    for k, p in report.items():
        fn = mod._gpu._functions[k]
        regs = driver.cuFuncGetAttribute(driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NUM_REGS, fn)[1]
        err, blocks = driver.cuOccupancyMaxActiveBlocksPerMultiprocessor(fn, p.threads_per_block, 0)
        assert err == driver.CUresult.CUDA_SUCCESS
        mine = occupancy(f"sm_{major}{minor}", p.threads_per_block, p.shared_bytes, regs)
        assert mine.blocks_per_sm == blocks, (k, regs, p.shared_bytes, mine)
    assert np.isfinite(arrays[-1]).all()
