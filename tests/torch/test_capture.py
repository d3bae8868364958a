"""Capture: torch.export -> Torch IR (export.py, torch_ir.py)."""
import pytest
import torch
import torch.nn as nn

import schedlang.torch as st
from schedlang.torch import capture, decomposition_table
from tests.helpers import GOLDEN

from .modules import SiluAndMul

# The seed document's Torch IR of SiluAndMul: the golden file of test_golden.py's "torch" level.
SEED = (GOLDEN / "torch_silu_and_mul.torch.txt").read_text().rstrip("\n")


def test_silu_and_mul_prints_as_the_seed():
    g = capture(SiluAndMul(), (torch.randn(1, 32, 4096),))
    assert str(g) == SEED


def test_table_keeps_lowered_ops_whole():
    table = decomposition_table()
    assert torch.ops.aten.silu.default not in table
    assert torch.ops.aten.gelu.default not in table
    from torch._decomp import core_aten_decompositions
    full = core_aten_decompositions()
    kept = [op for op in full if op not in table]
    assert kept and all(op in full for op in table)       # only lowered ops were removed


class Lin(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 4)
        self.register_buffer("b", torch.arange(4.0))

    def forward(self, x):
        return self.lin(x).view(-1, 2) + self.b.repeat(2)[:2], self.b * 2


def test_parameters_buffers_and_a_dynamic_dim():
    m = Lin()
    g = capture(m, (torch.randn(3, 8),), dynamic_shapes={"x": {0: torch.export.Dim("batch")}})
    text = str(g)
    assert "  x: (batch, 8) f32" in text
    assert "  lin_weight: (4, 8) f32   # parameter lin.weight" in text
    assert "  b: (4,) f32   # buffer b" in text
    assert [i.kind for i in g.inputs] == ["input", "parameter", "parameter", "buffer"]
    assert torch.equal(g.inputs[1].value, m.lin.weight.detach())
    assert "batch" in g.size_vars
    view = next(n for n in g.nodes if n.op == "view")
    assert str(view.shape[0]) == "2 * batch" and view.shape[1] == 2
    assert g.output_kind == "tuple" and len(g.outputs) == 2


def test_uneven_split_names_and_sizes():
    class M(nn.Module):
        def forward(self, x):
            a, b, c = torch.split(x, [2, 3, 1], dim=0)
            return a.sum(0) + b[0] - c[0]
    g = capture(M(), (torch.randn(6, 5),))
    slices = [n for n in g.nodes if n.op == "slice"]
    assert [n.name for n in slices] == ["split_0", "split_1", "split_2"]
    assert [n.args[2:] for n in slices] == [(0, 2), (2, 5), (5, 6)]
    assert [n.shape for n in slices] == [(2, 5), (3, 5), (1, 5)]


def test_table_is_built_once_and_handed_out_fresh():
    a, b = decomposition_table(), decomposition_table()
    assert a == b and a is not b
    a.clear()                                             # a caller's edits stay its own
    assert decomposition_table() == b


def test_compile_pauses_the_collector_and_restores_it():
    import gc
    from schedlang.torch import compile as sl_compile
    from schedlang.torch.gc_pause import gc_paused
    assert gc.isenabled()
    with gc_paused():
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()                         # the outer pause still holds
    assert gc.isenabled()
    sl_compile(SiluAndMul(), (torch.randn(2, 8),))
    assert gc.isenabled()


class _Cycle:
    def __init__(self):
        self.me = self


def test_the_first_pause_moves_what_it_left_to_the_oldest_generation(monkeypatch):
    """What the first pause of a process leaves (export's imports, mostly) goes to the oldest
    generation without a pass; its garbage is found by the next full collection. Later pauses,
    and a program that froze objects itself, are left to the collector as ever."""
    import gc
    import weakref
    from schedlang.torch import gc_pause
    monkeypatch.setattr(gc_pause, "_promoted", False)
    with gc_pause.gc_paused():
        kept, lost = _Cycle(), weakref.ref(_Cycle())
    assert gc.get_freeze_count() == 0
    assert any(o is kept for o in gc.get_objects(2)), "in the oldest generation"
    gc.collect(1)
    assert lost() is not None, "a young collection does not walk it"
    gc.collect()
    assert lost() is None, "the full collection frees the garbage"
    with gc_pause.gc_paused():
        later = _Cycle()
    assert not any(o is later for o in gc.get_objects(2)), "once per process"
    monkeypatch.setattr(gc_pause, "_promoted", False)
    gc.freeze()
    try:
        with gc_pause.gc_paused():
            mine = _Cycle()
        assert not any(o is mine for o in gc.get_objects(2)) and gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()


def test_what_torch_export_cannot_trace_is_a_capture_error():
    """An op whose output shape depends on values (CTC loss) or a dynamically quantized module
    (packed parameters torch.export cannot flatten): a CaptureError naming torch's reason and
    the Dynamo path, which runs such parts in eager torch."""
    class CTC(torch.nn.Module):
        def forward(self, logp, targets, lengths, target_lengths):
            return torch.nn.functional.ctc_loss(logp, targets, lengths, target_lengths)

    args = (torch.randn(6, 2, 5).log_softmax(2), torch.tensor([[1, 2, 2], [3, 1, 0]]),
            torch.tensor([6, 5]), torch.tensor([3, 2]))
    with pytest.raises(st.CaptureError, match=r"(?s)could not capture CTC: DynamicOutputShapeException.*backend="):
        st.compile(CTC(), args)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        quantized = torch.ao.quantization.quantize_dynamic(torch.nn.Sequential(torch.nn.Linear(8, 4)),
                                                           {torch.nn.Linear}, dtype=torch.qint8)
    with pytest.raises(st.CaptureError, match="could not capture Sequential"):
        st.compile(quantized, (torch.randn(2, 8),))
    with pytest.raises(TypeError):          # wrong arguments stay the TypeError torch raises
        st.compile(CTC(), args[:2])
