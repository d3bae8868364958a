"""The `schedlang` command line.

    schedlang compile --ir examples/silu_and_mul.py --shape 1,32,4096
    schedlang compile --ir model.py --module MLP --shape 8,64 --level tensor,kernel --target cuda
    schedlang tune model.py --model MLP --shape 8,64 --trials 200 --log mlp.jsonl --timeout 600
    schedlang tune model.py --model MLP --shape 8,64 --revalidate --log mlp.jsonl --threads 2

`compile` loads a Python file, picks the `nn.Module` to compile, makes random inputs of
the given shapes, compiles the module with `schedlang.torch.compile`, prints the chosen IR
levels (Torch IR, Tensor IR, Loop IR, Tile IR, Kernel IR, target code) and runs the
compiled module once against eager PyTorch, printing the largest difference (--target cuda
without a GPU: the CUDA C run on the CPU, through CompiledModule.emulate).

User mistakes (a missing file, a module the file does not define, a bad shape, an unknown
level, dtype or target) are reported in one line on stderr with exit status 2. A module
that fails to compile (one line; `--traceback` shows all of it), or whose compiled result
differs from PyTorch's, exits with 1. `tune` tunes the module's kernels
(schedlang.torch.compile's tune=), appending to a log, and prints a table per task and the
model's latency; with --revalidate it re-times each task's chosen record against today's
default schedule at the target's threads and logs the winner (schedlang.torch.revalidate).
torch is imported only when a command needs it, so `schedlang --help` is fast.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib.util
import inspect
import io
import logging
import math
import os
import sys
import traceback
import warnings
from typing import List, Optional, Sequence, Tuple

from .autoschedule.task_scheduler import format_round
from .kernel_cache import run_command
from .target.registry import get_backend
from .target.target import Target
from .version import __version__

# level name -> (title, what it says); the order is the pipeline's.
LEVELS = {
    "torch": ("Torch IR", "the captured ATen ops, with shapes and dtypes"),
    "tensor": ("Tensor IR", "Elementwise, Reduction and IndexMap stages (index maps read in place: no copies)"),
    "loop": ("Loop IR", "loop nests of loads, stores and reductions; injective producers fused into consumers"),
    "tile": ("Tile IR", "the schedule applied: split, reorder, unroll, vectorize, parallel / thread binding"),
    "kernel": ("Kernel IR", "kernels with launch geometry, memory scopes, vector loads and stores"),
    "target": ("Target code", "the code handed to the compiler: LLVM IR for llvm, CUDA C for cuda"),
}
DTYPES = ("float32", "float16", "bfloat16", "float64", "int8", "int16", "int32", "int64", "uint8", "bool")
TOLERANCE = {"float16": (1e-2, 1e-2), "bfloat16": (5e-2, 5e-2), "float32": (1e-4, 1e-5), "float64": (1e-10, 1e-12)}
EXIT_MISMATCH = 1
EXIT_USAGE = 2


class UsageError(Exception):
    """A mistake on the command line or in the user's file: reported in one line, exit 2.
    prog: the command it is about (argparse's errors name it), else the command run."""

    def __init__(self, message: str, prog: Optional[str] = None):
        super().__init__(message)
        self.prog = prog


class _Parser(argparse.ArgumentParser):
    """argparse, whose errors (an unknown option, a bad --seed) are one line like ours, not
    the usage block followed by the error."""

    def error(self, message):
        raise UsageError(f"{message} (see '{self.prog} --help')", self.prog)


# ---------------------------------------------------------------- the command line

def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="schedlang", description="schedlang, a tensor compiler with a TVM-style schedule language.",
        epilog="Run 'schedlang compile --help' or 'schedlang tune --help' for a command.")
    parser.add_argument("--version", action="version", version=f"schedlang {_version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    c = commands.add_parser(
        "compile", help="compile a PyTorch module from a Python file; print its IR levels",
        description="Compile the nn.Module in FILE with schedlang.torch.compile on random inputs, print the "
                    "chosen IR levels, and run it once against eager PyTorch (printing the largest "
                    "difference).",
        epilog="Which module: --module NAME names a class (built with no arguments) or a module instance in "
               "FILE. Without it, the one nn.Module named in FILE's __all__, else the one nn.Module class FILE "
               "defines (classes it imports do not count), else the one module instance it defines. "
               "Inputs: one --shape per forward() argument, or FILE's example_inputs() when no --shape is given.")
    c.add_argument("file", metavar="FILE", help="a Python file defining an nn.Module")
    c.add_argument("--ir", action="store_true", help="print the IR levels chosen by --level (default: all six)")
    c.add_argument("--module", metavar="NAME", help="the nn.Module class or instance in FILE to compile")
    c.add_argument("--shape", metavar="DIMS", action="append", default=[],
                   help="the shape of one input, comma-separated (1,32,4096; '' for a scalar tensor); "
                        "repeat it for each argument of forward()")
    c.add_argument("--dtype", default="float32", metavar="DTYPE",
                   help=f"dtype of the inputs and of the module's floating-point parameters "
                        f"(default float32; one of {', '.join(DTYPES)})")
    c.add_argument("--target", default="llvm", metavar="TARGET",
                   help="llvm (the host CPU, default), cuda, or a target string such as 'llvm -mcpu=haswell' "
                        "or 'cuda -arch=sm_80'; cuda compiles without a GPU and runs only where one is present")
    c.add_argument("--level", metavar="LEVELS",
                   help=f"levels to print, comma-separated: {', '.join(LEVELS)} or all (implies --ir)")
    c.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    c.add_argument("--no-run", action="store_true", help="compile and print only; do not run against PyTorch")
    c.add_argument("--profile", type=int, metavar="N",
                   help="compile for the target with its profile option (each kernel times itself), run the "
                        "module N times after the check and print each kernel's time per call, slowest first")
    c.add_argument("--traceback", action="store_true", help="show the full traceback when compiling fails")
    _tune_parser(commands)
    k = commands.add_parser("cache", help="show or empty the on-disk cache of compiled kernels",
                            description="info: where the cache of compiled kernels is and what it holds; clear: "
                                        "remove every entry (see schedlang/kernel_cache.py).")
    k.add_argument("action", choices=("info", "clear"))
    return parser


def _tune_parser(commands) -> None:
    t = commands.add_parser(
        "tune", help="tune a PyTorch module's kernels; write the log and print a per-task table",
        description="Tune the kernels of the nn.Module in FILE (schedlang.torch.compile(..., tune=N)): each "
                    "distinct kernel is a task weighted by how often it runs per forward; a task scheduler "
                    "gives rounds of trials to the task where the estimated model latency drops most. "
                    "Prints a line per round, then a table per task and the model's estimated and measured "
                    "latency, tuned and untuned.",
        epilog="Which module and inputs: as 'schedlang compile' (--module/--model, --shape or FILE's "
               "example_inputs()). The log is appended to: tuning again resumes it, and "
               "schedlang.torch.compile(model, inputs, log=LOG) builds the tuned model.")
    t.add_argument("file", metavar="FILE", help="a Python file defining an nn.Module")
    t.add_argument("--module", "--model", dest="module", metavar="NAME",
                   help="the nn.Module class or instance in FILE to tune")
    t.add_argument("--shape", metavar="DIMS", action="append", default=[],
                   help="the shape of one input, comma-separated; repeat it for each argument of forward()")
    t.add_argument("--dtype", default="float32", metavar="DTYPE",
                   help="dtype of the inputs and of the module's floating-point parameters (default float32)")
    t.add_argument("--target", default="llvm", metavar="TARGET", help="llvm (default) or a target string")
    t.add_argument("--trials", type=int, metavar="N", help="measurements in all (required unless --revalidate)")
    t.add_argument("--log", required=True, metavar="FILE", help="the tuning records (JSON lines), appended to")
    t.add_argument("--timeout", type=float, metavar="S",
                   help="start no new round S seconds after the start (the defaults measured included)")
    t.add_argument("--strategy", default="gradient", choices=("gradient", "round-robin"),
                   help="how rounds are given to tasks (default gradient: Ansor's)")
    t.add_argument("--per-round", type=int, default=8, metavar="K", help="measurements per round (default 8)")
    t.add_argument("--early-stopping", type=int, metavar="N",
                   help="a task whose best has not improved in its last N trials is not tuned further")
    t.add_argument("--dask", metavar="ADDRESS", help="measure on the Dask cluster of this scheduler address")
    t.add_argument("--seed", type=int, default=0, help="seed of the inputs and the search (default 0)")
    t.add_argument("--threads", type=int, metavar="N",
                   help="the CPU target's threads, tuned and timed at (default: the target's; records say it)")
    t.add_argument("--in-model", type=int, default=7, metavar="N",
                   help="time each task whose record won alone inside the model, against its default, in N "
                        "rounds, and keep the faster there (default 7; 0: not)")
    t.add_argument("--revalidate", action="store_true",
                   help="no search: re-time each task's chosen record in --log against today's default "
                        "schedule at the target's threads, and log the winner for them")
    t.add_argument("--quiet", action="store_true", help="no line per round")
    t.add_argument("--traceback", action="store_true", help="show the full traceback when tuning fails")


def parse_shape(text: str) -> Tuple[int, ...]:
    """(1, 32, 4096) from '1,32,4096'; () from '' (a 0-d tensor). UsageError otherwise."""
    text = text.strip()
    if text in ("", "()"):
        return ()
    parts = [p.strip() for p in text.strip("()").split(",")]
    if parts and parts[-1] == "":            # "8," as Python writes a 1-tuple
        parts.pop()
    # isascii: "²".isdigit() is true, but int() refuses it; 18 digits: a dimension is an int64
    if not parts or not all(p.isascii() and p.isdigit() and len(p) <= 18 for p in parts):
        raise UsageError(f"bad --shape {text!r}: expected non-negative integers separated by commas, "
                         f"such as 1,32,4096")
    return tuple(int(p) for p in parts)


def parse_levels(text: Optional[str]) -> List[str]:
    """The levels to print, in pipeline order, from 'tensor,loop' or 'all'."""
    names = [n.strip() for n in (text or "all").split(",") if n.strip()]
    if not names:
        raise UsageError(f"bad --level {text!r}: choose from {', '.join(LEVELS)} or all")
    for n in names:
        if n != "all" and n not in LEVELS:
            raise UsageError(f"unknown level {n!r}: choose from {', '.join(LEVELS)} or all")
    return list(LEVELS) if "all" in names else [n for n in LEVELS if n in names]


def check_dtype(name: str) -> str:
    if name not in DTYPES:
        raise UsageError(f"unknown dtype {name!r}: choose one of {', '.join(DTYPES)}")
    return name


def check_target(spec: str):
    """The resolved Target of a target string; UsageError naming what is wrong."""
    try:
        target = Target.create(spec)
    except (TypeError, ValueError, KeyError) as e:
        raise UsageError(f"bad --target {spec!r}: {_one_line(e)}") from None
    return target


# ---------------------------------------------------------------- the user's file

def load_file(path: str):
    """Import the Python file at path as a fresh module (its folder first on sys.path, so
    it can import its neighbours). UsageError if it is missing or fails to import."""
    if not os.path.exists(path):
        raise UsageError(f"no such file: {path}")
    if not os.path.isfile(path):
        raise UsageError(f"not a file: {path}")
    name = "_schedlang_cli_" + "".join(ch if ch.isalnum() else "_" for ch in os.path.basename(path)[:-3] or "file")
    spec = importlib.util.spec_from_file_location(name, os.path.abspath(path))
    if spec is None or spec.loader is None:
        raise UsageError(f"cannot load {path} as Python (expected a .py file)")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module                       # dataclasses and pickling look the module up
    folder = os.path.dirname(os.path.abspath(path))
    if folder not in sys.path:
        sys.path.insert(0, folder)
    try:
        spec.loader.exec_module(module)
    except SyntaxError as e:
        raise UsageError(f"{path}:{e.lineno}: syntax error: {e.msg}") from None
    except Exception as e:  # noqa: BLE001 (anything the user's file raises is reported, not crashed on)
        raise UsageError(f"{path}{_line_in(path, e)}: importing it raised {type(e).__name__}: {_one_line(e)}") from None
    return module


def pick_module(module, path: str, name: Optional[str]):
    """(the nn.Module instance, its display name) chosen as `compile --help` describes."""
    import torch.nn as nn

    def is_class(obj):
        return isinstance(obj, type) and issubclass(obj, nn.Module)

    if name:
        if not hasattr(module, name):
            found = _module_names(module, is_class)
            raise UsageError(f"{path} has no nn.Module named {name!r}"
                             + (f"; it defines: {', '.join(found)}" if found else "; it defines no nn.Module"))
        obj = getattr(module, name)
        if not (is_class(obj) or isinstance(obj, nn.Module)):
            raise UsageError(f"{name!r} in {path} is a {type(obj).__name__}, not an nn.Module class or instance")
        return _instantiate(obj, name, path), name
    exported = [n for n in getattr(module, "__all__", ()) if is_class(getattr(module, n, None))
                or isinstance(getattr(module, n, None), nn.Module)]
    classes = [n for n, obj in vars(module).items() if is_class(obj) and obj.__module__ == module.__name__]
    instances = [n for n, obj in vars(module).items() if isinstance(obj, nn.Module) and not n.startswith("_")]
    for found, where in ((exported, "named in __all__"), (classes, "defined"), (instances, "instantiated")):
        if len(found) == 1:
            return _instantiate(getattr(module, found[0]), found[0], path), found[0]
        if len(found) > 1:
            raise UsageError(f"{path} has several nn.Modules {where} ({', '.join(found)}): choose one with --module")
    raise UsageError(f"{path} defines no nn.Module class or instance")


def _module_names(module, is_class) -> List[str]:
    import torch.nn as nn
    return [n for n, obj in vars(module).items()
            if not n.startswith("_") and (is_class(obj) or isinstance(obj, nn.Module))]


def _instantiate(obj, name: str, path: str):
    if not isinstance(obj, type):
        return obj
    try:
        return obj()
    except TypeError as e:
        raise UsageError(f"cannot build {name}() from {path}: {_one_line(e)} (give its arguments defaults, or "
                         f"name a module instance with --module)") from None
    except Exception as e:  # noqa: BLE001 (the user's constructor failed: reported, not crashed on)
        raise UsageError(f"{path}{_line_in(path, e)}: building {name}() raised {type(e).__name__}: "
                         f"{_one_line(e)}") from None


def example_inputs(module_file, model, name: str, path: str, shapes: Sequence[Tuple[int, ...]], dtype: str,
                   seed: int) -> tuple:
    """Random tensors of the given shapes, or FILE's example_inputs() without --shape; their
    count is checked against model.forward's parameters."""
    import torch
    if not shapes:
        make = getattr(module_file, "example_inputs", None)
        if make is None:
            raise UsageError(f"give the input shapes with --shape (one per argument of {name}.forward; "
                             f"{path} defines no example_inputs())")
        torch.manual_seed(seed)
        try:
            inputs = make() if callable(make) else make
        except Exception as e:  # noqa: BLE001 (the user's function failed: reported, not crashed on)
            raise UsageError(f"{path}{_line_in(path, e)}: example_inputs() raised {type(e).__name__}: "
                             f"{_one_line(e)}") from None
        inputs = tuple(inputs) if isinstance(inputs, (list, tuple)) else (inputs,)
        wrong = [f"{k} is a {type(t).__name__}" for k, t in enumerate(inputs) if not isinstance(t, torch.Tensor)]
        if wrong:
            raise UsageError(f"{path}: example_inputs must give tensors, but input {wrong[0]}")
        tdtype = getattr(torch, dtype)                  # --dtype applies to them too
        if tdtype.is_floating_point:
            inputs = tuple(t.to(tdtype) if isinstance(t, torch.Tensor) and t.is_floating_point() else t
                           for t in inputs)
    else:
        inputs = tuple(_random_tensor(shape, dtype, seed + k) for k, shape in enumerate(shapes))
    _check_arity(model, name, len(inputs))
    return inputs


def _random_tensor(shape, dtype: str, seed: int):
    import torch
    tdtype = getattr(torch, dtype)
    size = math.prod(shape) * tdtype.itemsize
    if size > _memory_bytes() // 2:
        raise UsageError(f"--shape {','.join(map(str, shape))} is {math.prod(shape):.4g} elements "
                         f"({size / 2**30:.3g} GiB of {dtype}): more than half of this machine's memory")
    gen = torch.Generator().manual_seed(seed)
    if tdtype.is_floating_point:
        return torch.randn(shape, generator=gen, dtype=torch.float32).to(tdtype)
    if tdtype is torch.bool:
        return torch.randint(0, 2, shape, generator=gen).bool()
    low = 0 if tdtype is torch.uint8 else -8
    return torch.randint(low, 9, shape, generator=gen, dtype=tdtype)


def _memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):     # not POSIX: assume a laptop's 16 GiB
        return 16 << 30


def _check_arity(model, name: str, given: int) -> None:
    try:
        params = list(inspect.signature(model.forward).parameters.values())
    except (TypeError, ValueError):
        return
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    if not len(required) <= given <= len(positional):
        want = f"{len(required)}" if len(required) == len(positional) else f"{len(required)} to {len(positional)}"
        names = ", ".join(p.name for p in positional)
        raise UsageError(f"{name}.forward({names}) takes {want} input{'s' if want != '1' else ''}, "
                         f"but {given} {'were' if given != 1 else 'was'} given (one --shape per input)")


# ---------------------------------------------------------------- compile, print, run

def header(level: str, target) -> str:
    title, says = LEVELS[level]
    if level == "target":
        title = "Target code: " + get_backend(target.kind).source_title
    rule = "=" * 78
    return f"{rule}\n{title}  (--level {level}): {says}\n{rule}"


def report_failure(args, what: str, e: BaseException) -> int:
    """Say on stderr, in one line, that `what` failed with e (the whole traceback with
    --traceback); the exit status of a failed compile, run or tune."""
    if args.traceback:
        traceback.print_exc()
    print(f"schedlang {args.command}: error: {what} failed: {type(e).__name__}: {_one_line(e)}"
          + ("" if args.traceback else " (--traceback shows where)"), file=sys.stderr)
    return EXIT_MISMATCH


def load_model(args, shapes, dtype: str):
    """(model, name, inputs): the module the command names, in eval mode and in dtype, and its
    example inputs (compile and tune share this)."""
    module_file = load_file(args.file)
    model, name = pick_module(module_file, args.file, args.module)
    import torch
    model = model.eval()
    if getattr(torch, dtype).is_floating_point and dtype != "float32":
        model = model.to(getattr(torch, dtype))
    return model, name, example_inputs(module_file, model, name, args.file, shapes, dtype, args.seed)


def run_compile(args) -> int:
    shapes = [parse_shape(s) for s in args.shape]
    levels = parse_levels(args.level) if (args.ir or args.level) else []
    dtype = check_dtype(args.dtype)
    target = check_target(args.target)
    if args.profile is not None:
        if args.profile < 1 or args.no_run:
            raise UsageError("--profile N needs N >= 1 calls to time, and a run (not --no-run)")
        if not get_backend(target.kind).profiles_kernels:
            raise UsageError(f"--profile: the {target.kind} target's kernels cannot time themselves; "
                             "profile on the CPU (--target llvm)")
        target = target.with_options(profile=True)
    model, name, inputs = load_model(args, shapes, dtype)

    import torch
    described = ", ".join(f"{tuple(t.shape)} {str(t.dtype).replace('torch.', '')}" if isinstance(t, torch.Tensor)
                          else repr(t) for t in inputs)
    print(f"{name} from {args.file}; inputs: {described}; target: {target}")

    import schedlang.torch as sl_torch
    try:
        with torch.no_grad(), warnings.catch_warnings(record=True) as caught, _quiet_torch(not args.traceback):
            warnings.simplefilter("always")
            compiled = sl_torch.compile(model, inputs, target=target)
    except Exception as e:  # noqa: BLE001 (reported in one line; --traceback shows it all)
        return report_failure(args, f"compiling {name}", e)
    for w in caught:                       # one line each (an op run by torch, for instance)
        if not issubclass(w.category, (DeprecationWarning, FutureWarning)):
            print(f"warning: {w.message}", file=sys.stderr)
    for level in levels:
        print(header(level, target))
        print(compiled.ir(level).rstrip("\n"))
        print()
    for line in get_backend(target.kind).module_notes(compiled):
        print(line)
    if args.no_run:
        return 0
    try:
        status = run_against_torch(compiled, model, inputs, target, dtype)
        if args.profile is not None:
            print(f"profile: each kernel's time per call, mean of {args.profile} calls")
            print(compiled.profile(*inputs, number=args.profile).table())
        return status
    except Exception as e:  # noqa: BLE001 (reported in one line, as a failed compile is)
        return report_failure(args, f"running {name}", e)


def run_tune(args) -> int:
    """`schedlang tune`: tune, print the per-task table, time the model tuned and untuned
    (--revalidate: re-time the log's chosen records instead, run_revalidate)."""
    shapes = [parse_shape(s) for s in args.shape]
    dtype = check_dtype(args.dtype)
    target = tune_target(args)
    if args.revalidate:
        return run_revalidate(args, target, shapes, dtype)
    if args.trials is None:
        raise UsageError("--trials N is required (the measurements in all), unless --revalidate")
    if args.trials < 1 or args.per_round < 1 or (args.early_stopping is not None and args.early_stopping < 1):
        raise UsageError("--trials, --per-round and --early-stopping must be positive")
    if args.timeout is not None and not args.timeout > 0:
        raise UsageError("--timeout must be a positive number of seconds")
    model, name, inputs = load_model(args, shapes, dtype)
    import torch
    print(f"{name} from {args.file}; target: {target}; {args.trials} trials, strategy {args.strategy}; log: {args.log}")
    import schedlang.torch as sl_torch
    from schedlang.torch.tune import task_table, time_call
    executor = None
    try:
        if args.dask:
            from dask.distributed import Client
            executor = Client(args.dask)
        with torch.no_grad(), _quiet_torch(not args.traceback):
            tuned = sl_torch.compile(model, inputs, target=target, tune=args.trials, log=args.log,
                                     timeout=args.timeout, strategy=args.strategy, per_round=args.per_round,
                                     seed=args.seed, executor=executor, verbose=0,
                                     early_stopping=args.early_stopping, in_model=args.in_model,
                                     callback=None if args.quiet else _print_round)
            untuned = sl_torch.compile(model, inputs, target=target)
    except Exception as e:  # noqa: BLE001 (reported in one line; --traceback shows it all)
        return report_failure(args, f"tuning {name}", e)
    finally:
        if executor is not None:
            executor.close()
    if tuned.tuning is None:
        print("nothing to tune: the module has no kernel of static shape")
        return 0
    print(task_table(tuned.tuning))
    if args.in_model:
        from schedlang.torch.in_model import summary
        print(summary(tuned.tuning.in_model))
    with torch.no_grad():
        t_tuned, t_untuned = time_call(lambda: tuned(*inputs), lambda: untuned(*inputs))
    print(f"measured model latency (median, the two timed in alternation): {t_tuned * 1e3:.4g} ms tuned, "
          f"{t_untuned * 1e3:.4g} ms untuned ({t_untuned / t_tuned:.2f}x)")
    return run_against_torch(tuned, model, inputs, target, dtype)


def tune_target(args):
    """The target of `schedlang tune`: --target, with --threads as its num_threads."""
    target = check_target(args.target)
    if args.threads is None:
        return target
    if args.threads < 1:
        raise UsageError(f"--threads must be a positive number of threads, got {args.threads}")
    try:
        return target.with_options(num_threads=args.threads)
    except TypeError as e:
        raise UsageError(f"--threads: {_one_line(e)}") from None


def run_revalidate(args, target, shapes, dtype: str) -> int:
    """`schedlang tune --revalidate`: each task's chosen record in --log re-timed against
    today's default schedule at the target's threads, the winner logged; prints a line per
    task and the table, then runs the model built with the log against PyTorch."""
    if not os.path.isfile(args.log):
        raise UsageError(f"--revalidate: no tuning log {args.log!r}")
    model, name, inputs = load_model(args, shapes, dtype)
    import torch
    import schedlang.torch as sl_torch
    from schedlang.torch.revalidate import revalidate, revalidation_table
    print(f"{name} from {args.file}; target: {target}; revalidating the records of {args.log}")
    try:
        with torch.no_grad(), _quiet_torch(not args.traceback):
            untuned = sl_torch.compile(model, inputs, target=target)
            results = revalidate(untuned.program, target, args.log, verbose=0 if args.quiet else 1)
            tuned = sl_torch.compile(model, inputs, target=target, log=args.log)
    except Exception as e:  # noqa: BLE001 (reported in one line; --traceback shows it all)
        return report_failure(args, f"revalidating {name}", e)
    print(revalidation_table(results))
    return run_against_torch(tuned, model, inputs, target, dtype)


def _print_round(info) -> None:
    """A tuning round's line, on stdout (stderr is quiet while torch exports and compiles)."""
    print(format_round(info), flush=True)


def run_against_torch(compiled, model, inputs, target, dtype: str) -> int:
    """Run the compiled module and the eager module on the same inputs; print the largest
    difference of each output. EXIT_MISMATCH when one is beyond the dtype's tolerance."""
    import torch
    run = compiled
    backend = get_backend(target.kind)
    device = backend.torch_device
    if device != "cpu":
        if getattr(torch, device).is_available():
            inputs = tuple(t.to(device) if isinstance(t, torch.Tensor) else t for t in inputs)
            model = model.to(device)
        else:
            # the same kernels, run on the CPU (CompiledModule.emulate)
            print(f"run: emulated on the CPU {backend.emulation_note}")
            run = compiled.emulate
    with torch.no_grad():
        got = _flatten(run(*inputs))
        want = _flatten(model(*inputs))
    if len(got) != len(want):
        print(f"run: MISMATCH: schedlang returned {len(got)} outputs, torch {len(want)}")
        return EXIT_MISMATCH
    ok = True
    for k, (g, w) in enumerate(zip(got, want)):
        line, good = compare(g, w)
        ok = ok and good
        print(f"run: output {k}: {line}")
    print("run: matches eager PyTorch" if ok else "run: MISMATCH against eager PyTorch")
    return 0 if ok else EXIT_MISMATCH


def compare(got, want) -> Tuple[str, bool]:
    """One line describing how got differs from want, and whether it is within tolerance."""
    import torch
    if tuple(got.shape) != tuple(want.shape) or got.dtype != want.dtype:
        return (f"{tuple(got.shape)} {got.dtype} but torch gives {tuple(want.shape)} {want.dtype}", False)
    shape = f"{tuple(want.shape)} {str(want.dtype).replace('torch.', '')}"
    if not want.dtype.is_floating_point:
        wrong = int((got != want).sum())
        return (f"{shape}, {wrong} of {want.numel()} elements differ", wrong == 0)
    rtol, atol = TOLERANCE.get(str(want.dtype).replace("torch.", ""), (1e-4, 1e-5))
    diff = (got.double() - want.double()).abs()
    err = float(diff.max()) if diff.numel() else 0.0
    good = bool(torch.allclose(got.double(), want.double(), rtol=rtol, atol=atol, equal_nan=True))
    return (f"{shape}, max |schedlang - torch| = {err:.3g} (rtol {rtol:g}, atol {atol:g})", good)


def _flatten(value) -> list:
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _flatten(v)]
    return [value]


# ---------------------------------------------------------------- helpers

@contextlib.contextmanager
def _quiet_torch(quiet: bool):
    """torch.export logs, and prints to stderr, the graph it gave up on before it raises; the
    one-line error says what went wrong, and --traceback shows everything."""
    if not quiet:
        yield
        return
    # torch configures many loggers of its own (not propagating to "torch"): switch logging
    # off as a whole, for the duration of the compile only.
    before = logging.root.manager.disable
    logging.disable(logging.CRITICAL)
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            yield
    finally:
        logging.disable(before)


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__


def _line_in(path: str, e: BaseException) -> str:
    """':LINE' of the deepest frame of e that is in path, or ''."""
    here = os.path.abspath(path)
    lines = [f.lineno for f in traceback.extract_tb(e.__traceback__) if os.path.abspath(f.filename) == here]
    return f":{lines[-1]}" if lines else ""


def _version() -> str:
    return __version__


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The entry point of `schedlang` and `python -m schedlang`; returns the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except UsageError as e:
        print(f"{e.prog}: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    if args.command is None:
        print("schedlang: error: no command given (usage: schedlang COMMAND ...; commands: compile, tune, cache; "
              "see 'schedlang --help')", file=sys.stderr)
        return EXIT_USAGE
    if args.command == "cache":
        return run_command(args.action)
    try:
        return run_tune(args) if args.command == "tune" else run_compile(args)
    except UsageError as e:
        print(f"schedlang {args.command}: error: {e}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
