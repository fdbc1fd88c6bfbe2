"""The files inside a container — ``.zip``, ``.tar`` (``.tar.gz``/``.tgz``/``.tar.bz2``/``.tar.xz``), ``.mbox`` —
and the attachments of a message (``.eml``, ``.msg``), read **in memory** as (name, bytes) members.

This is the reading half of containers with children: whoever turns members into child items reads each
member like a file (``parse_bytes`` on its name and bytes) in the parse process, under its limits. Nothing
here ever writes a file or makes a path from a member's name: names are only *labels*, normalised once
(:func:`safe_name`) — ``\\`` becomes ``/``, ``.`` parts go — and a name that would leave the container
(``../x``, ``a/../../x``), is absolute (``/etc/x``, ``C:\\x``, ``\\\\host\\x``) or holds control characters is
refused (``unreadable``), as is anything that is not a regular file: tar symlinks and hard links
(``symlink_not_followed``, their targets never looked at), devices and FIFOs (``not_regular_file``).

Limits (the bomb checks of ``archive.py`` and ``compressed.py``, counted over the whole container, nested
members included):

* at most ``MAX_MEMBERS`` entries are looked at: more refuses the container (``too_large``), never a prefix;
* a ZIP member expanding more than ``archive.MAX_RATIO`` times past ``archive.RATIO_FLOOR`` is refused by
  itself (``decompression_bomb``), judged on the sizes it declares and again on what it really yields, so
  it never expands in memory and the archive's other files are still read; a compressed tar is unpacked by
  ``compressed.decompress`` under the same rule, which refuses the whole tar (its members cannot be
  reached without unpacking the stream);
* a member over ``max_bytes`` (a file's size limit) is refused by itself (``too_large``); all members
  together over ``archive.MAX_UNPACKED_BYTES`` refuse the container (``too_large``);
* an archive, mailbox or message inside an archive is a member like any other file: it becomes a child
  item and is unpacked when that child is read, within the budget of the whole tree below the file added
  (``knowledge.sources.nesting``: two container levels, descendants, bytes and ratio over all levels).

An encrypted ZIP member is ``encrypted`` (skipped: there is no password to ask for); a damaged container
is ``parse_error``. Reasons name the member by its safe name, never a path on this machine.
"""

from __future__ import annotations

import io
import re
import stat
import tarfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from knowledge.sources import archive
from knowledge.sources.formats import OLE_SIGNATURE, Format
from knowledge.sources.model import Member, ParsedDocument, Refused, SourceRejected, failing_as
from knowledge.sources.tar_headers import BoundedTarInfo

MAX_MEMBERS = 10_000
MAX_NAME_CHARS = 255
_READ_STEP = 1024 * 1024
_MIB = 1024 * 1024
_TAR_COMPRESSIONS = {".tgz": "gzip", ".tbz2": "bzip2", ".txz": "xz"}
_DRIVE = re.compile(r"^[A-Za-z]:")
_MBOX_FROM = re.compile(rb"^>+From ", re.MULTILINE)


@dataclass
class Unpacked:
    members: list[Member] = field(default_factory=list)
    refused: list[Refused] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(len(m.data) for m in self.members)


class _Budget:
    """What the whole container may still yield: entries looked at and bytes kept, nested levels included."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.entries = 0
        self.bytes = 0

    def entry(self) -> None:
        self.entries += 1
        if self.entries > MAX_MEMBERS:
            raise SourceRejected("too_large", f"{self.label} holds more than {MAX_MEMBERS} entries; not unpacked")

    def keep(self, size: int) -> None:
        self.bytes += size
        if self.bytes > archive.MAX_UNPACKED_BYTES:
            limit = archive.MAX_UNPACKED_BYTES // _MIB
            raise SourceRejected("too_large", f"{self.label} expands to more than {limit} MB when unpacked")


def container_kind(name: str) -> str | None:
    """``zip``, ``tar`` (any compression), ``mbox``, or None: what :func:`unpack` reads ``name`` as."""
    lower = name.lower()
    if lower.endswith(".zip"):
        return "zip"
    if lower.endswith((".tar", ".tar.gz", ".tar.bz2", ".tar.xz", *_TAR_COMPRESSIONS)):
        return "tar"
    if lower.endswith(".mbox"):
        return "mbox"
    return None


def unpack(data: bytes, name: str, *, max_bytes: int) -> Unpacked:
    """The members of the container ``name`` (by its suffix); archives inside are members (module doc).
    Raises ``SourceRejected`` for a container that cannot be read at all or breaks a whole-container limit."""
    kind = container_kind(name)
    if kind is None:
        raise SourceRejected("unsupported_type", "not an archive or a mailbox")
    budget = _Budget({"zip": "ZIP archive", "tar": "tar archive", "mbox": "mailbox"}[kind])
    found = Unpacked()
    for item in _entries(data, name, kind, max_bytes, budget):
        if isinstance(item, Refused):
            found.refused.append(item)
        else:  # an archive or mailbox inside is a member too: its own child, unpacked in turn (nesting.py)
            found.members.append(item)
    return found


def _entries(data: bytes, name: str, kind: str, max_bytes: int, budget: _Budget) -> Iterator[Member | Refused]:
    if kind == "zip":
        return _zip_entries(data, max_bytes, budget)
    if kind == "tar":
        return _tar_entries(_tar_bytes(data, name), max_bytes, budget)
    return _mbox_entries(data, max_bytes, budget)


# -- names -------------------------------------------------------------------------------------


def safe_name(raw: str) -> str | None:
    """``raw`` as a relative POSIX label that stays inside its container, or None when it would leave it
    (``..``), is absolute or names a drive or share, is empty, or holds control characters."""
    if not raw or any(ord(c) < 32 or ord(c) == 127 for c in raw) or len(raw) > 4 * MAX_NAME_CHARS:
        return None
    unified = raw.replace("\\", "/")
    if unified.startswith("/") or _DRIVE.match(unified):
        return None
    parts = [p for p in unified.split("/") if p not in ("", ".")]
    if not parts or any(p == ".." for p in parts) or any(len(p) > MAX_NAME_CHARS for p in parts):
        return None
    return "/".join(parts)


def _shown(raw: str) -> str:
    """A refused name as a reason may show it: printable, bounded, without a leading ``/`` (no path here)."""
    printable = "".join(c if c.isprintable() else "?" for c in raw.replace("\\", "/"))
    return printable.lstrip("/")[:80] or "(no name)"


def _refuse_name(raw: str) -> Refused:
    return Refused(_shown(raw), "unreadable", "its name leaves the archive or is not a plain relative name; not read")


def _too_large(name: str, size: int, max_bytes: int) -> Refused:
    return Refused(name, "too_large", f"over the {max_bytes // _MIB} MB limit of a file ({size // _MIB} MB)")


# -- ZIP ---------------------------------------------------------------------------------------


def _zip_entries(data: bytes, max_bytes: int, budget: _Budget) -> Iterator[Member | Refused]:
    if not zipfile.is_zipfile(io.BytesIO(data)):
        raise SourceRejected("parse_error", "ZIP archive is damaged or not a ZIP archive")
    with failing_as("ZIP archive is damaged (unreadable directory)"):
        zf = zipfile.ZipFile(io.BytesIO(data))
        infos = zf.infolist()
    for info in infos:
        budget.entry()
        if info.is_dir():
            continue
        name = safe_name(info.filename)
        if name is None:
            yield _refuse_name(info.filename)
            continue
        mode = info.external_attr >> 16
        if stat.S_ISLNK(mode):
            yield Refused(name, "symlink_not_followed", "a link inside the archive is not followed")
            continue
        if info.flag_bits & 0x1:
            yield Refused(name, "encrypted", "encrypted inside the archive (no password to open it); not read")
            continue
        if _bomb(info.file_size, info.compress_size):
            yield _bomb_refusal(name)
            continue
        if info.file_size > max_bytes:
            yield _too_large(name, info.file_size, max_bytes)
            continue
        yield _read_zip_member(zf, info, name, max_bytes, budget)


def _bomb(size: int, packed: int) -> bool:
    return size > archive.RATIO_FLOOR and size > archive.MAX_RATIO * max(packed, 1)


def _bomb_refusal(name: str) -> Refused:
    reason = f"looks like a decompression bomb (expands more than {archive.MAX_RATIO} times); not unpacked"
    return Refused(name, "decompression_bomb", reason)


def _read_zip_member(
    zf: zipfile.ZipFile, info: zipfile.ZipInfo, name: str, max_bytes: int, budget: _Budget
) -> Member | Refused:
    """The member's bytes read in steps, checked as they come: a directory that lies about sizes gains nothing."""
    out = bytearray()
    try:
        with zf.open(info) as handle:
            while chunk := handle.read(_READ_STEP):
                out += chunk
                if _bomb(len(out), info.compress_size):
                    return _bomb_refusal(name)
                if len(out) > max_bytes:
                    return _too_large(name, len(out), max_bytes)
    except (zipfile.BadZipFile, EOFError, OSError, ValueError, NotImplementedError, RuntimeError):
        return Refused(name, "parse_error", "damaged inside the archive (bad data or unsupported compression)")
    budget.keep(len(out))
    return Member(name, bytes(out))


# -- tar ---------------------------------------------------------------------------------------


def _tar_bytes(data: bytes, name: str) -> bytes:
    """The tar stream itself: a compressed tar is unpacked under the compressed-file bomb rule first."""
    from knowledge.sources.compressed import decompress
    from knowledge.sources.formats import COMPRESSIONS

    lower = name.lower()
    compression = next((c for s, c in _TAR_COMPRESSIONS.items() if lower.endswith(s)), None)
    compression = compression or next((c for s, c in COMPRESSIONS.items() if lower.endswith(s)), None)
    if compression is None:
        return data
    return decompress(data, compression, archive.MAX_UNPACKED_BYTES)


def _tar_entries(data: bytes, max_bytes: int, budget: _Budget) -> Iterator[Member | Refused]:
    with failing_as("tar archive is damaged or not a tar archive"):
        # tar_headers.BoundedTarInfo checks each extended header before tarfile parses it
        tf = tarfile.open(fileobj=io.BytesIO(data), mode="r:", tarinfo=BoundedTarInfo)  # noqa: SIM115
    with tf:
        while True:
            with failing_as("tar archive is damaged (bad header)"):
                info = tf.next()
            if info is None:
                return
            budget.entry()
            refused = _tar_refusal(info)
            if refused is not None or info.isdir():
                if refused is not None:
                    yield refused
                continue
            name = safe_name(info.name)
            assert name is not None  # _tar_refusal refused it otherwise
            if info.size > max_bytes:
                yield _too_large(name, info.size, max_bytes)
                continue
            with failing_as("tar archive is damaged (a member is cut short)"):
                handle = tf.extractfile(info)
                content = handle.read(max_bytes + 1) if handle is not None else b""
            budget.keep(len(content))
            yield Member(name, content)


def _tar_refusal(info: tarfile.TarInfo) -> Refused | None:
    name = safe_name(info.name)
    if name is None:
        return _refuse_name(info.name)
    if info.issym() or info.islnk():
        return Refused(name, "symlink_not_followed", "a link inside the archive is not followed")
    if not (info.isreg() or info.isdir()):
        return Refused(name, "not_regular_file", "not a regular file (device, pipe) inside the archive")
    return None


# -- mbox --------------------------------------------------------------------------------------


def _mbox_entries(data: bytes, max_bytes: int, budget: _Budget) -> Iterator[Member | Refused]:
    """One ``.eml`` member per message: each begins at a line starting ``From `` (what :mod:`mailbox`
    reads, without a file on disk); ``>From `` lines in a body lose one ``>`` (mboxrd)."""
    if not data.startswith(b"From "):
        raise SourceRejected("parse_error", "not a mailbox (it does not begin with a From line)")
    starts = [m.start() for m in re.finditer(rb"^From ", data, re.MULTILINE)]
    for n, (start, end) in enumerate(zip(starts, [*starts[1:], len(data)], strict=True), start=1):
        budget.entry()
        raw = data[start:end]
        body = raw.split(b"\n", 1)[1] if b"\n" in raw else b""
        message = _MBOX_FROM.sub(lambda m: m.group(0)[1:], body)
        name = f"message {n:04d}.eml"
        if len(message) > max_bytes:
            yield _too_large(name, len(message), max_bytes)
            continue
        budget.keep(len(message))
        yield Member(name, message)


# -- attachments of a message ------------------------------------------------------------------


def attachments(data: bytes, name: str, *, max_bytes: int) -> Unpacked:
    """The attached files of the message ``name`` (``.eml`` or ``.msg``), named by their file names (the
    last part only: an attachment's name is a file name, never a path); an attached message is a member
    ``.eml`` of its own. Inline parts without a file name are the body's, not attachments."""
    lower = name.lower()
    budget = _Budget("message")
    found = Unpacked()
    pairs = _eml_attachments(data) if lower.endswith(".eml") else _msg_attachments(data, found)
    for n, (raw_name, content) in enumerate(pairs, start=1):
        budget.entry()
        label = safe_name(raw_name or "")
        shown = label.rsplit("/", 1)[-1] if label else None
        if shown is None:
            found.refused.append(_refuse_name(raw_name or f"attachment {n}"))
        elif len(content) > max_bytes:
            found.refused.append(_too_large(shown, len(content), max_bytes))
        else:
            budget.keep(len(content))
            found.members.append(Member(shown, content))
    return found


def _eml_attachments(data: bytes) -> list[tuple[str | None, bytes]]:
    from email.message import EmailMessage

    from knowledge.sources.mail_headers import parse_message

    pairs: list[tuple[str | None, bytes]] = []
    with failing_as("e-mail message could not be read (malformed structure)"):
        message = parse_message(data)  # headers bounded first (mail_headers.py)
        for attached in message.iter_attachments():
            for part in _leaves(attached):
                content = _part_content(part)
                filename = part.get_filename()
                if isinstance(content, EmailMessage):  # a forwarded message: read as a message of its own
                    subject = content.get("Subject") or "attached message"
                    pairs.append((filename or f"{subject}.eml", bytes(content)))
                elif filename:
                    pairs.append((filename, content.encode("utf-8") if isinstance(content, str) else bytes(content)))
    return pairs


MAX_PART_DEPTH = 4  # multipart inside an attachment: its files are the message's; deeper nesting is refused


def _leaves(part: Any, depth: int = 0) -> Iterator[Any]:
    """An attachment's parts that hold content: itself, or the leaves of a multipart attachment (a bundle of
    files sent as one part), at most :data:`MAX_PART_DEPTH` levels deep."""
    if not part.is_multipart() or part.get_content_maintype() == "message":  # a forwarded message stays whole
        yield part
        return
    if depth >= MAX_PART_DEPTH:
        raise SourceRejected("too_large", f"e-mail parts are nested more than {MAX_PART_DEPTH} levels deep")
    for sub in part.iter_parts():
        yield from _leaves(sub, depth + 1)


def _part_content(part: Any) -> Any:
    """A part's content; a charset Python does not know keeps the raw bytes rather than failing the message."""
    try:
        return part.get_content()
    except (LookupError, UnicodeError):
        payload = part.get_payload(decode=True)
        return payload if isinstance(payload, bytes) else b""


def _msg_attachments(data: bytes, found: Unpacked) -> list[tuple[str | None, bytes]]:
    import extract_msg

    if not data.startswith(OLE_SIGNATURE):
        raise SourceRejected("parse_error", "not an Outlook message (no compound-file signature)")
    pairs: list[tuple[str | None, bytes]] = []
    with failing_as("Outlook message could not be read (damaged or not a mail message)"):
        message = extract_msg.openMsg(io.BytesIO(data), filename="message.msg", strict=False)
        try:
            for n, attached in enumerate(getattr(message, "attachments", []), start=1):
                filename = getattr(attached, "longFilename", None) or getattr(attached, "shortFilename", None)
                content = getattr(attached, "data", None)
                if isinstance(content, bytes):
                    pairs.append((filename, content))
                else:  # an attached Outlook item or a link: no file to read
                    shown = _shown(filename or f"attachment {n}")
                    found.refused.append(Refused(shown, "unsupported_type", "an attached Outlook item is not read"))
        finally:
            message.close()
    return pairs


# -- the container as a document ---------------------------------------------------------------


def parse_container(data: bytes, fmt: Format, *, name: str, max_bytes: int) -> ParsedDocument:
    """The container's own document: a list of what it holds (so a search for a file's name finds its
    archive), one line each, with the members to become its children and the refused ones with reasons."""
    from knowledge.sources.census import blank_metadata
    from knowledge.sources.textutil import document, line_segments

    found = unpack(data, name, max_bytes=max_bytes)  # each member within a file's size limit
    if not found.members and not found.refused:
        raise SourceRejected("empty", "holds no files")
    lines = [m.name for m in found.members] + [f"{r.name} (not read: {r.reason})" for r in found.refused]
    text = "\n".join(lines) + "\n"
    metadata = blank_metadata("container")
    metadata.update(files=len(found.members), not_read=len(found.refused))
    doc = document("container", text, line_segments(text), metadata, fmt.mime)
    return replace(doc, members=tuple(found.members), refused=tuple(found.refused))
