"""A tiny writer of textual LLVM IR for one function: SSA names, blocks, entry allocas."""
from __future__ import annotations

from typing import Dict, List

# Instructions without side effects (their value depends only on their operands): one emitted
# twice in a block gives the same value, so the second emit reuses the first's name.
PURE = frozenset({"add", "sub", "mul", "shl", "lshr", "ashr", "and", "or", "xor", "sext", "zext", "trunc",
                  "getelementptr", "insertelement", "extractelement", "shufflevector", "icmp", "fcmp",
                  "select", "fadd", "fsub", "fmul", "fneg", "sitofp", "uitofp", "fptosi", "fptoui",
                  "fpext", "fptrunc", "bitcast", "ptrtoint", "inttoptr"})


class FunctionText:
    """Accumulates the instructions of one function."""

    def __init__(self, name: str, signature: str, attrs: str = "#0"):
        self.name = name
        self.signature = signature   # e.g. "void @f(ptr noalias %a, i32 %n)"
        self.attrs = attrs
        self.allocas: List[str] = []
        self.lines: List[str] = []
        self.counter = 0
        self.block = "entry"
        self._pure: Dict[str, str] = {}     # text -> name of a pure instruction of this block

    def fresh(self, hint: str = "t") -> str:
        self.counter += 1
        clean = "".join(c if c.isalnum() or c in "._" else "_" for c in hint)
        if clean[:1].isdigit():     # "%0_weight.6" would read as a numbered value
            clean = "_" + clean
        return f"%{clean}.{self.counter}"

    def label(self, hint: str) -> str:
        return self.fresh(hint)[1:]

    def emit(self, text: str, hint: str = "t") -> str:
        """Emit `name = text` and return the name; a pure instruction already emitted in this
        block is not emitted again: its name is returned."""
        pure = text.split(" ", 1)[0] in PURE
        if pure:
            hit = self._pure.get(text)
            if hit is not None:
                return hit
        name = self.fresh(hint)
        if pure:
            self._pure[text] = name
        self.lines.append(f"  {name} = {text}")
        return name

    def do(self, text: str) -> None:
        self.lines.append(f"  {text}")

    def start_block(self, label: str) -> None:
        self.lines.append(f"{label}:")
        self.block = label
        self._pure = {}

    def alloca(self, text: str, hint: str) -> str:
        name = self.fresh(hint)
        self.allocas.append(f"  {name} = {text}")
        return name

    def render(self) -> str:
        body = ["entry:"] + self.allocas + self.lines
        return f"define internal {self.signature} {self.attrs} {{\n" + "\n".join(body) + "\n}\n"
