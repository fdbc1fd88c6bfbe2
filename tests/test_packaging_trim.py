"""The packaged app's build steps that rewrite native libraries (packaging/trim_elf.py, packaging/trim_icu.py), on
real wheels' libraries: trimmed copies still load and do their work in a fresh process, and what the loader maps
is byte-for-byte what it was. ``make package-check`` then runs the whole trimmed bundle."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

sys.path.insert(0, str(REPO / "packaging"))
import trim_elf  # packaging/ is not a package
import trim_icu

SITE = Path(importlib.util.find_spec("tesserocr").origin).parent.parent  # type: ignore[arg-type, union-attr]


def _run(code: str, path: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], env={"PYTHONPATH": f"{path}:{REPO}", "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


_OCR = """
import tesserocr
from knowledge.sources.ocr import tessdata_dir
from tests.sources.builders import render_page
print(tesserocr.__file__)
image = render_page(["The trimmed library reads pelicans"], (1400, 370))
print(tesserocr.image_to_text(image, path=tessdata_dir()).strip())
"""


def test_trimmed_wheel_libraries_load_and_read_text(tmp_path: Path) -> None:
    """tesserocr's libraries came through an old patchelf (segments 2 MiB apart in the file): trimmed, the OCR
    extension and its nine libraries load from the copy and read the same text."""
    site = tmp_path / "site"
    shutil.copytree(SITE / "tesserocr", site / "tesserocr")
    shutil.copytree(SITE / "tesserocr.libs", site / "tesserocr.libs")
    before = {p.name: p.read_bytes() for p in (site / "tesserocr.libs").iterdir()}
    changed, saved = trim_elf.trim_folder(site)
    assert changed >= 5 and saved > 10_000_000  # the padding alone is ~20 MB
    for name, data in before.items():
        after = (site / "tesserocr.libs" / name).read_bytes()
        old, new = trim_elf.Elf.read(data), trim_elf.Elf.read(after)
        assert old is not None and new is not None and len(after) <= len(data)
        assert [(v, b) for v, _o, b in old.loads()] == [(v, b) for v, _o, b in new.loads()]  # what is mapped
    location, text = _run(_OCR, site).splitlines()
    assert location.startswith(str(site)) and text == "The trimmed library reads pelicans"


def test_a_payload_after_the_last_referenced_byte_is_kept() -> None:
    library = next((SITE / "tesserocr.libs").glob("libjbig-*"))
    data = library.read_bytes() + b"appended payload"
    trimmed = trim_elf.trimmed(data)
    assert trimmed is not None and len(trimmed) < len(data) and trimmed.endswith(b"appended payload")
    assert trim_elf.trimmed(trimmed) is None  # nothing left to gain


_QT = """
import PySide6
from knowledge.components import probe
print(PySide6.__file__)
print(probe("PySide6"))
"""


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler to link the trimmed ICU data")
def test_qt_collates_and_names_time_zones_on_the_trimmed_icu_data(tmp_path: Path) -> None:
    pyside = Path(importlib.util.find_spec("PySide6").origin).parent  # type: ignore[arg-type, union-attr]
    site = tmp_path / "site"
    for package in ("PySide6", "shiboken6"):  # a copy made of links, but for the library rewritten
        shutil.copytree(pyside.parent / package, site / package, copy_function=lambda s, d: Path(d).symlink_to(s))
    (library,) = (site / "PySide6" / "Qt" / "lib").glob("libicudata.so.*")
    library.unlink()
    shutil.copy2(next((pyside / "Qt" / "lib").glob("libicudata.so.*")), library)
    summary = trim_icu.trim(library, tmp_path / "work")
    assert summary["removed"] > 1000 and summary["now"] < 0.6 * summary["bytes"]
    _header, kept = trim_icu.items(trim_icu.package_in(library)[1])
    assert not [name for name, _data in kept if trim_icu.unused(name)]
    assert any("/coll/" in name for name, _data in kept) and any("/zone/" in name for name, _data in kept)
    location, component = _run(_QT, site).splitlines()
    assert location.startswith(str(site)) and "loaded=True" in component, component
