"""Bytes to text for every text-like format: binary sniffing, then a fixed, deterministic decoding order.

Order (the first that fits wins):

1. a byte-order mark (UTF-8, UTF-16, UTF-32);
2. UTF-16 without a BOM, recognised by NUL bytes sitting on every other position;
3. otherwise NUL bytes or many control bytes in the first 8 KiB mean ``binary`` (a PNG renamed ``.txt``);
4. an encoding the document declares (HTML ``<meta charset>``), if the bytes really decode with it;
5. strict UTF-8, then "mostly UTF-8": a few bad bytes in an otherwise UTF-8 file (a log cut mid-character,
   a changelog with one Latin-1 name), decoded with replacement characters, when the file's valid multi-byte
   characters outnumber its undecodable bytes two to one and those are at most 1% of its characters (one
   is always allowed), counted over the whole file;
6. Windows-1252 when the result reads like Western European text. charset-normalizer alone guesses
   short Latin-1 text badly (French comes out as cp1250 with "crčme"), and this is the most common
   legacy encoding a desktop user meets;
7. charset-normalizer with a floor on its "mess" ratio;
8. UTF-8 with replacement characters when at most one byte in a thousand (or a single byte) does not decode
   (ASCII with a stray byte that is not Western text either, e.g. 0x81): one byte never refuses a whole file;
9. anything else is ``invalid_encoding``: better refused than indexed as mojibake.

Every decoded result must also look like text (few control, unassigned or private-use characters; the
replacement characters of a repaired UTF-8 decoding are bounded by the rules above instead).
"""

from __future__ import annotations

import codecs
import re
import unicodedata
from dataclasses import dataclass

from charset_normalizer import from_bytes

from knowledge.sources.model import SourceRejected

_SNIFF_BYTES = 8 * 1024
_DETECT_BYTES = 256 * 1024
_PLAUSIBLE_CHARS = 64 * 1024
_BOMS = (  # UTF-32 first: its little-endian BOM starts with UTF-16's.
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
_CONTROL_BYTES = frozenset([*range(0x00, 0x09), *range(0x0E, 0x1B), *range(0x1C, 0x20), 0x7F])
_MAX_CONTROL_RATIO = 0.10
_MAX_MESS = 0.15  # charset-normalizer's chaos score of its best guess: above this it is not trusted
_MAX_IMPLAUSIBLE_RATIO = 0.01
_MAX_UTF8_REPAIR_RATIO = 0.5  # undecodable bytes per valid multi-byte character, for "mostly UTF-8"
_MAX_UTF8_REPAIR_SHARE = 0.01  # undecodable bytes per character, for "mostly UTF-8"
_MAX_STRAY_BYTE_SHARE = 0.001  # undecodable bytes per byte, for UTF-8 (ASCII) with stray bytes
_REPAIRED = "utf-8 (repaired)"
# cp1252's typographic symbols (quotes, dashes, euro, copyright, degree...), without the superscripts and
# inverted marks that Polish letters (l-stroke, a-ogonek, z-dot) turn into when cp1250 is misread.
_WESTERN_SYMBOLS = frozenset(bytes(range(0x80, 0xC0)).decode("cp1252", "ignore") + "\u00d7\u00f7") - frozenset(
    "\u00a1\u00b2\u00b3\u00b9\u00bc\u00bd\u00be\u00bf"
)
# WHATWG decodes these labels as windows-1252; so do browsers, so must we.
_LABEL_ALIASES = {"iso-8859-1": "cp1252", "latin1": "cp1252", "latin-1": "cp1252", "ascii": "cp1252",
                  "us-ascii": "cp1252"}  # fmt: skip
_UNSAFE_DECLARED = frozenset({"idna", "punycode", "unicode-escape", "raw-unicode-escape", "undefined", "utf-7"})
_INVALID = "text encoding could not be determined (not UTF-8 and no plausible legacy encoding)"


@dataclass(frozen=True)
class Decoded:
    text: str
    encoding: str


def decode_text(data: bytes, declared: str | None = None) -> Decoded:
    """Decode ``data`` following the module's order; raise ``binary`` or ``invalid_encoding``."""
    found = _by_bom(data) or _by_utf16_pattern(data)
    if found is None:
        _refuse_binary(data[:_SNIFF_BYTES])
        found = (
            _by_declared(data, declared)
            or _by_utf8(data)
            or _by_western(data)
            or _by_detector(data)
            or _by_utf8(data, stray_only=True)
        )
    if found is None or not _plausible(found.text, repaired=found.encoding == _REPAIRED):
        raise SourceRejected("invalid_encoding", _INVALID)
    return found


def _strict(data: bytes, encoding: str) -> Decoded | None:
    try:
        return Decoded(data.decode(encoding), codecs.lookup(encoding).name)
    except (UnicodeDecodeError, LookupError):
        return None


def _by_bom(data: bytes) -> Decoded | None:
    # A "BOM" that does not decode is left to the binary sniffing below: it was probably not a BOM.
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return _strict(data, encoding)
    return None


def _by_utf16_pattern(data: bytes) -> Decoded | None:
    encoding = _utf16_pattern(data[:_SNIFF_BYTES])
    return None if encoding is None or len(data) % 2 else _strict(data, encoding)


def _utf16_pattern(sample: bytes) -> str | None:
    """UTF-16 without a BOM: mostly-ASCII text puts a NUL in every other byte."""
    sample = sample[: len(sample) - len(sample) % 2]
    pairs = len(sample) // 2
    if pairs < 4:
        return None
    even_nuls, odd_nuls = sample[0::2].count(0), sample[1::2].count(0)
    if odd_nuls >= 0.4 * pairs and even_nuls <= 0.05 * pairs:
        return "utf-16-le"
    if even_nuls >= 0.4 * pairs and odd_nuls <= 0.05 * pairs:
        return "utf-16-be"
    return None


def looks_binary(head: bytes) -> bool:
    """Whether a file's first bytes are binary by the test :func:`decode_text` applies to its first 8 KiB
    (NUL bytes or many control bytes, unless a byte-order mark or UTF-16's NUL pattern explains them), for a
    caller that must decide from those bytes alone (a file no suffix names, before the rest is read)."""
    sample = head[:_SNIFF_BYTES]
    if any(sample.startswith(bom) for bom, _ in _BOMS) or _utf16_pattern(sample):
        return False
    try:
        _refuse_binary(sample)
    except SourceRejected:
        return True
    return False


def _refuse_binary(sample: bytes) -> None:
    if b"\x00" in sample:
        raise SourceRejected("binary", "file looks binary, not text (it contains NUL bytes)")
    controls = sum(1 for byte in sample if byte in _CONTROL_BYTES)
    if sample and controls / len(sample) > _MAX_CONTROL_RATIO:
        raise SourceRejected("binary", "file looks binary, not text (too many control characters)")


def _by_declared(data: bytes, declared: str | None) -> Decoded | None:
    if not declared:
        return None
    label = declared.strip().lower()
    label = _LABEL_ALIASES.get(label, label)
    try:
        name = codecs.lookup(label).name
    except LookupError:
        return None
    # A document may not pick Python's transform codecs (escape decoding, punycode's quadratic decoder),
    # and a BOM-less "utf-16" declaration is a lie that browsers ignore too.
    if name in _UNSAFE_DECLARED or name.startswith("utf-16") or name.startswith("utf-32"):
        return None
    return _strict(data, name)


def _by_utf8(data: bytes, *, stray_only: bool = False) -> Decoded | None:
    """Strict UTF-8, or UTF-8 with replacement characters when the undecodable bytes are few: at most half
    the valid multi-byte characters (the evidence that the file is UTF-8) and 1% of the characters, or with
    ``stray_only`` (the last resort, after the legacy encodings) one byte in a thousand. One is always few."""
    strict = _strict(data, "utf-8")
    if strict is not None:
        return strict
    text = data.decode("utf-8", errors="replace")
    # Counted over the whole file: a 1.2 MB changelog's one Latin-1 byte used to be weighed against the few
    # multi-byte characters of its first 64 Ki characters, and the whole file was refused.
    replacements = text.count("\ufffd")
    bad = replacements - data.count("\ufffd".encode())
    valid_multibyte = len(text) - len(text.encode("ascii", "ignore")) - replacements
    if stray_only:
        accepted = bad <= max(1, _MAX_STRAY_BYTE_SHARE * len(data))
    else:
        few = bad <= max(1, _MAX_UTF8_REPAIR_SHARE * len(text))
        accepted = few and bad <= _MAX_UTF8_REPAIR_RATIO * valid_multibyte
    return Decoded(text, _REPAIRED) if accepted else None


def _by_western(data: bytes) -> Decoded | None:
    decoded = _strict(data, "cp1252")
    if decoded is None or not _looks_western(decoded.text[:_PLAUSIBLE_CHARS]):
        return None
    return decoded


def _looks_western(text: str) -> bool:
    """Accented letters are a minority of the letters, and the other non-ASCII characters are the usual
    typographic symbols. Cyrillic or Greek read as cp1252 fails the first test, Polish the second."""
    non_ascii = [char for char in text if ord(char) > 0x7F]
    letters = sum(1 for char in text if char.isalpha())
    accented = sum(1 for char in non_ascii if char.isalpha())
    odd = sum(1 for char in non_ascii if not char.isalpha() and char not in _WESTERN_SYMBOLS)
    return accented <= 0.4 * letters and odd <= 0.2 * len(non_ascii)


def _by_detector(data: bytes) -> Decoded | None:
    best = from_bytes(_detection_sample(data), enable_fallback=False).best()
    if best is None or best.chaos > _MAX_MESS:
        return None
    return _strict(data, best.encoding)


def _detection_sample(data: bytes) -> bytes:
    """A bounded prefix, cut after a newline: in the ASCII-compatible multi-byte encodings (Shift-JIS,
    GBK, Big5, EUC) 0x0A is never a trailing byte, so the cut never splits a character."""
    if len(data) <= _DETECT_BYTES:
        return data
    cut = data.rfind(b"\n", 0, _DETECT_BYTES)
    return data[: cut + 1] if cut > 0 else data[:_DETECT_BYTES]


def _plausible(text: str, *, repaired: bool = False) -> bool:
    sample = text[:_PLAUSIBLE_CHARS]
    if not sample:
        return True
    bad = sum(1 for char in sample if _implausible(char) and not (repaired and char == "\ufffd"))
    return bad <= _MAX_IMPLAUSIBLE_RATIO * len(sample)


def _implausible(char: str) -> bool:
    if char in "\t\n\r\f\v\x1b":
        return False
    return char == "\ufffd" or unicodedata.category(char) in ("Cc", "Cn", "Co", "Cs")


_META_CHARSET = re.compile(rb"""<meta[^>]+?charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE)
_XML_ENCODING = re.compile(rb"""<\?xml[^>]*?encoding\s*=\s*["']([A-Za-z0-9_.:-]+)""", re.IGNORECASE)


def declared_encoding(data: bytes) -> str | None:
    """The charset a markup document declares in its first 4 KiB (``<meta>`` or XML declaration)."""
    head = data[:4096]
    match = _META_CHARSET.search(head) or _XML_ENCODING.search(head)
    return match.group(1).decode("ascii") if match else None
