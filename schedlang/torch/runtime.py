"""The compiled module: built parts and torch steps run in order on torch tensors."""
from __future__ import annotations

import re
import warnings
from dataclasses import replace
from types import MappingProxyType
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import torch

import schedlang as sl
from schedlang import kernel_cache
from schedlang.dtypes import numpy_bfloat16
from schedlang.build_pool import build_each
from schedlang.expr.functor import substitute
from schedlang.expr.nodes import Const, Expr
from schedlang.expr.simplify import simplify

from .dtypes import to_torch
from . import model_cache
from .lower import LoweredProgram, Part, lower_graph, user_error
from ..target.shapes import UnboundSizes
from .prepack import PackCache
from .state import ModuleState
from .torch_ir import Ref, TorchGraph, map_refs

class GradientWarning(UserWarning):
    """A compiled module was called with grad mode on and parameters that require grad:
    its outputs carry no gradient (schedlang.torch.compile builds inference kernels)."""


LEVELS = ("torch", "tensor", "loop", "tile", "kernel", "target")


def _target(target) -> sl.Target:
    return sl.Target.create(target)


class CompiledModule:
    """A module compiled by schedlang.torch.compile: call it on tensors like the module
    (user inputs only; parameters and buffers are read from `module` at each call, state.py).
    It computes no gradients (see __call__)."""

    # A call whose state tensors are those of the last call, unchanged (ModuleState.same_as_last),
    # runs the last call's bound kernel calls with new inputs and outputs (_Prepared), skipping
    # the packing and binding of the weights; False: every call checked and bound whole
    # (benchmarks/call_overhead.py times both).
    prepared_calls = True

    def __init__(self, graph: TorchGraph, target="llvm", program: Optional[LoweredProgram] = None,
                 log: Optional[str] = None, module: Optional[torch.nn.Module] = None):
        self.graph = graph
        self.log = log            # tuning records: a part's best record replaces its default schedule
        self.target = _target(target)
        self._modules: Dict[int, Any] = {}
        # _plan is what a call runs: the lowered program, or the model cache's plan (model_cache.py),
        # whose hit skips lowering, fusion and scheduling (the program is then lowered only if asked)
        self._program, self._plan, disk_key = program, program, None
        if program is None:
            disk_key = model_cache.key_text(graph, self.target, log)
            hit = model_cache.load(disk_key, self.target, graph)
            if hit is not None:
                self._plan, disk_key = hit[0], None
                self._modules.update(hit[1])
            else:
                self._program = self._plan = lower_graph(graph, self.target, warn=not graph.size_vars)
        self._backend = sl.get_backend(self.target.kind)
        self._device = self._backend.torch_device
        self._state = ModuleState(graph.state_inputs, module)
        self._user_inputs = graph.user_inputs      # (a property that filters all inputs: 314 for MobileNetV2)
        self._warned_grad = False
        self._packs = PackCache(self._plan.packs, disk=True)    # weights packed once (prepack.py; on disk: pack_disk.py)
        self._prepared: Optional[_Prepared] = None
        # A graph with size variables is lowered and built again for each set of sizes it is
        # called with (specialize()) on a target that builds static shapes only (cuda), and on
        # any target when an op needs its sizes known to lower (NeedsStaticShape: a convolution
        # over a symbolic image size, extents torch proved equal that do not simplify to one)
        # or a part cannot read a size from its arguments (UnboundSizes: a tensor made by an op
        # in torch carries it), rather than leave the op in torch or fail (Inductor does
        # neither). Each new shape is a compile; the kernel caches make a repeated one cheap.
        self._per_shape = _uses_sizes(graph) and (self._backend.builds_static_shapes
                                                  or self._plan.needs_static_shapes())
        self._variants: Dict[tuple, Tuple[LoweredProgram, Dict[int, Any]]] = {}
        self._variant_packs: Dict[int, PackCache] = {}     # id(a variant's program) -> its packed weights
        self._last: Optional[Tuple[LoweredProgram, Dict[int, Any]]] = None
        if not self._per_shape and not self._modules:   # the parts are independent: built by a few threads
            try:
                with kernel_cache.deferred():                # the disk entries written behind the first call
                    built = build_each(lambda part: self._module(part, {}), self.program.parts)
                    self._modules.update((part.index, mod) for part, mod in zip(self.program.parts, built))
                    model_cache.store(disk_key, self.program, self._modules)
            except UnboundSizes:
                if not _uses_sizes(graph):
                    raise
                self._per_shape = True
        if graph.size_vars and not self._per_shape and self._program is not None:
            self._program.warn_fallbacks(stacklevel=3)
        self._preparable = not self._per_shape and not graph.size_vars   # until a part's module binds no call

    @property
    def program(self) -> LoweredProgram:
        """The lowered program (Tensor IR parts and torch steps); lowered now if the model
        cache answered the compile."""
        if self._program is None:
            self._program = lower_graph(self.graph, self.target, warn=False)
        return self._program

    @property
    def modules(self) -> Mapping[int, Any]:
        """The built module (sl.build's result) of each part, by part index, read-only: those
        ir() shows (for a module built per shape, the last shapes built; none before)."""
        if self._per_shape:
            return MappingProxyType(self._last[1] if self._last is not None else {})
        return MappingProxyType(self._modules)

    def fallback_ops(self) -> Dict[str, int]:
        """The ops that run in torch, not in schedlang kernels: op -> number of nodes
        (empty when the whole module is compiled). A module built per shape: those of the
        last shape built, or before any, those that run in torch at every shape."""
        if self._per_shape and self._last is not None:
            return self._last[0].fallback_counts()
        return self._plan.fallback_counts(include_static_only=not self._per_shape)

    # ------------------------------------------------------------ building
    def _module(self, part: Part, modules: Optional[Dict[int, Any]] = None):
        """The built module of part (sl.build's cache makes a repeated workload free)."""
        modules = self._modules if modules is None else modules
        mod = modules.get(part.index)
        if mod is None:
            from .schedules import default_schedule
            ins, outs = [t for _, t in part.inputs], [t for _, t in part.outputs]
            tuned = self._tuned(ins, outs)
            if tuned is not None:            # the record's program: the canonical copy (tune.py)
                ins, outs = tuned.inputs, list(tuned.outputs)
            try:
                if tuned is not None:
                    mod = sl.build(tuned.schedule, ins + outs, target=self.target)
                elif self.log is not None:   # records under the part's own names (older logs)
                    mod = sl.build(default_schedule(outs, self.target, log=self.log), ins + outs, target=self.target)
                else:                        # found on disk, the default schedule is not made either
                    mod = kernel_cache.build_default(
                        ins, outs, self.target, lambda: default_schedule(outs, self.target),
                        lambda s: sl.build(s, ins + outs, target=self.target))
            except (ValueError, TypeError) as e:
                node = _named_node(self.graph, str(e))
                if node is None:
                    raise
                raise user_error(e, node) from None
            modules[part.index] = mod
        return mod

    def _tuned(self, ins, outs):
        """The best record in self.log of the part's canonical copy (tune.canonical_program:
        a record made on the same computation in any model), as a namespace of schedule,
        inputs and outputs of the copy, or None."""
        if self.log is None or not all(isinstance(e, int) for t in outs for e in t.shape):
            return None
        from types import SimpleNamespace
        from .schedules import tuned_schedule
        from .tune import canonical_program
        c_ins, c_outs = canonical_program(ins, outs)
        s = tuned_schedule(c_outs, self.target, self.log)
        return None if s is None else SimpleNamespace(schedule=s, inputs=c_ins, outputs=c_outs)

    def specialize(self, *args) -> None:
        """Build the module for the shapes of args (the inputs of a call, on any device)
        ahead of the call. Only a module with dynamic shapes built per shape (a cuda one, or one
        with an op that needs its sizes known: see __init__) does so, and its ir() shows the last
        shapes built; others were built whole at compile time."""
        if self._per_shape:
            self._variant(self._check_inputs(args, device=None))

    def _variant(self, sizes: Dict[str, int]) -> Tuple[LoweredProgram, Dict[int, Any]]:
        """The program and modules for these sizes: the graph with every size variable
        replaced by its value, lowered and built for the target (kept per sizes)."""
        missing = [n for n in self.graph.size_vars if n not in sizes]
        if missing:
            raise ValueError(f"the sizes {', '.join(missing)} are not known from the inputs' shapes; a module "
                             "built per concrete shape needs every size")
        key = tuple(sorted((n, sizes[n]) for n in self.graph.size_vars))
        variant = self._variants.get(key)
        if variant is None:
            graph = _specialized_graph(self.graph, lambda e: self._eval(e, sizes))
            program = lower_graph(graph, self.target, warn=not self._variants)   # the first shape's says it
            modules: Dict[int, Any] = {}
            for part in program.parts:
                self._module(part, modules)
            self._variant_packs[id(program)] = PackCache(program.packs, disk=True)
            variant = self._variants[key] = (program, modules)
        if self._last is not None and self._last is not variant:
            # the variants are kept, their temporaries not: one shape's at a time (a model called
            # at many shapes would otherwise hold an arena per shape)
            for mod in self._last[1].values():
                getattr(mod, "release_temps", lambda: None)()
        self._last = variant
        return variant

    def ir(self, level: str = "all") -> str:
        """The text of one level ("torch", "tensor", "loop", "tile", "kernel", "target") or of "all"."""
        if level == "all":
            return "\n\n".join(f"==== {lv} ====\n{self.ir(lv)}" for lv in LEVELS)
        if level not in LEVELS:
            raise ValueError(f"unknown IR level {level!r}; choose one of {', '.join(LEVELS + ('all',))}")
        if level == "torch":
            return str(self.graph)
        if level == "tensor":
            return str(self.program)
        program, modules = self.program, None
        if self._per_shape:
            if self._last is None:
                raise ValueError(f"the {level} level of a module with dynamic shapes built per shape exists per concrete "
                                 "shape: call the module (or .specialize(*inputs)) first; this shows the "
                                 "last shapes built")
            program, modules = self._last
        texts = []
        for part in program.parts:
            ir = self._module(part, modules).ir
            if level == "target":
                key = next(k for k in ir if k not in ("tensor", "loop", "tile", "kernel"))
                texts.append(ir[key])
            else:
                texts.append(str(ir[level]))
        return "\n\n".join(texts)

    # ------------------------------------------------------------ calling
    def _check_inputs(self, args: Sequence, device: Optional[str] = "") -> Dict[str, int]:
        """Check count, dtypes, devices (device: the one wanted, "" the target's, None any)
        and shapes of the user inputs; the size vars' values."""
        device = self._device if device == "" else device
        want = self._user_inputs
        if len(args) != len(want):
            raise TypeError(f"the compiled module takes {len(want)} input(s) "
                            f"({', '.join(i.name for i in want)}), got {len(args)}")
        sizes: Dict[str, int] = {}
        for spec, x in zip(want, args):
            if spec.kind == "size":
                if isinstance(x, bool) or not isinstance(x, int):
                    raise TypeError(f"input {spec.name}: expected an int (a size), got {type(x).__name__}")
                continue
            if not isinstance(x, torch.Tensor):
                raise TypeError(f"input {spec.name}: expected a torch.Tensor, got {type(x).__name__}")
            if x.dtype != to_torch(spec.dtype):
                raise TypeError(f"input {spec.name}: dtype {x.dtype}, the module was compiled for {to_torch(spec.dtype)}")
            if device is not None and x.device.type != device:
                if device != self._device:
                    raise ValueError(f"input {spec.name} is on {x.device}; emulate() runs the CUDA kernels on "
                                     "the CPU and takes CPU tensors")
                raise ValueError(f"input {spec.name} is on {x.device}; the module was compiled for target "
                                 f"{self.target.kind!r}, which takes {self._device} tensors")
            if x.dim() != len(spec.shape):
                raise ValueError(f"input {spec.name}: {x.dim()} dimensions {tuple(x.shape)}, expected "
                                 f"{len(spec.shape)} {tuple(map(str, spec.shape))}")
            for d, (want_e, got) in enumerate(zip(spec.shape, x.shape)):
                if isinstance(want_e, int):
                    if want_e != got:
                        raise ValueError(f"input {spec.name}: shape {tuple(x.shape)}, expected "
                                         f"{tuple(map(str, spec.shape))} (dimension {d})")
                elif isinstance(want_e, sl.Var):
                    if sizes.setdefault(want_e.name, got) != got:
                        raise ValueError(f"input {spec.name}: dimension {d} is {got}, but {want_e.name} is "
                                         f"{sizes[want_e.name]} from another input")
        for spec, x in zip(want, args):       # derived extents (2 * batch) once all are known
            if spec.kind == "size":
                continue
            for d, (want_e, got) in enumerate(zip(spec.shape, x.shape)):
                if isinstance(want_e, Expr) and not isinstance(want_e, sl.Var) and self._eval(want_e, sizes) != got:
                    raise ValueError(f"input {spec.name}: dimension {d} is {got}, expected {want_e}")
        for spec, x in zip(want, args):       # sizes Dynamo passes bind their variables
            if spec.kind == "size" and isinstance(spec.size, sl.Var):
                sizes.setdefault(spec.size.name, x)
        return sizes

    def _eval(self, e, sizes: Dict[str, int]) -> int:
        if isinstance(e, int):
            return e
        mapping = {v: sl.const(sizes[v.name], v.dtype) for n, v in self.graph.size_vars.items() if n in sizes}
        out = simplify(substitute(e, mapping))
        if not isinstance(out, Const):
            raise ValueError(f"the extent {e} is not known from the inputs' shapes")
        return float(out.value) if out.dtype.is_float else int(out.value)

    def _check_out(self, out, args: Sequence, sizes: Dict[str, int]) -> list:
        """The out= tensors, one per graph output, checked against the outputs' types."""
        outputs = self.graph.outputs
        spec = getattr(self.graph, "out_spec", None)
        many = not spec.is_leaf() if spec is not None else len(outputs) != 1 or self.graph.output_kind != "single"
        bufs = list(out) if many and isinstance(out, (tuple, list)) else [out] if not many else None
        if bufs is None or len(bufs) != len(outputs):
            raise TypeError(f"out= takes {'a tuple of ' + str(len(outputs)) + ' tensors' if many else 'a tensor'} "
                            f"(one per output of the module), got {type(out).__name__}"
                            + (f" of {len(bufs)}" if bufs is not None else ""))
        inputs = [x for x in args if isinstance(x, torch.Tensor)]
        for k, (o, buf) in enumerate(zip(outputs, bufs)):
            what = "out" if not many else f"out[{k}]"
            if not isinstance(buf, torch.Tensor):
                raise TypeError(f"{what}: expected a torch.Tensor, got {type(buf).__name__}")
            if not isinstance(o, Ref):
                raise TypeError(f"{what}: output {k} of the module is the constant {o!r}, not a tensor")
            shape, dtype = self.graph.value_type(o.name)
            want = tuple(self._eval(e, sizes) for e in shape)
            if buf.dtype != to_torch(dtype):
                raise TypeError(f"{what}: dtype {buf.dtype}, the output is {to_torch(dtype)}")
            if buf.device.type != self._device:
                raise ValueError(f"{what} is on {buf.device}; the module's outputs are {self._device} tensors")
            if tuple(buf.shape) != want:
                raise ValueError(f"{what}: shape {tuple(buf.shape)}, the output's is {want}")
            if not buf.is_contiguous():
                raise ValueError(f"{what} is not contiguous (the kernels write row-major outputs); "
                                 "pass a contiguous tensor")
            storage = buf.untyped_storage().data_ptr()
            if any(x.untyped_storage().data_ptr() == storage for x in inputs + bufs[:k]):
                raise ValueError(f"{what} shares memory with an input or another out= tensor")
        return bufs

    def _check_grad(self, args: Sequence, state: Dict[str, Any]) -> None:
        """The kernels compute no gradients. With grad mode on, an input that requires grad
        is refused (RuntimeError), and a parameter that requires grad (any nn.Module's, by
        default) gets one warning per compiled module: the outputs carry no grad_fn, where
        eager's would. Under torch.no_grad() or torch.inference_mode() both run."""
        if not torch.is_grad_enabled():
            return
        for spec, x in zip(self.graph.user_inputs, args):
            if isinstance(x, torch.Tensor) and x.requires_grad:
                raise RuntimeError(
                    f"input {spec.name} requires grad, but schedlang.torch.compile builds inference kernels "
                    "that compute no gradients; call the module under torch.no_grad() or "
                    "torch.inference_mode(), pass x.detach(), or use torch.compile(model, backend='schedlang'), "
                    "which keeps autograd (the backward runs in PyTorch)")
        name = None if self._warned_grad else self._state.requiring_grad(state)
        if name is not None:
            self._warned_grad = True
            warnings.warn(
                f"the parameter {name} requires grad, but the compiled module computes no gradients: its outputs "
                "do not require grad (eager's would). Call it under torch.no_grad() or torch.inference_mode() "
                "(or freeze the parameters with requires_grad_(False)); to train, use "
                "torch.compile(model, backend='schedlang'). Warned once per compiled module.",
                GradientWarning, stacklevel=4)

    def __call__(self, *args, out=None):
        """The module's outputs for args; with out= (a tensor, or a tuple of one per output,
        contiguous, of the outputs' shapes and dtypes, as torch's out=) the kernels write
        into those tensors, which are returned, instead of fresh ones. The outputs never
        require grad (_check_grad)."""
        return self.call_with_state(args, None, out=out)

    def call_with_state(self, args: Sequence, state: Optional[Mapping[str, torch.Tensor]], out=None):
        """As __call__(*args), with the tensors of some state inputs (by Torch IR input name)
        given by the caller instead of read from the module: the Dynamo backend passes the
        parameters Dynamo hands it at each call (checked as state.py checks the module's)."""
        if self._device == "cuda" and not torch.cuda.is_available():
            raise RuntimeError("this module was compiled for target 'cuda', but no CUDA GPU is available "
                               "(compile with target='llvm' to run on the CPU, or run the CUDA kernels on the "
                               "CPU with .emulate(*cpu_tensors))")
        sizes = self._check_inputs(args)
        bufs = None if out is None else self._check_out(out, args, sizes)
        prepared = self._prepared if self.prepared_calls and bufs is None else None
        current = self._state.same_as_last(state) if prepared is not None else None
        record = None
        if current is None or current is not prepared.state:
            remember = self.prepared_calls and bufs is None and self._preparable
            prepared, current = None, self._state.current(state, remember=remember)
            record = _Prepared(current) if remember else None
        self._check_grad(args, current)
        if prepared is not None:
            return self._run_prepared(args, prepared, sizes)
        result = self._run(args, sizes, self._state.on_device(current, self._device),
                           lambda mod, arrays: mod(*arrays), bufs=bufs, record=record)
        if record is not None:
            self._preparable = None not in record.parts
            self._prepared = record if self._preparable else None
        return result

    def profile(self, *args, number: int = 10):
        """Each kernel's time per forward inside the model, as TVM's debug executor gives each
        operator's: args are called once, then `number` times; returns a ModelProfile (print it
        for the table, slowest kernel first). The model must be compiled for a target with the
        profile option (target="llvm -profile"), whose kernels time themselves."""
        from .profile import profile
        with torch.no_grad():
            return profile(self, args, number)

    def emulate(self, *args, engine: str = "shim"):
        """Run a module compiled for target 'cuda' on the CPU, on CPU tensors, with the
        result a GPU call gives (same outputs, dtypes and packing): each part's CUDA kernels
        through CUDAModule.emulate (engine "shim": the generated CUDA C compiled by g++, block
        threads as real threads; "simt": the Kernel IR interpreted with numpy, slow, every
        access bounds-checked), the ops without a lowering in torch on the CPU."""
        engines = self._backend.emulation_engines
        if not engines:
            raise ValueError(f"emulate() runs the kernels of a module compiled for target 'cuda' on the CPU; "
                             f"this one was compiled for {self.target.kind!r}: call it directly")
        if engine not in engines:
            raise ValueError(f"unknown emulation engine {engine!r}; choose one of {', '.join(engines)}")
        sizes = self._check_inputs(args, device="cpu")
        current = self._state.current()
        self._check_grad(args, current)

        def run(mod, arrays):
            # simt reads numpy arrays: views of the tensors' storage, so results land in them
            mod.emulate(*(_numpy_view(a) if engine == "simt" else a for a in arrays), engine=engine)
        return self._run(args, sizes, self._state.on_device(current, "cpu"), run, device="cpu")

    def _run(self, args, sizes: Dict[str, int], state: Dict[str, Any], launch, device: Optional[str] = None,
             bufs: Optional[list] = None, record: Optional["_Prepared"] = None):
        """Run the steps on the user inputs args: parts through launch(module, arrays),
        torch nodes in torch; the outputs (written into bufs, the checked out= tensors, when
        given) packed as the module packs them. record: filled with the constants and the
        parts' bound calls (or None where a module binds no call) for _run_prepared."""
        device = device or self._device
        program, modules = self._variant(sizes) if self._per_shape else (self._plan, None)
        given: Dict[str, Any] = {}
        for o, buf in zip(self.graph.outputs, bufs or []):
            given.setdefault(o.name, buf)          # a value returned twice: the second one is a copy
        constants = dict(state)
        with kernel_cache.deferred():           # a new pack_disk entry written behind the call
            constants.update((self._variant_packs[id(program)] if self._per_shape else self._packs).values(state))
        values: Dict[str, Any] = {i.name: x for i, x in zip(self.graph.user_inputs, args)}
        values.update(constants)
        if record is not None:
            record.constants = constants
            record.user_names = [i.name for i in self.graph.user_inputs]
        for step in program.steps:
            if isinstance(step, Part):
                self._run_part(step, values, sizes, launch, device, modules, given, record)
            else:
                self._run_node(step, values, sizes, device)
                if record is not None:
                    record.parts.append(False)
        return self._results(values, bufs, sizes)

    def _run_prepared(self, args, prepared: "_Prepared", sizes: Dict[str, int]):
        """_run on a CPU target, by the bound calls prepared recorded on a call with the same
        state: only the user inputs, the values torch steps and other parts make, and fresh
        outputs are bound, each checked as a whole call checks it (PreparedCall.run)."""
        values = dict(prepared.constants)
        values.update(zip(prepared.user_names, args))
        device = self._device
        for step, call in zip(self._plan.steps, prepared.parts):
            if call is False:
                self._run_node(step, values, {}, device)
                continue
            replaced = [(pos, _kernel_array(values[name])) for pos, name in call.inputs]
            for pos, name, shape, dtype in call.outputs:
                out = values[name] = torch.empty(shape, dtype=dtype, device=device)
                replaced.append((pos, out))
            call.bound.run(replaced)
            _after_part(step, values)
        return self._results(values, None, sizes)

    def _run_node(self, step, values: Dict[str, Any], sizes: Dict[str, int], device: str) -> None:
        """Run a torch step of the program on values, adding its result."""
        node = step.node
        concrete = lambda r: values[r.name]          # noqa: E731
        a = map_refs(node.args, concrete)
        kw = map_refs(node.kwargs, concrete)
        a, kw = self._concrete_sizes(a, sizes), self._concrete_sizes(kw, sizes)
        if device != self._device and "device" in kw:   # a factory op made for the target's device
            kw["device"] = torch.device(device)
        values[node.name] = node.target(*a, **kw)

    def _results(self, values: Dict[str, Any], bufs: Optional[list], sizes: Dict[str, int]):
        """The module's outputs among values (copied into bufs where given), packed as the module
        packs them; an output that is a size (AOT autograd's forward graphs return the sizes their
        backward reads) as the int it is for this call's sizes."""
        outs = [values[o.name] if isinstance(o, Ref) else self._concrete_sizes(o, sizes) for o in self.graph.outputs]
        if bufs is not None:                       # outputs not written in place: copied
            for buf, value in zip(bufs, outs):
                if value is not buf:
                    buf.copy_(value)
            outs = bufs
        spec = getattr(self.graph, "out_spec", None)
        if spec is not None:
            from torch.utils._pytree import tree_unflatten
            return tree_unflatten(outs, spec)
        kind = self.graph.output_kind
        return outs[0] if kind == "single" else tuple(outs) if kind == "tuple" else list(outs)

    def _concrete_sizes(self, value, sizes):
        if isinstance(value, Expr):
            return self._eval(value, sizes)
        if isinstance(value, (list, tuple)):
            return type(value)(self._concrete_sizes(v, sizes) for v in value)
        if isinstance(value, dict):
            return {k: self._concrete_sizes(v, sizes) for k, v in value.items()}
        return value

    def _run_part(self, part: Part, values: Dict[str, Any], sizes: Dict[str, int], launch, device: str,
                  modules: Optional[Dict[int, Any]] = None, given: Optional[Dict[str, Any]] = None,
                  record: Optional["_Prepared"] = None) -> None:
        arrays = [_kernel_array(values[name]) for name, _ in part.inputs]
        results = []
        for name, t in part.outputs:
            out = (given or {}).get(name)
            if out is None:
                shape = tuple(self._eval(e, sizes) for e in t.shape)
                out = torch.empty(shape, dtype=to_torch(t.dtype), device=device)
            results.append(out)
            values[name] = out
        mod = self._module(part, modules)
        prepare = getattr(mod, "prepare", None) if record is not None else None
        bound = prepare(arrays + results) if prepare is not None else None
        if bound is None:
            launch(mod, arrays + results)
        else:
            bound.run()
        if record is not None:
            record.parts.append(None if bound is None else _PartCall(bound, part, arrays, results, record.constants))
        _after_part(part, values)


def _kernel_array(v):
    """v as a kernel reads it: a kernel may read its inputs with 16-byte vector loads, so a
    view that starts off that alignment (x[1:]) is copied, as a non-contiguous one is."""
    return v if v.is_contiguous() and v.data_ptr() % 16 == 0 else v.clone(memory_format=torch.contiguous_format)


def _after_part(part: Part, values: Dict[str, Any]) -> None:
    """A part's guards checked and its aliases added to values, once its kernels ran."""
    for name, (error, message) in part.checks.items():   # guards (LowerContext.guard): embedding's indices ...
        if bool(values.pop(name)):
            raise error(message)
    for name, src in part.aliases.items():
        values[name] = values[src]


class _Prepared:
    """What a call of a CPU module recorded for the next calls with the same state (the
    dict ModuleState.current returned): the constants (state tensors, packed ones) by name,
    and per step a _PartCall, False for a torch step, None where a part's module binds no
    call (then nothing is prepared)."""

    def __init__(self, state: Dict[str, Any]):
        self.state = state
        self.constants: Dict[str, Any] = {}
        self.user_names: List[str] = []
        self.parts: list = []


class _PartCall:
    """A part's bound call (PreparedCall) and what changes at each call: the positions of
    inputs that are not constants passed as they are (user inputs, values made by other
    steps, copies of misaligned constants: made again), and of the outputs, made fresh."""

    def __init__(self, bound, part: Part, arrays: list, results: list, constants: Dict[str, Any]):
        self.bound = bound
        self.inputs = [(k, name) for k, ((name, _), a) in enumerate(zip(part.inputs, arrays))
                       if constants.get(name) is not a]
        first = len(arrays)
        self.outputs = [(first + k, name, tuple(out.shape), out.dtype) for k, ((name, _), out)
                        in enumerate(zip(part.outputs, results))]
        bound.release([k for k, _ in self.inputs] + [k for k, *_ in self.outputs])


def _named_node(graph: TorchGraph, message: str):
    """The node whose name a build error quotes ('mul': a stage is named after its node), or None."""
    nodes = {n.name: n for n in graph.nodes}
    return next((nodes[w] for w in re.findall(r"'(\w+)'", message) if w in nodes), None)


def _numpy_view(t):
    """A numpy array sharing the CPU tensor's storage (bfloat16 as ml_dtypes.bfloat16)."""
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(numpy_bfloat16())
    return t.numpy()


def _uses_sizes(graph: TorchGraph) -> bool:
    """Whether some input of the graph has a symbolic extent (or is a size)."""
    return any(i.kind == "size" or any(not isinstance(e, int) for e in i.shape) for i in graph.user_inputs)


def _specialized_graph(graph: TorchGraph, value) -> TorchGraph:
    """graph with every size expression e (in shapes, node arguments, outputs) replaced by
    value(e), an int."""
    def conc(v):
        if isinstance(v, Expr):
            return value(v)
        if isinstance(v, (list, tuple)) and not isinstance(v, Ref):
            return type(v)(conc(x) for x in v)
        if isinstance(v, dict):
            return {k: conc(x) for k, x in v.items()}
        return v
    inputs = [replace(i, shape=conc(i.shape), size=conc(i.size)) for i in graph.inputs]
    nodes = [replace(n, args=conc(n.args), kwargs=conc(n.kwargs), shape=conc(n.shape),
                     display_kwargs=conc(n.display_kwargs)) for n in graph.nodes]
    return replace(graph, inputs=inputs, nodes=nodes, outputs=conc(graph.outputs), size_vars={})
