"""Embedding models Quire can use, by stable id. Only packaged, offline models: nothing is downloaded."""

from __future__ import annotations

from knowledge.errors import InvalidInput
from knowledge.ingest.embedding import DEFAULT_MODEL_ID, ModelSpec, bf16_supported, default_model_spec


def model_spec(model_id: str) -> ModelSpec:
    if model_id == DEFAULT_MODEL_ID:
        return default_model_spec()
    raise InvalidInput(f"unknown embedding model {model_id!r}; available: {DEFAULT_MODEL_ID}")


def default_precision() -> str:
    """bf16 where the CPU has it (measured: same retrieval quality, ~2.5x the throughput), else fp32."""
    return "bf16" if bf16_supported() else "fp32"
