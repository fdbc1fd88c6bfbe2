"""A password in a store or queue URL is never printed: in its user part (``user:pw@host``) or in its query
(``?password=pw``, which libpq and redis-py both accept), by ``doctor``, by an error, or anywhere else."""

from __future__ import annotations

from pathlib import Path

import pytest

from knowledge.store.postgres import connection_problem, redacted
from tests.conftest import quire_cli
from tests.support.servers import free_port

SECRET = "hunter2-in-the-url"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://alice:pw@db.example:5432/quire", "postgresql://alice:***@db.example:5432/quire"),
        ("postgresql://alice@db/quire?password=pw&sslmode=verify-full", "postgresql://alice@db/quire?password=***&sslmode=verify-full"),
        ("postgresql://db/quire?sslmode=require&PassWord=pw", "postgresql://db/quire?sslmode=require&PassWord=***"),
        ("postgresql://db/quire?sslpassword=pw&application_name=q", "postgresql://db/quire?sslpassword=***&application_name=q"),
        ("redis://:pw@127.0.0.1:6379/0", "redis://:***@127.0.0.1:6379/0"),
        ("rediss://127.0.0.1/0?password=pw", "rediss://127.0.0.1/0?password=***"),
        ("postgresql://db/quire?sslmode=require", "postgresql://db/quire?sslmode=require"),
        ("postgresql://alice:pw@db:notaport/quire", "postgresql://(unreadable URL, not shown)"),
        ("postgresql://db/quire?passfile=/home/alice/.pgpass", "postgresql://db/quire?passfile=***"),
        ("rediss://h/0?ssl_password=pw&pwd=pw", "rediss://h/0?ssl_password=***&pwd=***"),
        # libpq reads the user part up to its "@": an unescaped ? or # is password, not a query or a fragment
        ("postgresql://alice:1234#5@db/quire", "postgresql://alice:***@db/quire"),
        ("postgresql://alice:12?34@db/quire", "postgresql://alice:***@db/quire"),
        ("postgresql://db:5432/quire?user=a@b", "postgresql://db:5432/quire?user=a@b"),
    ],
)  # fmt: skip
def test_redacted_hides_every_place_a_password_goes(url: str, shown: str) -> None:
    assert redacted(url) == shown


def unreachable_port() -> int:
    return free_port()  # bound and released: nothing listens there


@pytest.mark.parametrize("command", [("doctor",), ("base", "list"), ("search", "kb", "anything")])
def test_a_store_url_with_a_password_parameter_is_never_printed(data_dir: Path, command: tuple[str, ...]) -> None:
    url = f"postgresql://alice@127.0.0.1:{unreachable_port()}/quire?password={SECRET}&connect_timeout=2"
    done = quire_cli("--store", url, *command, data_dir=data_dir)
    assert done.returncode != 0
    assert SECRET not in done.stdout + done.stderr, done.stdout + done.stderr
    assert "password=***" in done.stdout + done.stderr  # the URL is named, its secret is not


def test_a_queue_url_with_a_password_parameter_is_never_printed(data_dir: Path) -> None:
    store = f"postgresql://alice@127.0.0.1:{unreachable_port()}/quire?connect_timeout=2"
    bad_queue = f"http://127.0.0.1/0?password={SECRET}"  # not a Redis URL: a usage error that names it
    done = quire_cli("--store", store, "--queue", bad_queue, "base", "list", data_dir=data_dir)
    assert done.returncode == 2
    assert SECRET not in done.stdout + done.stderr and "password=***" in done.stdout + done.stderr


def test_a_drivers_message_loses_every_secret_of_the_url() -> None:
    url = "postgresql://alice:p%40ss@db/quire?sslpassword=s%26x&passfile=/home/alice/.pgpass"
    echoed = RuntimeError("connection failed: bad key passphrase s&x (p@ss, s%26x) reading /home/alice/.pgpass")
    said = str(connection_problem(echoed, url))
    assert not any(secret in said for secret in ("p@ss", "p%40ss", "s&x", "s%26x", "/home/alice")), said
    assert "db/quire" in said and "***" in said
