"""The command line's arguments: the parser and every sub-command's options, and nothing else.

This module imports only the standard library, so that ``turnkeep --help`` (and a usage error) is answered
without importing the host, the providers or the servers; each command's own module is imported once the
arguments are parsed (:mod:`._main`).
"""

from __future__ import annotations

import argparse
from typing import NoReturn

from ._exit_codes import EXIT_USAGE

__all__ = [
    "FAKE_PORT",
    "FAULT_PROFILES",
    "add_host_options",
    "add_mcp_option",
    "add_store_options",
    "build_parser",
]

FAKE_PORT = 8765
"""The port of the embedded provider by default: the one of the default ``provider.base_url``."""

FAULT_PROFILES: tuple[str, ...] = ("none", "light", "heavy")
"""The embedded provider's fault profiles, the same as :data:`sampler.fake.PROFILES` (a test holds them
equal). Named here because any module of :mod:`sampler.fake` imports the whole :mod:`sampler` package
(its actor, HTTP client and event loop) first."""


class _Parser(argparse.ArgumentParser):
    """Reports a usage error in one line, not with the whole usage text."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    """The ``turnkeep`` parser, with every sub-command."""
    parser = _Parser(prog="turnkeep", description="Supervised actors for LLM agent sessions.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = commands.add_parser(
        "run",
        help="run one turn, without asking (tools that would be asked about are denied)",
        description="Run one turn. Exit code: 0 completed, 1 failed, 2 usage error, 130 cancelled.",
    )
    add_host_options(run)
    _add_run_arguments(run)

    chat = commands.add_parser("chat", help="chat in a session, one turn per line; Ctrl-C cancels a turn")
    add_mcp_option(chat)
    add_host_options(chat)
    _add_chat_arguments(chat)

    serve = commands.add_parser("serve", help="the host as an HTTP service with event streams and a console")
    add_host_options(serve)
    _add_serve_arguments(serve)

    acp = commands.add_parser(
        "acp", help="an Agent Client Protocol agent on stdin and stdout, for editors (Zed, JetBrains, ...)"
    )
    add_host_options(acp)
    _add_acp_arguments(acp)

    sessions = commands.add_parser("sessions", help="what the session store holds")
    _add_sessions_arguments(sessions)

    fake = commands.add_parser(
        "fake-provider", help="serve the embedded model provider on loopback until Ctrl-C"
    )
    _add_fake_provider_arguments(fake)

    demo = commands.add_parser("demo", help="the live demo: sessions under faults (no API key, no network)")
    demo.add_argument("--sessions", type=int, metavar="N", help="how many sessions at once")
    demo.add_argument(
        "--faults", choices=FAULT_PROFILES, metavar="PROFILE", help=f"one of {', '.join(FAULT_PROFILES)}"
    )
    demo.add_argument("--seed", type=int, help="the seed of the faults drawn")

    chaos = commands.add_parser(
        "chaos",
        help="many sessions under provider faults, actor crashes and cancels; checks nothing was lost",
    )
    _add_chaos_arguments(chaos)
    return parser


def add_store_options(parser: argparse.ArgumentParser) -> None:
    """``--config`` and ``--store``: enough to find the session store."""
    parser.add_argument("--config", metavar="FILE", help="a TOML configuration file")
    parser.add_argument("--store", metavar="PATH", help="the session store (a SQLite file)")


def add_host_options(parser: argparse.ArgumentParser) -> None:
    """Every option that configures the provider, the store, the turn loop and the tool permissions."""
    add_store_options(parser)
    parser.add_argument("--base-url", metavar="URL", help="the provider's base URL")
    parser.add_argument("--model", help="the model name sent to the provider")
    parser.add_argument("--provider", choices=("openai", "anthropic"), help="the provider's wire protocol")
    parser.add_argument("--api-key-env", metavar="VAR", help="the environment variable holding the API key")
    parser.add_argument("--workspace", metavar="DIR", help="where tools work (new sessions; default: .)")
    parser.add_argument("--session", metavar="ID", help="continue this stored session")
    parser.add_argument("--max-attempts", type=int, metavar="N", help="attempts per model call")
    parser.add_argument("--idle-timeout", type=float, metavar="S", help="seconds allowed between chunks")
    parser.add_argument("--max-steps", type=int, metavar="N", help="model calls allowed per turn")
    parser.add_argument("--context-window", type=int, metavar="TOKENS", help="the model's context window")
    parser.add_argument(
        "--allow", action="append", default=[], metavar="TOOL", help="run TOOL without asking (repeatable)"
    )
    parser.add_argument("--allow-all", action="store_true", help="run every tool that would be asked about")


def add_mcp_option(parser: argparse.ArgumentParser) -> None:
    """The repeatable ``--mcp NAME=COMMAND`` option."""
    parser.add_argument(
        "--mcp",
        action="append",
        default=[],
        metavar="NAME=COMMAND",
        help="run the MCP server COMMAND (a command line); its tools are NAME__tool (repeatable)",
    )


def _add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """``run``'s own arguments (the host options are added by the caller)."""
    parser.add_argument("--json", action="store_true", help="write every event as a JSON line on stdout")
    add_mcp_option(parser)
    parser.add_argument("prompt", help="what to ask")


def _add_chat_arguments(parser: argparse.ArgumentParser) -> None:
    """``chat``'s own arguments (the host options are added by the caller)."""
    parser.add_argument(
        "--fake",
        metavar="SCENARIO",
        help="chat with the embedded provider playing SCENARIO (see turnkeep fake-provider --list): "
        "no key, no network, a temporary store and workspace unless given, the scenario's tools allowed",
    )


def _add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    """``serve``'s own arguments (the host options are added by the caller)."""
    parser.add_argument("--host", metavar="ADDRESS", help="where to listen (default 127.0.0.1)")
    parser.add_argument("--port", type=int, metavar="N", help="the port (default 8787; 0 picks one)")
    parser.add_argument(
        "--workspace-root", metavar="DIR", help="clients open sessions only under DIR (default: .)"
    )


def _add_acp_arguments(parser: argparse.ArgumentParser) -> None:
    """``acp``'s own arguments (the host options are added by the caller)."""
    parser.add_argument(
        "--permission-timeout",
        type=float,
        metavar="S",
        help="seconds the editor has to answer a permission request before it counts as a denial",
    )
    parser.add_argument(
        "--max-line-bytes", type=int, metavar="N", help="the longest protocol line read or written"
    )
    parser.add_argument(
        "--actor-crash-rate",
        type=float,
        default=0.0,
        metavar="P",
        help="chaos testing: crash each session actor on a message with probability P (0 to 1; default 0)",
    )
    parser.add_argument(
        "--chaos-seed", type=int, default=1, metavar="N", help="the seed of --actor-crash-rate's crashes"
    )


def _add_sessions_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``sessions`` subcommands, each with the store options and ``--json``."""
    views = parser.add_subparsers(dest="view", required=True, metavar="{list,show,events,fork,rewind}")
    views.add_parser(
        "list", help="every session: id, status, turns, tokens, cost, last update, fork origin, parent"
    )
    show = views.add_parser(
        "show", help="a session's record, usage by turn, children, history as the model sees it"
    )
    show.add_argument("id", help="the session's id")
    events = views.add_parser("events", help="a session's event log")
    events.add_argument("id", help="the session's id")
    fork = views.add_parser("fork", help="a new session with a session's history up to a turn; prints its id")
    fork.add_argument("id", help="the session to fork")
    fork.add_argument(
        "--at", type=int, metavar="K", help="the turn to fork at (default: the last that ended)"
    )
    rewind = views.add_parser("rewind", help="fork a session at a turn and archive it; prints the new id")
    rewind.add_argument("id", help="the session to rewind")
    rewind.add_argument("--to", type=int, required=True, metavar="K", help="the turn to go back to")
    for making in (fork, rewind):
        making.add_argument(
            "--workspace", metavar="DIR", help="the new session's workspace (default: the same)"
        )
        making.add_argument(
            "--id", dest="new_id", metavar="NEW", help="the new session's id (default: a new one)"
        )
    for view in (views.choices["list"], show, events, fork, rewind):
        add_store_options(view)
        view.add_argument("--json", action="store_true", help="JSON: one object per line (show: one object)")


def _add_fake_provider_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", type=int, default=FAKE_PORT, help=f"default {FAKE_PORT}; 0 picks one")
    parser.add_argument(
        "--faults", choices=FAULT_PROFILES, default="none", help="the fault profile (default none)"
    )
    parser.add_argument("--seed", type=int, default=0, help="the seed of the faults drawn")
    parser.add_argument(
        "--scenario",
        metavar="NAME",
        help="play the named scenario (its script, faults and tokens); see --list",
    )
    parser.add_argument("--list", action="store_true", help="list the scenarios, one per line, and exit")


def _add_chaos_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seed", type=int, default=1, help="the seed of every fault drawn (replayable)")
    parser.add_argument("--sessions", type=int, default=10, metavar="N")
    parser.add_argument("--turns", type=int, default=3, metavar="T")
    parser.add_argument("--actor-crash-rate", type=float, default=0.0, metavar="P")
    parser.add_argument("--fault-profile", choices=("light", "heavy"), default="light")
    parser.add_argument(
        "--rate-limit",
        type=float,
        default=None,
        metavar="R",
        help="the embedded provider allows R requests per second (429 with Retry-After beyond)",
    )
    parser.add_argument(
        "--mcp-crash-rate",
        type=float,
        default=0.0,
        metavar="P",
        help="give every session a stdio MCP server, crash its actor and kill its process with probability P",
    )
    parser.add_argument(
        "--kill-host-every",
        type=float,
        default=None,
        metavar="S",
        help="run the host in a child process, SIGKILL it about every S seconds and start it again",
    )
    parser.add_argument(
        "--host-kills", type=int, default=5, metavar="N", help="with --kill-host-every: kill it N times"
    )
    parser.add_argument(
        "--subagents",
        action="store_true",
        help="about 2 turns in 5 fan out to three child sessions; the families are checked too",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
