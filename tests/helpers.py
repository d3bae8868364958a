"""Test helpers: build a schedule, run it on random inputs, compare with the reference evaluator;
one helper per engine: `assert_matches_reference` (llvm, with a bounds-checked build beside it),
`emulate_and_check` (cuda, through the g++ shim or the SIMT interpreter), `run_both_engines`
(cuda, both emulators, with the SIMT profile)."""
from __future__ import annotations

import numpy as np

import schedlang as sl

RTOL = {"float16": 2e-3, "bfloat16": 1.6e-2, "float32": 1e-4, "float64": 1e-10}


def random_input(shape, dtype, rng):
    dtype = str(dtype)
    if dtype.startswith(("float", "bfloat")):
        return rng.standard_normal(shape).astype(sl.dtypes.dtype(dtype).numpy)
    if dtype == "bool":
        return rng.random(shape) < 0.5
    return rng.integers(-50, 50, size=shape).astype(dtype)


def arrays_for(s, args, seed=0):
    """Random inputs and output arrays filled with 7, in argument order; and the inputs by tensor."""
    rng = np.random.default_rng(seed)
    arrays, feed = [], {}
    for t in args:
        if isinstance(s[t].op, sl.tensor.PlaceholderOp):
            feed[t] = random_input(t.shape, t.dtype, rng)
            arrays.append(feed[t])
        else:
            arrays.append(np.full(t.shape, 7, dtype=t.dtype_obj.numpy))
    return arrays, feed


def emulate_and_check(s, args, engine="shim", **options):
    """Build s for cuda, run it on random inputs through mod.emulate(engine=, **options) and
    compare every output with the reference evaluator; returns the module."""
    mod = sl.build(s, args, target="cuda")
    _emulate_and_compare(mod, s, args, engine, options)
    return mod


def run_both_engines(s, args, **shim_options):
    """emulate_and_check on the shim (with shim_options) and on the SIMT interpreter; returns
    (module, the interpreter's profile: kernel name -> KernelProfile)."""
    mod = sl.build(s, args, target="cuda")
    _emulate_and_compare(mod, s, args, "shim", shim_options)
    return mod, _emulate_and_compare(mod, s, args, "simt", {"profile": True})


def _emulate_and_compare(mod, s, args, engine, options):
    arrays, feed = arrays_for(s, args)
    result = mod.emulate(*arrays, engine=engine, **options)
    _compare(args, arrays, feed, f" ({engine})")
    return result


def call_and_compare(mod, s, args, seed: int = 0):
    """Call a built module (of s, or of a program of the same shapes) on random inputs and
    compare every output with the reference evaluator."""
    arrays, feed = arrays_for(s, args, seed)
    mod(*arrays)
    _compare(args, arrays, feed)


def _compare(args, arrays, feed, label=""):
    outputs = [t for t in args if t not in feed]
    for t, want in zip(outputs, sl.reference(outputs, feed)):
        assert_close(arrays[args.index(t)], want, str(t.dtype), name=t.name + label)


CHECKED = sl.Target.create("llvm").with_options(bounds_check=True)


def run(s, args, seed: int = 0, feed=None, check_bounds: bool = True):
    """Build s and run it on random inputs; returns (inputs dict, outputs list, module).

    With check_bounds, it first runs a bounds-checked build (any access outside a buffer
    raises IndexError) and checks that the normal build computes the same outputs."""
    rng = np.random.default_rng(seed)
    feed = dict(feed or {})
    arrays = []
    outputs = []
    for t in args:
        if isinstance(s[t].op, sl.tensor.PlaceholderOp):
            feed.setdefault(t, random_input(t.shape, t.dtype, rng))
            arrays.append(feed[t])
        else:
            out = np.full(t.shape, 7, dtype=t.dtype_obj.numpy) if t.dtype != "bool" else np.zeros(t.shape, bool)
            arrays.append(out)
            outputs.append((t, out))
    checked = None
    if check_bounds:
        sl.build(s, args, target=CHECKED)(*arrays)
        checked = [out.copy() for _, out in outputs]
        for _, out in outputs:
            out.fill(7 if out.dtype != bool else False)
    mod = sl.build(s, args)
    mod(*arrays)
    if checked is not None:
        for (t, out), want in zip(outputs, checked):
            assert_close(out, want, str(t.dtype), name=f"{t.name} (unchecked vs bounds-checked build)")
    return feed, outputs, mod


def assert_matches_reference(s, args, seed: int = 0, feed=None, rtol=None):
    """Build, run and compare every output with the reference evaluator."""
    feed, outputs, mod = run(s, args, seed, feed)
    expected = sl.reference([t for t, _ in outputs], feed)
    for (t, got), want in zip(outputs, expected):
        assert_close(got, want, str(t.dtype), rtol, name=t.name)
    return mod


def assert_close(got, want, dtype: str, rtol=None, name: str = "output"):
    if dtype.startswith(("float", "bfloat")):
        tol = RTOL[dtype] if rtol is None else rtol
        scale = max(1.0, float(np.max(np.abs(want.astype("float64")))) if want.size else 1.0)
        np.testing.assert_allclose(got.astype("float64"), want.astype("float64"), rtol=tol, atol=tol * scale,
                                   err_msg=f"{name} differs from the reference")
    else:
        np.testing.assert_array_equal(got, want, err_msg=f"{name} differs from the reference")


def guards_inside(tile_ir: str, loop: str) -> list:
    """The conditions (`if` lines) nested in the loops of a Tile IR text whose header matches
    the regex loop (from the loop's indentation): a guard in a hot loop tests every step."""
    import re
    guards, lines = [], tile_ir.splitlines()
    for at, line in enumerate(lines):
        if re.match(r"\s*" + loop, line):
            depth = len(line) - len(line.lstrip())
            for inner in lines[at + 1:]:
                if len(inner) - len(inner.lstrip()) <= depth:
                    break
                if inner.strip().startswith("if "):
                    guards.append(inner.strip())
    return guards


GOLDEN = __import__("pathlib").Path(__file__).resolve().parent / "golden"


def assert_golden(text: str, name: str, update: bool) -> None:
    """text equals tests/golden/<name>; with update (pytest --update-golden) the file is written
    instead. A missing golden file fails: a deleted or renamed one must not pass silently."""
    path = GOLDEN / name
    if update:
        path.write_text(text)
        return
    check_golden_exists(path)
    assert text == path.read_text(), f"{path.name} changed; rerun with --update-golden if intended"


def check_golden_exists(path) -> None:
    import pytest
    if not path.exists():
        pytest.fail(f"golden output missing: {path}; run with --update-golden")


def forbid_builds(*also: str, env: str = "FORBID_CODEGEN") -> str:
    """The first lines of a child script: with `env` (FORBID_CODEGEN) set in its environment, LLVM
    code generation and each of `also` ("package.module.function" names) raise RuntimeError("code
    generation ran"), so whatever the child computes must come from the caches."""
    lines = ["import os",
             f"if os.environ.get({env!r}):",
             "    from schedlang.target.llvm.backend import LLVMBackend",
             "    def refuse(*a, **k):",
             '        raise RuntimeError("code generation ran")',
             "    LLVMBackend.build = refuse"]
    for name in also:
        module, attr = name.rsplit(".", 1)
        lines += [f"    import {module}", f"    {module}.{attr} = refuse"]
    return "\n".join(lines) + "\n"


def compile_model_script(make_model: str, *forbid: str) -> str:
    """A child script (see run_json_child): forbid_builds(*forbid); then `make_model` (Python
    that sets `model` and `inputs`, torch seeded with 0) compiled by schedlang.torch.compile, or
    by torch.compile(backend="schedlang") where DYNAMO is set, and run; it prints JSON: the
    output's digest, its error against eager, the kernel cache's loads and stores and the model
    cache's loads. With THEN_DYNAMO set it then compiles the model again by torch.compile, the
    in-memory build cache and the counters cleared first (only the disk remembers, as in a new
    process), and prints a second line of JSON for that compile."""
    return forbid_builds(*forbid) + f"""
import json
import torch
import schedlang.torch as st
import schedlang.torch.dynamo  # noqa: F401
from schedlang import build_cache, kernel_cache
from schedlang.torch import model_cache, zoo
torch.manual_seed(0)
{make_model}
for dynamo in [bool(os.environ.get("DYNAMO"))] + ([True] if os.environ.get("THEN_DYNAMO") else []):
    build_cache.clear()
    kernel_cache.stats, model_cache.stats = kernel_cache.DiskStats(), model_cache.ModelStats()
    with torch.no_grad():
        if dynamo:
            y = torch.compile(model, backend="schedlang", dynamic=False)(*inputs)
        else:
            y = st.compile(model, inputs)(*inputs)
        err = (y - model(*inputs)).abs().max().item()
    kernel_cache.flush()     # the entries are written behind the compile
    print(json.dumps({{"digest": y.numpy().tobytes().hex(), "err": err, "loads": kernel_cache.stats.loads,
                      "stores": kernel_cache.stats.stores, "model_loads": model_cache.stats.loads}}))
"""


def run_json_child(script: str, env: dict, timeout: int = 600, lines: int = 1):
    """Run `python -c script` with env; it must succeed; returns the JSON of its last line (with
    lines > 1: the list of the JSON of its last `lines` lines)."""
    import json
    import subprocess
    import sys
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    found = [json.loads(line) for line in done.stdout.strip().splitlines()[-lines:]]
    return found if lines > 1 else found[0]
