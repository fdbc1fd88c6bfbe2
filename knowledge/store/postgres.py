"""A team store: the same ``Database`` door onto PostgreSQL (psycopg 3 under SQLAlchemy), chosen by URL.

A data location is a directory (SQLite, the default, untouched by any of this) or a ``postgresql://`` URL
(:func:`is_store_url`). Only this module and the per-engine statement sets import or name PostgreSQL.

Transactions keep SQLite's semantics exactly:

* ``write()`` takes the store's one write lock first — a transaction-scoped advisory lock,
  ``pg_advisory_xact_lock`` — then runs at READ COMMITTED, so each statement sees everything committed before
  the lock was granted: a read-check-write never fails half-way, and every check made inside it still holds
  at commit, as with ``BEGIN IMMEDIATE``. Writers queue on the lock; readers never wait for it. (Finer row
  locks, for writers that touch disjoint rows, are a later step measured against this one.)
* ``read()`` is REPEATABLE READ: one snapshot for all its queries, never blocking writers, like a deferred
  ``BEGIN`` in WAL mode.
* Nested writes are savepoints and after-commit hooks run after the commit, unchanged (``Database``).

Credentials: the URL's password is used only to connect to the host the URL names; :func:`redacted` is how
a URL is ever shown or logged.
"""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path
from typing import ClassVar
from urllib.parse import unquote, urlsplit, urlunsplit

from sqlalchemy import Connection, create_engine
from sqlalchemy.pool import QueuePool

from knowledge.errors import Forbidden, InvalidInput, KnowledgeError, NotFound, StoreError
from knowledge.store.database import Database

SCHEMES = ("postgresql", "postgres", "postgresql+psycopg")
# pg_advisory_xact_lock's key: the store's one write lock (any fixed 64-bit number; "QUIRE" in ASCII)
WRITE_LOCK_KEY = 0x5155495245


def is_store_url(value: str) -> bool:
    """Whether a data location names a team store (a PostgreSQL URL) rather than a directory."""
    return urlsplit(value).scheme.lower() in SCHEMES


# query parameters that carry a secret in a libpq or Redis URL (``?password=…`` works in both), or a path to one
SECRET_PARAMETERS = frozenset(
    {"password", "passwd", "pass", "pwd", "sslpassword", "ssl_password", "passfile", "sslkey", "secret", "token", "key"}
)


def redacted(url: str) -> str:
    """The URL without its password, in its user part or its query: the only form a store or queue URL is ever
    printed, logged or stored in. A URL too malformed to take apart keeps only its scheme."""
    url = _libpq_userinfo_redacted(url)
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return f"{url.split(':', 1)[0][:20]}://(unreadable URL, not shown)"
    netloc = parts.netloc
    if parts.password is not None:
        netloc = f"{parts.username or ''}:***@{parts.hostname or ''}" + (f":{port}" if port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, _redacted_query(parts.query), parts.fragment))


def _libpq_userinfo_redacted(url: str) -> str:
    """libpq takes the user part up to the first ``@`` before any ``/``, so a password holding an unescaped ``?``
    or ``#`` (``alice:12?3#4@db``) is all password to it, where :func:`urlsplit` would cut it and show the rest."""
    scheme, sep, rest = url.partition("://")
    at, slash = rest.find("@"), rest.find("/")
    userinfo = rest[:at] if at != -1 and (slash == -1 or at < slash) else ""
    if not sep or ":" not in userinfo or not any(c in userinfo for c in "?#"):
        return url
    return f"{scheme}://{userinfo.split(':', 1)[0]}:***{rest[at:]}"


def secrets_of(url: str) -> set[str]:
    """Every secret ``url`` carries (its password, the values of its secret parameters), as written and
    percent-decoded: what must be taken out of any message that might echo them."""
    found: set[str] = set()
    rest = url.partition("://")[2]
    at, slash = rest.find("@"), rest.find("/")
    if at != -1 and (slash == -1 or at < slash) and ":" in rest[:at]:  # libpq's reading of the user part
        found.add(rest[:at].split(":", 1)[1])
    with contextlib.suppress(ValueError):  # and Python's (redis-py reads URLs with urllib)
        found.add(urlsplit(url).password or "")
    for pair in urlsplit(url).query.split("&") if "?" in url else ():
        name, sep, value = pair.partition("=")
        if sep and value and unquote(name).strip().lower() in SECRET_PARAMETERS:
            found.add(value)
    return {form for secret in found for form in (secret, unquote(secret)) if form}


def scrubbed(text: str, url: str) -> str:
    """``text`` (a driver's or server's message) with every secret of ``url`` replaced by ``***``."""
    for secret in sorted(secrets_of(url), key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def _redacted_query(query: str) -> str:
    """``query`` with the value of every secret parameter replaced by ``***`` (the rest kept byte for byte)."""
    if not query:
        return query
    pairs = []
    for pair in query.split("&"):
        name, sep, _value = pair.partition("=")
        secret = unquote(name).strip().lower() in SECRET_PARAMETERS
        pairs.append(f"{name}{sep}***" if secret and sep else pair)
    return "&".join(pairs)


def sqlalchemy_url(url: str) -> str:
    """The URL SQLAlchemy needs for psycopg 3; refuses anything that is not a PostgreSQL URL."""
    parts = urlsplit(url)
    if parts.scheme.lower() not in SCHEMES:
        raise InvalidInput(f"not a PostgreSQL URL: {redacted(url)}")
    if not parts.path.strip("/"):
        raise InvalidInput(f"the store URL names no database: {redacted(url)}")
    return urlunsplit(("postgresql+psycopg", parts.netloc, parts.path, parts.query, parts.fragment))


# what the server said about a refused connection, read from psycopg's message (it carries no SQLSTATE)
_REFUSALS = ("password authentication failed", "no pg_hba.conf entry", "role ", "permission denied")


def connection_problem(exc: BaseException, url: str) -> KnowledgeError:
    """A failed connection as one of ours: refused (exit 5), no such database (3) or unreachable (1).

    The message names the store redacted and carries the server's own sentence, with the password removed
    should the driver ever echo it.
    """
    said = str(getattr(exc, "orig", None) or exc).strip()
    said = said.split("FATAL:", 1)[1] if "FATAL:" in said else said.removeprefix("connection failed: ")
    said = " ".join(said.split())
    said = scrubbed(said, url)
    where = redacted(url)
    if any(marker in said for marker in _REFUSALS):
        return Forbidden(f"the team store {where} refused the connection: {said}")
    if "does not exist" in said and "database" in said:
        return NotFound(f"no database at {where}: {said}")
    return StoreError(f"cannot reach the team store {where}: {said}")


class PostgresDatabase(Database):
    """The team store's database: ``Database``'s transactions on PostgreSQL (see the module docstring)."""

    dialect_name: ClassVar[str] = "postgresql"
    shared_by_machines: ClassVar[bool] = True

    def __init__(self, url: str) -> None:
        self.url = url
        self.path = Path("/nonexistent/team-store")  # a team store has no file; nothing may open this
        self._local = threading.local()
        self.engine = create_engine(
            sqlalchemy_url(url),
            poolclass=QueuePool,
            pool_size=4,
            max_overflow=16,
            pool_pre_ping=True,
            pool_reset_on_return="rollback",
            connect_args={"connect_timeout": 15, "application_name": "quire"},
        )

    def __repr__(self) -> str:
        return f"PostgresDatabase({redacted(self.url)})"

    def connect_check(self) -> str:
        """Connect once and answer the server's version; a failure is one of ours (:func:`connection_problem`)."""
        from sqlalchemy.exc import DBAPIError

        try:
            with self.engine.connect() as conn:
                return str(conn.exec_driver_sql("SHOW server_version").scalar())
        except DBAPIError as exc:
            raise connection_problem(exc, self.url) from None

    def has_schema(self) -> bool:
        """Whether ``quire store init`` has created Quire's schema in this database."""
        with self.engine.connect() as conn:
            return conn.exec_driver_sql("SELECT to_regclass('schema_migrations') IS NOT NULL").scalar() is True

    def _begin_write(self, conn: Connection, *, store_lock: bool = True) -> None:
        conn.exec_driver_sql("SET TRANSACTION ISOLATION LEVEL READ COMMITTED")
        if store_lock:  # without it: a claim, whose FOR UPDATE SKIP LOCKED row lock is all it needs
            conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({WRITE_LOCK_KEY})")

    def _begin_read(self, conn: Connection) -> None:
        conn.exec_driver_sql("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")


def open_store(location: str | Path) -> Database:
    """The database a data location names: a PostgreSQL URL, or a directory's SQLite file."""
    if isinstance(location, str) and is_store_url(location):
        return PostgresDatabase(location)
    return Database.in_dir(Path(location))
