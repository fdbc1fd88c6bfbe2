"""More of people's documents through the real CLI: ``quire add`` a folder, ``worker --until-idle``,
``quire search``. Each file carries a made-up sentinel word found only in it; the hit must be that file,
at the right place (a workbook's sheet and row range, a deck's slide, a PDF table's page)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import quire_cli
from tests.sources.builders import make_pdf, ruled_table
from tests.sources.office_builders import make_eml, make_msg, make_odp, make_odt, make_pptx, make_rtf, make_xlsx

# the second sheet has rows enough that a chunk holding row 10 starts inside that sheet (chunk size 64)
_LEDGER = [["Item", "Cost", "Supplier"]] + [[f"part {n}", n * 3, f"vendor {n}"] for n in range(1, 12)]
_LEDGER[9] = ["flange", 27, "Vorquistal"]  # spreadsheet row 10
_PARTS = [["Part", "Stock"], ["bolt", 400], ["washer", 900]]
# rows enough that the chunk holding the last one starts on the table's page (chunk size 64)
_FLEET = [[f"boat {n}", str(n * 10), f"crew {n}"] for n in range(1, 6)] + [["Marrowind", "340", "Oskeltrude"]]


def _ok(data_dir: Path, *args: str) -> Any:
    result = quire_cli("--json", *args, data_dir=data_dir)
    assert result.returncode == 0, (args, result.stdout, result.stderr)
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """One base holding one file of each new kind, added as a folder and indexed by the worker."""
    root = tmp_path_factory.mktemp("formats")
    docs, data = root / "docs", root / "data"
    docs.mkdir()
    deck = [("Roadmap", "Ship the widget", "Remember the pelorixate budget"), ("Risks", "Late parts", "")]
    (docs / "deck.pptx").write_bytes(make_pptx(deck))
    (docs / "ledger.xlsx").write_bytes(make_xlsx([("Parts", _PARTS), ("Ledger", _LEDGER)]))
    (docs / "sales.csv").write_text("Region,Amount\nNorth,120\nGlimbardy,75\n", encoding="utf-8")
    (docs / "trip.odt").write_bytes(make_odt(["The ferry to Skarnevik leaves at dawn."]))
    harbour = [("Harbour plan", "Dredge the basin", "Ask about the brindlemoss permit"), ("Costs", "Tight", "")]
    (docs / "harbour.odp").write_bytes(make_odp(harbour))
    fleet = ruled_table(["Vessel", "Tonnage", "Skipper"], _FLEET, above=["Fleet register"])
    (docs / "fleet.pdf").write_bytes(make_pdf([["Harbour authority annual report", "Berths, dues, dredging."], fleet]))
    (docs / "letter.rtf").write_bytes(make_rtf(["Dear Sir, the trundlewort order shipped."]))
    html = "<html><body><p>The <b>kelmorant</b> shipment arrives Friday.</p></body></html>"
    (docs / "shipment.eml").write_bytes(make_eml("Shipment update", html=html))
    crane = "The quorvelant crane is booked for Tuesday."
    (docs / "crane.msg").write_bytes(make_msg("Crane hire", plain=crane, sender=("Bo Li", "bo@example.org")))
    vault_note = (
        "---\ntags: [garden]\naliases: [Compost]\n---\n# Heap\n\nTurn the brovashik heap #weekly, see [[Soil]].\n"
    )
    (docs / "heap.md").write_text(vault_note, encoding="utf-8")
    (docs / "release.md.gz").write_bytes(gzip.compress(b"# Release 2.0\n\nThe zandolphic cache is gone.\n"))
    (docs / "bomb.txt.gz").write_bytes(gzip.compress(b"\x00" * (64 * 1024 * 1024), 9))
    _ok(data, "base", "create", "kb", "--precision", "fp32", "--chunk-size", "64")
    _ok(data, "add", "kb", str(docs))
    _ok(data, "worker", "--until-idle")
    items = {i["name"]: i for i in _ok(data, "items", "kb")["items"]}
    return data, items


def _top_hit(data: Path, query: str) -> dict[str, Any]:
    hits = _ok(data, "search", "kb", query, "--mode", "keyword", "--limit", "1")["hits"]
    assert hits, f"no hit for {query!r}"
    return hits[0]  # type: ignore[no-any-return]


def test_every_new_kind_is_indexed(indexed: tuple[Path, dict[str, Any]]) -> None:
    _data, items = indexed
    kinds = ("deck.pptx", "ledger.xlsx", "sales.csv", "trip.odt", "letter.rtf", "release.md.gz", "shipment.eml")
    kinds += ("harbour.odp", "fleet.pdf")
    for name in (*kinds, "crane.msg"):
        assert items[name]["status"] == "completed", items[name]


def test_spreadsheet_row_found_by_value_and_column_with_sheet_and_row(indexed: tuple[Path, dict[str, Any]]) -> None:
    data, _items = indexed
    hit = _top_hit(data, "Supplier Vorquistal")
    assert hit["source_path"].endswith("ledger.xlsx")
    assert "Item: flange; Cost: 27; Supplier: Vorquistal" in hit["text"]
    location = hit["location"]
    assert location["page"] == 2  # the second sheet
    assert location["line_start"] <= 10 <= location["line_end"]  # a row range holding row 10


def test_slide_and_speaker_notes_found_on_their_slide(indexed: tuple[Path, dict[str, Any]]) -> None:
    data, _items = indexed
    hit = _top_hit(data, "pelorixate")
    assert hit["source_path"].endswith("deck.pptx") and hit["location"]["page"] == 1
    assert "Notes: Remember the pelorixate budget" in hit["text"]


def test_odp_speaker_notes_found_on_their_slide(indexed: tuple[Path, dict[str, Any]]) -> None:
    data, _items = indexed
    hit = _top_hit(data, "brindlemoss")
    assert hit["source_path"].endswith("harbour.odp") and hit["location"]["page"] == 1
    assert "Notes: Ask about the brindlemoss permit" in hit["text"]


def test_pdf_table_row_found_by_value_and_column_on_its_page(indexed: tuple[Path, dict[str, Any]]) -> None:
    data, _items = indexed
    hit = _top_hit(data, "Skipper Oskeltrude")
    assert hit["source_path"].endswith("fleet.pdf") and hit["location"]["page"] == 2
    assert "Vessel: Marrowind; Tonnage: 340; Skipper: Oskeltrude" in hit["text"]


def test_gzipped_markdown_found_at_its_line_and_bomb_refused(indexed: tuple[Path, dict[str, Any]]) -> None:
    data, items = indexed
    hit = _top_hit(data, "zandolphic")
    assert hit["source_path"].endswith("release.md.gz") and hit["location"]["line_start"] == 1
    bomb = items["bomb.txt.gz"]
    assert (bomb["status"], bomb["error_code"]) == ("failed", "decompression_bomb")
    assert "bomb" in bomb["error_message"] and "/" not in bomb["error_message"]


def test_vault_note_tags_aliases_and_links_are_metadata(indexed: tuple[Path, dict[str, Any]]) -> None:
    data, items = indexed
    hit = _top_hit(data, "brovashik")
    assert hit["source_path"].endswith("heap.md") and hit["location"]["line_start"] == 5  # lines counted in the file
    metadata = items["heap.md"]["metadata"]
    assert (metadata["tags"], metadata["aliases"], metadata["links"]) == ("garden, weekly", "Compost", "Soil")


def test_html_only_mail_found_with_its_headers(indexed: tuple[Path, dict[str, Any]]) -> None:
    data, items = indexed
    hit = _top_hit(data, "kelmorant")
    assert hit["source_path"].endswith("shipment.eml")
    assert "Subject: Shipment update" in hit["text"] and "The kelmorant shipment arrives Friday." in hit["text"]
    metadata = items["shipment.eml"]["metadata"]
    assert metadata["from"] == "Ada Lovelace <ada@example.org>" and metadata["date"] == "2024-03-05T10:30:00+01:00"


@pytest.mark.parametrize(
    ("word", "name"), [("Glimbardy", "sales.csv"), ("Skarnevik", "trip.odt"), ("trundlewort", "letter.rtf")]
)
def test_csv_odt_rtf_found_by_their_words(indexed: tuple[Path, dict[str, Any]], word: str, name: str) -> None:
    data, _items = indexed
    hit = _top_hit(data, word)
    assert hit["source_path"].endswith(name)
    if name == "sales.csv":
        assert "Region: Glimbardy; Amount: 75" in hit["text"] and hit["location"]["line_start"] == 1


def test_outlook_message_found_and_filtered_by_its_sender(indexed: tuple[Path, dict[str, Any]]) -> None:
    data, items = indexed
    hit = _top_hit(data, "quorvelant")
    assert hit["source_path"].endswith("crane.msg") and "Subject: Crane hire" in hit["text"]
    metadata = items["crane.msg"]["metadata"]
    assert metadata["from"] == "Bo Li <bo@example.org>" and metadata["date"] == "2024-03-05T09:30:00+00:00"
    sent_by = _ok(data, "search", "kb", "crane shipment from:bo@example.org", "--mode", "keyword")["hits"]
    assert {h["item_name"] for h in sent_by} == {"crane.msg"}
