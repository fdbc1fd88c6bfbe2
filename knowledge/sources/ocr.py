"""Local OCR: Tesseract 5.5 through ``tesserocr`` (the engine is inside the wheel), with the trained data
of the ``tessdata-fast-*`` packages, installed into the environment's ``share/tessdata`` by pip. Nothing
is downloaded at run time and nothing leaves the machine.

Why Tesseract and not ``rapidocr`` (measured on four rendered pages, docs/BENCHMARKS.md): exact text at
~0.4 s a page against ~7 s a page and dropped/merged words for rapidocr + onnxruntime.

OCR runs inside the parser (``image.py``, ``pdf.py``), so whatever time and memory limits the caller puts
on parsing hold for it too. The engine is not thread-safe: each thread keeps its own instance per
language (initialising one costs ~0.1 s, so instances are kept rather than made per page).

The language is a base setting (``bases.ocr_language``, default ``eng``); :func:`language_refusal` says,
in words a person can act on, why a language cannot be used (its trained data is not installed).
"""

from __future__ import annotations

import logging
import re
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from PIL.Image import Image

log = logging.getLogger(__name__)

DEFAULT_LANGUAGE = "eng"
ENGINE = "tesseract"
_LANGUAGE_RE = re.compile(r"^[A-Za-z_]{3,20}(\+[A-Za-z_]{3,20})*$")  # eng, chi_sim, eng+deu
MAX_SIDE = 4000  # pixels on the long side sent to the engine: bounds time and memory of a huge scan
_MIN_SIDE = 1000  # small images (screenshots, thumbnails) are upscaled: Tesseract wants ~20 px letters
_local = threading.local()


def tessdata_dir() -> str:
    import tessdata

    return str(tessdata.data_path())


def installed_languages() -> tuple[str, ...]:
    """The OCR languages whose trained data is installed (``osd``, script detection, is not one)."""
    import tesserocr

    _path, languages = tesserocr.get_languages(tessdata_dir())
    return tuple(sorted(lang for lang in languages if lang != "osd"))


def language_refusal(language: str) -> str | None:
    """Why ``language`` cannot be used for OCR, or None when it can (``eng+deu`` needs both installed)."""
    if not _LANGUAGE_RE.match(language):
        return f"{language[:40]!r} is not an OCR language code (examples: eng, deu, eng+deu)"
    installed = installed_languages()
    missing = [part for part in language.split("+") if part not in installed]
    if missing:
        return (
            f"OCR language {'+'.join(missing)!r} is not installed (installed: {', '.join(installed) or 'none'}); "
            f"install its trained data, e.g. pip install tessdata-fast-{missing[0]}"
        )
    return None


def _engine(language: str) -> Any:
    engines: dict[str, Any] = getattr(_local, "engines", None) or {}
    _local.engines = engines
    if language not in engines:
        import tesserocr

        engines[language] = tesserocr.PyTessBaseAPI(path=tessdata_dir(), lang=language)
    return engines[language]


def prepare(image: Image) -> Image:
    """Greyscale on white (transparency flattened), scaled into the size range the engine reads well."""
    from PIL import Image as PilImage

    if image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info):
        rgba = image.convert("RGBA")
        white = PilImage.new("RGBA", rgba.size, (255, 255, 255, 255))
        image = PilImage.alpha_composite(white, rgba)
    grey = image.convert("L")
    longest = max(grey.size)
    if longest > MAX_SIDE:
        factor = MAX_SIDE / longest
    elif 0 < longest < _MIN_SIDE:
        factor = min(3.0, _MIN_SIDE / longest)
    else:
        return grey
    size = (max(1, round(grey.width * factor)), max(1, round(grey.height * factor)))
    return grey.resize(size, PilImage.Resampling.LANCZOS)


def recognize(image: Image, language: str = DEFAULT_LANGUAGE) -> str:
    """The text Tesseract reads in ``image`` (``""`` when it finds none), whitespace tidied per line."""
    engine = _engine(language)
    engine.SetImage(prepare(image))
    raw = str(engine.GetUTF8Text() or "")
    engine.Clear()
    lines = [" ".join(line.split()) for line in raw.splitlines()]
    text = "\n".join(lines)
    text = re.sub(r"\n{3,}", "\n\n", text).strip()
    # a few stray marks read off a photo are not text: keep it only if it holds a real word
    return text if re.search(r"[^\W\d_]{2,}", text) else ""
