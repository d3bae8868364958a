"""Check a shared library's bytes before the dynamic loader sees them, and read a constant
from it without loading it.

dlopen trusts the file: a truncated or corrupt library kills the process (SIGBUS or SIGSEGV
inside the loader), and a foreign one runs its constructors. So a library schedlang writes
(sl.export_library, the CUDA shim's build cache) ends with a checksum trailer, and before
loading one we check, in Python, that the bytes are an ELF shared object for this machine
whose headers and segments lie inside the file, and that the checksum (when present) holds.
"""
from __future__ import annotations

import os
import struct
import sys
import tempfile
from functools import lru_cache
from typing import Callable, Optional, Tuple

from ..disk import TRAILER, checksum, with_checksum, write_atomically  # noqa: F401 (checksums live in disk.py)

MAGIC = b"\x7fELF"
ET_DYN, PT_LOAD, PT_DYNAMIC, SHT_NOBITS, SHT_DYNSYM = 3, 1, 2, 8, 11


def write_library(dest, link: Callable[[str], None]) -> None:
    """Have link(out) write a library to out, a new file beside dest, then put its bytes at
    dest whole (write_atomically) with the checksum trailer; out is removed either way."""
    dest = os.path.abspath(dest)
    fd, out = tempfile.mkstemp(dir=os.path.dirname(dest), prefix=f"{os.path.basename(dest)}.", suffix=".tmp")
    os.close(fd)
    try:
        link(out)
        with open(out, "rb") as f:
            write_atomically(dest, with_checksum(f.read()))
    finally:
        if os.path.exists(out):
            os.unlink(out)


@lru_cache(maxsize=1)
def _host_ident() -> Tuple[bytes, int]:
    """(class and byte order, e_machine) of this Python's own executable."""
    with open(sys.executable, "rb") as f:
        head = f.read(20)
    return head[4:6], struct.unpack_from("<H" if head[5] == 1 else ">H", head, 18)[0]


class _Elf:
    """The headers of a 64-bit ELF file, every offset checked against its size (ValueError)."""

    def __init__(self, data: bytes, what: str):
        self.data, self.what = data, what
        if len(data) < 64 or data[:4] != MAGIC:
            self.fail("it is not an ELF shared library (no ELF header)")
        ident, machine = _host_ident()
        if data[4:6] != ident or data[4] != 2:
            self.fail("it is an ELF file for another word size or byte order than this machine's")
        self.end = "<" if data[5] == 1 else ">"
        (e_type, e_machine, _, _, self.phoff, self.shoff, _, _, self.phentsize, self.phnum, self.shentsize,
         self.shnum, _) = struct.unpack_from(self.end + "HHIQQQIHHHHHH", data, 16)
        if e_type != ET_DYN:
            self.fail(f"it is an ELF file of type {e_type}, not a shared library")
        if e_machine != machine:
            self.fail(f"it is a library for another processor (ELF machine {e_machine}, this one is {machine})")
        if self.phentsize != 56 or self.phnum == 0 or (self.shnum and self.shentsize != 64):
            self.fail("its ELF headers are malformed")
        self.inside(self.phoff, self.phnum * 56, "program headers")
        self.inside(self.shoff, self.shnum * 64, "section headers")

    def fail(self, why: str):
        raise ValueError(f"{self.what} cannot be loaded: {why}")

    def inside(self, offset: int, size: int, name: str) -> None:
        if offset + size > len(self.data):
            self.fail(f"the file is truncated or corrupt (its {name} end at byte {offset + size}, "
                      f"the file has {len(self.data)})")

    def segments(self):
        for i in range(self.phnum):
            yield struct.unpack_from(self.end + "IIQQQQQQ", self.data, self.phoff + i * 56)

    def sections(self):
        for i in range(self.shnum):
            yield struct.unpack_from(self.end + "IIQQQQIIQQ", self.data, self.shoff + i * 64)


def check_library(data: bytes, what: str) -> None:
    """Raise ValueError unless data is a whole ELF shared library for this machine whose
    checksum trailer, if it has one, matches."""
    if checksum(data) is False:
        raise ValueError(f"{what} cannot be loaded: the file is corrupt (its checksum does not match its contents)")
    elf = _Elf(data, what)
    kinds = set()
    for p_type, _, offset, _, _, filesz, _, _ in elf.segments():
        if p_type in (PT_LOAD, PT_DYNAMIC):
            elf.inside(offset, filesz, "segments")
            kinds.add(p_type)
    if kinds != {PT_LOAD, PT_DYNAMIC}:
        elf.fail("it has no loadable or no dynamic segment")
    for _, sh_type, _, _, offset, size, *_ in elf.sections():
        if sh_type != SHT_NOBITS:
            elf.inside(offset, size, "sections")


def read_symbol(data: bytes, name: str, what: str) -> Optional[bytes]:
    """The bytes of the exported constant `name` (as in the file, up to its size), or None
    when the library exports no such symbol. data must have passed check_library."""
    elf = _Elf(data, what)
    sections = list(elf.sections())
    wanted = name.encode()
    for _, sh_type, _, _, offset, size, link, _, _, entsize in sections:
        if sh_type != SHT_DYNSYM or entsize != 24 or link >= len(sections):
            continue
        strings_at, strings_size = sections[link][4], sections[link][5]
        for i in range(size // 24):
            st_name, _, _, shndx, value, st_size = struct.unpack_from(elf.end + "IBBHQQ", data, offset + i * 24)
            start = strings_at + st_name
            if st_name >= strings_size or data[start:start + len(wanted) + 1] != wanted + b"\0":
                continue
            if not 0 < shndx < len(sections) or sections[shndx][1] == SHT_NOBITS:
                elf.fail(f"its symbol {name} is not stored in the file")
            _, _, _, addr, sec_offset, sec_size, *_ = sections[shndx]
            if not addr <= value <= value + st_size <= addr + sec_size:
                elf.fail(f"its symbol {name} lies outside its section")
            return data[sec_offset + value - addr:sec_offset + value - addr + st_size]
    return None
