"""One bounded HTTP POST for the remote embedder, and the rules an endpoint URL must meet.

Rules (an endpoint may be hostile or compromised; the key must stay with Quire):

* **No redirect is followed**: a 3xx reaches the caller as :class:`HttpAnswer` with its status; the request
  (and its ``Authorization`` header) never goes anywhere but the configured URL.
* **A total deadline per request**: ``timeout`` seconds from the start of the request to the last byte of its
  answer, not per socket read; when it passes, the connection is shut down (a server that trickles a byte a
  second cannot hold a worker).
* **A size cap**: at most ``max_bytes`` of answer are read (a declared larger ``Content-Length`` is refused
  before reading), and at most :data:`ERROR_BODY_BYTES` of an error answer.
* **Where a key may go**: an endpoint URL carries no user-info, query or fragment (they would be shown and
  exported with the base), and a key is sent over plain ``http://`` only to this computer (a loopback host,
  reached without a proxy).
"""

from __future__ import annotations

import contextlib
import functools
import http.client
import ipaddress
import os
import socket
import threading
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

from knowledge.errors import InvalidInput

ERROR_BODY_BYTES = 4096


def endpoint_problem(endpoint: str, *, sends_key: bool) -> str | None:
    """Why ``endpoint`` may not be used (a sentence for a person), or None when it may."""
    if any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in endpoint):
        return "the endpoint must not contain spaces or control characters"
    parts = urllib.parse.urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "the endpoint must be an http:// or https:// URL with a host"
    if "@" in parts.netloc:
        return "the endpoint must not carry a user name or password (use --api-key-env for a key)"
    if "?" in endpoint or "#" in endpoint:
        return "the endpoint must not carry a query string or fragment (use --api-key-env for a key)"
    try:
        parts.port  # noqa: B018 - raises on a port that is not a number in range
    except ValueError:
        return "the endpoint's port is not a valid port number"
    if sends_key and parts.scheme == "http" and not is_loopback(parts.hostname):
        return "an API key is sent only over https:// (plain http:// only to this computer: localhost, 127.0.0.1, ::1)"
    return None


def check_endpoint(endpoint: str, *, sends_key: bool) -> str:
    """``endpoint`` when it may be used, else :class:`InvalidInput` saying why."""
    problem = endpoint_problem(endpoint, sends_key=sends_key)
    if problem:
        raise InvalidInput(problem)
    return endpoint


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


# -- the request ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class HttpAnswer:
    """An answer that was not a 2xx: its status, ``Retry-After`` header and the start of its body."""

    status: int
    retry_after: str | None
    body: bytes


class TransportFailed(Exception):
    """No answer: the connection failed or dropped, or the total deadline passed (``timed_out``)."""

    def __init__(self, reason: str, *, timed_out: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.timed_out = timed_out


class AnswerTooLarge(Exception):
    """The answer is (or declares itself) larger than the cap."""


def post(url: str, body: bytes, headers: dict[str, str], *, timeout: float, max_bytes: int) -> bytes | HttpAnswer:
    """POST ``body`` to ``url``: the 2xx answer's bytes, or the non-2xx :class:`HttpAnswer` (3xx included)."""
    deadline = _Deadline(timeout)
    opener = _opener(url, deadline)
    request = urllib.request.Request(url, data=body, method="POST", headers=headers)
    try:
        with opener.open(request, timeout=timeout) as response:
            declared = response.headers.get("Content-Length")
            if declared is not None and declared.strip().isdigit() and int(declared) > max_bytes:
                raise AnswerTooLarge(f"the answer declares {int(declared)} bytes (at most {max_bytes} are read)")
            payload = response.read(max_bytes + 1)
        if deadline.expired:  # a read cut short by the deadline may look complete: never trust it
            raise TransportFailed("timed out", timed_out=True)
        if len(payload) > max_bytes:
            raise AnswerTooLarge(f"the answer is larger than {max_bytes} bytes")
        return bytes(payload)
    except urllib.error.HTTPError as exc:
        try:
            excerpt = exc.read(ERROR_BODY_BYTES) if exc.fp is not None else b""
        except (OSError, http.client.HTTPException):
            excerpt = b""
        finally:
            exc.close()
        return HttpAnswer(exc.code, exc.headers.get("Retry-After") if exc.headers else None, excerpt)
    except TimeoutError:
        raise TransportFailed("timed out", timed_out=True) from None
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
        if deadline.expired or isinstance(getattr(exc, "reason", None), TimeoutError):
            raise TransportFailed("timed out", timed_out=True) from None
        raise TransportFailed(f"connection failed ({type(exc).__name__})") from None
    finally:
        deadline.cancel()


def _opener(url: str, deadline: _Deadline) -> urllib.request.OpenerDirector:
    handlers: list[Any] = [_RefuseRedirects(), _DeadlineHTTPHandler(deadline), _DeadlineHTTPSHandler(deadline)]
    if is_loopback(urllib.parse.urlsplit(url).hostname or ""):
        handlers.append(urllib.request.ProxyHandler({}))  # this computer is reached directly, never via a proxy
    return urllib.request.build_opener(*handlers)


class _RefuseRedirects(urllib.request.HTTPRedirectHandler):
    """Follows nothing: the 3xx is raised as an ``HTTPError`` and answered as such."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class _Deadline:
    """Shuts down every connection of one request when ``seconds`` have passed since it started.

    It keeps a duplicate descriptor of each socket as it is created: ``shutdown`` through the duplicate ends
    the shared connection even after TLS has wrapped (and detached) the original, so a proxy tunnel or a TLS
    handshake that trickles is cut too. The duplicates are closed when the request ends."""

    def __init__(self, seconds: float) -> None:
        self.expired = False
        self._twins: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True
        self._timer.start()

    def watch(self, sock: socket.socket) -> None:
        twin = socket.socket(fileno=os.dup(sock.fileno()))
        with self._lock:
            self._twins.append(twin)
            if self.expired:
                _shut(twin)

    def cancel(self) -> None:
        self._timer.cancel()
        with self._lock:
            for twin in self._twins:
                twin.close()
            self._twins.clear()

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for twin in self._twins:
                _shut(twin)


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # the peer already hung up
        sock.shutdown(socket.SHUT_RDWR)  # wakes a read blocked in another thread


class _WatchedConnection(http.client.HTTPConnection):
    """Hands each socket it creates to the request's deadline before anything is sent or read on it."""

    def __init__(self, *args: Any, deadline: _Deadline, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline = deadline
        self._create_connection = self._create_watched

    def _create_watched(
        self, address: tuple[str, int], timeout: float | None = None, source_address: Any = None
    ) -> socket.socket:
        sock = socket.create_connection(address, timeout, source_address)
        self._deadline.watch(sock)
        return sock


class _WatchedHTTPSConnection(_WatchedConnection, http.client.HTTPSConnection):
    pass


class _DeadlineHTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, deadline: _Deadline) -> None:
        super().__init__()
        self._deadline = deadline

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(functools.partial(_WatchedConnection, deadline=self._deadline), req)


class _DeadlineHTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, deadline: _Deadline) -> None:
        super().__init__()
        self._deadline = deadline

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(functools.partial(_WatchedHTTPSConnection, deadline=self._deadline), req)
