"""Tile IR -> Kernel IR: run the target's Kernel IR passes, top to bottom.

Each backend writes out its whole list (kernel_passes): passes over the body of the
function, then split_kernels (cut into kernels with their launch geometry) and
add_size_params, which need the function itself and are listed as SPLIT_KERNELS and
ADD_SIZE_PARAMS.
"""
from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Callable, Dict, Optional, Sequence, Tuple

from .. import verify
from ..errors import InternalError
from ..loop.nodes import Allocate, Func, Seq, StageNest, Stmt, seq
from ..loop.printer import print_func
from ..loop.verify import size_vars, verify_stmt
from .dedup import alpha_key, rename, renaming
from .forked import map_forked
from .kernels import split_kernels
from .nodes import KernelCopy, KernelModule
from .sizes import add_size_params
from .verify import verify_kernel_module


class WholeFunction:
    """A Kernel IR pass that needs the lowered function (its name, parameters, size
    arguments) besides the IR: run(ir, func)."""

    def __init__(self, run: Callable):
        self.run = run


def _split(body, func: Func) -> KernelModule:
    return split_kernels(func.name, func.params, body)


def _sizes(module: KernelModule, func: Func) -> KernelModule:
    return add_size_params(module, func.size_args, func.size_checks)


SPLIT_KERNELS = WholeFunction(_split)          # one kernel per root stage nest, its launch axes lifted
ADD_SIZE_PARAMS = WholeFunction(_sizes)        # size variables become scalar parameters


def lower_to_kernel_ir(func: Func, passes: Sequence[Tuple[str, Callable]], trace=None,
                       per_nest: bool = False) -> KernelModule:
    """Run the passes (from the target's backend) over the function body; the list ends
    with SPLIT_KERNELS and ADD_SIZE_PARAMS. With verification on (schedlang.verify), the IR
    is checked after every pass; with a trace, its text is recorded after every pass.

    per_nest (a backend whose body passes see one root stage nest at a time): the passes
    before SPLIT_KERNELS run on each root stage nest alone, and a nest that is an earlier
    one with its variables and buffers renamed (kernel/dedup.py: a model's repeated layer)
    takes that one's result, renamed, instead of running them again; the distinct nests of
    a function with many of them are shared out between this process and a forked child
    (kernel/forked.py; the same IR). Verification then checks the whole body after the last
    of them; a trace keeps the whole-body order."""
    bound = [(name, partial(p.run, func=func) if isinstance(p, WholeFunction) else p) for name, p in passes]
    origins = None
    if per_nest and trace is None:
        cut = next((i for i, (_, p) in enumerate(passes) if isinstance(p, WholeFunction)), len(passes))
        done = _per_nest(func.body, bound[:cut]) if cut else None
        if done is not None:
            body, origins = done
            if verify.ENABLED:
                _verify(func, body, bound[cut - 1][0])
            func, bound = replace(func, body=body), bound[cut:]
    module = verify.run_passes(func.body, bound, partial(_verify, func), trace, partial(_show, func))
    if not isinstance(module, KernelModule):
        raise InternalError("a Kernel IR pass list ends with split_kernels and add_size_params "
                            f"(SPLIT_KERNELS, ADD_SIZE_PARAMS); this one ends with {bound[-1][0] if bound else 'nothing'}")
    if origins is not None and isinstance(module, KernelModule) and any(o is not None for o in origins):
        module = replace(module, copies=_copies(module, origins))
    return verify_kernel_module(module) if verify.ENABLED else module


def _copies(module: KernelModule, origins) -> tuple:
    """module.copies from the nest each kernel's nest was renamed from (one kernel per nest)."""
    if len(origins) != len(module.kernels):
        return ()
    out = []
    for kj, origin in zip(module.kernels, origins):
        copy = None
        if origin is not None:
            i, var_map, buf_map = origin
            ki = module.kernels[i]
            params = tuple(buf_map.get(b) for b in ki.params)
            sizes = tuple(var_map.get(v) for v in ki.sizes)
            if (len(ki.launch) == len(kj.launch) and set(map(id, params)) == set(map(id, kj.params))
                    and len(params) == len(kj.params) and set(map(id, sizes)) == set(map(id, kj.sizes))
                    and len(sizes) == len(kj.sizes)):
                copy = KernelCopy(i, params, sizes)
        out.append(copy)
    return tuple(out)


def _per_nest(body: Stmt, passes):
    """(the body with the passes run on each root stage nest, once per distinct nest up to
    renaming; per nest, None or (index of the nest it repeats, variable map, buffer map)),
    or None when the body is not root allocations around stage nests."""
    allocs = []
    while isinstance(body, Allocate):
        allocs.append(body.buffer)
        body = body.body
    nests = list(body.stmts) if isinstance(body, Seq) else [body]
    if not all(isinstance(n, StageNest) for n in nests):
        return None
    table: Dict[tuple, int] = {}          # the nests' keys are compared: one table for all
    keys = [alpha_key(nest.body, table=table) for nest in nests]
    first: Dict[tuple, int] = {}          # key -> index of the first nest with it
    distinct = [i for i, keyed in enumerate(keys) if keyed is None or first.setdefault(keyed[0], i) == i]
    # The keyed ones may go to a forked child: their variables and buffers (all the keyer
    # met) come back as these objects. An unkeyable nest (an extern call) is lowered here.
    keyed = [i for i in distinct if keys[i] is not None]
    known = {id(x): x for i in keyed for x in keys[i][1].vars + keys[i][1].buffers}
    run = partial(verify.run_passes, passes=passes)
    lowered = dict(zip(keyed, map_forked(run, [nests[i] for i in keyed], known)))
    lowered.update((i, run(nests[i])) for i in distinct if keys[i] is None)
    out, origins = [], []
    for index, (nest, key) in enumerate(zip(nests, keys)):
        i = index if key is None else first[key[0]]
        new = lowered[i]
        if i == index or not isinstance(new, StageNest):
            origins.append(None)
            if i != index:                # lowered to something else: lowered again, not shared
                new = run(nest)
        else:
            var_map, buf_map = renaming(keys[i][1], key[1])
            new = StageNest(nest.stage, rename(new.body, var_map, buf_map))
            origins.append((i, var_map, buf_map))
        out.append(new)
    result = seq(*out)
    for b in reversed(allocs):
        result = Allocate(b, result)
    return result, origins


def _verify(func: Func, ir, after: str) -> None:
    if isinstance(ir, KernelModule):      # verify_kernel_module checks the finished module
        return
    free = size_vars(func.params) + [v for _, v in func.size_args]
    verify_stmt(ir, func.params, free, flat=True, where=f"Kernel IR of '{func.name}' after {after}")


def _show(func: Func, ir) -> str:
    return str(ir) if isinstance(ir, KernelModule) else print_func(replace(func, body=ir))
