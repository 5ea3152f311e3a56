"""The command line: parsing, the sub-commands, and the exit code each error ends in.

Exit codes (:mod:`._exit_codes`): 0 success (a completed turn), 1 failure (a failed turn), 2 a usage or
configuration error (one line on stderr; a feature whose extra is not installed is one), 130 a turn
cancelled, or the command interrupted, by Ctrl-C.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from types import FrameType
from typing import Any, NoReturn

from actors import ActorError
from sampler.fake import PROFILES, SCENARIOS, FakeProvider, serve_forever
from tool_bridge.mcp import McpError

from .._extras import MissingExtra
from ..config import ConfigError
from ..host import HostError
from ..store import StoreError
from . import _chat, _fake, _run, _serve, _sessions
from ._exit_codes import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from ._settings import CliUsageError, add_host_options

__all__ = ["run_command"]

_FAKE_PORT = 8765  # the port of the default provider.base_url


class _Parser(argparse.ArgumentParser):
    """Reports a usage error in one line, not with the whole usage text."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="turnkeep", description="Supervised actors for LLM agent sessions.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = commands.add_parser(
        "run",
        help="run one turn, without asking (tools that would be asked about are denied)",
        description="Run one turn. Exit code: 0 completed, 1 failed, 2 usage error, 130 cancelled.",
    )
    add_host_options(run)
    _run.add_arguments(run)

    chat = commands.add_parser("chat", help="chat in a session, one turn per line; Ctrl-C cancels a turn")
    _run.add_mcp_option(chat)
    add_host_options(chat)
    _chat.add_arguments(chat)

    serve = commands.add_parser("serve", help="the host as an HTTP service with event streams and a console")
    add_host_options(serve)
    _serve.add_arguments(serve)

    sessions = commands.add_parser("sessions", help="what the session store holds")
    _sessions.add_arguments(sessions)

    fake = commands.add_parser(
        "fake-provider", help="serve the embedded model provider on loopback until Ctrl-C"
    )
    fake.add_argument("--port", type=int, default=_FAKE_PORT, help=f"default {_FAKE_PORT}; 0 picks one")
    fake.add_argument("--faults", choices=PROFILES, default="none", help="the fault profile (default none)")
    fake.add_argument("--seed", type=int, default=0, help="the seed of the faults drawn")
    fake.add_argument(
        "--scenario",
        metavar="NAME",
        help="play the named scenario (its script, faults and tokens); see --list",
    )
    fake.add_argument("--list", action="store_true", help="list the scenarios, one per line, and exit")

    demo = commands.add_parser("demo", help="the live demo: sessions under faults (no API key, no network)")
    demo.add_argument("--sessions", type=int, metavar="N", help="how many sessions at once")
    demo.add_argument("--faults", choices=PROFILES, metavar="PROFILE", help=f"one of {', '.join(PROFILES)}")
    demo.add_argument("--seed", type=int, help="the seed of the faults drawn")

    chaos = commands.add_parser(
        "chaos",
        help="many sessions under provider faults, actor crashes and cancels; checks nothing was lost",
    )
    chaos.add_argument("--seed", type=int, default=1, help="the seed of every fault drawn (replayable)")
    chaos.add_argument("--sessions", type=int, default=10, metavar="N")
    chaos.add_argument("--turns", type=int, default=3, metavar="T")
    chaos.add_argument("--actor-crash-rate", type=float, default=0.0, metavar="P")
    chaos.add_argument("--fault-profile", choices=("light", "heavy"), default="light")
    chaos.add_argument(
        "--rate-limit",
        type=float,
        default=None,
        metavar="R",
        help="the embedded provider allows R requests per second (429 with Retry-After beyond)",
    )
    chaos.add_argument(
        "--mcp-crash-rate",
        type=float,
        default=0.0,
        metavar="P",
        help="give every session a stdio MCP server, crash its actor and kill its process with probability P",
    )
    chaos.add_argument(
        "--kill-host-every",
        type=float,
        default=None,
        metavar="S",
        help="run the host in a child process, SIGKILL it about every S seconds and start it again",
    )
    chaos.add_argument(
        "--host-kills", type=int, default=5, metavar="N", help="with --kill-host-every: kill it N times"
    )
    chaos.add_argument(
        "--subagents",
        action="store_true",
        help="about 2 turns in 5 fan out to three child sessions; the families are checked too",
    )
    chaos.add_argument("--json", action="store_true", help="print the report as JSON")
    return parser


def run_command(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default: the process's arguments); return the exit code.

    A Ctrl-C that is not the command's own to answer propagates as KeyboardInterrupt (the entry point,
    :func:`shell.cli.main`, answers it)."""
    options = _build_parser().parse_args(argv)
    try:
        return _dispatch(options)
    except (ConfigError, CliUsageError, McpError, MissingExtra) as error:
        return _fail(EXIT_USAGE, str(error))
    except (HostError, StoreError) as error:
        return _fail(EXIT_FAILED, str(error))
    except ActorError as error:
        return _fail(EXIT_FAILED, f"the session did not answer ({type(error).__name__}: {error})")
    except BrokenPipeError:
        # The reader went away (``| head``); nothing more can be written, not even at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FAILED


def _dispatch(options: argparse.Namespace) -> int:
    command = options.command
    if command == "run":
        return _run.run(options)
    if command == "chat":
        return _chat.run(options)
    if command == "serve":
        return _serve.run(options)
    if command == "sessions":
        return _sessions.run(options)
    if command == "fake-provider":
        return _fake_provider(options)
    if command == "chaos":
        from .. import _chaos

        if options.kill_host_every is not None:
            return _host_kills(options)
        try:
            return _chaos.run(
                seed=options.seed,
                sessions=options.sessions,
                turns=options.turns,
                actor_crash_rate=options.actor_crash_rate,
                rate_limit=options.rate_limit,
                profile=options.fault_profile,
                as_json=options.json,
                mcp_crash_rate=options.mcp_crash_rate,
                subagents=options.subagents,
            )
        except ValueError as error:
            raise CliUsageError(str(error)) from error
    from . import _demo  # the live view's library is needed by the demo alone

    given = {"sessions": options.sessions, "profile": options.faults, "seed": options.seed}
    kwargs: dict[str, Any] = {key: value for key, value in given.items() if value is not None}
    return _demo.run(**kwargs)


def _host_kills(options: argparse.Namespace) -> int:
    import msgspec

    from .._chaos import host_kill_run, print_host_kill_report

    if (
        options.actor_crash_rate
        or options.mcp_crash_rate
        or options.rate_limit is not None
        or options.subagents
    ):
        raise CliUsageError(
            "--kill-host-every takes no --actor-crash-rate, --mcp-crash-rate, --rate-limit or --subagents"
        )
    try:
        report = host_kill_run(
            seed=options.seed,
            sessions=options.sessions,
            turns=options.turns,
            kill_every=options.kill_host_every,
            kills=options.host_kills,
        )
    except ValueError as error:
        raise CliUsageError(str(error)) from error
    if options.json:
        sys.stdout.write(msgspec.json.encode(report).decode() + "\n")
    else:
        print_host_kill_report(report)
    return 0 if report.ok else 1


def _fake_provider(options: argparse.Namespace) -> int:
    if options.list:
        width = max(len(name) for name in SCENARIOS)
        for name, scenario in SCENARIOS.items():
            print(f"{name:<{width}}  {scenario.description}")
        return EXIT_OK
    provider = None
    playing = ""
    if options.scenario is not None:
        scenario = _fake.scenario_named(options.scenario)
        provider = scenario.provider(profile=options.faults, seed=options.seed, port=options.port)
        playing = f"scenario {scenario.name}, "

    def ready(provider: FakeProvider) -> None:
        print(provider.base_url, flush=True)
        sys.stderr.write(f"[{playing}faults: {options.faults}, seed {options.seed}; Ctrl-C to stop]\n")
        if options.scenario is not None:
            needs = _fake.scenario_named(options.scenario).needs.describe(provider.token_url)
            sys.stderr.write(f"[a host playing it needs: {needs}]\n")

    try:
        with _stopped_by_signals():
            stats = serve_forever(
                options.port, options.faults, options.seed, on_ready=ready, provider=provider
            )
    except OSError as error:
        return _fail(EXIT_FAILED, f"cannot serve on port {options.port}: {error.strerror or error}")
    sys.stderr.write(f"[served {stats.requests} requests, {stats.total_faults} with a fault]\n")
    return EXIT_OK


@contextmanager
def _stopped_by_signals() -> Iterator[None]:
    """Within: SIGINT and SIGTERM raise KeyboardInterrupt, even where a shell had SIGINT ignored."""

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {number: signal.signal(number, interrupt) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def _fail(code: int, message: str) -> int:
    sys.stderr.write(f"turnkeep: error: {message}\n")
    return code
