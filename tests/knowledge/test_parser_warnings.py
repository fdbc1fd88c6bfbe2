"""A parser library's warnings describe the file: they reach the worker's log with the item's name, never the
terminal (a real documentation tree printed 180 of BeautifulSoup's XMLParsedAsHTMLWarning and nothing else)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from knowledge.ingest import PARSER_WARNINGS
from knowledge.ingest.parse_worker import ParseLimits, ParseWorker
from tests.conftest import quire_cli

# XML handed to the HTML parser: BeautifulSoup warns XMLParsedAsHTMLWarning (an XHTML page of a real doc tree)
XML_AS_HTML = b'<?xml version="1.0" encoding="utf-8"?>\n<reference><para>teapot calibration notes</para></reference>\n'


def test_the_parse_process_forwards_a_warning_with_the_items_name(caplog: pytest.LogCaptureFixture) -> None:
    worker = ParseWorker(ParseLimits(timeout_seconds=60, memory_bytes=0))
    try:
        with caplog.at_level(logging.WARNING, logger=PARSER_WARNINGS):
            [parsed] = worker.parse_many([("guide.html", XML_AS_HTML, 1 << 20, "eng")])
    finally:
        worker.close()
    assert "teapot calibration notes" in parsed.text  # type: ignore[union-attr]
    forwarded = [r.getMessage() for r in caplog.records if r.name == PARSER_WARNINGS]
    assert forwarded == [forwarded[0]] and forwarded[0].startswith("guide.html: XMLParsedAsHTMLWarning: ")


def test_a_worker_keeps_them_off_the_terminal_and_in_its_log(data_dir: Path, tmp_path: Path) -> None:
    page = tmp_path / "guide.html"
    page.write_bytes(XML_AS_HTML)
    assert quire_cli("base", "create", "docs", data_dir=data_dir).returncode == 0
    assert quire_cli("add", "docs", str(page), data_dir=data_dir).returncode == 0
    done = quire_cli("worker", "--until-idle", "--log", data_dir=data_dir)
    assert done.returncode == 0, done.stderr
    assert "Warning" not in done.stderr and "Warning" not in done.stdout, done.stderr
    log = (data_dir / "worker.log").read_text()
    assert "quire.parser_warnings: guide.html: XMLParsedAsHTMLWarning" in log
    found = quire_cli("--json", "search", "docs", "teapot calibration", "--mode", "keyword", data_dir=data_dir)
    assert '"guide.html"' in found.stdout  # the file itself was read
