"""A remote embedding provider: an OpenAI-compatible ``POST {endpoint}/v1/embeddings`` with bounded calls.

What Ollama, LM Studio, llama.cpp's server and vLLM offer. A base created with ``--embedder http``
stores its endpoint, the remote model's name, the dimension, the *name* of the environment variable
holding the API key (never the key) and the call settings below (``bases.embedder``, JSON).

Contract of every call (an external call is bounded in time, tries and bytes, and fails readably):

* **Timeout**: each HTTP request has ``timeout`` seconds in all, from connecting to the last byte of the
  answer (a total deadline, not per socket read), and reads at most :meth:`RemoteConfig.max_answer_bytes`.
* **Bounded retries** on 408, 429, 500/502/503/504, timeouts and connection errors: at most ``max_retries``
  more tries, waiting ``Retry-After`` when the server sends it (capped at ``backoff_max``), else exponential
  backoff with full jitter (a random wait in ``[0, min(backoff_max, backoff_base * 2**n)]``). When the tries
  are spent, :class:`EmbedderUnavailable` (code ``embedder_unavailable``): the index job fails those items
  with it and a reindex tries them again; it is never narrowed to items (the endpoint is down, not a text).
* **A refusal of the texts** (400, 413, 422) is :class:`EmbeddingRejected` (``embedding_rejected``, with the
  status and a short cleaned excerpt of the server's message): not retried; the index job and folder runs
  bisect the batch (``ingest.narrowing.embed_narrowed``) so only the refused item fails.
* **Everything else fails the request at once** as ``embedder_unavailable``: a redirect (never followed, so
  the key goes nowhere else), 401/403 (the key), other 4xx, an answer that is too large, not JSON, the wrong
  number of vectors, the wrong length, or not finite (NaN, Inf) or zero.
* **Rate limit and concurrency cap**, per endpoint across every process of the store: ``rate_per_second``
  (burst ``burst``) and at most ``max_concurrency`` requests in flight, however many workers, searches and
  commands call it (``knowledge.ingest.remote_turns``). A turn is held only around the request itself, never
  while backing off.
* **No call inside a transaction**: the caller passes a check (``Quire`` passes "no write transaction is
  open on this thread"); a call made inside one raises instead of holding SQLite's lock over the network.
* **The key** is read from the environment at call time, sent as a bearer token, never stored or logged,
  and sent only where :func:`knowledge.ingest.remote_http.endpoint_problem` allows (checked when the base is
  created and again before every request); a server's message that echoes it is redacted.

Vectors come back L2-normalised (the index compares unit vectors), in input order.
"""

from __future__ import annotations

import email.utils
import hashlib
import json
import logging
import os
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from knowledge.errors import InvalidInput, KnowledgeError
from knowledge.ingest import remote_http, remote_turns

if TYPE_CHECKING:
    from knowledge.store.endpoint_turns import Allowance

log = logging.getLogger(__name__)

Vectors = npt.NDArray[np.float32]
KIND = "http"
RETRYABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504})
REFUSED_INPUT_STATUS = frozenset({400, 413, 422})  # the texts were refused: narrowed to their item
MAX_PROBE_DIMENSION = 8192
_BYTES_PER_NUMBER = 32  # a JSON float with its separator ("-1.2345678901234567e-05, " is 25)
_BYTES_PER_VECTOR = 256  # its object around it
_BYTES_PER_ANSWER = 64 * 1024  # the envelope (model name, usage)
_DETAIL_CHARS = 160
_HOLD_MARGIN = 5.0  # seconds past a request's own deadline before its turn counts as a dead holder's


class EmbedderUnavailable(KnowledgeError):
    """The endpoint did not answer usefully: down, misconfigured or answering nonsense. Never an item's fault."""

    code = "embedder_unavailable"


class EmbeddingRejected(KnowledgeError):
    """The endpoint refused the texts of a request (400, 413, 422): some item's fault, found by bisection."""

    code = "embedding_rejected"

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"the embedding endpoint refused the text (HTTP {status}{': ' + detail if detail else ''})")
        self.status = status


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

    def max_answer_bytes(self, count: int) -> int:
        """The most an answer for ``count`` texts may weigh (a probe allows the longest dimension)."""
        numbers = self.dimension if self.dimension > 0 else MAX_PROBE_DIMENSION
        return _BYTES_PER_ANSWER + count * (_BYTES_PER_VECTOR + numbers * _BYTES_PER_NUMBER)

    @property
    def allowance(self) -> Allowance:
        """The endpoint's rate, burst and cap; a request holds its turn for its deadline and a margin at most."""
        from knowledge.store.endpoint_turns import Allowance  # imported here: a search process loads no SQL layer

        s = self.settings
        return Allowance(self.url, s.rate_per_second, s.burst, s.max_concurrency, s.timeout + _HOLD_MARGIN)

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


def validate_endpoint(endpoint: str, *, sends_key: bool = False) -> str:
    """``endpoint`` if a base may store it (see :func:`remote_http.endpoint_problem`), else InvalidInput."""
    return remote_http.check_endpoint(endpoint, sends_key=sends_key)


# -- the client ----------------------------------------------------------------------------------


class _Retryable(Exception):
    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


class EmbeddingClient:
    """Bounded calls to one endpoint (see the module docstring)."""

    def __init__(
        self,
        config: RemoteConfig,
        *,
        in_transaction: Callable[[], bool] = lambda: False,
        turn: remote_turns.TurnTaker = remote_turns.local_turn,
    ) -> None:
        self.config = config
        self.in_transaction = in_transaction
        self.turn = turn
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
        headers, key = self._headers()
        body = json.dumps({"model": self.config.model, "input": texts}).encode("utf-8")
        timeout, cap = self.config.settings.timeout, self.config.max_answer_bytes(len(texts))
        with self.turn(self.config.allowance):
            self.requests += 1
            try:
                answer = remote_http.post(self.config.url, body, headers, timeout=timeout, max_bytes=cap)
            except remote_http.TransportFailed as exc:
                raise _Retryable(exc.reason) from None
            except remote_http.AnswerTooLarge as exc:
                raise _unusable(str(exc)) from None
        if isinstance(answer, remote_http.HttpAnswer):
            raise _refusal(answer, key)
        return self._parse(answer, len(texts))

    def _headers(self) -> tuple[dict[str, str], str | None]:
        """The request's headers and the key in them; refused when the endpoint may not receive them."""
        name = self.config.api_key_env
        problem = remote_http.endpoint_problem(self.config.url, sends_key=bool(name))
        if problem:  # checked at create too; again here for a base whose stored endpoint was changed
            raise EmbedderUnavailable(f"the embedding endpoint is not used: {problem}")
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if not name:
            return headers, None
        key = os.environ.get(name)  # read at call time; never stored, never logged
        if not key:
            raise EmbedderUnavailable(f"the API key variable {name} is not set")
        headers["Authorization"] = f"Bearer {key}"
        return headers, key

    def _parse(self, payload: bytes, count: int) -> Vectors:
        try:
            data = json.loads(payload)["data"]
            indices = [int(d.get("index", n)) for n, d in enumerate(data)]
            ordered = [d for _, d in sorted(zip(indices, data, strict=True), key=lambda pair: pair[0])]
            with np.errstate(over="ignore"):  # 1e39 becomes inf in float32 and is refused below
                vectors = np.asarray([d["embedding"] for d in ordered], dtype=np.float32)
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
            raise _unusable(f"not an embeddings answer ({type(exc).__name__})") from None
        if sorted(indices) != list(range(len(indices))):
            raise _unusable("its vector indices are not 0..n-1")
        expected = self.config.dimension or (vectors.shape[1] if vectors.ndim == 2 else -1)  # 0: probing
        if vectors.ndim != 2 or vectors.shape != (count, expected) or expected < 1:
            got = f"{vectors.shape[0]}x{vectors.shape[1] if vectors.ndim == 2 else 0}"
            raise _unusable(f"{got} numbers for {count} texts of dimension {self.config.dimension or 'any'}")
        if expected > MAX_PROBE_DIMENSION:
            raise _unusable(f"vectors of {expected} numbers (at most {MAX_PROBE_DIMENSION})")
        if not np.isfinite(vectors).all():
            raise _unusable("a vector holds NaN or Inf")
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        if not (norms > 0).all() or not np.isfinite(norms).all():
            raise _unusable("a vector is zero or too large to normalise")
        result: Vectors = (vectors / norms).astype(np.float32)
        return result


def _unusable(reason: str) -> EmbedderUnavailable:
    """An answer that cannot be used: the endpoint's fault, not the texts' (never retried, never bisected)."""
    return EmbedderUnavailable(f"the embedding endpoint's answer is unusable: {reason}")


def _refusal(answer: remote_http.HttpAnswer, key: str | None) -> Exception:
    """What a non-2xx answer means: retry it, narrow it to an item, or give up on the endpoint."""
    status = answer.status
    if status in RETRYABLE_STATUS:
        return _Retryable(f"HTTP {status}", _retry_after(answer.retry_after))
    if status in REFUSED_INPUT_STATUS:
        return EmbeddingRejected(status, _detail(answer.body, key))
    if 300 <= status < 400:
        return EmbedderUnavailable(
            f"the embedding endpoint redirected the request (HTTP {status}); redirects are not followed "
            "(the key goes only to the configured endpoint): give the final URL"
        )
    if status in (401, 403):
        return EmbedderUnavailable(f"the embedding endpoint refused the key (HTTP {status})")
    return EmbedderUnavailable(f"the embedding endpoint refused the request (HTTP {status})")


def _detail(body: bytes, key: str | None) -> str:
    """A short, printable excerpt of a refusal's message, with the key (should the server echo it) removed."""
    text = body.decode("utf-8", "replace")
    try:
        parsed = json.loads(text)
        found = parsed.get("error", parsed) if isinstance(parsed, dict) else parsed
        if isinstance(found, dict):
            found = found.get("message") or found.get("detail") or ""
        text = found if isinstance(found, str) else ""
    except (ValueError, RecursionError):
        pass
    if key:
        text = text.replace(key, "[key]")
    text = " ".join("".join(ch if ch.isprintable() else " " for ch in text).split())
    return text if len(text) <= _DETAIL_CHARS else text[: _DETAIL_CHARS - 1] + "…"


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

    def __init__(
        self,
        config: RemoteConfig,
        *,
        in_transaction: Callable[[], bool] = lambda: False,
        turn: remote_turns.TurnTaker = remote_turns.local_turn,
    ) -> None:
        self.config = config
        self.client = EmbeddingClient(config, in_transaction=in_transaction, turn=turn)
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
    validate_endpoint(endpoint, sends_key=api_key_env is not None)
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
