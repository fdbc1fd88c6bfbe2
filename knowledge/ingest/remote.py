"""A remote embedding provider: an OpenAI-compatible ``POST {endpoint}/v1/embeddings`` with bounded calls.

What Ollama, LM Studio, llama.cpp's server and vLLM offer. A base created with ``--embedder http``
stores its endpoint, the remote model's name, the dimension, the *name* of the environment variable
holding the API key (never the key) and the call settings below (``bases.embedder``, JSON).

Contract of every call (seed 003's external-call rules):

* **Timeout**: each HTTP request has ``timeout`` seconds (connect and read).
* **Bounded retries** on 429, 5xx, timeouts and connection errors: at most ``max_retries`` more tries,
  waiting ``Retry-After`` when the server sends it (capped at ``backoff_max``), else exponential backoff
  with full jitter (a random wait in ``[0, min(backoff_max, backoff_base * 2**n)]``). Other 4xx answers
  are not retried. When the tries are spent, :class:`EmbedderUnavailable` (code ``embedder_unavailable``):
  the index job fails those items with it and a reindex tries them again.
* **Rate limit**: a token bucket per endpoint and process (``rate_per_second``, burst ``burst``).
* **Concurrency cap**: at most ``max_concurrency`` requests in flight per endpoint and process
  (a semaphore, held only around the request itself, never while backing off).
* **No call inside a transaction**: the caller passes a check (``Quire`` passes "no write transaction is
  open on this thread"); a call made inside one raises instead of holding SQLite's lock over the network.
* **The key** is read from the environment at call time, sent as a bearer token, never stored or logged.

Vectors come back L2-normalised (the index compares unit vectors), in input order.
"""

from __future__ import annotations

import contextlib
import email.utils
import hashlib
import http.client
import json
import logging
import os
import random
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from knowledge.errors import InvalidInput, KnowledgeError

log = logging.getLogger(__name__)

Vectors = npt.NDArray[np.float32]
KIND = "http"
RETRYABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504})


class EmbedderUnavailable(KnowledgeError):
    """The remote embedder did not answer usefully within the bounded retries."""

    code = "embedder_unavailable"


class CallInsideTransaction(AssertionError):
    """A remote call was attempted while a database write transaction is open on this thread."""


@dataclass(frozen=True)
class CallSettings:
    """How calls to the endpoint are bounded; the defaults suit a local server (Ollama, llama.cpp)."""

    timeout: float = 30.0
    max_retries: int = 4
    backoff_base: float = 0.5
    backoff_max: float = 30.0
    rate_per_second: float = 20.0
    burst: int = 20
    max_concurrency: int = 4
    batch_size: int = 64

    def validate(self) -> CallSettings:
        if self.timeout <= 0 or self.backoff_base < 0 or self.backoff_max < 0:
            raise InvalidInput("timeout must be positive and backoff times not negative")
        if not 0 <= self.max_retries <= 20:
            raise InvalidInput("max retries must be between 0 and 20")
        if self.rate_per_second <= 0 or self.burst < 1 or self.max_concurrency < 1 or self.batch_size < 1:
            raise InvalidInput("rate, burst, concurrency and batch size must be positive")
        return self


@dataclass(frozen=True)
class RemoteConfig:
    """What a base stores about its remote embedder (no secret: only the key's variable name)."""

    endpoint: str
    model: str
    dimension: int
    api_key_env: str | None = None
    settings: CallSettings = field(default_factory=CallSettings)

    @property
    def url(self) -> str:
        base = self.endpoint.rstrip("/")
        return (
            base
            if base.endswith("/embeddings")
            else (base + "/embeddings" if base.endswith("/v1") else base + "/v1/embeddings")
        )

    @property
    def fingerprint(self) -> str:
        where = hashlib.sha256(self.endpoint.encode("utf-8")).hexdigest()[:12]  # as Base.model_fingerprint
        return f"http:{self.model}:{self.dimension}:{where}"

    def as_json(self) -> dict[str, Any]:
        return {
            "kind": KIND,
            **{k: v for k, v in asdict(self).items() if k != "settings"},
            "settings": asdict(self.settings),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RemoteConfig:
        if data.get("kind") != KIND:
            raise InvalidInput(f"unknown embedder kind {data.get('kind')!r}")
        return cls(
            endpoint=str(data["endpoint"]),
            model=str(data["model"]),
            dimension=int(data["dimension"]),
            api_key_env=data.get("api_key_env"),
            settings=CallSettings(**data.get("settings", {})),
        )


def validate_endpoint(endpoint: str) -> str:
    if not endpoint.startswith(("http://", "https://")):
        raise InvalidInput("the endpoint must be an http:// or https:// URL")
    return endpoint


# -- rate limit and concurrency, shared per endpoint in the process ------------------------------


class TokenBucket:
    """``rate`` tokens a second, at most ``burst`` saved up; ``take`` waits for one."""

    def __init__(self, rate: float, burst: int) -> None:
        self.rate, self.burst = rate, float(burst)
        self._tokens = float(burst)
        self._at = time.monotonic()
        self._lock = threading.Lock()

    def take(self) -> None:
        while True:
            with self._lock:
                now = time.monotonic()
                self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
                self._at = now
                if self._tokens >= 1:
                    self._tokens -= 1
                    return
                wait = (1 - self._tokens) / self.rate
            time.sleep(wait)  # pacing a rate, not synchronisation


_LIMITS: dict[tuple[str, float, int, int], tuple[TokenBucket, threading.BoundedSemaphore]] = {}
_LIMITS_LOCK = threading.Lock()


def _limits(config: RemoteConfig) -> tuple[TokenBucket, threading.BoundedSemaphore]:
    s = config.settings
    key = (config.url, s.rate_per_second, s.burst, s.max_concurrency)
    with _LIMITS_LOCK:
        if key not in _LIMITS:
            _LIMITS[key] = (TokenBucket(s.rate_per_second, s.burst), threading.BoundedSemaphore(s.max_concurrency))
        return _LIMITS[key]


# -- the client ----------------------------------------------------------------------------------


class _Retryable(Exception):
    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


class EmbeddingClient:
    """Bounded calls to one endpoint (see the module docstring)."""

    def __init__(self, config: RemoteConfig, *, in_transaction: Callable[[], bool] = lambda: False) -> None:
        self.config = config
        self.in_transaction = in_transaction
        self.requests = 0  # HTTP requests sent (tries included)

    def embed(self, texts: Sequence[str]) -> Vectors:
        if self.in_transaction():
            raise CallInsideTransaction("a remote embedding call was attempted inside a database transaction")
        size = self.config.settings.batch_size
        parts = [self._embed_batch(list(texts[i : i + size])) for i in range(0, len(texts), size)]
        if not parts:
            return np.zeros((0, max(self.config.dimension, 0)), dtype=np.float32)
        return np.concatenate(parts).astype(np.float32, copy=False)

    def _embed_batch(self, texts: list[str]) -> Vectors:
        s = self.config.settings
        last = "no answer"
        for attempt in range(s.max_retries + 1):
            try:
                return self._call(texts)
            except _Retryable as exc:
                last = exc.reason
                if attempt == s.max_retries:
                    break
                delay = _backoff(s, attempt, exc.retry_after)
                log.info("embedder %s: %s; retrying in %.2fs", self.config.model, exc.reason, delay)
                time.sleep(delay)
        raise EmbedderUnavailable(
            f"the embedding endpoint did not answer after {s.max_retries + 1} tries ({last}); reindex to try again"
        )

    def _call(self, texts: list[str]) -> Vectors:
        bucket, slots = _limits(self.config)
        bucket.take()
        body = json.dumps({"model": self.config.model, "input": texts}).encode("utf-8")
        request = urllib.request.Request(self.config.url, data=body, method="POST", headers=self._headers())
        with _held(slots):
            self.requests += 1
            try:
                with urllib.request.urlopen(request, timeout=self.config.settings.timeout) as response:
                    payload = response.read()
            except urllib.error.HTTPError as exc:
                if exc.code in RETRYABLE_STATUS:
                    raise _Retryable(f"HTTP {exc.code}", _retry_after(exc.headers.get("Retry-After"))) from None
                raise EmbedderUnavailable(f"the embedding endpoint refused the request (HTTP {exc.code})") from None
            except TimeoutError:
                raise _Retryable("timed out") from None
            except (urllib.error.URLError, ConnectionError, http.client.HTTPException, OSError) as exc:
                raise _Retryable(f"connection failed ({type(exc).__name__})") from None
        return self._parse(payload, len(texts))

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        name = self.config.api_key_env
        if name:
            key = os.environ.get(name)  # read at call time; never stored, never logged
            if not key:
                raise EmbedderUnavailable(f"the API key variable {name} is not set")
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def _parse(self, payload: bytes, count: int) -> Vectors:
        try:
            data = json.loads(payload)["data"]
            ordered = sorted(data, key=lambda d: int(d.get("index", 0)))
            vectors = np.asarray([d["embedding"] for d in ordered], dtype=np.float32)
        except (ValueError, KeyError, TypeError) as exc:
            raise _Retryable(f"malformed answer ({type(exc).__name__})") from None
        expected = self.config.dimension or (vectors.shape[1] if vectors.ndim == 2 else -1)  # 0: probing
        if vectors.ndim != 2 or vectors.shape != (count, expected) or expected < 1:
            raise EmbedderUnavailable(
                f"the endpoint answered {vectors.shape[0]}x{vectors.shape[1] if vectors.ndim == 2 else 0} "
                f"for {count} texts of dimension {self.config.dimension}"
            )
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        result: Vectors = (vectors / np.maximum(norms, np.float32(1e-12))).astype(np.float32)
        return result


@contextlib.contextmanager
def _held(slots: threading.BoundedSemaphore) -> Iterator[None]:
    slots.acquire()
    try:
        yield
    finally:
        slots.release()


def _backoff(s: CallSettings, attempt: int, retry_after: float | None) -> float:
    if retry_after is not None:
        return min(max(retry_after, 0.0), s.backoff_max)
    return random.uniform(0.0, min(s.backoff_max, s.backoff_base * (2**attempt)))


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value) if value else None
        return None if parsed is None else max(0.0, parsed.timestamp() - time.time())


# -- the encoder face --------------------------------------------------------------------------


class RemoteEncoder:
    """The ``Encoder`` interface (encode_documents, encode_query, fingerprint, dimension) over the client."""

    def __init__(self, config: RemoteConfig, *, in_transaction: Callable[[], bool] = lambda: False) -> None:
        self.config = config
        self.client = EmbeddingClient(config, in_transaction=in_transaction)
        self.calls = 0
        self.encoded_texts = 0
        self.truncated_texts = 0
        self.precision = "fp32"

    @property
    def fingerprint(self) -> str:
        return self.config.fingerprint

    @property
    def dimension(self) -> int:
        return self.config.dimension

    def encode_documents(self, texts: Sequence[str]) -> Vectors:
        self.calls += 1
        self.encoded_texts += len(texts)
        return self.client.embed(texts)

    def encode_query(self, text: str) -> npt.NDArray[np.float32]:
        vector: npt.NDArray[np.float32] = self.client.embed([text])[0]
        return vector


def probe_dimension(config: RemoteConfig) -> RemoteConfig:
    """Ask the endpoint once (bounded like every call, outside any transaction) how long its vectors are."""
    vectors = EmbeddingClient(replace(config, dimension=0)).embed(["dimension probe"])
    return replace(config, dimension=int(vectors.shape[1]))


def remote_embedder_config(
    endpoint: str,
    model: str,
    *,
    dimensions: int | None = None,
    api_key_env: str | None = None,
    settings: CallSettings | None = None,
) -> RemoteConfig:
    """A checked config for a new base; without ``dimensions`` the endpoint is asked once (bounded)."""
    validate_endpoint(endpoint)
    if not model.strip():
        raise InvalidInput("a remote embedder needs a model name")
    if api_key_env is not None and not api_key_env.replace("_", "").isalnum():
        raise InvalidInput("--api-key-env takes the NAME of an environment variable, not the key")
    if dimensions is not None and not 1 <= dimensions <= 8192:
        raise InvalidInput("dimensions must be between 1 and 8192")
    config = RemoteConfig(
        endpoint, model.strip(), dimensions or 0, api_key_env, (settings or CallSettings()).validate()
    )
    return config if dimensions else probe_dimension(config)
