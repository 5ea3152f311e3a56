"""The command line: the sub-command the arguments name (parsed by :mod:`._args`), and the exit code
each error ends in. A command's modules are imported when it runs, so that each command imports what it
needs alone.

Exit codes (:mod:`._exit_codes`): 0 success (a completed turn), 1 failure (a failed turn), 2 a usage or
configuration error (one line on stderr; a feature whose extra is not installed is one), 130 a turn
cancelled, or the command interrupted, by Ctrl-C.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ._args import build_parser
from ._exit_codes import EXIT_FAILED, EXIT_OK, EXIT_USAGE

if TYPE_CHECKING:
    from sampler.fake import FakeProvider

__all__ = ["run_command"]


def run_command(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default: the process's arguments); return the exit code.

    A Ctrl-C that is not the command's own to answer propagates as KeyboardInterrupt (the entry point,
    :func:`shell.cli.main`, answers it)."""
    options = build_parser().parse_args(argv)  # ends the process for --help and usage errors
    # Imported once the arguments are parsed: the parser needs none of them.
    from actors import ActorError
    from tool_bridge.mcp import McpError

    from .._extras import MissingExtra
    from ..config import ConfigError
    from ..host import HostError
    from ..store import StoreError
    from ._settings import CliUsageError

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
        from . import _run

        return _run.run(options)
    if command == "chat":
        from . import _chat

        return _chat.run(options)
    if command == "serve":
        from . import _serve

        return _serve.run(options)
    if command == "acp":
        return _acp(options)
    if command == "sessions":
        from . import _sessions

        return _sessions.run(options)
    if command == "fake-provider":
        return _fake_provider(options)
    if command == "chaos":
        from .. import _chaos
        from ._settings import CliUsageError

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


def _acp(options: argparse.Namespace) -> int:
    from ..acp import AcpSettings, claim_stdio, serve_stdio
    from ._settings import CliUsageError, open_host, settings_from

    if options.workspace is not None or options.session is not None:
        raise CliUsageError("acp takes no --workspace or --session: the editor chooses")
    given = {"permission_timeout": options.permission_timeout, "max_line_bytes": options.max_line_bytes}
    settings = settings_from(options)
    try:
        acp = AcpSettings(
            abort_grace=settings.tools.abort_grace, **{k: v for k, v in given.items() if v is not None}
        )
    except ValueError as error:
        raise CliUsageError(f"invalid option: {error}") from None
    if not 0.0 <= options.actor_crash_rate <= 1.0:
        raise CliUsageError(f"--actor-crash-rate must be between 0 and 1, got {options.actor_crash_rate}")
    chaos = None
    if options.actor_crash_rate:
        from .._chaos import session_chaos

        chaos = session_chaos(options.chaos_seed, options.actor_crash_rate)
    claim = claim_stdio()  # before the host starts anything that could inherit stdout
    return serve_stdio(lambda: open_host(settings, options, interactive=True, chaos=chaos), acp, claim)


def _host_kills(options: argparse.Namespace) -> int:
    import msgspec

    from .._chaos import host_kill_run, print_host_kill_report
    from ._settings import CliUsageError

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
    from sampler.fake import SCENARIOS, serve_forever

    from .._signals import on_stop_signals
    from . import _fake

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
        with on_stop_signals(_interrupt):
            stats = serve_forever(
                options.port, options.faults, options.seed, on_ready=ready, provider=provider
            )
    except OSError as error:
        return _fail(EXIT_FAILED, f"cannot serve on port {options.port}: {error.strerror or error}")
    sys.stderr.write(f"[served {stats.requests} requests, {stats.total_faults} with a fault]\n")
    return EXIT_OK


def _interrupt() -> None:
    """SIGINT and SIGTERM end the command as Ctrl-C does."""
    raise KeyboardInterrupt


def _fail(code: int, message: str) -> int:
    sys.stderr.write(f"turnkeep: error: {message}\n")
    return code
