"""A throwaway PostgreSQL server for tests.

:func:`postgres_server` runs ``initdb`` into a new temporary directory, starts the server with ``pg_ctl``
on 127.0.0.1 (a free port) with its unix socket in that directory, creates a database and yields its URL;
afterwards it stops the server (``pg_ctl stop -m fast``) and removes the directory. As root, the server
runs as the unprivileged ``postgres`` user, or ``nobody``, since ``initdb`` refuses to run as root.

The binaries are looked for on ``PATH``, then under ``/usr/lib/postgresql/*/bin`` (where Debian puts
them), newest version first. When no server can be started, :class:`PostgresUnavailable` says why.
"""

from __future__ import annotations

import glob
import os
import pwd
import shlex
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from urllib.parse import quote

__all__ = ["REQUIRE_ENV", "PostgresUnavailable", "find_bindir", "postgres_server", "with_options"]

REQUIRE_ENV = "REQUIRE_POSTGRES_TESTS"
"""Set to ``1`` where the PostgreSQL tests must run (CI): then a server that cannot start is a failure."""

_SUPERUSER = "turnkeep"
_UNPRIVILEGED = ("postgres", "nobody")
_START_ATTEMPTS = 3


class PostgresUnavailable(Exception):
    """No PostgreSQL server can be started here; the message says why."""


def find_bindir() -> Path | None:
    """The directory holding ``initdb`` and ``pg_ctl``, or None if there is none."""
    found = shutil.which("initdb")
    candidates = [Path(found).resolve().parent] if found else []
    versions = glob.glob("/usr/lib/postgresql/*/bin")
    candidates += [
        Path(p) for p in sorted(versions, key=lambda p: _version_key(Path(p).parent.name), reverse=True)
    ]
    for directory in candidates:
        if (directory / "initdb").is_file() and (directory / "pg_ctl").is_file():
            return directory
    return None


def with_options(url: str, *settings: tuple[str, str], application_name: str | None = None) -> str:
    """``url`` (which must have no query) with server settings such as ``("search_path", "t1")`` added."""
    query = []
    if settings:
        options = " ".join(f"-c{name}={value}" for name, value in settings)
        query.append(f"options={quote(options, safe='')}")
    if application_name is not None:
        query.append(f"application_name={quote(application_name, safe='')}")
    return f"{url}?{'&'.join(query)}" if query else url


@contextmanager
def postgres_server(database: str = "turnkeep_test") -> Iterator[str]:
    """A running server with an empty ``database``; yields ``postgresql://turnkeep@127.0.0.1:PORT/database``.

    Authentication is ``trust``; ``fsync`` is off, since the server is thrown away.
    """
    bindir = find_bindir()
    if bindir is None:
        raise PostgresUnavailable("initdb and pg_ctl are neither on PATH nor under /usr/lib/postgresql/*/bin")
    try:
        import psycopg
    except ImportError as error:
        raise PostgresUnavailable(f"psycopg is not installed: {error}") from error
    user = _server_user()
    # Directly in /tmp: the server's user must be able to reach it, and a unix socket path is short.
    base = Path(tempfile.mkdtemp(prefix="turnkeep-pg-", dir="/tmp" if os.path.isdir("/tmp") else None))
    data = base / "data"
    pg_ctl = [str(bindir / "pg_ctl"), "-D", str(data)]
    started = False
    try:
        if user is not None:
            shutil.chown(base, user=user)
        initdb = [str(bindir / "initdb"), "-D", str(data), "-U", _SUPERUSER, "--auth=trust", "--no-sync"]
        _run(user, [*initdb, "--encoding=UTF8", "--locale=C"])
        for attempt in range(_START_ATTEMPTS):
            port = _free_port()
            server = f"-c listen_addresses=127.0.0.1 -p {port} -k {base} -c fsync=off -c full_page_writes=off"
            try:
                _run(user, [*pg_ctl, "-l", str(base / "server.log"), "-w", "-t", "30", "-o", server, "start"])
            except PostgresUnavailable:
                # Most likely the port was taken in the meantime; make sure nothing is left running.
                with suppress(PostgresUnavailable):
                    _run(user, [*pg_ctl, "-m", "immediate", "-w", "stop"])
                if attempt == _START_ATTEMPTS - 1:
                    raise
            else:
                started = True
                break
        url = f"postgresql://{_SUPERUSER}@127.0.0.1:{port}"
        with psycopg.connect(f"{url}/postgres", autocommit=True, connect_timeout=10) as admin:
            admin.execute(f'CREATE DATABASE "{database}"')
        yield f"{url}/{database}"
    finally:
        if started:
            with suppress(PostgresUnavailable):
                _run(user, [*pg_ctl, "-m", "fast", "-w", "stop"])
        shutil.rmtree(base, ignore_errors=True)


def _run(user: str | None, command: Sequence[str]) -> None:
    if user is not None:
        if shutil.which("runuser"):
            command = ["runuser", "-u", user, "--", *command]
        else:
            command = ["su", "-s", "/bin/sh", user, "-c", shlex.join(command)]
    environ = {key: value for key, value in os.environ.items() if not key.startswith("PG")}
    try:
        result = subprocess.run(
            command, capture_output=True, text=True, timeout=60, env=environ, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise PostgresUnavailable(f"{shlex.join(command)} failed: {error}") from error
    if result.returncode != 0:
        output = (result.stdout + result.stderr).strip()[-2000:]
        raise PostgresUnavailable(f"{shlex.join(command)} exited with {result.returncode}: {output}")


def _server_user() -> str | None:
    """Who runs the server: None for the current user, an unprivileged user when running as root."""
    if os.geteuid() != 0:
        return None
    for name in _UNPRIVILEGED:
        try:
            pwd.getpwnam(name)
        except KeyError:
            continue
        return name
    raise PostgresUnavailable(
        f"running as root and none of the users {_UNPRIVILEGED} exists to run the server"
    )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _version_key(name: str) -> tuple[int, ...]:
    return tuple(int(part) for part in name.split(".") if part.isdigit())
