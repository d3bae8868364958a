"""No package of schedlang reaches into another's private names (issue 16, item 5): what one
package needs from another gets a public, documented name. A package is the first folder under
schedlang/ (a top-level module, such as cli.py or driver.py, is a package of its own).

The scan finds, with `ast`, the imports `from <other package> import _name` and the attribute
reads `x._name` (or getattr(x, "_name")) where `_name` is defined (a def, a class, an
assignment, `obj._name = ...`) in some other package of schedlang but not in the reader's own.
Private names of third-party modules (torch._dynamo, llvmlite) are out of its scope. ALLOWED
lists what remains today: a new reach fails the test, and so does an entry that no longer occurs
(delete it), so the list can only shrink. On the main before issue 16's item 5 it finds 17."""
import ast
import collections
import functools
import pathlib

import schedlang

ROOT = pathlib.Path(schedlang.__file__).parent

# (file under schedlang/, private name) -> why it is still there
ALLOWED = {
    # false hits: torch's own private names, which a schedlang package also happens to define
    ("torch/state.py", "_version"): "torch.Tensor._version (cli.py defines a _version)",
    ("torch/ops/registry.py", "_name"): "getattr(OpOverload, '_name')",
    ("torch/conv_variants.py", "_replace"): "NamedTuple._replace (target/target.py defines a _replace)",
}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _package(rel: pathlib.PurePath) -> str:
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _imported_package(rel: pathlib.PurePath, node: ast.ImportFrom):
    """The package an import names, or None for a module outside schedlang."""
    if node.level == 0:
        parts = (node.module or "").split(".")
        return (parts[1] if len(parts) > 1 else None) if parts[0] == "schedlang" else None
    here = list(rel.parts[:-1])[:len(rel.parts) - node.level]   # the folder the dots name
    target = here + (node.module.split(".") if node.module else [])
    return target[0] if target else None


def _third_party_names(tree: ast.Module) -> set:
    """Names bound in a file to modules (or their members) outside schedlang."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update((a.asname or a.name).split(".")[0] for a in node.names
                         if not a.name.startswith("schedlang"))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and not (node.module or "").startswith("schedlang"):
            names.update(a.asname or a.name for a in node.names)
    return names


def _definitions(tree: ast.Module) -> set:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(node.name)
        elif isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Store):
            found.add(node.id if isinstance(node, ast.Name) else node.attr)
    return {n for n in found if _private(n)}


def _root(node: ast.expr):
    while isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _attribute_reads(tree: ast.Module):
    """(receiver, name) of every `x.name` and `getattr/hasattr(x, "name", ...)`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            yield node.value, node.attr
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr")
              and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)):
            yield node.args[0], node.args[1].value


@functools.cache
def private_reaches() -> frozenset:
    """(file, name) of every private reach across packages; scanned once a process (both
    tests below compare the same scan with ALLOWED: about 3 s of CPU each)."""
    trees = {p.relative_to(ROOT): ast.parse(p.read_text()) for p in sorted(ROOT.rglob("*.py"))}
    defined = collections.defaultdict(set)        # private name -> packages defining it
    for rel, tree in trees.items():
        for name in _definitions(tree):
            defined[name].add(_package(rel))
    found = set()
    for rel, tree in trees.items():
        pkg, outside = _package(rel), _third_party_names(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                other = _imported_package(rel, node)
                if other is not None and other != pkg:
                    found.update((rel.as_posix(), a.name) for a in node.names if _private(a.name))
        for receiver, name in _attribute_reads(tree):
            if _private(name) and defined[name] and pkg not in defined[name] and _root(receiver) not in outside:
                found.add((rel.as_posix(), name))
    return frozenset(found)


def test_no_new_private_reach_across_packages():
    new = private_reaches() - set(ALLOWED)
    assert not new, ("private names reached across packages (give them a public, documented name): "
                     + ", ".join(f"{f}: {n}" for f, n in sorted(new)))


def test_allow_list_has_no_stale_entry():
    stale = set(ALLOWED) - private_reaches()
    assert not stale, "no longer reached, delete from ALLOWED: " + ", ".join(f"{f}: {n}" for f, n in sorted(stale))


def test_scan_finds_a_reach():
    """The scan itself works: the reaches this issue removed would be found again."""
    tree = ast.parse("from ...tensor.reference import _BINARY\nsaved = s._snapshot()\n")
    node = tree.body[0]
    assert _imported_package(pathlib.PurePath("target/simt/evaluate.py"), node) == "tensor"
    assert "_snapshot" not in _definitions(tree) and _root(tree.body[1].value.func) == "s"
    read = ast.parse('getattr(compiled, "_modules", {})')
    assert [name for _, name in _attribute_reads(read)] == ["_modules"]
