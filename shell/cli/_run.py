"""``turnkeep run``: one turn, without asking anything; the exit code says how it ended."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import msgspec

from tool_bridge.mcp import McpSettingsError, parse_mcp_option

from ..config import Settings
from ..facade import Host
from ._exit_codes import EXIT_CANCELLED
from ._settings import CliUsageError, open_host, open_session, settings_from
from ._turn_view import Interrupts, JsonView, TextView, View, drive_turn, exit_code

__all__ = ["run", "with_mcp_options"]


def with_mcp_options(settings: Settings, options: list[str]) -> Settings:
    """``settings`` with a stdio MCP server for each ``NAME=COMMAND`` of ``options`` (over a configured
    server of the same name). Raises `CliUsageError` for an option it cannot read."""
    servers = dict(settings.mcp_servers)
    for option in options:
        try:
            name, server = parse_mcp_option(option)
        except McpSettingsError as exc:
            raise CliUsageError(str(exc)) from None
        servers[name] = server
    return msgspec.structs.replace(settings, mcp_servers=servers) if options else settings


def run(options: argparse.Namespace) -> int:
    """Run one turn; 0 completed, 1 failed, 130 cancelled or interrupted by Ctrl-C.

    Tools that would be asked about are denied unless ``--allow``-ed. Which sandbox and environment policy
    the ``shell`` tool runs with is said once on stderr before the turn (after the session is found); after
    it, without ``--json``, the turn's usage (tokens, and cost with a price for the model) and the session's
    id, one line each. Raises :class:`~shell.config.ConfigError` or
    :class:`~shell.cli._settings.CliUsageError` before the turn.

    A Ctrl-C while the host starts raises KeyboardInterrupt there (nothing is acknowledged yet). Once the
    host is up, a Ctrl-C is counted, never raised: before the turn it keeps the turn from starting, during
    it it cancels the turn, after it the host still closes in full; in each case the exit code is 130.
    """
    settings = with_mcp_options(settings_from(options), options.mcp)
    view: View = JsonView() if options.json else TextView()
    interrupts = Interrupts()
    host: Host | None = None
    terminal: Any | None = None
    ended_by = 0
    with interrupts.counting():
        try:
            with interrupts.raising():
                host = open_host(settings, options, interactive=False)
            session = open_session(host, options)
            sys.stderr.write(f"[{host.agent_host.tool_isolation.describe()}]\n")
            if interrupts.count:
                view.notice("interrupted before the turn started")
                return EXIT_CANCELLED
            terminal = drive_turn(session, options.prompt, view, interrupts)
            if terminal is not None and not options.json:
                sys.stderr.write(f"[session {session.id}]\n")
            ended_by = interrupts.count
        finally:
            if host is not None:
                host.close()
    if interrupts.count > ended_by:
        view.notice("interrupted while the host closed; it closed in full")
    return EXIT_CANCELLED if interrupts.count else exit_code(terminal)
