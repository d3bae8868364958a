"""No code of schedlang outside schedlang/target/ tests a target's kind (issue 16, item 1): what
differs per target is asked of its backend (get_backend(target.kind).<attribute>), so a new
target is a folder under target/ and its registration, not edits across the packages above.

The scan finds, with `ast`, comparisons (==, !=, in, not in) of a `.kind` (or a name `kind`)
with a target-kind string ("llvm", "cuda", ...; also inside a tuple or list), and
isinstance() tests against a target's options class (LLVMOptions, CUDAOptions, ...). On the
main before this change it finds 18 (in autoschedule/, torch/ and cli.py)."""
import ast
import pathlib

import pytest

import schedlang
from schedlang.target import Backend, HostCPUBackend
from schedlang.target import target as target_module

ROOT = pathlib.Path(schedlang.__file__).parent

# Kinds with a backend, and others a future backend may take: comparing .kind with any of them
# outside target/ is a kind test.
KINDS = set(target_module.OPTIONS) | {"c", "opencl", "rocm", "metal", "vulkan", "webgpu", "hexagon"}
OPTIONS_CLASSES = {name for name, value in vars(target_module).items()
                   if isinstance(value, type) and name.endswith("Options")}


def _is_kind(node: ast.expr) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "kind") or (isinstance(node, ast.Name) and node.id == "kind")


def _kind_literals(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return node.value in KINDS
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_kind_literals(e) for e in node.elts)
    return False


def _kind_tests(tree: ast.Module):
    """(line, what) of each target-kind test in a module."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_is_kind(x) for x in sides) and any(_kind_literals(x) for x in sides):
                yield node.lineno, "compares a kind with a target kind"
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance"
              and len(node.args) == 2):
            classes = node.args[1].elts if isinstance(node.args[1], ast.Tuple) else [node.args[1]]
            names = {c.attr if isinstance(c, ast.Attribute) else getattr(c, "id", None) for c in classes}
            if names & OPTIONS_CLASSES:
                yield node.lineno, f"isinstance against {', '.join(sorted(names & OPTIONS_CLASSES))}"


def scan(root: pathlib.Path = ROOT):
    """Every target-kind test under root outside its target/ folder, as 'file:line: what'."""
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if rel.parts[0] == "target":
            continue
        for line, what in _kind_tests(ast.parse(path.read_text(), str(path))):
            found.append(f"{rel}:{line}: {what}")
    return found


def test_the_scan_finds_a_kind_test():
    tree = ast.parse('if target.kind == "cuda": pass\nx = kind not in ("llvm", "c")\n'
                     'if isinstance(t.options, CUDAOptions): pass\nif dt.kind == "float": pass\n')
    assert [line for line, _ in _kind_tests(tree)] == [1, 2, 3]


def test_no_target_kind_tests_outside_target():
    found = scan()
    assert not found, ("target-kind tests outside schedlang/target/ (ask the backend instead: "
                       "schedlang/target/backend.py):\n" + "\n".join(found))


def test_each_backend_answers_what_the_packages_above_ask():
    llvm, cuda = schedlang.get_backend("llvm"), schedlang.get_backend("cuda")
    assert (llvm.torch_device, cuda.torch_device) == ("cpu", "cuda")
    assert (llvm.builds_static_shapes, cuda.builds_static_shapes) == (False, True)
    assert (llvm.source_title, cuda.source_title) == ("LLVM IR", "CUDA C")
    assert llvm.emulation_engines == () and "shim" in cuda.emulation_engines
    assert isinstance(llvm, HostCPUBackend) and not isinstance(cuda, HostCPUBackend)
    # every kernel kind torch/schedules.py names has a default schedule on both targets
    kinds = set(llvm.default_schedules())
    assert kinds == set(cuda.default_schedules()) and {"matmul", "rows", "pointwise"} <= kinds
    assert all(callable(f) for f in [*llvm.default_schedules().values(), *cuda.default_schedules().values()])


def test_a_backend_without_the_hooks_says_what_it_cannot_do():
    class Bare(Backend):
        kind = "bare"

    with pytest.raises(NotImplementedError, match="the bare target has no sketch rules"):
        Bare().sketch_rules()
    with pytest.raises(NotImplementedError, match="no default schedules for the torch frontend"):
        Bare().default_schedules()
    assert Bare().torch_device == "cpu" and Bare().module_notes(None) == []
