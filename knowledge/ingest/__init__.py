"""The ingest stages every path shares: walk a folder, read → parse → chunk → reuse or embed
(:mod:`knowledge.ingest.material`), and the embedding models. Nothing here imports torch until an encoder
is built."""

from knowledge.ingest.embedding import DEFAULT_MODEL_ID
from knowledge.ingest.models import MULTILINGUAL_MODEL_ID, chosen_encoder, is_multilingual, model_encoding, model_spec
from knowledge.ingest.parse_worker import PARSER_WARNINGS
from knowledge.ingest.query_process import out_of_process_queries
from knowledge.ingest.remote import (
    CallSettings,
    EmbedderUnavailable,
    EmbeddingRejected,
    RemoteConfig,
    remote_embedder_config,
)

__all__ = [
    "DEFAULT_MODEL_ID",
    "MULTILINGUAL_MODEL_ID",
    "PARSER_WARNINGS",
    "CallSettings",
    "EmbedderUnavailable",
    "EmbeddingRejected",
    "RemoteConfig",
    "chosen_encoder",
    "is_multilingual",
    "model_encoding",
    "model_spec",
    "out_of_process_queries",
    "remote_embedder_config",
]
