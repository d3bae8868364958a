"""LLVMModule.prepare: a call bound once and run again with some arguments replaced, each
replacement checked as a whole call checks it (target/llvm/module.PreparedCall)."""
import numpy as np
import pytest
import torch

import schedlang as sl
from tests import programs


def _add():
    A, B, C = programs.vector_add(37)
    return sl.build(sl.create_schedule(C.op), [A, B, C], target="llvm")


def test_replaced_arguments_are_read_and_written():
    mod = _add()
    a, b, c = (torch.randn(37) for _ in range(3))
    call = mod.prepare([a, b, c])
    call.run()
    torch.testing.assert_close(c, a + b)
    a2, c2 = torch.randn(37), torch.empty(37)
    call.run([(0, a2), (2, c2)])
    torch.testing.assert_close(c2, a2 + b)
    call.run([(0, np.ones(37, dtype=np.float32)), (2, c2)])      # numpy arrays as in a whole call
    torch.testing.assert_close(c2, b + 1)


def test_replacements_are_checked():
    mod = _add()
    a, b, c = (torch.randn(37) for _ in range(3))
    call = mod.prepare([a, b, c])
    with pytest.raises(TypeError, match="argument 'A' must have dtype float32"):
        call.run([(0, torch.randn(37, dtype=torch.float64))])
    with pytest.raises(ValueError, match="argument 'B' must have shape"):
        call.run([(1, torch.randn(38))])
    with pytest.raises(ValueError, match="not C-contiguous"):
        call.run([(1, torch.randn(37, 2)[:, 0])])
    with pytest.raises(ValueError, match="'B' and 'C' overlap"):
        call.run([(2, b)])
    with pytest.raises(ValueError, match="'A' and 'C' overlap"):
        call.run([(0, c)])


def test_released_arguments_must_be_replaced():
    mod = _add()
    a, b, c = (torch.randn(37) for _ in range(3))
    call = mod.prepare([a, b, c])
    call.release([2])
    with pytest.raises(ValueError, match="must replace the arguments it released"):
        call.run([(0, a)])
    out = torch.empty(37)
    call.run([(2, out)])
    torch.testing.assert_close(out, a + b)
