"""The model-level disk cache (schedlang/torch/model_cache.py): a compile of a model found
on disk runs no lowering, fusion, scheduling or code generation and gives the same results;
the weights still come from the module at each call; any change of graph, target or tuning
log misses; an entry whose kernels were evicted or that is damaged is not used; a second
process compiling through torch.compile(backend="schedlang") loads from disk."""
import contextlib
import io
import json
import os
import shutil
from pathlib import Path

import pytest
import torch

import schedlang as sl
import schedlang.torch as st
from schedlang import build_cache, disk, kernel_cache
from schedlang.torch import model_cache, pack_disk, runtime, zoo
from tests.helpers import compile_model_script, forbid_builds, run_json_child
from tests.torch.modules import reverse

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def kernels_on_disk(tmp_path_factory):
    """A cache folder holding the kernels of _model() and no model: built once for the module
    (its code generation took most of each test's first compile; the model cache's entry and
    its checks are the subject here, the kernels' building is tests/api/test_kernel_cache.py's,
    and the eviction test below still builds them again)."""
    folder = tmp_path_factory.mktemp("seed") / "cache"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(disk.ENV, str(folder))
        mp.setenv(disk.CODE_CACHE_ENV, "1")
        model, inputs = _model()
        _compile(model, inputs)
        build_cache.clear()
    shutil.rmtree(folder / model_cache.FOLDER)
    return folder


@pytest.fixture
def cache(tmp_path, monkeypatch, kernels_on_disk):
    """A cache folder holding _model()'s kernels (no model: a first compile lowers and stores
    it), the disk caches on, fresh counters, the in-memory cache empty."""
    shutil.copytree(kernels_on_disk, tmp_path / "cache")
    monkeypatch.setenv(disk.ENV, str(tmp_path / "cache"))
    monkeypatch.setenv(disk.CODE_CACHE_ENV, "1")
    monkeypatch.setattr(kernel_cache, "stats", kernel_cache.DiskStats())
    monkeypatch.setattr(model_cache, "stats", model_cache.ModelStats())
    build_cache.clear()
    yield tmp_path / "cache"
    build_cache.clear()


_GRAPHS: dict = {}


@pytest.fixture
def captured_once(monkeypatch):
    """schedlang.torch.capture of _model()'s ResNet answered once per input shape for the file
    (each compile here captured the same seeded model again, torch.export about a second each;
    the model cache's keys and entries are the subject, not the capture). Other modules are
    captured as ever; test_a_hit_skips_lowering_and_building and the second processes keep
    fresh captures, so that two captures of one model must still give one key."""
    real = st.capture

    def capture(module, example_inputs, dynamic_shapes=None):
        if type(module) is not zoo.ResNet or dynamic_shapes is not None:
            return real(module, example_inputs, dynamic_shapes=dynamic_shapes)
        key = tuple(tuple(x.shape) for x in example_inputs)
        if key not in _GRAPHS:
            _GRAPHS[key] = real(module, example_inputs)
        return _GRAPHS[key]
    monkeypatch.setattr(st, "capture", capture)


def _refuse(*args, **kwargs):
    raise AssertionError("lowered or built again")


def _compile(model, inputs, **kw):
    build_cache.clear()          # as a new process: only the disk remembers
    with torch.no_grad():
        compiled = st.compile(model, inputs, **kw)
    kernel_cache.flush()         # its entries are written behind the compile
    return compiled


def _model():
    torch.manual_seed(0)
    return zoo.build("resnet18", "tiny")


def test_a_hit_skips_lowering_and_building(cache, monkeypatch):
    model, inputs = _model()
    first = _compile(model, inputs)
    assert model_cache.stats.stores == 1 and isinstance(first._plan, st.LoweredProgram)
    with torch.no_grad():
        want = first(*inputs)
    monkeypatch.setattr(runtime, "lower_graph", _refuse)
    monkeypatch.setattr(sl, "build", _refuse)
    again = _compile(model, inputs)
    assert model_cache.stats.loads == 1 and isinstance(again._plan, model_cache.CachedPlan)
    monkeypatch.setattr(pack_disk, "stats", pack_disk.DiskStats())
    with torch.no_grad():
        got = again(*inputs)
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    assert pack_disk.stats.loads == len(again._plan.packs) > 0, "the packed weights mapped from disk too"
    assert again.fallback_ops() == {}
    monkeypatch.undo()
    assert again.ir("tensor") == first.ir("tensor")        # lowered when asked
    assert again.ir("kernel") == first.ir("kernel")


def test_weights_are_read_from_the_module_after_a_hit(cache, captured_once):
    model, inputs = _model()
    _compile(model, inputs)
    again = _compile(model, inputs)
    assert model_cache.stats.loads == 1
    assert {s.kind for s in again._plan.packs.values()} >= {"conv"}, "packed weights are what may go stale"
    with torch.no_grad():
        torch.testing.assert_close(again(*inputs), model(*inputs), rtol=1e-4, atol=1e-4)   # packed now
        for p in model.parameters():
            p.mul_(0.5)                                      # seen: packed weights made again
        for b in model.buffers():
            if b.is_floating_point():
                b.add_(0.25)
        torch.testing.assert_close(again(*inputs), model(*inputs), rtol=1e-4, atol=1e-4)
        conv = next(m for m in model.modules() if isinstance(m, torch.nn.Conv2d))
        conv.weight = torch.nn.Parameter(torch.randn_like(conv.weight))     # a new tensor: seen too
        torch.testing.assert_close(again(*inputs), model(*inputs), rtol=1e-4, atol=1e-4)


class _Folded(torch.nn.Module):
    """A Linear whose weight is a value of the state alone (w * exp(g), folded into a
    constant at compile time, const_fold.py) and whose positions come from arange, as a
    rotary embedding's tables do."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(24, 16))
        self.g = torch.nn.Parameter(torch.randn(24, 1) * 0.1)

    def forward(self, x):
        pos = torch.arange(x.shape[0], dtype=x.dtype).unsqueeze(1)
        return torch.nn.functional.linear(x + pos, self.w * self.g.exp())


def test_a_model_with_a_folded_value_is_stored_and_answered(cache, monkeypatch):
    torch.manual_seed(0)
    model, inputs = _Folded().eval(), (torch.randn(5, 16),)
    first = _compile(model, inputs)
    assert model_cache.stats.stores == 1, "a FoldGraph in the plan kept the model from being stored"
    assert "fold" in {s.kind for s in first._plan.packs.values()}
    monkeypatch.setattr(runtime, "lower_graph", _refuse)
    monkeypatch.setattr(sl, "build", _refuse)
    again = _compile(model, inputs)
    assert model_cache.stats.loads == 1
    with torch.no_grad():
        torch.testing.assert_close(again(*inputs), model(*inputs), rtol=1e-5, atol=1e-5)
        model.g.add_(0.3)                  # the folded value is made again from the new state
        torch.testing.assert_close(again(*inputs), model(*inputs), rtol=1e-5, atol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(zoo.MODELS))
def test_every_zoo_model_has_a_plan_to_store(name):
    """What a model's plan holds is storable (plan_json), the folded values of Llama's rotary
    tables included: a pack spec that is not was found only by a second process being slow."""
    from types import SimpleNamespace
    model, inputs = zoo.build(name, "tiny")
    program = runtime.lower_graph(st.capture(model, inputs), sl.Target.create("llvm"))
    on_disk = {p.index: SimpleNamespace(disk_key="entry") for p in program.parts}
    assert model_cache.plan_json(program, on_disk) is not None


def test_another_graph_target_or_log_misses(cache, captured_once, tmp_path):
    model, inputs = _model()
    _compile(model, inputs)
    graph = st.capture(model, inputs)
    host = sl.Target.create("llvm")
    text = model_cache.key_text(graph, host, None)
    assert text is not None and model_cache.load(text, host, graph) is not None
    wider = st.capture(model, (torch.randn(1, 3, 40, 40),))
    assert model_cache.key_text(wider, host, None) != text
    assert model_cache.key_text(graph, host.with_options(num_threads=1), None) != text
    assert model_cache.key_text(graph, sl.Target.create("llvm -mattr=-avx512f"), None) != text
    log = tmp_path / "log.jsonl"
    log.write_text("")
    empty = model_cache.key_text(graph, host, str(log))
    log.write_text('{"another": "record"}\n')
    assert len({text, empty, model_cache.key_text(graph, host, str(log))}) == 3
    assert all(v in text for v in kernel_cache.versions().values()) and torch.__version__ in text
    from schedlang.torch.ops import conv_winograd     # a lowering switch: Winograd off is another plan
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(conv_winograd, "ENABLED", not conv_winograd.ENABLED)
        assert model_cache.key_text(graph, host, None) != text


def test_an_entry_whose_kernels_were_evicted_is_not_used(cache, captured_once):
    model, inputs = _model()
    _compile(model, inputs)
    for p in (cache / kernel_cache.FOLDER).glob("*" + disk.ENTRY_SUFFIX):
        p.unlink()
    again = _compile(model, inputs)
    assert model_cache.stats.loads == 0 and isinstance(again._plan, st.LoweredProgram)
    with torch.no_grad():
        torch.testing.assert_close(again(*inputs), model(*inputs), rtol=1e-4, atol=1e-4)
    assert isinstance(_compile(model, inputs)._plan, model_cache.CachedPlan), "stored again"


def test_a_damaged_entry_is_not_used(cache, captured_once):
    model, inputs = _model()
    _compile(model, inputs)
    (entry,) = (cache / model_cache.FOLDER).glob("*" + disk.ENTRY_SUFFIX)
    data = bytearray(entry.read_bytes())
    data[len(data) // 2] ^= 0xFF
    entry.write_bytes(bytes(data))
    again = _compile(model, inputs)
    assert kernel_cache.stats.rejected == 1 and isinstance(again._plan, st.LoweredProgram)
    with torch.no_grad():
        torch.testing.assert_close(again(*inputs), model(*inputs), rtol=1e-4, atol=1e-4)


def test_graphs_with_torch_steps_or_dynamic_sizes_are_not_stored(cache):
    class Odd(torch.nn.Module):
        def forward(self, x):
            return reverse(x.relu()) + 1      # runs in torch

    x = torch.randn(4, 8)
    with pytest.warns(st.FallbackWarning, match="reverse"):
        odd = _compile(Odd(), (x,))
    assert odd.fallback_ops() == {"reverse": 1} and model_cache.stats.stores == 0
    with pytest.warns(st.FallbackWarning, match="reverse"):    # compiled again, warned again
        _compile(Odd(), (x,))
    lin = torch.nn.Linear(8, 3).eval()
    batch = torch.export.Dim("batch", min=2)
    dyn = _compile(lin, (x,), dynamic_shapes=({0: batch},))
    assert model_cache.stats.stores == 0 and kernel_cache.stats.stores >= 1
    with torch.no_grad():
        torch.testing.assert_close(dyn(torch.randn(6, 8)).shape, torch.Size([6, 3]))


def test_the_cache_folders_are_in_cache_info(cache, captured_once, capsys):
    from schedlang.cli import main as cli_main
    model, inputs = _model()
    _compile(model, inputs)
    assert kernel_cache.info()[model_cache.FOLDER]["entries"] == 1
    assert cli_main(["cache", "info"]) == 0
    assert "models: 1 entries" in capsys.readouterr().out
    assert kernel_cache.clear() == 3          # the kernel, its default-schedule alias, the model
    assert isinstance(_compile(model, inputs)._plan, st.LoweredProgram)


# A GPT-2 (fused qkv, chunk, causal attention) compiled by schedlang.torch.compile or
# torch.compile(backend="schedlang"); prints the output's digest and the caches' counters.
# With FORBID_CODEGEN set, LLVM code generation raises; with FORBID_LOWERING set, the graph's
# lowering raises too (helpers.forbid_builds).
SCRIPT = forbid_builds("schedlang.torch.runtime.lower_graph", env="FORBID_LOWERING") + \
    compile_model_script('model, inputs = zoo.build("gpt2", "tiny")')


# Two child processes (each imports torch and schedlang and compiles a GPT-2): half a minute of
# CPU. The default suite keeps the disk hit in this process (test_a_hit_skips_lowering_and_building:
# the build cache cleared, only the disk remembers) and tests/api/test_kernel_cache.py's second
# process loading kernels.
@pytest.mark.slow
def test_second_processes_load_models_from_disk_by_either_path(cache):
    """Export path, then Dynamo path: the Dynamo path builds the same kernels, so a process
    compiling by it after the export path loads every kernel (no code generation); a later
    process loads each path's model (no lowering either). (This is also the kernel cache's
    second-process check for models, which tests/api/test_kernel_cache.py made on a BERT layer.)
    The later process compiles by both paths, the in-memory build cache cleared between them
    (one process less: importing torch and schedlang is about 5 s of CPU)."""
    env = {**os.environ, disk.ENV: str(cache), disk.CODE_CACHE_ENV: "1", "PYTHONPATH": str(ROOT)}
    first = _run_here(SCRIPT)    # the first compile needs no process of its own: the caches are fresh
    assert first["stores"] >= 1 and first["loads"] == 0 and first["err"] < 1e-4
    # its own graph (lowered once), the kernels of the export path
    dynamo = run_json_child(SCRIPT, {**env, "DYNAMO": "1", "FORBID_CODEGEN": "1"})
    assert (dynamo["loads"], dynamo["stores"]) == (first["stores"], 0)
    second, again = run_json_child(SCRIPT, {**env, "THEN_DYNAMO": "1", "FORBID_LOWERING": "1"}, lines=2)
    assert (second["model_loads"], second["loads"], second["stores"]) == (1, first["stores"], 0)
    assert (again["model_loads"], again["loads"], again["stores"]) == (1, first["stores"], 0)
    assert first["digest"] == second["digest"] == dynamo["digest"] == again["digest"]


def _run_here(script: str) -> dict:
    """Run a child script (run_json_child's) in this process: the JSON of its last line."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(script, "<child script>", "exec"), {"__name__": "__main__"})
    return json.loads(out.getvalue().strip().splitlines()[-1])


def test_off_with_a_lowering_from_outside_or_the_build_cache_off(cache, captured_once, monkeypatch):
    """A lowering registered by user code changes what a graph lowers to, and no version in
    the key says so: such a process neither loads nor stores models (kernels still cached)."""
    from schedlang.torch.ops.registry import LOWERINGS
    model, inputs = _model()
    _compile(model, inputs)
    graph, host = st.capture(model, inputs), sl.Target.create("llvm")
    assert model_cache.key_text(graph, host, None) is not None
    monkeypatch.setitem(LOWERINGS, "aten.my_op_for_this_test", lambda ctx, x: x)
    assert model_cache.key_text(graph, host, None) is None
    assert isinstance(_compile(model, inputs)._plan, st.LoweredProgram)
    monkeypatch.delitem(LOWERINGS, "aten.my_op_for_this_test")
    monkeypatch.setattr(build_cache, "ENABLED", False)
    assert model_cache.key_text(graph, host, None) is None
