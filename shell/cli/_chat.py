"""``turnkeep chat``: prompts read from the terminal, one turn each, in one session; tools asked about."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from contextlib import suppress
from pathlib import Path
from typing import Literal

from tool_bridge import PermissionDecision, PermissionRequested

from ..config import Settings
from ..credentials import CredentialProvider
from ._mcp import mcp_command
from ._run import with_mcp_options
from ._settings import open_host, open_session, settings_from
from ._turn_view import EXIT_CANCELLED, EXIT_OK, Interrupts, TextView, drive_turn

__all__ = ["run"]

_LEAVE = frozenset({"/exit", "/quit"})
_STATUS = "/status"
_ANSWERS: dict[str, Literal["allow_once", "allow_always"]] = {
    "y": "allow_once",
    "yes": "allow_once",
    "a": "allow_always",
    "always": "allow_always",
}


def run(options: argparse.Namespace) -> int:
    """Chat until ``/exit`` or end of input (0) or Ctrl-C at the prompt (130); Ctrl-C during a turn
    cancels it and the chat goes on, a second one leaves (130). ``/status`` tells what the session and the
    host's provider gate are doing.

    With ``--fake SCENARIO`` the scenario's provider runs in this process for the chat's length, and the
    host is pointed at it (:mod:`._fake`). A tool call that needs permission is asked about: ``y`` allows
    it once, ``a`` for the rest of the session, anything else denies it. Raises
    :class:`~shell.config.ConfigError` or :class:`~shell.cli._settings.CliUsageError` before the first
    prompt.
    """
    if options.fake is None:
        return _chat(settings_from(options), options)
    from . import _fake  # the embedded provider's server is needed with --fake alone

    with _fake.started(options.fake, os.environ, store=options.store, workspace=options.workspace) as fake:
        sys.stderr.write(
            f"[scenario {fake.scenario.name}: {fake.scenario.description}; "
            f"embedded provider at {fake.provider.base_url}, workspace {fake.workspace}]\n"
        )
        return _chat(
            _fake.pointed(settings_from(options, fake.environ), fake.provider.base_url),
            options,
            allow=fake.scenario.needs.allow_tools,
            credentials=fake.credentials,
            workspace=fake.workspace,
        )


def _chat(
    settings: Settings,
    options: argparse.Namespace,
    *,
    allow: tuple[str, ...] = (),
    credentials: CredentialProvider | None = None,
    workspace: Path | None = None,
) -> int:
    settings = with_mcp_options(settings, options.mcp)
    if sys.stdin.isatty():
        with suppress(ImportError):
            importlib.import_module("readline")  # line editing and history for input()
    view = TextView()
    interrupts = Interrupts()

    def ask(request: PermissionRequested) -> PermissionDecision:
        view.end_line()
        question = f"allow {request.tool} {request.arguments}? [y]es once, [a]lways, [N]o: "
        reply = _read(interrupts, question)
        if isinstance(reply, int):
            interrupts.count += 1  # Ctrl-C or end of input while asked: no, and the turn ends
        decision = _ANSWERS.get(reply.strip().lower()) if isinstance(reply, str) else None
        if decision is None:
            return PermissionDecision(request.call_id, "deny", reason="the user said no")
        return PermissionDecision(request.call_id, decision)

    with interrupts.counting():
        host = open_host(settings, options, interactive=True, allow=allow, credentials=credentials)
        try:
            session = open_session(host, options, workspace=workspace)
            sys.stderr.write(f"[session {session.id}: /status to look around, /exit or Ctrl-D to leave]\n")
            while True:
                line = _read(interrupts, "> ")
                if isinstance(line, int):
                    sys.stdout.write("\n")
                    return line
                text = line.strip()
                if text in _LEAVE:
                    return EXIT_OK
                if not text:
                    continue
                if text == _STATUS:
                    agent_host = host.agent_host
                    sys.stderr.write(f"[{agent_host.describe(session.id)}]\n[{agent_host.describe_gate()}]\n")
                    continue
                if text.split()[0] == "/mcp":
                    sys.stderr.write(mcp_command(host, session, text) + "\n")
                    continue
                interrupts.count = 0
                if drive_turn(session, text, view, interrupts, ask) is None:
                    return EXIT_CANCELLED
        finally:
            host.close()


def _read(interrupts: Interrupts, prompt: str) -> str | int:
    """A line from the terminal, or the exit code of leaving: 0 for end of input, 130 for Ctrl-C."""
    with interrupts.raising():
        try:
            return input(prompt)
        except EOFError:
            return EXIT_OK
        except KeyboardInterrupt:
            return EXIT_CANCELLED
