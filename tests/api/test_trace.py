"""build(..., trace=True) and SCHEDLANG_TRACE=1: the IR after every pass, named as in the
written-out pass lists (tile_passes, the backend's kernel_passes and stages)."""
import numpy as np
import pytest

import schedlang as sl
from schedlang.driver import pass_names
from tests import programs
from tests.cpu_targets import needs_cc

TILE = ["tensor", "loop", "infer_regions", "build_loop_nests", "simplify", "unique_loop_names"]
LLVM = TILE + ["flatten_buffers", "unroll_loops", "simplify", "widen_index_arith", "vectorize_loops", "simplify",
               "split_kernels", "add_size_params", "llvm", "llvm.opt", "jit"]
CUDA = TILE + ["flatten_buffers", "inject_virtual_threads", "unroll_loops", "simplify", "widen_index_arith",
               "vectorize_loops", "simplify", "lower_thread_allreduce", "insert_barriers", "inject_double_buffer",
               "complete_async_copies",
               "sink_thread_guards", "split_kernels", "add_size_params", "cuda", "ptx"]
C = TILE + ["flatten_buffers", "unroll_loops", "simplify", "widen_index_arith", "serialize_vector_loops",
            "split_kernels", "add_size_params", "c", "cc"]


def _gemm(gpu: bool):
    A, B, C = programs.gemm(16, 16, 8)
    s = sl.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[1], factor=4)
    if gpu:
        s[C].bind(C.op.axis[0], sl.thread_axis("blockIdx.x"))
        s[C].bind(xi, sl.thread_axis("threadIdx.x"))
    else:
        s[C].vectorize(xi)
    return s, [A, B, C]


@pytest.mark.parametrize("target, expected", [("llvm", LLVM), ("cuda", CUDA), pytest.param("c", C, marks=needs_cc)])
def test_trace_names_every_pass_in_order(target, expected, capsys):
    s, args = _gemm(target == "cuda")
    mod = sl.build(s, args, target=target, trace=True)
    names = [name for name, _ in mod.trace]
    assert names == expected == pass_names(target)
    texts = dict(mod.trace)
    assert texts["flatten_buffers"] != texts["unique_loop_names"]        # each entry is the IR then
    assert texts[target] == mod.ir[target]                                   # the stage's own text
    assert texts["add_size_params"] == str(sl.lower(s, args, level="kernel", target=target).ir["kernel"])
    err = capsys.readouterr().err
    assert all(f"IR after {name} ----" in err for name in expected)
    assert err.index("IR after flatten_buffers") < err.index("IR after split_kernels")


def test_trace_from_the_environment_and_a_traced_build_compiles(monkeypatch, capsys):
    s, args = _gemm(False)
    sl.build(s, args)                                    # cached: a traced build must not reuse it
    monkeypatch.setenv("SCHEDLANG_TRACE", "1")
    mod = sl.build(s, args)
    assert [name for name, _ in mod.trace] == LLVM
    assert "IR after vectorize_loops" in capsys.readouterr().err
    rng = np.random.default_rng(0)
    a, b = rng.random((16, 8), dtype=np.float32), rng.random((8, 16), dtype=np.float32)
    c = np.zeros((16, 16), np.float32)
    mod(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)
    monkeypatch.setenv("SCHEDLANG_TRACE", "0")
    sl.build(s, args, cache=False)
    assert "IR after" not in capsys.readouterr().err


def test_trace_of_a_lowered_function_starts_at_kernel_ir(capsys):
    s, args = _gemm(False)
    mod = sl.build(sl.lower(s, args), trace=True)
    assert [name for name, _ in mod.trace] == LLVM[len(TILE):]


def test_stage_names_are_the_stages_build_runs():
    for kind in ("llvm", "cuda", "c"):
        target = sl.Target.create(kind)
        backend = sl.get_backend(kind)
        assert backend.stage_names(target) == tuple(name for name, _ in backend.stages(target))


def test_architecture_doc_lists_each_targets_pipeline():
    from pathlib import Path
    doc = (Path(__file__).resolve().parents[2] / "docs" / "architecture.md").read_text()
    for kind in ("llvm", "cuda", "c"):
        assert f"    {kind}: {', '.join(pass_names(kind))}\n" in doc
