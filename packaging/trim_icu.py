"""Build step of ``make package`` (run by packaging/quire.spec on Linux): Qt's ICU data without what Qt never asks.

    python packaging/trim_icu.py dist/Quire/_internal/PySide6/Qt/lib/libicudata.so.73 build/quire-icu

``libicudata`` is one symbol, ``icudt<N>_dat``: ICU's data package (32 MB), a table of named items. Qt 6 calls
ICU for collation (``ucol_*``, QCollator), code page conversion (``ucnv_*``, QStringConverter), time zones and
their display names (``ucal_*``) and case mapping (``u_strTo*``); it calls none of ICU's break iterators, number,
currency, unit or date formatting, language and region display names, rule-based number spelling or
transliteration (``nm -D`` of every Qt library in the bundle: the ICU functions it imports are those four groups).
The items of those services are left out (:data:`UNUSED`, ~15 MB); the rest are kept as they were, in the same
order (ICU looks items up by binary search on their names), and linked into a library of the same name and
soname with the system's C compiler. ICU answers a lookup of a missing item with an error code, never a crash.

Prints one line of JSON: items kept and removed, bytes before and after.
"""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from trim_elf import Elf  # this folder's module

# Trees of the data package that only ICU services Qt never calls read (see the module docstring).
UNUSED = ("brkitr", "unit", "curr", "lang", "region", "rbnf", "translit")
ALIGN = 16  # ICU's items start on 16-byte boundaries


def data_symbol(elf: Elf) -> tuple[str, int, int]:
    """(name, file offset, size) of the ``icudt<N>_dat`` symbol in the library's dynamic symbol table."""
    dynsym = next(s for s, name in zip(elf.shdrs, elf.names, strict=True) if name == ".dynsym")
    dynstr = elf.shdrs[dynsym[6]]  # sh_link
    for at in range(dynsym[4], dynsym[4] + dynsym[5], 24):
        name_at, _info, _other, shndx, value, size = struct.unpack_from("<IBBHQQ", elf.data, at)
        start = dynstr[4] + name_at
        name = elf.data[start : elf.data.index(b"\0", start)].decode("ascii")
        if name.startswith("icudt") and name.endswith("_dat"):
            section = elf.shdrs[shndx]
            return name, section[4] + value - section[3], size
    raise ValueError("no icudt*_dat symbol: not ICU's data library")


def items(package: bytes) -> tuple[int, list[tuple[str, bytes]]]:
    """The package's header size and its (name, bytes) items, in table order."""
    header = struct.unpack_from("<H", package, 0)[0]
    count = struct.unpack_from("<I", package, header)[0]
    entries = []
    for i in range(count):
        name_at, data_at = struct.unpack_from("<II", package, header + 4 + 8 * i)
        name = package[header + name_at : package.index(b"\0", header + name_at)].decode("ascii")
        entries.append((name, header + data_at))
    ends = [at for _name, at in entries[1:]] + [len(package)]
    return header, [(name, package[at:end]) for (name, at), end in zip(entries, ends, strict=True)]


def package_of(header: bytes, kept: list[tuple[str, bytes]]) -> bytes:
    """A data package of ``kept`` items behind ``header`` (offsets relative to the table, as ICU reads them)."""
    table = 4 + 8 * len(kept)
    names = b"".join(name.encode("ascii") + b"\0" for name, _data in kept)
    first = -(-(len(header) + table + len(names)) // ALIGN) * ALIGN - len(header)
    entries, blob, name_at = [], bytearray(), table
    for name, data in kept:
        entries.append((name_at, first + len(blob)))
        name_at += len(name) + 1
        blob += data + bytes(-len(data) % ALIGN)
    out = bytearray(header) + struct.pack("<I", len(kept))
    out += b"".join(struct.pack("<II", *entry) for entry in entries) + names
    out += bytes(len(header) + first - len(out))
    return bytes(out + blob)


def unused(name: str) -> bool:
    parts = name.split("/")  # "icudt73l/brkitr/word.brk"
    return len(parts) > 2 and parts[1] in UNUSED


def package_in(library: Path) -> tuple[str, bytes]:
    """The data symbol's name and the data package it holds."""
    elf = Elf.read(library.read_bytes())
    if elf is None:
        raise ValueError(f"{library} is not a 64-bit ELF library")
    symbol, at, size = data_symbol(elf)
    return symbol, elf.data[at : at + size]


def trim(library: Path, work: Path) -> dict[str, int]:
    before = library.stat().st_size
    symbol, package = package_in(library)
    header_size, all_items = items(package)
    kept = [(name, body) for name, body in all_items if not unused(name)]
    trimmed = package_of(package[:header_size], kept)
    if items(trimmed)[1] != [(n, b + bytes(-len(b) % ALIGN)) for n, b in kept]:
        raise ValueError("the trimmed package does not read back")
    work.mkdir(parents=True, exist_ok=True)
    (work / "icudata.dat").write_bytes(trimmed)
    source = work / "icudata.S"
    lines = [".section .rodata", f".globl {symbol}", f".type {symbol}, @object", f".balign {ALIGN}", f"{symbol}:"]
    lines += ['.incbin "icudata.dat"', f".size {symbol}, .-{symbol}", '.section .note.GNU-stack,"",@progbits']
    source.write_text("\n".join(lines) + "\n", encoding="ascii")
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise FileNotFoundError("no C compiler (cc) to link the trimmed ICU data")
    built = work / library.name
    subprocess.run(
        [compiler, "-shared", "-nostdlib", f"-Wl,-soname,{library.name}", "-o", str(built), str(source)],
        cwd=work, check=True,
    )  # fmt: skip
    built_bytes = built.read_bytes()
    shutil.copymode(library, built)
    built.replace(library)
    return {"items": len(kept), "removed": len(all_items) - len(kept), "bytes": before, "now": len(built_bytes)}


def main() -> int:
    print(json.dumps(trim(Path(sys.argv[1]), Path(sys.argv[2]))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
