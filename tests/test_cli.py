"""`schedlang compile --ir` end to end, in a subprocess as a user runs it: every level of the
SiluAndMul example (compared with the golden text), the CUDA target without a GPU, and
each user error as one line on stderr with exit status 2 and no traceback."""
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from schedlang import cli

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden"
SILU = "examples/silu_and_mul.py"
# The CPU is named so that the default schedule (its vector width) and the LLVM IR do not
# depend on the machine running the tests: the golden text is the same everywhere.
GOLDEN_TARGET = "llvm -mcpu=haswell"


def schedlang(*args, timeout=300):
    """Run `python -m schedlang ARGS` from the repository root; (returncode, stdout, stderr)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [env.get("PYTHONPATH")] if p])
    proc = subprocess.run([sys.executable, "-m", "schedlang", *args], cwd=ROOT, env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    return proc.returncode, proc.stdout, proc.stderr


def write(tmp_path, name, source):
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return str(path)


# ---------------------------------------------------------------- help

def test_help(capsys):
    rc, out, err = schedlang("--help")                 # the process: help without importing torch
    assert rc == 0 and "compile" in out and err == ""
    with pytest.raises(SystemExit) as exit_:           # the subcommand's help, in this process (argparse exits)
        cli.main(["compile", "--help"])
    out = capsys.readouterr().out
    assert exit_.value.code in (0, None)
    for option in ("--ir", "--module", "--shape", "--dtype", "--target", "--level"):
        assert option in out, option


def test_no_command_prints_usage_and_fails():
    """The one parser error run in a process (the others run in this one, below): the exit
    status and the one line on stderr are the process's, not only main()'s return value."""
    rc, out, err = schedlang()
    assert rc == 2 and "usage: schedlang" in err
    message = PARSER_ERRORS[0][1]
    assert err.startswith(message) and len(err.strip().splitlines()) == 1, err


# ---------------------------------------------------------------- user errors

MISSING_MODULE = """
    import torch.nn as nn
    x = 1
"""
SEVERAL = """
    import torch.nn as nn
    class A(nn.Module):
        def forward(self, x): return x + 1
    class B(nn.Module):
        def forward(self, x): return x * 2
"""
BROKEN = """
    import torch.nn as nn

    raise RuntimeError("no weights here")
"""
SINGLE = """
    import torch.nn as nn
    class Double(nn.Module):
        def forward(self, x): return x * 2
"""
NEEDS_ARGS = """
    import torch.nn as nn
    class Scale(nn.Module):
        def __init__(self, factor):
            super().__init__(); self.factor = factor
        def forward(self, x): return x * self.factor
"""


ERRORS = [
    (["compile", "no/such/model.py"], "no such file: no/such/model.py"),
    (["compile", "examples"], "not a file: examples"),
    (["compile", SILU, "--shape", "1,x,3"], "bad --shape '1,x,3'"),
    (["compile", SILU, "--shape", "1,-2"], "bad --shape '1,-2'"),
    (["compile", SILU, "--level", "assembly"], "unknown level 'assembly'"),
    (["compile", SILU, "--dtype", "float8"], "unknown dtype 'float8'"),
    (["compile", SILU, "--target", "rocm"], "bad --target 'rocm'"),
    (["compile", SILU, "--module", "Missing"], "has no nn.Module named 'Missing'; it defines: SiluAndMul"),
    (["compile", SILU, "--module", "torch"], "'torch' in examples/silu_and_mul.py is a module, not an nn.Module"),
    (["compile", SILU, "--shape", "4,8", "--shape", "8"], "SiluAndMul.forward(x) takes 1 input, but 2 were given"),
    (["compile", "FILE:missing", "--shape", "4"], "defines no nn.Module class or instance"),
    (["compile", "FILE:several", "--shape", "4"], "several nn.Modules defined (A, B): choose one with --module"),
    (["compile", "FILE:broken", "--shape", "4"], "broken.py:4: importing it raised RuntimeError: no weights here"),
    (["compile", "FILE:needs_args", "--shape", "4"], "cannot build Scale()"),
    (["compile", "FILE:single"], "give the input shapes with --shape (one per argument of Double.forward"),
    # issue 15, item 11: what used to end in a traceback
    (["compile", "FILE:init_raises", "--shape", "4"], "init_raises.py:6: building M() raised RuntimeError: boom"),
    (["compile", "FILE:inputs_raise"], "inputs_raise.py:6: example_inputs() raised ValueError: no inputs"),
    (["compile", "FILE:inputs_not_tensors"], "example_inputs must give tensors, but input 0 is a int"),
    (["compile", SILU, "--shape", "100000000000,100000000000"], "more than half of this machine's memory"),
    (["compile", SILU, "--shape", "9" * 30], "bad --shape"),
    (["compile", SILU, "--shape", "\u00b2"], "bad --shape"),
    (["compile", SILU, "--seed", "abc"], "argument --seed: invalid int value: 'abc'"),
    (["compile", SILU, "--profile", "0"], "--profile N needs N >= 1 calls to time"),
    (["compile", SILU, "--profile", "3", "--no-run"], "--profile N needs N >= 1 calls to time, and a run"),
    (["compile", SILU, "--profile", "3", "--target", "cuda"], "the cuda target's kernels cannot time themselves"),
    (["compile"], "the following arguments are required: FILE"),
]
INIT_RAISES = """
    import torch.nn as nn
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            raise RuntimeError("boom")
        def forward(self, x): return x
"""
INPUTS_RAISE = """
    import torch.nn as nn
    class M(nn.Module):
        def forward(self, x): return x
    def example_inputs():
        raise ValueError("no inputs")
"""
INPUTS_NOT_TENSORS = SINGLE + "    example_inputs = 3\n"
FILES = {"missing": MISSING_MODULE, "several": SEVERAL, "broken": BROKEN, "needs_args": NEEDS_ARGS, "single": SINGLE,
         "init_raises": INIT_RAISES, "inputs_raise": INPUTS_RAISE, "inputs_not_tensors": INPUTS_NOT_TENSORS}
# argparse's own errors, about the top-level command
PARSER_ERRORS = [
    ([], "schedlang: error: no command given (usage: schedlang COMMAND"),
    (["bogus"], "schedlang: error: argument COMMAND: invalid choice: 'bogus'"),
    (["compile", SILU, "--bogus"], "schedlang: error: unrecognized arguments: --bogus"),
]


def _materialize(tmp_path, args):
    return [write(tmp_path, a[5:] + ".py", FILES[a[5:]]) if a.startswith("FILE:") else a for a in args]


def _check_error(rc, out, err, message):
    assert rc == 2, (out, err)
    assert message in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith("schedlang compile: error: ")


@pytest.mark.parametrize("args, message", ERRORS, ids=[m.split(":")[0][:30] for _, m in ERRORS])
def test_user_errors_are_one_line_with_status_2(tmp_path, capsys, monkeypatch, args, message):
    """Every error through cli.main, in this process (a subprocess per case would import torch
    fifteen times); the subprocess test below checks that the process behaves the same."""
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(sys, "path", list(sys.path))           # load_file puts the file's folder first
    rc = cli.main(_materialize(tmp_path, args))
    captured = capsys.readouterr()
    _check_error(rc, captured.out, captured.err, message)


# one case per way a process could differ from cli.main in this process: 0 fails before torch
# is imported, 12 while the user's file imports (its RuntimeError must not leak a traceback),
# 15 while the module is built; every message is checked in process above
@pytest.mark.parametrize("case", [0, 12, 15])
def test_user_errors_in_a_subprocess(tmp_path, case):
    args, message = ERRORS[case]
    _check_error(*schedlang(*_materialize(tmp_path, args)), message)


@pytest.mark.parametrize("args, message", PARSER_ERRORS)
def test_command_line_errors_are_one_line_with_status_2(capsys, args, message):
    """In this process; test_no_command_prints_usage_and_fails runs the first in a process."""
    rc = cli.main(args)
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith(message) and len(err.strip().splitlines()) == 1, err


# ---------------------------------------------------------------- choosing the module, in process

def test_pick_module_rules(tmp_path):
    several_all = write(tmp_path, "with_all.py", textwrap.dedent(SEVERAL) + "\n__all__ = ['B']\n")
    model, name = cli.pick_module(cli.load_file(several_all), several_all, None)
    assert name == "B" and type(model).__name__ == "B"
    model, name = cli.pick_module(cli.load_file(several_all), several_all, "A")
    assert name == "A" and type(model).__name__ == "A"
    instance = write(tmp_path, "instance.py", textwrap.dedent(NEEDS_ARGS) + "\nmodel = Scale(3.0)\n")
    with pytest.raises(cli.UsageError, match="cannot build Scale"):
        cli.pick_module(cli.load_file(instance), instance, None)           # the class comes first
    model, name = cli.pick_module(cli.load_file(instance), instance, "model")
    assert name == "model" and model.factor == 3.0
    imported = write(tmp_path, "imported.py", "from torch.nn import Linear, ReLU\nlayer = Linear(4, 2)\n")
    model, name = cli.pick_module(cli.load_file(imported), imported, None)   # imported classes do not count
    assert name == "layer"


@pytest.mark.parametrize("text, shape", [("1,32,4096", (1, 32, 4096)), ("8", (8,)), ("8,", (8,)),
                                         ("(2, 3)", (2, 3)), ("", ()), ("0,4", (0, 4))])
def test_parse_shape(text, shape):
    assert cli.parse_shape(text) == shape


def test_parse_levels_keeps_pipeline_order():
    assert cli.parse_levels("kernel,torch") == ["torch", "kernel"]
    assert cli.parse_levels("all") == list(cli.LEVELS)
    assert cli.parse_levels(None) == list(cli.LEVELS)


# ---------------------------------------------------------------- compiling for real

def test_every_level_of_silu_and_mul_and_the_run():
    """All six levels, each under its header and equal to the golden text, then the run
    against eager PyTorch (the example's shape, given on the command line)."""
    rc, out, err = schedlang("compile", "--ir", SILU, "--shape", "1,32,4096", "--target", GOLDEN_TARGET)
    assert rc == 0, err
    assert out.startswith("SiluAndMul from examples/silu_and_mul.py; inputs: (1, 32, 4096) float32; target: llvm")
    positions = []
    for level, (title, _) in cli.LEVELS.items():
        head = f"(--level {level})"
        assert out.count(head) == 1, f"no single header for {level}"
        golden = (GOLDEN / f"torch_silu_and_mul.{level}.txt").read_text()
        start = out.index(head)
        assert golden in out[start:], f"the {level} level differs from {GOLDEN.name}/torch_silu_and_mul.{level}.txt"
        positions.append(start)
    assert positions == sorted(positions), "levels out of pipeline order"
    run = [line for line in out.splitlines() if line.startswith("run: ")]
    assert run[-1] == "run: matches eager PyTorch", run
    err_value = float(run[0].split("max |schedlang - torch| = ")[1].split()[0])
    assert err_value < 1e-5


def run_main(capsys, monkeypatch, *args):
    """cli.main(args) in this process, from the repository root; (returncode, stdout, stderr).
    For the runs whose point is what compile does, not the process (test_every_level_of_silu_and_mul_and_the_run
    runs a compile in a process): each process would import torch again."""
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(sys, "path", list(sys.path))           # load_file puts the file's folder first
    rc = cli.main(list(args))
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


def test_chosen_levels_of_the_swiglu_mlp_with_its_example_inputs(capsys, monkeypatch):
    """--level implies --ir and prints only the levels named; without --shape the file's
    example_inputs() gives the inputs; the MLP (three Linears) matches eager PyTorch."""
    rc, out, err = run_main(capsys, monkeypatch, "compile", "examples/swiglu_mlp.py", "--level", "kernel,torch")
    assert rc == 0, err
    assert "inputs: (8, 256) float32" in out
    assert out.index("(--level torch)") < out.index("(--level kernel)")
    for level in ("tensor", "loop", "tile", "target"):
        assert f"(--level {level})" not in out
    assert "down_weight: (256, 688) f32" in out          # parameters are named inputs of the Torch IR
    assert "run: matches eager PyTorch" in out


def test_profile_prints_each_kernels_time(capsys, monkeypatch):
    """--profile N compiles for the target's profile option and prints compiled.profile's table
    after the check against eager."""
    rc, out, err = run_main(capsys, monkeypatch, "compile", "examples/swiglu_mlp.py", "--profile", "3")
    assert rc == 0, err
    assert out.index("run: matches eager PyTorch") < out.index("profile: each kernel's time per call, mean of 3")
    table = out[out.index("profile: "):].splitlines()
    assert table[1].split() == ["part", "kernel", "ms", "%"] and "(outside the kernels)" in out
    assert re.search(r"forward: [\d.]+ ms \(mean of 3\), [1-9]\d* kernel calls", out)


def test_a_wrong_result_exits_1(tmp_path, capsys, monkeypatch):
    """A compiled module that disagrees with torch is reported and fails the command."""
    path = write(tmp_path, "double.py", SINGLE)
    real_compile = __import__("schedlang.torch", fromlist=["compile"]).compile

    def off_by_one(model, inputs, target="llvm"):
        compiled = real_compile(model, inputs, target=target)
        wrapped = lambda *a: compiled(*a) + 1.0  # noqa: E731
        wrapped.ir = compiled.ir
        return wrapped

    monkeypatch.setattr("schedlang.torch.compile", off_by_one)
    monkeypatch.setattr(sys, "path", list(sys.path))
    assert cli.main(["compile", path, "--shape", "4"]) == 1
    out = capsys.readouterr().out
    assert "max |schedlang - torch| = 1" in out and "run: MISMATCH against eager PyTorch" in out


def test_a_module_that_cannot_be_captured_fails_in_one_line(tmp_path, capsys, monkeypatch):
    """Data-dependent control flow: torch.export refuses it. One line names the module and
    torch's reason (torch's own printout of the partial graph is held back), exit status 1."""
    path = write(tmp_path, "branchy.py", """
        import torch.nn as nn
        class Branchy(nn.Module):
            def forward(self, x):
                return x + 1 if x.sum() > 0 else x - 1
    """)
    monkeypatch.setattr(sys, "path", list(sys.path))
    assert cli.main(["compile", path, "--shape", "4"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("schedlang compile: error: compiling Branchy failed: ")
    assert len(err.strip().splitlines()) == 1 and "(--traceback shows where)" in err, err


def test_cuda_target_prints_cuda_c_without_a_gpu(capsys, monkeypatch):
    # a small odd shape (1500 outputs: several blocks and a partial one) rather than the example's
    # 65536: the emulation runs every thread on the CPU
    rc, out, err = run_main(capsys, monkeypatch, "compile", SILU, "--target", "cuda", "--level", "kernel,target",
                            "--shape", "3,5,200")
    assert rc == 0, err
    assert "Target code: CUDA C" in out
    assert '__global__' in out and "blockIdx.x" in out
    import torch
    if not torch.cuda.is_available():
        assert "run: emulated on the CPU (no CUDA GPU here)" in out
    assert "run: output 0: (3, 5, 100) float32, max |schedlang - torch| = " in out
    assert "run: matches eager PyTorch" in out
