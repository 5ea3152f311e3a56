"""``turnkeep serve``: run a host behind the HTTP API and the console until Ctrl-C or SIGTERM."""

from __future__ import annotations

import argparse
import os
import sys
import threading
from pathlib import Path

import msgspec

from .._signals import on_stop_signals
from ._settings import CliUsageError, open_host, settings_from
from ._turn_view import EXIT_FAILED, EXIT_OK

__all__ = ["run"]

_CHECK_EVERY = 0.5


def run(options: argparse.Namespace) -> int:
    """Serve until interrupted; 0 after a stop by SIGINT or SIGTERM, 1 when the server ended by itself.
    Raises :class:`CliUsageError` (exit code 2) for a
    refused configuration: a non-loopback address without ``TURNKEEP_SERVE_TOKEN``, a missing workspace
    root, an address that cannot be listened on."""
    from ..serve import ServeRefused, check_bind, resolve_token, start_server  # the server's libraries

    if options.workspace is not None or options.session is not None:
        raise CliUsageError("serve takes no --workspace or --session: clients choose (see --workspace-root)")
    settings = settings_from(options)
    given = {"host": options.host, "port": options.port, "workspace_root": options.workspace_root}
    try:
        serve = msgspec.structs.replace(settings.serve, **{k: v for k, v in given.items() if v is not None})
    except ValueError as error:
        raise CliUsageError(f"invalid option: {error}") from None
    root = Path(serve.workspace_root or ".").expanduser().resolve()
    if not root.is_dir():
        raise CliUsageError(f"the workspace root {root} is not a directory")
    try:
        token, generated = resolve_token(os.environ)
        check_bind(serve.host, token_from_environment=not generated)
    except ServeRefused as error:
        raise CliUsageError(str(error)) from None
    stop = threading.Event()
    with on_stop_signals(stop.set):
        host = open_host(settings.replace(serve=serve), options, interactive=True)
        try:
            try:
                server = start_server(host.agent_host, serve, token=token, workspace_root=root)
            except ServeRefused as error:
                raise CliUsageError(str(error)) from None
            try:
                _announce(server.url, token if generated else None, root)
                sys.stderr.write(f"[{host.agent_host.tool_isolation.describe()}]\n")
                server.resume_interrupted()
                while server.running and not stop.wait(_CHECK_EVERY):
                    pass
            finally:
                server.stop()
        finally:
            host.close()
    if not stop.is_set():
        sys.stderr.write("turnkeep: error: the server stopped by itself (see the log above)\n")
        return EXIT_FAILED
    return EXIT_OK


def _announce(url: str, generated_token: str | None, root: Path) -> None:
    """Say where the server listens; a generated token is printed here, once, and nowhere else."""
    print(f"turnkeep serve: listening on {url} (workspaces under {root})", flush=True)
    if generated_token is not None:
        print(f"token: {generated_token}", flush=True)
        print(f"console: {url}/#token={generated_token}", flush=True)
    else:
        print(f"console: {url}/ (token from $TURNKEEP_SERVE_TOKEN)", flush=True)
    sys.stderr.write("[Ctrl-C to stop]\n")
