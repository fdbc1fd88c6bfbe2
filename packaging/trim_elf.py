"""Build step of ``make package`` (run by packaging/quire.spec on Linux): smaller shared libraries, loaded the same.

    python packaging/trim_elf.py dist/Quire/_internal

For every ELF file under the folder given (64-bit little-endian, x86-64's kind), two things the dynamic loader
never reads are taken out:

* the symbol tables and debug sections (``.symtab``, ``.strtab``, ``.debug_*``, ``.gnu_debugdata``): their section
  headers stay, emptied; the dynamic symbols that linking uses are in ``.dynsym``, inside a segment;
* file ranges that no header, segment or section refers to, in whole pages: the zero padding an old ``patchelf``
  left in many wheels' libraries (their segments 2 MiB apart in the file), and what the first step freed.

Later bytes move down by whole pages, so every segment keeps its address, its bytes and its offset's congruence
to its address modulo the page size, which is all the loader asks ("ELF load command address/offset not
page-aligned" otherwise); the file is rewritten only after that is checked on the result. Bytes after the last
referenced one are kept (a payload appended to a file is read by its owner, not the loader). Why not ``strip``:
binutils lays out again the libraries that ``patchelf`` edited and leaves them unloadable.

Prints one line of JSON: files changed and bytes saved.
"""

from __future__ import annotations

import json
import os
import struct
import sys
from dataclasses import dataclass
from pathlib import Path

PAGE = 4096
MIN_SAVING = 16 * 1024  # smaller savings leave the file as it is
_PHDR = struct.Struct("<IIQQQQQQ")  # type, flags, offset, vaddr, paddr, filesz, memsz, align
_SHDR = struct.Struct("<IIQQQQIIQQ")  # name, type, flags, addr, offset, size, link, info, addralign, entsize
_PT_LOAD, _SHT_NOBITS, _SHF_ALLOC = 1, 8, 2
DROPPED_SECTIONS = (".symtab", ".strtab", ".gnu_debugdata")


@dataclass
class Elf:
    data: bytes
    phoff: int
    shoff: int
    phentsize: int
    shentsize: int
    phdrs: list[list[int]]
    shdrs: list[list[int]]
    names: list[str]

    @classmethod
    def read(cls, data: bytes) -> Elf | None:
        if data[:4] != b"\x7fELF" or data[4:6] != b"\x02\x01" or len(data) < 64:
            return None  # not ELF64 little-endian
        phoff, shoff = struct.unpack_from("<QQ", data, 0x20)
        phentsize, phnum, shentsize, shnum, shstrndx = struct.unpack_from("<HHHHH", data, 0x36)
        if phentsize != _PHDR.size or shentsize != _SHDR.size or not shnum or shstrndx >= shnum:
            return None
        phdrs = [list(_PHDR.unpack_from(data, phoff + i * phentsize)) for i in range(phnum)]
        shdrs = [list(_SHDR.unpack_from(data, shoff + i * shentsize)) for i in range(shnum)]
        strtab_at = shdrs[shstrndx][4]
        names = [data[strtab_at + s[0] : data.index(b"\0", strtab_at + s[0])].decode("latin-1") for s in shdrs]
        return cls(data, phoff, shoff, phentsize, shentsize, phdrs, shdrs, names)

    def loads(self) -> list[tuple[int, int, bytes]]:
        """(vaddr, offset, bytes) of every loaded segment: what the loader maps, with the three header tables
        blanked (a trim rewrites their offsets; a patchelf'd file may even map its section headers)."""
        masked = bytearray(self.data)
        masked[0:64] = bytes(64)
        tables = [(self.phoff, len(self.phdrs) * self.phentsize), (self.shoff, len(self.shdrs) * self.shentsize)]
        for at, size in tables:
            masked[at : at + size] = bytes(size)
        return [(p[3], p[2], bytes(masked[p[2] : p[2] + p[5]])) for p in self.phdrs if p[0] == _PT_LOAD]


def _dropped(name: str, shdr: list[int]) -> bool:
    return not shdr[2] & _SHF_ALLOC and (name in DROPPED_SECTIONS or name.startswith(".debug"))


def _referenced(elf: Elf) -> list[tuple[int, int]]:
    used = [(0, 64), (elf.phoff, elf.phoff + len(elf.phdrs) * elf.phentsize)]
    used.append((elf.shoff, elf.shoff + len(elf.shdrs) * elf.shentsize))
    used += [(p[2], p[2] + p[5]) for p in elf.phdrs if p[5]]
    used += [(s[4], s[4] + s[5]) for s in elf.shdrs if s[1] != _SHT_NOBITS and s[5]]
    return sorted(used)


def _gaps(used: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """(start, length) of the whole pages between referenced ranges (never after the last one)."""
    gaps, end = [], 0
    for lo, hi in used:
        start = -(-end // PAGE) * PAGE
        length = (lo - start) // PAGE * PAGE
        if length > 0:
            gaps.append((start, length))
        end = max(end, hi)
    return gaps


def trimmed(data: bytes) -> bytes | None:
    """The file without its symbol tables, debug sections and unreferenced pages, or None (nothing to gain, or
    not a file this handles)."""
    elf = Elf.read(data)
    if elf is None:
        return None
    for name, shdr in zip(elf.names, elf.shdrs, strict=True):
        if _dropped(name, shdr):
            shdr[4], shdr[5] = 0, 0  # the header stays (section indices do not change), empty
    gaps = _gaps(_referenced(elf))
    saved = sum(length for _start, length in gaps)
    if saved < MIN_SAVING:
        return None

    def moved(offset: int) -> int:
        return offset - sum(length for start, length in gaps if start + length <= offset)

    out, cursor = bytearray(), 0
    for start, length in gaps:
        out += data[cursor:start]
        cursor = start + length
    out += data[cursor:]
    phoff, shoff = moved(elf.phoff), moved(elf.shoff)
    struct.pack_into("<QQ", out, 0x20, phoff, shoff)
    for i, p in enumerate(elf.phdrs):
        _PHDR.pack_into(out, phoff + i * elf.phentsize, p[0], p[1], moved(p[2]), *p[3:])
    for i, s in enumerate(elf.shdrs):
        _SHDR.pack_into(out, shoff + i * elf.shentsize, *s[:4], moved(s[4]) if s[5] else s[4], *s[5:])
    _check(elf, bytes(out))
    return bytes(out)


def _check(before: Elf, data: bytes) -> None:
    """Every segment at the same address with the same bytes, its offset congruent to it modulo the page."""
    after = Elf.read(data)
    if after is None:
        raise ValueError("the rewritten file is not ELF")
    old, new = before.loads(), after.loads()
    same = len(old) == len(new) and all(o[0] == n[0] and o[2] == n[2] for o, n in zip(old, new, strict=True))
    if not same or any((vaddr - offset) % PAGE for vaddr, offset, _bytes in new):
        raise ValueError("a segment would move or change")


def trim_folder(folder: Path) -> tuple[int, int]:
    """Trim every ELF file under ``folder`` in place (not symlinks): (files changed, bytes saved)."""
    changed = saved = 0
    for path in sorted(folder.rglob("*")):
        if path.is_symlink() or not path.is_file() or path.stat().st_size < MIN_SAVING:
            continue
        data = path.read_bytes()
        result = trimmed(data)
        if result is None:
            continue
        staging = path.with_name(path.name + ".trimming")
        staging.write_bytes(result)
        os.chmod(staging, path.stat().st_mode)
        staging.replace(path)
        changed, saved = changed + 1, saved + len(data) - len(result)
    return changed, saved


def main() -> int:
    folder = Path(sys.argv[1])
    changed, saved = trim_folder(folder)
    print(json.dumps({"files": changed, "bytes_saved": saved}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
