"""A single compressed file (``changelog.gz``, ``notes.md.bz2``, ``trace.log.xz``) read as the file inside.

The name without its compression suffix decides the parser (``formats.format_for``); a name with no
known inner suffix (``changelog``, ``changelog.Debian``, ``NEWS``) is read as text, whose decoder refuses
binary content. Archives are not unpacked here: ``x.tar.gz`` is not supported, and neither is a file
compressed twice.

Decompression is streamed in bounded steps and stops as soon as the output is

* more than ``MAX_RATIO`` times the compressed size and past ``RATIO_FLOOR`` (the bounds the ZIP check in
  ``archive.py`` uses) → ``decompression_bomb``, with nothing more unpacked;
* larger than the size limit a plain file has (``max_bytes``) → ``too_large``.

Concatenated gzip members and bzip2/xz streams are read one after the other, as ``gzip -d`` does.
"""

from __future__ import annotations

import bz2
import lzma
import zlib

from knowledge.sources import archive
from knowledge.sources.model import SourceRejected, failing_as

_STEP = 1024 * 1024  # output produced per call: the checks run at least this often
_MIB = 1024 * 1024
_LABELS = {"gzip": "gzip", "bzip2": "bzip2", "xz": "xz"}


class _Stream:
    """One gzip member or bzip2/xz stream, decompressed at most ``_STEP`` bytes per call."""

    def __init__(self, compression: str, data: bytes) -> None:
        self._zlib = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS) if compression == "gzip" else None
        self._other = (
            None if self._zlib else (bz2.BZ2Decompressor() if compression == "bzip2" else lzma.LZMADecompressor())
        )
        self._input = data

    def step(self) -> bytes:
        """The next piece of output; ``b""`` only at the end of the stream (truncation raises)."""
        if self._zlib is not None:
            out = self._zlib.decompress(self._input, _STEP)
            self._input = self._zlib.unconsumed_tail
            starved = not self._input
        else:
            assert self._other is not None
            out = self._other.decompress(self._input, _STEP)
            self._input = b""
            starved = self._other.needs_input
        if not out and not self.eof and starved:
            raise EOFError("compressed stream ends early")
        return out

    @property
    def eof(self) -> bool:
        engine = self._zlib if self._zlib is not None else self._other
        return bool(engine.eof)  # type: ignore[union-attr]

    @property
    def rest(self) -> bytes:
        """What follows the stream: the next member, zero padding, or nothing."""
        engine = self._zlib if self._zlib is not None else self._other
        return bytes(engine.unused_data)  # type: ignore[union-attr]


def decompress(data: bytes, compression: str, max_bytes: int) -> bytes:
    """The file inside ``data``; refuses bombs and oversized output before producing them (module doc)."""
    label = _LABELS[compression]
    out = bytearray()
    with failing_as(f"{label} file is damaged or truncated"):
        pending = data
        while pending:
            stream = _Stream(compression, pending)
            while not stream.eof:
                out += stream.step()
                _check(len(out), len(data), max_bytes, label)
            pending = stream.rest.lstrip(b"\x00") if compression == "gzip" else stream.rest  # gzip allows padding
    return bytes(out)


def _check(size: int, packed: int, max_bytes: int, label: str) -> None:
    if size > archive.RATIO_FLOOR and size > archive.MAX_RATIO * packed:  # read at call time: one knob
        raise SourceRejected(
            "decompression_bomb",
            f"{label} file looks like a decompression bomb (expands more than {archive.MAX_RATIO} times); not unpacked",
        )
    if size > max_bytes:
        raise SourceRejected("too_large", f"{label} file expands to more than {max_bytes // _MIB} MB")
