"""lower() and build(): the pipeline from a schedule to a callable module, as a list of
named steps, keeping the text of every level."""
from __future__ import annotations

import warnings
from functools import partial
from typing import Dict, List, Optional, Sequence, Union

from . import build_cache, trace as tracing
from .errors import ScheduleError
from .limits import recursion_guard
from .kernel import lower_to_kernel_ir
from .loop import lower_to_loop_ir, print_func
from .loop.nodes import Func
from .loop.plan import reachable_stages
from .lowered import LoweredFunc
from .module_group import ModuleGroup
from .schedule import Schedule
from .schedule.annotate import PARALLEL as PARALLEL_ANNOTATION, check_unroll_products
from .schedule.placement import enclosing_loops
from .target.registry import get_backend, load_library_module
from .target.target import Target
from .tile import lower_to_tile_ir
from .tile.lower import tile_passes
from .tensor.op import PlaceholderOp, Tensor
from .tensor.printer import print_tensor_ir
from .texts import LevelTexts

LEVELS = ("tensor", "loop", "tile", "kernel")


def _check_schedule(s) -> None:
    if not isinstance(s, Schedule):
        raise TypeError(f"expected a schedule from sl.create_schedule(...), got {type(s).__name__}")


def _check_parallel_nesting(s: Schedule) -> None:
    """A parallel loop inside another parallel loop (of the same stage, or of a stage it is
    computed in) would start threads from threads."""
    for st in s.stages:
        loops = enclosing_loops(st) + [(st, a) for a in st.leaf_iter_vars]
        parallel = [(owner, a) for owner, a in loops if owner.annotations.get(a) is not None
                    and owner.annotations[a].kind == PARALLEL_ANNOTATION]
        if len(parallel) > 1:
            (outer_stage, outer), (inner_stage, inner) = parallel[0], parallel[1]
            raise ScheduleError("parallel", inner_stage.name, f"loop '{inner.name}' is parallel inside the parallel "
                                f"loop '{outer.name}' of stage '{outer_stage.name}'", axis=inner.name,
                                hint="parallelize one level only (fuse loops first to get more parallel work)")


def check_before_lowering(s) -> None:
    """The target-independent checks lower() and the auto-scheduler's features make before
    lowering: s is a Schedule, no parallel loop nests in another, unroll products stay bounded."""
    _check_schedule(s)
    _check_parallel_nesting(s)
    check_unroll_products(s, enclosing_loops)


def lower_all(s: Schedule, args: Sequence[Tensor], target: Target, name: Optional[str] = None,
              upto: str = "kernel", trace: Optional[tracing.Trace] = None) -> Dict[str, object]:
    """The levels of the pipeline in order, up to and including `upto`: Tensor IR text,
    Loop IR, Tile IR, Kernel IR. Only Kernel IR depends on the (resolved) target: its
    backend checks the schedule and gives the Kernel IR passes. A trace records the Tensor
    and Loop IR and the IR after every Tile and Kernel IR pass (pass_names)."""
    check_before_lowering(s)
    levels: Dict[str, object] = {"tensor": print_tensor_ir(s.outputs, _stage_ops(s, args))}
    _record(trace, "tensor", levels["tensor"])
    if upto == "tensor":
        return levels
    levels["loop"] = lower_to_loop_ir(s, args, name)              # what each stage computes
    _record(trace, "loop", levels["loop"])
    if upto == "loop":
        return levels
    levels["tile"] = lower_to_tile_ir(s, args, name, trace)       # the schedule applied
    if upto == "tile":
        return levels
    levels["kernel"] = lower_tile_to_kernel(levels["tile"], s, target, trace)   # kernels, launch geometry, vectors
    return levels


def _record(trace: Optional[tracing.Trace], name: str, ir) -> None:
    if trace is not None:
        trace.record(name, lambda: _text(ir))


def lower_tile_to_kernel(tile: Func, s: Schedule, target: Target, trace: Optional[tracing.Trace] = None):
    """Kernel IR for a target: its backend checks the schedule, then runs its Kernel IR passes."""
    backend = get_backend(target.kind)
    backend.check_schedule(s, target)
    return lower_to_kernel_ir(tile, backend.kernel_passes(target), trace, backend.kernel_passes_per_nest)


def pass_names(target) -> List[str]:
    """Every step of build(s, args, target) in order, as mod.trace names them: the Tensor and
    Loop IR levels, the Tile IR passes, the backend's Kernel IR passes and build stages."""
    target = Target.create(target)
    backend = get_backend(target.kind)
    return (["tensor", "loop"] + [name for name, _ in tile_passes()]
            + [name for name, _ in backend.kernel_passes(target)] + list(backend.stage_names(target)))


def _stage_ops(s: Schedule, args):
    """The operations of the scheduled program in stage order, including the stages the
    schedule added (cache_read/cache_write copies, rfactor partials)."""
    in_schedule = [a for a in args if isinstance(a, Tensor) and a.op in s.stage_map]   # not unused placeholders
    reachable = reachable_stages(s, [s[o] for o in s.outputs] + [s[a] for a in in_schedule])
    return [st.op for st in s.stages if id(st) in reachable]


def lower(s: Schedule, args: Sequence[Tensor], name: Optional[str] = None, level: str = "tile",
          target="llvm", simple_mode: bool = False) -> LoweredFunc:
    """The lowered schedule: its text at `level` (tensor, loop, tile (default, the scheduled
    loop nest, like tvm.lower), kernel, or all), which print() shows and build() accepts.
    simple_mode is accepted for TVM compatibility: the text is always the simple form."""
    if level not in LEVELS + ("all",):
        raise ValueError(f"unknown IR level {level!r}; choose one of {', '.join(LEVELS + ('all',))}")
    target = Target.create(target)
    with recursion_guard("lower"):
        levels = lower_all(s, args, target, name, upto="kernel" if level == "all" else level)
        texts = {k: _text(v) for k, v in levels.items()}
    if level == "all":
        text = "\n\n".join(f"# ---- {k} IR ----\n{t}" for k, t in texts.items())
    else:
        text = texts[level]
    return LoweredFunc.make(text, level, levels, texts, target, s, args, _is_output(s, args))


def _is_output(s: Schedule, args: Sequence[Tensor]) -> list:
    """For each tensor argument, whether the program writes it (the module checks those are writable)."""
    return [not isinstance(a.op, PlaceholderOp) for a in args if isinstance(a, Tensor)]


def _text(ir) -> str:
    if isinstance(ir, str):
        return ir
    if isinstance(ir, Func):
        return print_func(ir)
    return str(ir)


def build(inputs: Union[Schedule, LoweredFunc], args: Optional[Sequence[Tensor]] = None, target=None,
          name: Optional[str] = None, cache: Optional[bool] = None, trace: Optional[bool] = None):
    """Compile into a callable module: mod(*arrays) with arrays in args order.

    A list of lowered functions builds them all (tvm.build([f1, f2])): mod["f1"] is one.

    As tvm.build: build(s, args, target="llvm", name=None), or build(sl.lower(s, args), target=...).
    target is a string ("llvm", "llvm -mcpu=haswell", "cuda") or a Target; by default "llvm",
    or for a lowered function the target it was lowered for. An identical build of a schedule
    (program, steps, args, target, name) returns the module already compiled; cache=False
    always compiles (see build_cache.py).

    trace=True (or the environment variable SCHEDLANG_TRACE=1) prints the IR after every pass
    and build stage to stderr and keeps it as mod.trace, a list of (pass name, text) in the
    order of pass_names(target) (see trace.py); a traced build always compiles. For a
    lowered function the trace starts at its Kernel IR passes. trace= may also be a
    schedlang.trace.Trace: Trace(text=False) times each pass (trace.times) and prints nothing."""
    if isinstance(inputs, LoweredFunc) and isinstance(args, (str, Target)) and target is None:
        args, target = None, args            # build(lowered, "llvm")
    if isinstance(inputs, (list, tuple)) and inputs and all(isinstance(f, LoweredFunc) for f in inputs):
        return _build_group(inputs, args, target, name, trace)
    record = tracing.for_build(trace)
    if target is None:
        target = inputs.target if isinstance(inputs, LoweredFunc) else "llvm"
    target = Target.create(target)
    if isinstance(inputs, LoweredFunc):
        if args is not None:
            raise TypeError("build(lowered, target=...) takes no args: they were fixed by sl.lower(s, args)")
        if name is not None and name != inputs.name:
            # TVM ignores name= for a lowered module too; say so, since the name differs.
            warnings.warn(f"build(lowered, name={name!r}) is ignored: the function was named {inputs.name!r} by "
                          "sl.lower(s, args, name=...)", UserWarning, stacklevel=2)
        levels = _kernel_levels(inputs, target, record)
        is_output = inputs.is_output
    else:
        if args is None:
            raise TypeError("build(s, args, target=...) needs the argument tensors, in call order")
        if record is not None:
            return _build(inputs, args, target, name, record)
        return build_cache.cached_build(inputs, args, target, name, cache,
                                        lambda: _build(inputs, args, target, name))
    return _build_levels(levels, target, is_output, record)


def _build_group(funcs: Sequence[LoweredFunc], args, target, name, trace=None):
    """build([f1, f2], target): each lowered function compiled, found by its name (TVM's m["f1"])."""
    if isinstance(args, (str, Target)) and target is None:
        args, target = None, args
    if args is not None or name is not None:
        raise TypeError("build([f1, f2], target=...) takes no args or name: sl.lower(s, args, name=...) fixed them")
    names = [f.name for f in funcs]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"functions built together need distinct names; {', '.join(map(repr, twice))} is given "
                         "twice (sl.lower(s, args, name=...))")
    return ModuleGroup({f.name: build(f, target=target, trace=trace) for f in funcs})


def _build(s: Schedule, args: Sequence[Tensor], target: Target, name: Optional[str],
           trace: Optional[tracing.Trace] = None):
    with recursion_guard("lower"):
        levels = lower_all(s, args, target, name, trace=trace)
    return _build_levels(levels, target, _is_output(s, args), trace)


def _build_levels(levels: Dict[str, object], target: Target, is_output, trace: Optional[tracing.Trace] = None):
    texts = LevelTexts({k: partial(_text, v) for k, v in levels.items()})      # printed when read (texts.py)
    backend = get_backend(target.kind)
    with recursion_guard("build"):
        if trace is None:        # backends written before tracing take no trace argument
            return backend.build(levels["kernel"], target, is_output, texts)
        mod = backend.build(levels["kernel"], target, is_output, texts, trace=trace)
    mod.trace = trace.passes
    return mod


def _kernel_levels(lowered: LoweredFunc, target: Target, trace: Optional[tracing.Trace] = None) -> Dict[str, object]:
    """The levels of a lowered function down to Kernel IR for `target`, reusing its Kernel IR
    when it was lowered for that target."""
    if "tile" not in lowered.ir:
        raise ValueError(f"build needs a function lowered to Tile IR or further; this one was lowered with "
                         f"level={lowered.level!r}: use sl.lower(s, args) (level='tile') or build(s, args)")
    levels = dict(lowered.ir)
    if "kernel" not in levels or lowered.target != target or trace is not None:   # another target, or traced
        levels["kernel"] = lower_tile_to_kernel(levels["tile"], lowered.schedule, target, trace)
    return levels


def load_module(path: str):
    """A module that mod.export_library(path) wrote, ready to call with no lowering or code
    generation (as tvm.runtime.load_module), by the backend that wrote it (llvm or c)."""
    return load_library_module(path)
