"""``turnkeep chat``: prompts read from the terminal, one turn each, in one session; tools asked about."""

from __future__ import annotations

import argparse
import importlib
import sys
from contextlib import suppress
from typing import Literal

from tool_bridge import PermissionDecision, PermissionRequested

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
    """Chat until ``/exit``, end of input or Ctrl-C at the prompt (0); Ctrl-C during a turn cancels it
    and the chat goes on, a second one leaves (130). ``/status`` tells what the session and the host's
    provider gate are doing.

    A tool call that needs permission is asked about: ``y`` allows it once, ``a`` for the rest of the
    session, anything else denies it. Raises :class:`~shell.config.ConfigError` or
    :class:`~shell.cli._settings.CliUsageError` before the first prompt.
    """
    settings = with_mcp_options(settings_from(options), options.mcp)
    if sys.stdin.isatty():
        with suppress(ImportError):
            importlib.import_module("readline")  # line editing and history for input()
    view = TextView()
    interrupts = Interrupts()

    def ask(request: PermissionRequested) -> PermissionDecision:
        view.end_line()
        question = f"allow {request.tool} {request.arguments}? [y]es once, [a]lways, [N]o: "
        reply = _read(interrupts, question)
        if reply is None:
            interrupts.count += 1  # Ctrl-C or end of input while asked: no, and the turn ends
        decision = _ANSWERS.get((reply or "").strip().lower())
        if decision is None:
            return PermissionDecision(request.call_id, "deny", reason="the user said no")
        return PermissionDecision(request.call_id, decision)

    with interrupts.counting():
        host = open_host(settings, options, interactive=True)
        try:
            session = open_session(host, options)
            sys.stderr.write(f"[session {session.id}: /status to look around, /exit or Ctrl-D to leave]\n")
            while True:
                line = _read(interrupts, "> ")
                if line is None:
                    sys.stdout.write("\n")
                    return EXIT_OK
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


def _read(interrupts: Interrupts, prompt: str) -> str | None:
    """A line from the terminal, or None for end of input or Ctrl-C."""
    with interrupts.raising():
        try:
            return input(prompt)
        except (EOFError, KeyboardInterrupt):
            return None
