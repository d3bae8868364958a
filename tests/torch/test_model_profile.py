"""A model compiled for "llvm -profile" gives each kernel's time inside the model
(CompiledModule.profile, torch/profile.py: TVM's debug executor): one row per kernel call of a
forward, their sum within the forward's time, a table slowest first; the outputs are eager's."""
import re

import pytest
import torch

import schedlang.torch as st
from schedlang.torch import zoo


@pytest.fixture(scope="module")
def profiled():
    model, inputs = zoo.build("bert", "tiny")
    with torch.no_grad():
        compiled = st.compile(model, inputs, target="llvm -profile")
    return model, inputs, compiled


def test_every_kernel_call_of_a_forward_has_a_time(profiled):
    model, inputs, compiled = profiled
    prof = compiled.profile(*inputs, number=5)
    kernels = sum(len(mod.kernel_names) for mod in compiled.modules.values())
    assert len(prof.rows) == kernels >= 5
    assert all(r.ms > 0 for r in prof.rows)
    assert prof.runs == 5
    assert 0 < prof.kernels_ms <= prof.forward_ms * 1.02       # the kernels run within the forward
    with torch.no_grad():
        torch.testing.assert_close(compiled(*inputs), model(*inputs), rtol=1e-4, atol=1e-5)


def test_the_table_lists_the_slowest_kernels_first(profiled):
    _, inputs, compiled = profiled
    prof = compiled.profile(*inputs, number=2)
    text = prof.table(top=3)
    lines = text.splitlines()
    assert lines[0].split() == ["part", "kernel", "ms", "%"]
    shown = [float(line.split()[-2]) for line in lines[2:5]]
    assert shown == sorted(shown, reverse=True) and shown[0] == pytest.approx(max(r.ms for r in prof.rows), abs=1e-4)
    assert f"({len(prof.rows) - 3} more kernels)" in text and "(outside the kernels)" in text
    assert re.search(r"forward: [\d.]+ ms \(mean of 2\), \d+ kernel calls", lines[-1])
    assert str(prof) == prof.table()
    with pytest.raises(ValueError, match="number must be a positive integer"):
        compiled.profile(*inputs, number=0)


def test_profile_needs_the_option_and_a_count():
    model, inputs = zoo.build("bert", "tiny")
    with torch.no_grad():
        compiled = st.compile(model, inputs)
    with pytest.raises(ValueError, match="llvm -profile"):
        compiled.profile(*inputs)
