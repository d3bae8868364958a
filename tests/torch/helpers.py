"""Check one ATen lowering against torch: lower it on placeholders, build, run on the
tensors given, and compare with the op run by torch."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn as nn

import schedlang as sl
from schedlang.torch.dtypes import to_sl, to_torch
from schedlang.torch.ops import LowerContext, lookup

from ..helpers import CHECKED

TOL = {torch.float16: (2e-3, 2e-3), torch.bfloat16: (1.6e-2, 1e-2), torch.float32: (1e-5, 1e-5), torch.float64: (1e-12, 1e-12)}


def has_dtype(dtype: torch.dtype) -> bool:
    """Whether schedlang maps the torch dtype (bfloat16 arrives with its own branch)."""
    try:
        to_sl(dtype)
    except TypeError:
        return False
    return True


requires_bfloat16 = pytest.mark.skipif(not has_dtype(torch.bfloat16), reason="schedlang has no bfloat16 yet")


def _placeholders(value, made):
    if isinstance(value, torch.Tensor):
        t = sl.placeholder(tuple(value.shape), to_sl(value.dtype), name=f"arg{len(made)}")
        made.append((t, value))
        return t
    if isinstance(value, (list, tuple)):
        return type(value)(_placeholders(v, made) for v in value)
    return value


def lower(op, args, kwargs=None, node="out"):
    """Lower op on placeholders standing for the torch tensors in args.
    Returns (inputs [(placeholder, tensor)], outputs [sl.Tensor])."""
    made = []
    sl_args = _placeholders(list(args), made)
    sl_kwargs = {k: _placeholders(v, made) for k, v in (kwargs or {}).items()}
    fn = lookup(op)
    assert fn is not None, f"no lowering registered for {op}"
    result = fn(LowerContext(node), *sl_args, **sl_kwargs)
    outputs = list(result) if isinstance(result, (list, tuple)) else [result]
    return made, outputs


def run_lowered(made, outputs, schedule=None, check_bounds=True):
    """Build the lowered outputs (default schedule: none) and run them on the inputs."""
    s = schedule(outputs) if schedule else sl.create_schedule([t.op for t in outputs])
    args = [t for t, _ in made] + outputs
    arrays = [v.contiguous().clone() for _, v in made]
    results = [torch.empty(tuple(int(n) for n in t.shape), dtype=to_torch(t.dtype)) for t in outputs]
    for target in ((CHECKED, None) if check_bounds else (None,)):
        mod = sl.build(s, args, target=target) if target else sl.build(s, args)
        mod(*arrays, *results)
    return results


def check_lowering(op, args, kwargs=None, tol=None, schedule=None):
    """Lower op, build it (bounds-checked and normal) and compare every result with torch."""
    made, outputs = lower(op, args, kwargs)
    got = run_lowered(made, outputs, schedule)
    want = op(*args, **(kwargs or {}))
    want = list(want) if isinstance(want, (list, tuple)) else [want]
    assert len(got) == len(want), f"{op}: {len(got)} results, torch gives {len(want)}"
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == w.dtype, f"{op} result {k}: dtype {g.dtype}, torch gives {w.dtype}"
        assert tuple(g.shape) == tuple(w.shape), f"{op} result {k}: shape {tuple(g.shape)}, torch {tuple(w.shape)}"
        if w.dtype.is_floating_point:
            rtol, atol = tol or TOL[w.dtype]
            # through float64: numpy has no bfloat16
            np.testing.assert_allclose(g.double().numpy(), w.double().numpy(), rtol=rtol, atol=atol,
                                       err_msg=f"{op} result {k}")
        else:
            np.testing.assert_array_equal(g.numpy(), w.numpy(), err_msg=f"{op} result {k}")
    return got


def distinct_builds(targets):
    """targets less each one that builds what an earlier one builds on this host: the same
    options once the CPU is read as its vector width and register file and the threads as
    the worker threads (a default schedule reads nothing else of the CPU). On a 2-core AVX2
    host "llvm -mcpu=haswell" and "llvm -num-cores=2" build the host's schedules; on an
    AVX-512 host or one of more cores they stay."""
    import dataclasses
    kept, seen = [], set()
    for target in targets:
        target = sl.Target.create(target)
        options, backend = target.options, sl.get_backend(target.kind)
        if hasattr(options, "cpu") and hasattr(backend, "worker_threads"):
            options = dataclasses.replace(options, cpu="", features="", num_threads=backend.worker_threads(target))
        key = (target.kind, repr(options), target.native_lanes(32), target.native_registers())
        if key not in seen:
            seen.add(key)
            kept.append(target)
    return kept


def compile_each(model, inputs, targets):
    """(target, compiled module) for each of targets: model captured once (torch.export takes
    a third of a small model's compile and does not depend on the target), the first by
    schedlang.torch.compile, the others from its graph as schedlang.torch.compile makes them."""
    import schedlang.torch as st
    first = None
    for target in targets:
        if first is None:
            first = cm = st.compile(model, inputs, target=target)
        else:
            cm = st.CompiledModule(first.graph, target, module=model)
            cm.specialize(*inputs)
        yield target, cm


class EachInput(nn.Module):
    """models[i] applied to the i-th input, for each i: the models of a file's cases compiled
    as one module (one capture and one build per target, not one per case). A program's
    kernels are scheduled one by one from their own shapes and the target, so each model's
    kernels are the ones it compiles to alone (each file using this checked that once: the
    kernel IR of every case alone and here equal up to names)."""

    def __init__(self, models):
        super().__init__()
        self.each = nn.ModuleList(models)
        self.eval()

    def forward(self, *xs):
        return tuple(model(x) for model, x in zip(self.each, xs))


def compile_cases(models, inputs, targets):
    """(eager's results, [(target, compiled module, its results)] for each of targets) of
    EachInput(models) on inputs (one per model), captured once (compile_each); result i is
    models[i]'s, its kernels' names and packed weights' sources start with f"each_{i}_"."""
    model = EachInput(models)
    with torch.no_grad():
        want = model(*inputs)
    builds = []
    for target, cm in compile_each(model, tuple(inputs), targets):
        with torch.no_grad():
            builds.append((target, cm, cm(*inputs)))
    return want, builds


def random_batch_norm(c: int) -> nn.BatchNorm2d:
    """An eval-mode batch norm of c channels with random running statistics and affine terms
    (a freshly made one is the identity, which would hide a wrong fold)."""
    bn = nn.BatchNorm2d(c)
    bn.running_mean.uniform_(-0.5, 0.5)
    bn.running_var.uniform_(0.5, 2.0)
    nn.init.uniform_(bn.weight, 0.5, 1.5)
    nn.init.uniform_(bn.bias, -0.5, 0.5)
    return bn


class ZooModel:
    """A zoo model at its tiny size, its inputs, its capture, and eager's result (under
    torch.no_grad). zoo.build is seeded, so one per model name serves every test."""

    def __init__(self, name: str):
        from schedlang.torch import zoo
        import schedlang.torch as st
        self.name = name
        self.module, self.inputs = zoo.build(name, "tiny")
        with torch.no_grad():
            self.want = self.module(*self.inputs)
        self.graph = st.capture(self.module, self.inputs)


_ZOO_MODELS: dict = {}
_ZOO_COMPILED: dict = {}
_ZOO_COVERAGE: dict = {}


def zoo_model(name: str) -> ZooModel:
    """ZooModel(name), made once per process (torch.export of a zoo model takes seconds, and
    test_zoo, test_conv, test_attention and test_pool each want the same tiny models: with
    `--dist loadfile` a worker runs several of those files)."""
    if name not in _ZOO_MODELS:
        _ZOO_MODELS[name] = ZooModel(name)
    return _ZOO_MODELS[name]


def zoo_compiled(name: str, target="llvm"):
    """(ZooModel, its CompiledModule for target, the warnings its compile raised): compiled
    once per process from the shared capture as schedlang.torch.compile makes it (the tests
    only call it and read its IR). Every warning is recorded, so that each caller asserts the
    ones it forbids (the first caller's filters would otherwise decide for the rest)."""
    import warnings
    import schedlang.torch as st
    target = sl.Target.create(target)
    key = (name, str(target))
    if key not in _ZOO_COMPILED:
        model = zoo_model(name)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            compiled = st.CompiledModule(model.graph, target, module=model.module)
            compiled.specialize(*model.inputs)
        _ZOO_COMPILED[key] = (model, compiled, list(caught))
    return _ZOO_COMPILED[key]


def zoo_coverage(name: str) -> dict:
    """zoo.coverage of the tiny model, run on the shared capture (its capture call answered by
    it: the lowering and counting are zoo.coverage's own), once per process."""
    from unittest import mock
    from schedlang.torch import zoo
    if name not in _ZOO_COVERAGE:
        model = zoo_model(name)

        def captured(module, inputs):
            assert module is model.module and inputs is model.inputs
            return model.graph
        with mock.patch.object(zoo, "capture", captured):
            _ZOO_COVERAGE[name] = zoo.coverage(model.module, model.inputs)
    return dict(_ZOO_COVERAGE[name])


def spy_compile_fx(monkeypatch, before=None, after=None) -> None:
    """Reset Dynamo and wrap schedlang.torch.compile_fx (the backend calls it once per ATen
    graph): before(gm, target) runs ahead of each compile, after(module) with its result."""
    import torch
    import schedlang.torch as sl_torch
    torch._dynamo.reset()
    real = sl_torch.compile_fx

    def spy(gm, example_inputs, target="llvm", **options):
        if before is not None:
            before(gm, target)
        module = real(gm, example_inputs, target=target, **options)
        if after is not None:
            after(module)
        return module

    monkeypatch.setattr(sl_torch, "compile_fx", spy)


class Lambda(nn.Module):
    """A module whose forward is fn(*inputs): one op or a few written as a function."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)
