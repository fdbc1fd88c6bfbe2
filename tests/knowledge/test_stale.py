"""Provenance and stale work (issue 10, item 5): bump the parser, the chunker and the model weights in
turn; the affected items show as stale, ``reindex --stale`` re-derives exactly those, and reuse never
takes material stamped otherwise."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import text

from knowledge import lifecycle
from knowledge.ingest import chunking, models
from knowledge.ingest import weights as model_weights
from knowledge.ingest.models import model_spec
from knowledge.lifecycle import PathInput, operations
from knowledge.runtime import Quire
from knowledge.sources import PARSER_VERSIONS
from tests.conftest import quire_cli
from tests.knowledge.helpers import drain, make_base
from tests.support.encoders import CountingEncoder, install
from tests.support.files import write_tree

FILES = {
    "alpha.txt": "Alpha describes the granite quarry near the old mill.",
    "beta.md": "# Beta\n\nBeta is about the tidal estuary and its herons.",
    "gamma.txt": "Gamma follows a glacier across the northern valley.",
}


@pytest.fixture
def counting(quire: Quire) -> CountingEncoder:
    return install(quire, CountingEncoder())


def _indexed(quire: Quire, tmp_path: Path) -> dict[str, operations.tree.Item]:
    make_base(quire, precision="fp32")
    operations.add_items(quire, "kb", [PathInput(write_tree(tmp_path / "lib", FILES))])
    drain(quire)
    return _files(quire)


def _files(quire: Quire) -> dict[str, operations.tree.Item]:
    return {i.name: i for i in operations.list_items(quire, "kb", flat=True) if not i.is_container}


def _stale_names(quire: Quire) -> set[str]:
    return {i.name for i in lifecycle.stale_items(quire, "kb")}


def _reindex_stale(quire: Quire) -> None:
    lifecycle.reindex_stale(quire, "kb")
    drain(quire)


def test_stamps_carry_the_weights_hash_and_nothing_is_stale_at_first(quire: Quire, tmp_path: Path) -> None:
    files = _indexed(quire, tmp_path)
    digest = models.weights_digest(model_spec("all-MiniLM-L6-v2"))
    assert len(digest) == 16
    assert {i.model_fingerprint for i in files.values()} == {f"all-MiniLM-L6-v2:384:fp32:w{digest}"}
    assert _stale_names(quire) == set()
    assert lifecycle.reindex_stale(quire, "kb").noop


class _ParsersInThisProcess:
    """Parses in the test's own process: a version bumped by monkeypatch is invisible to the real parse
    process (a fresh interpreter), and this test is about the stamps, not about isolation."""

    def for_this_thread(self) -> _ParsersInThisProcess:
        return self

    def parse_many(self, requests: list[tuple[str, bytes, int, str]]) -> list[object]:
        from knowledge.ingest.parse_worker import ParseFailed
        from knowledge.sources import SourceRejected, parse_bytes

        answers: list[object] = []
        for name, data, max_bytes, language in requests:
            try:
                answers.append(parse_bytes(data, name=name, max_bytes=max_bytes, ocr_language=language))
            except SourceRejected as rejected:
                answers.append(ParseFailed(rejected.code, rejected.reason))
        return answers

    def close(self) -> None:
        pass


def test_a_parser_bump_makes_its_items_stale_and_reindex_redoes_exactly_those(
    quire: Quire, tmp_path: Path, counting: CountingEncoder, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = _indexed(quire, tmp_path)
    embedded = len(counting.texts_seen)
    monkeypatch.setitem(PARSER_VERSIONS, "markdown", "markdown-99")
    monkeypatch.setattr(quire, "parsers", _ParsersInThisProcess())
    assert _stale_names(quire) == {"beta.md"}
    _reindex_stale(quire)
    after = _files(quire)
    assert (
        after["beta.md"].parser_version == "markdown-99" and after["beta.md"].generation > before["beta.md"].generation
    )
    for name in ("alpha.txt", "gamma.txt"):  # untouched: same generation, same row
        assert (after[name].generation, after[name].updated_at) == (before[name].generation, before[name].updated_at)
    assert _stale_names(quire) == set()
    assert len(counting.texts_seen) == embedded  # same chunk texts, same model: the stamped vectors were reused


def test_a_chunker_bump_makes_everything_stale(quire: Quire, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = _indexed(quire, tmp_path)
    monkeypatch.setattr(chunking, "CHUNKER_VERSION", "tok-99")
    assert _stale_names(quire) == set(FILES)
    _reindex_stale(quire)
    after = _files(quire)
    assert {i.chunker_version for i in after.values()} == {"tok-99"}
    assert all(after[n].generation > before[n].generation for n in FILES)
    assert _stale_names(quire) == set()


def test_new_weights_make_everything_stale_and_no_stale_vector_is_reused(
    quire: Quire, tmp_path: Path, counting: CountingEncoder, monkeypatch: pytest.MonkeyPatch
) -> None:
    _indexed(quire, tmp_path)
    first = list(counting.texts_seen)
    assert sorted(first) == sorted(set(first)) and len(first) == 3  # one chunk per file
    monkeypatch.setattr(models, "weights_digest", lambda spec: "0123456789abcdef")
    assert _stale_names(quire) == set(FILES)
    _reindex_stale(quire)
    # every chunk went through the model again: neither the live chunks nor the cache (stamped with the
    # old weights by the reindex's stash) were taken
    assert sorted(counting.texts_seen[len(first) :]) == sorted(first)
    with quire.db.read() as conn:
        cache = conn.execute(text("SELECT DISTINCT model_fingerprint FROM vector_cache")).scalars().all()
    assert cache and all(not str(s).endswith("0123456789abcdef") for s in cache)
    assert {i.model_fingerprint for i in _files(quire).values()} == {"all-MiniLM-L6-v2:384:fp32:w0123456789abcdef"}
    assert _stale_names(quire) == set()
    # a copy of an indexed file added now reuses today's material (nothing embedded)
    seen = len(counting.texts_seen)
    operations.add_items(quire, "kb", [PathInput(write_tree(tmp_path / "copy", {"alpha.txt": FILES["alpha.txt"]}))])
    drain(quire)
    assert len(counting.texts_seen) == seen


def test_cli_items_stale_and_reindex_stale(quire: Quire, tmp_path: Path, data_dir: Path) -> None:
    _indexed(quire, tmp_path)
    with quire.db.write() as conn:  # as an older parser stamped it
        conn.execute(text("UPDATE items SET parser_version = 'text-0' WHERE name = 'gamma.txt'"))
    listed = quire_cli("--json", "items", "kb", "--stale", data_dir=data_dir)
    assert listed.returncode == 0, listed.stderr
    assert [(i["name"], i["stale"]) for i in json.loads(listed.stdout)["items"]] == [("gamma.txt", True)]
    assert quire_cli("reindex", "kb", data_dir=data_dir).returncode == 2  # ids or --stale
    queued = quire_cli("--json", "reindex", "kb", "--stale", data_dir=data_dir)
    assert queued.returncode == 0, queued.stderr
    assert len(json.loads(queued.stdout)["job_ids"]) == 1
    drain(quire)
    assert _stale_names(quire) == set()
    assert _files(quire)["gamma.txt"].parser_version == PARSER_VERSIONS["text"]


def test_the_weights_digest_is_remembered_per_file_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A process reads the digest an earlier one remembered for the same files (names, sizes, mtimes) instead
    of hashing them again; a weights file changed in place is hashed anew."""
    import hashlib
    import os

    from knowledge.ingest.embedding import ModelSpec

    monkeypatch.setenv("QUIRE_CACHE_DIR", str(tmp_path / "cache"))
    weights = tmp_path / "model" / "model.safetensors"
    weights.parent.mkdir()
    weights.write_bytes(b"first weights")
    spec = ModelSpec("test-model", str(weights.parent), 8, weights=("model.safetensors",))
    hashed = hashlib.sha256(b"model.safetensors" + b"first weights").hexdigest()[:16]
    assert model_weights.weights_digest(spec) == hashed
    remembered = json.loads((tmp_path / "cache" / "weights-digests.json").read_text())
    assert list(remembered.values()) == [hashed]

    model_weights._digest.cache_clear()  # a new process: the remembered digest is read, the file not hashed
    (tmp_path / "cache" / "weights-digests.json").write_text(json.dumps(dict.fromkeys(remembered, "feedfacefeedface")))
    assert model_weights.weights_digest(spec) == "feedfacefeedface"

    model_weights._digest.cache_clear()
    weights.write_bytes(b"other weights")  # replaced in place: another size and mtime
    os.utime(weights, ns=(1, 1))
    rehashed = hashlib.sha256(b"model.safetensors" + b"other weights").hexdigest()[:16]
    assert model_weights.weights_digest(spec) == rehashed
    model_weights._digest.cache_clear()


def test_a_man_page_read_as_text_before_is_stale_and_reindex_renders_it(quire: Quire, tmp_path: Path) -> None:
    page = '.TH QUINCECTL 1 "2022" "orchard 2.1"\n.SH NAME\nquincectl \\- prune the \\fBmedlar\\fR orchards\n'
    make_base(quire, precision="fp32")
    operations.add_items(quire, "kb", [PathInput(write_tree(tmp_path / "man", {"quincectl.1": page}))])
    drain(quire)
    assert _files(quire)["quincectl.1"].parser == "roff" and _stale_names(quire) == set()
    with quire.db.write() as conn:  # as the text parser stamped it when it read man pages markup and all
        conn.execute(text("UPDATE items SET parser = 'text', parser_version = 'text-2' WHERE name = 'quincectl.1'"))
    assert _stale_names(quire) == {"quincectl.1"}
    _reindex_stale(quire)
    assert _files(quire)["quincectl.1"].parser == "roff" and _stale_names(quire) == set()
