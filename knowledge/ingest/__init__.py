"""The ingest stages every path shares: walk a folder, read → parse → chunk → reuse or embed
(:mod:`knowledge.ingest.material`), and the embedding models. Nothing here imports torch until an encoder
is built."""

from knowledge.ingest.embedding import DEFAULT_MODEL_ID
from knowledge.ingest.models import default_precision, model_spec

__all__ = ["DEFAULT_MODEL_ID", "default_precision", "model_spec"]
