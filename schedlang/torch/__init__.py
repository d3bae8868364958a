"""The PyTorch frontend: torch.export capture (Torch IR), ATen -> Tensor IR lowering,
fusion with default schedules, and the `torch.compile` backend.

Importing this package imports torch; `import schedlang` alone does not.

    cm = schedlang.torch.compile(module, (x,))      # target="llvm" | "cuda"
    y = cm(x)                                        # like module(x)
    y = cm.emulate(x)                                # target="cuda", run on the CPU
    print(cm.ir("all"))                              # Torch IR ... target code
"""
from __future__ import annotations

import functools
import warnings

from typing import Optional, Sequence

import schedlang as sl

from . import ops  # noqa: F401  (registers every lowering)
from .export import CaptureError, capture, decomposition_table, graph_from_fx  # noqa: F401
from .lower import FallbackWarning, LoweredProgram, lower_graph  # noqa: F401
from .runtime import CompiledModule, GradientWarning  # noqa: F401
from .torch_ir import TorchGraph  # noqa: F401


def compile(module, example_inputs: Sequence, target="llvm", dynamic_shapes=None, *,  # noqa: A001
            tune: int = 0, log: Optional[str] = None, **tune_options) -> CompiledModule:
    """Capture module on example_inputs, lower it to Tensor IR, schedule and build every
    part for target; the result is called like the module.

    tune=N first auto-schedules the model's kernels with N trials in all (tune.py): each
    distinct kernel is a task weighted by how often it runs per forward, and a task scheduler
    (strategy="gradient", Ansor's, or "round-robin") gives rounds of trials to the task where
    the estimated model latency drops most; timeout= (seconds) ends tuning early. Records go
    to `log` (required); each kernel is then built with its best record
    (default_schedule(..., log)) and `compiled.tuning` is the TaskScheduler (tasks, weights,
    trials, best latencies). Then, on the CPU, each task whose best record is not its default
    schedule is timed inside the model with the record and with the default (in_model=7
    alternating rounds of the two models, built for "llvm -profile"; 0: not), and the faster
    there is logged as the task's choice (in_model.py; `compiled.tuning.in_model` has the
    times): records that won alone may lose among their neighbours. A log given without tune
    is only read. The other tune_options (seed, executor, a Dask client too, verbose,
    per_round, number, repeat, policy, final, early_stopping, callback, variants, alpha,
    beta, backward_window_size) go to tune.tune_program.

    target="cuda" builds static shapes only: with dynamic_shapes, the module is built for
    the example inputs' shapes here and again for each new shape it is called with.
    Without a GPU, `compiled.emulate(*cpu_tensors)` runs the CUDA kernels on the CPU.

    The result keeps module and reads its parameters and buffers from it at each call, as
    eager does: a reassigned or updated one is seen (one of another shape or dtype is
    refused); see state.py for copies (packed weights) and writes through `.data`.
    It computes no gradients: with grad mode on, an input that requires grad raises
    RuntimeError and parameters that require grad give one GradientWarning (the outputs
    carry no grad_fn); call it under torch.no_grad() or torch.inference_mode(), or train
    through torch.compile(model, backend="schedlang"), which keeps autograd."""
    if tune and log is None:
        raise ValueError("schedlang.torch.compile: tune= needs log= (the records file to write)")
    if tune_options and not tune:
        raise TypeError(f"schedlang.torch.compile: {', '.join(tune_options)} only apply with tune=")
    from .gc_pause import gc_paused
    with gc_paused():
        graph = capture(module, example_inputs, dynamic_shapes=dynamic_shapes)
        target = sl.Target.create(target)
        if not tune:
            # CompiledModule lowers (or finds the model in the disk cache: model_cache.py) in the
            # same pause: the collector's first pass after it walks what export left once (a
            # pause of its own cost a second pass over the same objects, ~0.12 s of BERT's
            # warm first call)
            return _built(graph, target, None, log, module, example_inputs, None)
        program = lower_graph(graph, target)
    from .in_model import ROUNDS, compare_in_model
    from .tune import tune_program
    in_model = tune_options.pop("in_model", ROUNDS)
    if isinstance(in_model, bool) or not isinstance(in_model, int) or in_model < 0:
        raise ValueError(f"schedlang.torch.compile: in_model must be a number of rounds >= 0, got {in_model!r}")
    tuning = tune_program(program, target, tune, log, **tune_options)
    if tuning is not None:
        tuning.in_model = []
        if in_model and sl.get_backend(target.kind).profiles_kernels:
            def build(with_log):
                with gc_paused():
                    return CompiledModule(graph, target.with_options(profile=True), program, log=with_log,
                                          module=module)
            try:
                tuning.in_model = compare_in_model(build, example_inputs, tuning.tasks, log, target, program,
                                                   rounds=in_model, verbose=tune_options.get("verbose", 1))
            except Exception as err:  # noqa: BLE001 (the search's records stand; its hours are not lost)
                warnings.warn(f"tune: the in-model check of the tuned tasks failed ({type(err).__name__}: {err}); "
                              "the search's choices stand", stacklevel=2)
    with gc_paused():
        return _built(graph, target, program, log, module, example_inputs, tuning)


def _built(graph, target, program, log, module, example_inputs, tuning) -> CompiledModule:
    compiled = CompiledModule(graph, target, program, log=log, module=module)
    compiled.specialize(*example_inputs)      # cuda with dynamic shapes: the example's build
    compiled.tuning = tuning
    return compiled


def compile_fx(gm, example_inputs: Sequence, target="llvm", *, inputs: Optional[dict] = None,
               log: Optional[str] = None):
    """A callable for an ATen-level FX GraphModule as AOT autograd hands it to a backend
    (inputs are the graph's placeholders, in order: tensors, and ints for the sizes Dynamo
    passes with dynamic shapes; the result is the graph's outputs).

    inputs (the Dynamo backend's frozen graphs, dynamo.py) maps every placeholder's name to
    (kind, name, tensor): kind "parameter" or "buffer" makes it a state input of that name
    (called through CompiledModule.call_with_state), "input" names a user input, "size" an
    int one (a SymInt placeholder no tensor's shape gives). log: a
    tuning log whose best records replace the default schedules (as compile's log=)."""
    import torch
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp
    graph_module = gm
    placeholders = [n for n in graph_module.graph.nodes if n.op == "placeholder"]
    if any("val" not in n.meta for n in graph_module.graph.nodes if n.op in ("placeholder", "call_function")):
        FakeTensorProp(graph_module).propagate(*example_inputs)
    for n, x in zip(placeholders, example_inputs):
        if not isinstance(x, (torch.Tensor, torch.SymInt, int)):
            raise TypeError(f"compile_fx: input {n.name} is a {type(x).__name__}; schedlang.torch takes "
                            "tensors and sizes only")
    kinds = {ph: (kind, name) for ph, (kind, name, _) in (inputs or {}).items()}
    state = {name: t for kind, name, t in (inputs or {}).values() if kind not in ("input", "size")}
    attrs = {n.target: functools.reduce(getattr, n.target.split("."), graph_module)
             for n in graph_module.graph.nodes if n.op == "get_attr"}
    graph = graph_from_fx(graph_module.graph, kinds, state, attrs=attrs)
    return CompiledModule(graph, target, log=log)
