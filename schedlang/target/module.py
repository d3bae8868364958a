"""BuiltModule: what the module of every backend shares — its target, name, argument
buffers and which are outputs, the size variables of symbolic shapes (a SizeBinder), the
text of every level and stage (ir), get_source and export_library."""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

from ..kernel.nodes import KernelModule
from ..kernel.sizes import symbolic_buffers, symbolic_extents
from ..texts import LevelTexts
from .arrays import _pointer, check_arguments, describe_type, resolve_arguments
from .shapes import SizeBinder
from .target import Target


def size_binder(kernel_ir: KernelModule) -> Optional[SizeBinder]:
    """How a call of the module reads its size variables (None without symbolic shapes)."""
    if not kernel_ir.sizes:
        return None
    return SizeBinder(list(kernel_ir.params), kernel_ir.sizes, symbolic_buffers(kernel_ir), symbolic_extents(kernel_ir),
                      kernel_ir.size_args, kernel_ir.size_checks)


class BuiltModule:
    """Base of the modules that Backend.build returns."""

    def __init__(self, kernel_ir: KernelModule, is_output: Sequence[bool], target: Target, texts: Dict[str, str]):
        self.target = target
        self.name = kernel_ir.name
        self.params = list(kernel_ir.params)
        self._is_output = list(is_output)
        self.ir = LevelTexts(texts)          # each level printed on its first read (texts.py)
        self._sizes = size_binder(kernel_ir)

    def __repr__(self) -> str:
        args = [f"{b.name}: {b.dtype}[{', '.join(map(str, b.shape))}]" for b in self.params]
        for pos, v in (self._sizes.size_args if self._sizes is not None else ()):
            args.insert(pos, f"{v.name}: {v.dtype}")       # a size variable passed as an int
        return f"<schedlang module {self.name}({', '.join(args)}) target={self.target_text()}>"

    def target_text(self) -> str:
        """The target as __repr__ names it."""
        return self.target.kind

    def bind_call(self, args: Sequence, device: str = "cpu") -> Tuple[list, List[int], List[int]]:
        """(the arrays of a call, their data pointers, the values of the size variables) after the
        checks of target/arrays.py; with symbolic shapes the sizes come from the arrays' shapes
        (and from the size arguments, ints among the arrays). Keep the arrays alive while the call
        runs: lazily negated torch inputs are resolved into copies (resolve_arguments)."""
        arrays, given = self._sizes.split_call(args) if self._sizes is not None else (list(args), None)
        if len(arrays) != len(self.params):
            names = ", ".join(b.name for b in self.params)
            raise TypeError(f"{self.name} takes {len(self.params)} arrays ({names}), got {len(arrays)}")
        arrays = resolve_arguments(self.params, arrays, self._is_output)
        shapes, sizes = None, []
        if self._sizes is not None:   # symbolic shapes: read the sizes, then check as for static ones
            got = []
            for b, x in zip(self.params, arrays):
                shape = getattr(x, "shape", None)
                if shape is None:
                    raise TypeError(f"argument '{b.name}' must be a numpy array or a CPU torch tensor, "
                                    f"got {describe_type(x)}")
                if len(shape) != len(b.shape):
                    raise ValueError(f"argument '{b.name}' must have {len(b.shape)} dimensions "
                                     f"({', '.join(map(str, b.shape))}), got shape {tuple(shape)}")
                got.append(tuple(int(n) for n in shape))
            sizes = self._sizes.bind(got, given)
            shapes = [self._sizes.shape_of(b, sizes) for b in self.params]
        pointers = check_arguments(self.name, self.params, self._is_output, arrays, device, shapes)
        return arrays, pointers, sizes

    def spans(self, arrays: Sequence, pointers: Sequence[int]) -> List[Tuple[int, int]]:
        """The [start, end) bytes of each argument of a call bound by bind_call."""
        return [(p, p + _nbytes(x)) for x, p in zip(arrays, pointers)]

    def rebind(self, spans: List[Tuple[int, int]], replaced: Sequence[Tuple[int, object]]) -> Tuple[list, List[int]]:
        """(the arrays, their pointers) replacing some arguments of a call that bind_call checked
        (spans: what its arguments span, updated in place): each new array checked as
        bind_call checks it, and against the others for overlap with an output. Static shapes
        only (a module with size variables binds each call whole)."""
        arrays, pointers = [], []
        outputs = [j for j, out in enumerate(self._is_output) if out]
        for i, x in replaced:
            b, is_out = self.params[i], self._is_output[i]
            (x,) = resolve_arguments((b,), (x,), (is_out,))
            ptr, nbytes = _pointer(b, x, is_out, tuple(b.shape))
            spans[i] = (ptr, ptr + nbytes)
            arrays.append(x)
            pointers.append(ptr)
        for i, _ in replaced:      # as check_arguments: only pairs with an output can conflict
            lo, hi = spans[i]
            for j in (range(len(spans)) if self._is_output[i] else outputs):
                if j != i and lo < spans[j][1] and spans[j][0] < hi:
                    first, second = self.params[min(i, j)].name, self.params[max(i, j)].name
                    raise ValueError(f"arrays for '{first}' and '{second}' overlap in memory; "
                                     "an output must not share memory with another argument")
        return arrays, pointers

    def get_source(self, fmt: str) -> str:
        """The generated code in a format the backend names."""
        raise NotImplementedError(f"the {self.target.kind} target keeps no source")

    def export_library(self, path: str) -> None:
        """Write the module as a shared library that sl.load_module(path) loads."""
        raise NotImplementedError(f"the {self.target.kind} target cannot export a shared library; "
                                  "export_library is the llvm (CPU) target's")


def _nbytes(x) -> int:
    """The bytes of a checked argument (a numpy array or a torch tensor)."""
    nbytes = getattr(x, "nbytes", None)
    return nbytes if isinstance(nbytes, int) else x.numel() * x.element_size()
