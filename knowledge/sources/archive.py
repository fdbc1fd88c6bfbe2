"""Guards for ZIP-based formats (DOCX, EPUB) before a library unpacks them.

python-docx and ebooklib read every member of the package into memory, so a small file that expands
to gigabytes (a "zip bomb") would exhaust memory before any parser error could be raised. The member
sizes recorded in the ZIP directory are what :mod:`zipfile` will actually yield (it stops at the
declared size), so summing them is a sound bound.
"""

from __future__ import annotations

import io
import zipfile

from knowledge.sources.model import SourceRejected, failing_as

MAX_UNPACKED_BYTES = 512 * 1024 * 1024
MAX_MEMBERS = 20_000
# A member that expands more than MAX_RATIO times (and to more than RATIO_FLOOR bytes) is a bomb: real
# XML and HTML compress ~5-20x; a run of zeros ~1000x.
MAX_RATIO = 100
RATIO_FLOOR = 1024 * 1024


def check_package(data: bytes, label: str) -> None:
    """Refuse data that is not a ZIP (``parse_error``) or that unpacks too large (``too_large``)."""
    if not zipfile.is_zipfile(io.BytesIO(data)):
        raise SourceRejected("parse_error", f"{label} is damaged or not a {label} file (not a ZIP package)")
    with failing_as(f"{label} is damaged (unreadable ZIP directory)"), zipfile.ZipFile(io.BytesIO(data)) as zf:
        members = zf.infolist()
    if len(members) > MAX_MEMBERS:
        raise SourceRejected("too_large", f"{label} has more than {MAX_MEMBERS} parts")
    for member in members:
        ratio = member.file_size // max(member.compress_size, 1)
        if member.file_size > RATIO_FLOOR and ratio > MAX_RATIO:
            raise SourceRejected(
                "decompression_bomb",
                f"{label} looks like a decompression bomb (a part expands {ratio} times); not unpacked",
            )
    if sum(member.file_size for member in members) > MAX_UNPACKED_BYTES:
        limit = MAX_UNPACKED_BYTES // (1024 * 1024)
        raise SourceRejected("too_large", f"{label} expands to more than {limit} MB when unpacked")
