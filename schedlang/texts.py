"""LevelTexts: a module's `ir` (level or stage name -> text), each text printed when first read;
and name_table, the aligned columns of the tables the torch frontend prints.

A build keeps the text of every level (mod.ir["tile"], ...), but most builds are never
printed: a model's kernels, the auto-scheduler's candidates, a benchmark's rebuilds.
Printing Loop, Tile and Kernel IR took ~0.5 s of CPU in MobileNetV2's cold compile
(8.5 s) and ~1.3 ms of a warm build of the tutorial GEMM (68 ms, Zen 3): a text is now
made on the first read of its key, from the IR object the build kept, and then kept.
Reading gives the same text as before; `dict(mod.ir)` prints them all.
"""
from __future__ import annotations

from collections.abc import MutableMapping
from typing import Callable, Dict, Iterator, List, Mapping, Sequence, Union

Text = Union[str, Callable[[], str]]


class LevelTexts(MutableMapping):
    """Name -> text; a value set as a function of no arguments is called on the first read
    (from any thread: two first reads at once both print, with the same result)."""

    def __init__(self, items: Union[Mapping[str, Text], "LevelTexts"] = ()):
        self._items: Dict[str, Text] = dict(items._items if isinstance(items, LevelTexts) else items)

    def __getitem__(self, name: str) -> str:
        value = self._items[name]
        if callable(value):
            value = self._items[name] = value()
        return value

    def __setitem__(self, name: str, value: Text) -> None:
        self._items[name] = value

    def __delitem__(self, name: str) -> None:
        del self._items[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, name) -> bool:      # no printing to answer `in`
        return name in self._items

    def copy(self) -> "LevelTexts":
        """A copy that prints nothing yet."""
        return LevelTexts(self)

    def __repr__(self) -> str:
        return f"LevelTexts({list(self._items)})"


def name_table(rows: Sequence[Sequence[str]]) -> List[str]:
    """Rows of cells as aligned lines: the second column (a name) to the left, the others to
    the right, and a rule under the first row (the header)."""
    widths = [max(len(r[k]) for r in rows) for k in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) if k == 1 else c.rjust(w) for k, (c, w) in enumerate(zip(r, widths)))
             for r in rows]
    lines.insert(1, "-" * len(lines[0]))
    return lines
