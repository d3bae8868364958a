"""A 2-d convolution as an implicit GEMM on tensor cores in the auto-scheduler
(topi/cuda_tensorcore.conv2d_implicit_gemm; the gpu_tensor_core sketch rule): match_gemm takes
the GEMM (the weight [OC, K] shared by the batch, the im2col columns inlined), the rule is one
of the stage's sketches, and sampled candidates (plain copies: the im2col is an inlined view,
never cp.async) build without spills and match the convolution on the SIMT engine for odd
spatial sizes, padding and stride."""
import random

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import schedlang as sl
from schedlang.autoschedule.sample import sample
from schedlang.autoschedule.sketch import generate_sketches
from schedlang.autoschedule.task import SearchTask
from schedlang.topi import cuda_tensorcore as tc

pytest.importorskip("cuda.bindings")      # NVRTC compiles the CUDA C

SM80 = "cuda -arch=sm_80"


def conv(shape_x, shape_w, stride=(1, 1), padding=(0, 0), element="float16"):
    x = sl.placeholder(shape_x, element, name="x")
    w = sl.placeholder(shape_w, element, name="w")
    return x, w, tc.conv2d_implicit_gemm(x, w, stride, padding, name="conv")[2]


def test_match_gemm_takes_the_implicit_gemm():
    _, _, gemm = conv((2, 16, 7, 9), (32, 16, 3, 3), padding=(1, 1))
    g = tc.match_gemm(gemm)
    assert (g.M, g.N, g.K, g.batch, g.layout, g.shared_a) == (32, 64, 144, (2,), "kn", True)
    assert g.whole_fragments


@pytest.mark.parametrize("shape_x, shape_w, stride, padding, seed",
                         [((1, 16, 7, 9), (16, 16, 3, 3), (1, 1), (1, 1), 0),
                          ((2, 32, 9, 9), (32, 32, 3, 3), (2, 2), (1, 1), 1)],
                         ids=["7x9-pad1", "batch2-stride2"])
def test_sampled_candidates_match_the_convolution(shape_x, shape_w, stride, padding, seed):
    x, w, gemm = conv(shape_x, shape_w, stride, padding)
    task = SearchTask(tensors=[x, w, gemm], target=SM80)
    sketches = generate_sketches(task)
    assert [sk.name for sk in sketches][0].startswith("gpu_tensor_core")
    s, d = sample(task, sketches[0], random.Random(seed))
    assert d["conv_gemm|tc|async"] is False
    mod = sl.build(s, task.args, target=SM80)
    assert "mma.sync.aligned.m16n8k16" in mod.get_source("ptx")
    if mod.ptxas_info is not None:
        assert all(i.spill_bytes == 0 for i in mod.ptxas_info.values()), d
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1, 1, shape_x).astype(np.float16)
    b = rng.uniform(-1, 1, shape_w).astype(np.float16)
    out = np.zeros(gemm.shape, np.float32)
    mod.emulate(a, b, out, engine="simt")
    ref = F.conv2d(torch.from_numpy(a).double(), torch.from_numpy(b).double(), stride=stride, padding=padding)
    n, oc, oh, ow = ref.shape
    np.testing.assert_allclose(out[:, :, :oh * ow], ref.reshape(n, oc, oh * ow).numpy(), rtol=1e-3, atol=1e-3,
                               err_msg=str(d))
    np.testing.assert_array_equal(out[:, :, oh * ow:], 0)      # the padded pixels read zeros
