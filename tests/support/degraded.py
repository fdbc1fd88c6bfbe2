"""A data directory holding a base that embeds through a real HTTP endpoint on 127.0.0.1 (the test's
:class:`~tests.support.embedding_server.EmbeddingServer`), its documents indexed: stop the server, or make it
answer 503, and the base's meaning search is unavailable while its keyword index still answers."""

from __future__ import annotations

from pathlib import Path

from knowledge.compose import open_quire
from knowledge.ingest.remote import CallSettings, RemoteConfig
from knowledge.library import bases
from knowledge.lifecycle import operations
from tests.knowledge.helpers import drain, statuses
from tests.support.embedding_server import EmbeddingServer
from tests.support.files import write_tree

DOCS = {
    "astronomy.txt": "The telescope mount needs a counterweight to track the stars at night.\n",
    "cooking.txt": "Knead the bread dough for ten minutes, then let it rise in a warm kitchen.\n",
    "sailing.txt": "Reef the mainsail before the squall reaches the harbor entrance.\n",
}


def remote_base_data_dir(data_dir: Path, server: EmbeddingServer, folder: Path, name: str = "remote") -> int:
    """``DOCS`` written under ``folder`` and indexed in a new base ``name`` of ``data_dir`` that embeds through
    ``server`` (no retries: a stopped endpoint fails a query at once); returns the base's id."""
    config = RemoteConfig(server.url, "hash", 384, None, CallSettings(timeout=30, max_retries=0))
    quire = open_quire(data_dir)
    try:
        base = bases.create_base(
            quire.db, name, model_id="all-MiniLM-L6-v2", dimension=384, precision="fp32", embedder=config.as_json()
        )
        operations.add_items(quire, base.id, [operations.PathInput(write_tree(folder, DOCS))])
        drain(quire)
        assert set(statuses(quire, base.id).values()) == {"completed"}
        return base.id
    finally:
        quire.close()
