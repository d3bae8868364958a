"""gpu_estimate.host_tensor: the arrays a GPU-timed candidate gets, numpy -> torch on the host
(no GPU needed). torch.from_numpy refuses ml_dtypes' bfloat16, so bfloat16 goes through its bits."""
import ml_dtypes
import numpy as np
import pytest
import torch

from schedlang.autoschedule.gpu_estimate import host_tensor


def test_bfloat16_arrays_keep_their_values_and_dtype():
    values = np.array([[1.0, -2.5, 3.140625], [0.0, 1e-3, -65504.0]], dtype=np.float32)
    a = values.astype(ml_dtypes.bfloat16)
    with pytest.raises(TypeError):
        torch.from_numpy(a)                      # (why host_tensor exists)
    t = host_tensor(a)
    assert t.dtype == torch.bfloat16 and tuple(t.shape) == a.shape
    assert torch.equal(t, torch.from_numpy(values).to(torch.bfloat16))


@pytest.mark.parametrize("dtype", ["float16", "float32", "int8", "int64"])
def test_other_dtypes_are_plain_from_numpy(dtype):
    a = np.arange(12, dtype=dtype).reshape(3, 4)[:, ::2]          # not contiguous: copied first
    t = host_tensor(a)
    assert t.dtype == torch.from_numpy(np.ascontiguousarray(a)).dtype
    np.testing.assert_array_equal(t.numpy(), a)
