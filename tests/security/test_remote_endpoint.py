"""A hostile or compromised embedding endpoint keeps neither the key nor a worker, and poisons nothing.

Real HTTP servers on 127.0.0.1 (``tests/support/embedding_server.py``) play the endpoint: one redirects to a
second that records every ``Authorization`` header it receives; others answer NaN, the wrong length or
count, trickle their answer, send too much, or refuse one text. ``base create`` refuses endpoints that
would carry a secret where it is shown or exported. The key never appears in a stored row, a file of the
data directory, a log line, ``base show``/``base list --json`` or an export.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from knowledge.ingest.remote import CallSettings, EmbedderUnavailable, RemoteConfig, RemoteEncoder
from knowledge.library import bases
from knowledge.library.index import vec_table
from knowledge.lifecycle import operations
from knowledge.runtime import Quire
from tests.conftest import quire_cli, wait_until
from tests.knowledge.helpers import drain
from tests.support.embedding_server import EmbeddingServer, HashVectors, RawTrickleServer
from tests.support.files import write_tree

KEY = "quire-security-key-5f1d2c9e8b7a40"
KEY_VAR = "QUIRE_SECURITY_TEST_KEY"


@pytest.fixture
def endpoint() -> Iterator[EmbeddingServer]:
    server = EmbeddingServer(HashVectors(384))
    yield server
    server.close()


@pytest.fixture
def elsewhere() -> Iterator[EmbeddingServer]:
    """Where a hostile endpoint would send the request: it records every header it receives."""
    server = EmbeddingServer(HashVectors(384))
    yield server
    server.close()


@pytest.fixture(autouse=True)
def key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(KEY_VAR, KEY)  # CLI children inherit it
    return KEY


def _config(url: str, **settings: Any) -> RemoteConfig:
    defaults: dict[str, Any] = {"timeout": 60, "max_retries": 2, "backoff_base": 0.01, "backoff_max": 0.05}
    return RemoteConfig(url, "m", 384, KEY_VAR, CallSettings(**{**defaults, **settings}))


def _cli(*args: str, data_dir: Path) -> tuple[int, Any, str]:
    """Exit code, parsed JSON output, and everything the command printed (to look for the key in)."""
    done = quire_cli("--json", *args, data_dir=data_dir)
    printed = done.stdout + done.stderr
    assert KEY not in printed
    return done.returncode, json.loads(done.stdout) if done.stdout.strip() else None, printed


def _nothing_holds_the_key(data_dir: Path) -> None:
    """No file of the data directory (database, WAL, blobs, logs) holds the key's bytes."""
    for path in data_dir.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path.name


# -- redirects -----------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_is_never_followed_so_the_key_goes_nowhere_else(
    endpoint: EmbeddingServer, elsewhere: EmbeddingServer, status: int
) -> None:
    endpoint.behaviour.mode, endpoint.behaviour.status = "redirect", status
    endpoint.behaviour.redirect_to = elsewhere.url + "/v1/embeddings"
    client = RemoteEncoder(_config(endpoint.url))
    with pytest.raises(EmbedderUnavailable, match=rf"redirected the request \(HTTP {status}\)") as raised:
        client.encode_documents(["where does this go"])
    assert raised.value.code == "embedder_unavailable" and KEY not in str(raised.value)
    assert endpoint.behaviour.auth_seen == [f"Bearer {KEY}"]  # the configured endpoint, once, not retried
    assert elsewhere.behaviour.requests == 0 and elsewhere.behaviour.auth_seen == []


def test_base_create_against_a_redirecting_endpoint_stores_nothing(
    endpoint: EmbeddingServer, elsewhere: EmbeddingServer, data_dir: Path
) -> None:
    endpoint.behaviour.mode, endpoint.behaviour.status = "redirect", 302
    endpoint.behaviour.redirect_to = elsewhere.url + "/v1/embeddings"
    code, out, _ = _cli(
        "base", "create", "r", "--embedder", "http", "--endpoint", endpoint.url, "--model", "m",
        "--api-key-env", KEY_VAR, data_dir=data_dir,
    )  # fmt: skip
    assert code == 1 and out["error"]["code"] == "embedder_unavailable" and "redirected" in out["error"]["message"]
    assert elsewhere.behaviour.auth_seen == []
    assert _cli("base", "list", data_dir=data_dir)[1]["bases"] == []


# -- answers that cannot be used ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("nan", "a vector holds NaN or Inf"),
        ("wronglen", "1x383 numbers for 1 texts of dimension 384"),
        ("wrongcount", "0x0 numbers for 1 texts"),
    ],
)
def test_a_poisoned_answer_fails_the_request_and_is_not_retried(
    endpoint: EmbeddingServer, mode: str, expected: str
) -> None:
    endpoint.behaviour.mode = mode
    with pytest.raises(EmbedderUnavailable, match=expected):
        RemoteEncoder(_config(endpoint.url)).encode_documents(["poison"])
    assert endpoint.behaviour.requests == 1


def test_a_nan_endpoint_writes_no_vector(quire: Quire, endpoint: EmbeddingServer, tmp_path: Path) -> None:
    endpoint.behaviour.mode = "nan"
    base = bases.create_base(
        quire.db, "nan", model_id="all-MiniLM-L6-v2", dimension=384, precision="fp32",
        embedder=_config(endpoint.url).as_json(),
    )  # fmt: skip
    folder = write_tree(tmp_path / "d", {"a.txt": "Tide tables for the harbor.\n", "b.txt": "Quartz and feldspar.\n"})
    operations.add_items(quire, base.id, [operations.PathInput(folder)])
    drain(quire)
    with quire.db.read() as conn:
        rows = conn.execute(text("SELECT status, error_code FROM items WHERE type = 'file'")).all()
        vectors = conn.execute(text(f"SELECT count(*) FROM {vec_table(base.id)}")).scalar_one()
    assert {tuple(r) for r in rows} == {("failed", "embedder_unavailable")} and vectors == 0
    assert endpoint.behaviour.requests == 1  # neither retried nor bisected


def test_a_trickling_endpoint_is_cut_at_the_total_deadline(endpoint: EmbeddingServer) -> None:
    """Every read gets a few bytes well inside the 1 s timeout, so only a deadline for the whole request ends
    it; unbounded, the whole (valid) answer would arrive after about 25 s and the call would succeed."""
    endpoint.behaviour.mode = "trickle"
    endpoint.behaviour.trickle_bytes, endpoint.behaviour.trickle_interval = 16, 0.05
    client = RemoteEncoder(_config(endpoint.url, timeout=1.0, max_retries=0))
    with pytest.raises(EmbedderUnavailable, match=r"after 1 tries \(timed out\)"):
        client.encode_documents(["drip"])
    wait_until(lambda: endpoint.behaviour.hung_up == 1)  # the client closed the connection mid-answer


def test_a_trickling_tls_handshake_is_cut_at_the_total_deadline() -> None:
    """A TLS record header announcing 2,000 bytes, then a byte every 10 ms: unbounded, the handshake would
    wait 20 s for garbage. It ends with the request's 1 s (the deadline watches the socket from its
    creation; Python's own TLS handshake timeout bounds it as well)."""
    server = RawTrickleServer(b"\x16\x03\x03\x07\xd0" + b"\x00" * 2000, interval=0.01)
    try:
        client = RemoteEncoder(_config(f"https://127.0.0.1:{server.port}", timeout=1.0, max_retries=0))
        with pytest.raises(EmbedderUnavailable, match=r"after 1 tries \(timed out\)"):
            client.encode_documents(["handshake"])
        wait_until(lambda: server.hung_up == 1)
    finally:
        server.close()


@pytest.mark.parametrize(
    ("mode", "expected"), [("oversize_declared", "the answer declares"), ("oversize_stream", "larger than")]
)
def test_an_oversized_answer_is_refused_after_reading_at_most_the_cap(
    endpoint: EmbeddingServer, mode: str, expected: str
) -> None:
    endpoint.behaviour.mode = mode
    config = _config(endpoint.url)
    with pytest.raises(EmbedderUnavailable, match=expected) as raised:
        RemoteEncoder(config).encode_documents(["flood"])
    assert str(config.max_answer_bytes(1)) in str(raised.value)
    assert endpoint.behaviour.requests == 1
    if mode == "oversize_stream":  # the server was still sending when the client stopped reading
        wait_until(lambda: endpoint.behaviour.hung_up == 1)


# -- endpoints that would carry a secret or send the key in clear ----------------------------------


@pytest.mark.parametrize(
    ("where", "with_key", "expected"),
    [
        ("http://admin:hunter2-secret@127.0.0.1:{port}", False, "must not carry a user name or password"),
        ("http://127.0.0.1:{port}/v1?api_key=hunter2-secret", False, "must not carry a query string"),
        ("http://127.0.0.1:{port}/v1#hunter2-secret", False, "must not carry a query string or fragment"),
        ("http://192.0.2.10:{port}", True, "an API key is sent only over https://"),
        ("http://embed.example.test:{port}/v1", True, "an API key is sent only over https://"),
    ],
)
def test_base_create_refuses_an_endpoint_that_would_leak_a_secret(
    endpoint: EmbeddingServer, data_dir: Path, where: str, with_key: bool, expected: str
) -> None:
    url = where.format(port=endpoint.url.rsplit(":", 1)[1])
    key_args = ["--api-key-env", KEY_VAR] if with_key else []
    code, out, printed = _cli(
        "base", "create", "leaky", "--embedder", "http", "--endpoint", url, "--model", "m", *key_args,
        data_dir=data_dir,
    )  # fmt: skip
    assert code == 2 and out["error"]["code"] == "invalid_input" and expected in out["error"]["message"]
    assert "hunter2" not in printed and endpoint.behaviour.requests == 0  # refused before any call
    assert _cli("base", "list", data_dir=data_dir)[1]["bases"] == []
    for path in data_dir.rglob("*"):
        if path.is_file():
            assert b"hunter2" not in path.read_bytes()


def test_base_create_allows_a_key_over_https_or_to_this_computer(data_dir: Path) -> None:
    for name, url, key_args in [
        ("hosted", "https://embed.example.test/v1", ["--api-key-env", KEY_VAR]),
        ("local", "http://localhost:11434", ["--api-key-env", KEY_VAR]),
        ("lan-no-key", "http://192.0.2.10:8080", []),
    ]:  # --dimensions: nothing is asked of these hosts
        code, out, _ = _cli(
            "base", "create", name, "--embedder", "http", "--endpoint", url, "--model", "m", "--dimensions", "8",
            *key_args, data_dir=data_dir,
        )  # fmt: skip
        assert code == 0 and out["embedder"]["endpoint"] == url, out


@pytest.mark.parametrize(
    "where", ["http://admin:pw@127.0.0.1:{port}", "http://127.0.0.1:{port}/v1?k=v", "http://192.0.2.10:{port}"]
)
def test_a_stored_endpoint_is_checked_again_before_every_call(
    quire: Quire, endpoint: EmbeddingServer, where: str
) -> None:
    """A base row written without ``base create``'s check (an older version, an edited database) still
    never sends the key where it may not go: the client refuses before opening a connection."""
    url = where.format(port=endpoint.url.rsplit(":", 1)[1])
    base = bases.create_base(
        quire.db, "stored", model_id="all-MiniLM-L6-v2", dimension=384, precision="fp32",
        embedder=_config(url).as_json(),
    )  # fmt: skip
    encoder = quire.document_encoder(base)
    with pytest.raises(EmbedderUnavailable, match="the embedding endpoint is not used: ") as raised:
        encoder.encode_documents(["x"])
    assert "did not answer" not in str(raised.value)  # no connection was tried (192.0.2.10 answers nobody)
    assert isinstance(encoder, RemoteEncoder) and encoder.client.requests == 0
    assert endpoint.behaviour.requests == 0


# -- a refused text fails its own item, through `quire add` and through a folder run ----------------


def test_a_text_refused_by_the_endpoint_fails_only_its_item_and_the_key_stays_private(
    endpoint: EmbeddingServer, data_dir: Path, tmp_path: Path
) -> None:
    endpoint.behaviour.require_key = KEY
    endpoint.behaviour.refuse_marker, endpoint.behaviour.status = "FORBIDDEN-PHRASE", 400
    endpoint.behaviour.status_body = json.dumps(
        {"error": {"message": f"input has FORBIDDEN-PHRASE (request signed with {KEY})", "type": "invalid"}}
    ).encode()  # a hostile server echoes the key back: it must be redacted before anything is stored
    folder = write_tree(
        tmp_path / "docs",
        {
            "a.txt": "Charts of the northern coast and its lighthouses.\n",
            "b.txt": "This note holds the FORBIDDEN-PHRASE the endpoint will not embed.\n",
            "c.txt": "Sourdough starter needs feeding twice a day.\n",
            "d.txt": "The orchard's pear trees flower in April.\n",
        },
    )
    create = ["--embedder", "http", "--endpoint", endpoint.url, "--model", "m", "--api-key-env", KEY_VAR]
    assert _cli("base", "create", "kb", *create, data_dir=data_dir)[0] == 0  # asks the dimension: one request
    assert _cli("add", "kb", str(folder), data_dir=data_dir)[0] == 0
    assert _cli("worker", "--until-idle", data_dir=data_dir)[0] == 0
    items = _cli("items", "kb", data_dir=data_dir)[1]["items"]
    by_name = {i["name"]: (i["status"], i["error_code"], i["error_message"]) for i in items if i["type"] == "file"}
    assert by_name.pop("b.txt") == (
        "failed",
        "embedding_rejected",
        "the embedding endpoint refused the text (HTTP 400: input has FORBIDDEN-PHRASE (request signed with [key]))",
    )
    assert set(by_name.values()) == {("completed", None, None)}

    assert _cli("base", "create", "runs", *create, data_dir=data_dir)[0] == 0
    code, started, _ = _cli("run", "start", "runs", str(folder), "--key", "k1", data_dir=data_dir)
    assert code == 0
    assert _cli("worker", "--until-idle", data_dir=data_dir)[0] == 0
    shown = _cli("run", "show", str(started["run_id"]), data_dir=data_dir)[1]
    assert shown["status"] == "completed"  # the run went on past the refused source
    outcomes = {s["relative_path"]: (s["disposition"], s["reason"]) for s in shown["sources"]}
    assert outcomes.pop("b.txt") == (
        "rejected",
        "embedding_rejected: the embedding endpoint refused the text "
        "(HTTP 400: input has FORBIDDEN-PHRASE (request signed with [key]))",
    )
    assert {d for d, _ in outcomes.values()} == {"committed"}

    assert set(endpoint.behaviour.auth_seen) == {f"Bearer {KEY}"}  # the key was really sent, every time
    for args in (["base", "show", "kb"], ["base", "list"], ["base", "show", "runs"]):
        code, _, printed = _cli(*args, data_dir=data_dir)  # _cli asserts the key is not printed
        assert code == 0 and KEY_VAR in printed
    export = tmp_path / "kb.quirebase"
    assert _cli("base", "export", "kb", str(export), data_dir=data_dir)[0] == 0
    assert export.stat().st_size > 0 and KEY.encode() not in export.read_bytes()
    _nothing_holds_the_key(data_dir)
