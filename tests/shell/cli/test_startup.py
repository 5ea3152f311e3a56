"""What the command line imports before it answers: ``--help`` the parser alone, ``run`` the host without
the embedded provider, the servers or the optional extras. Counted in modules, never timed."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from sampler.fake import PROFILES
from shell.cli._args import FAULT_PROFILES, build_parser
from tests.shell.cli.conftest import Options
from tests.shell.cli.test_cli import REPO, TIMEOUT, environment, serving

HEAVY = ("actors", "sampler", "tool_bridge", "turnkeep", "httpx", "trio", "pykka", "msgspec", "rich")
"""Packages the parser needs none of."""
UNUSED_BY_RUN = ("hypercorn", "sampler.fake", "opentelemetry", "ray", "mcp", "shell.serve", "shell.telemetry")
"""Packages a turn run with the default settings needs none of."""
PARSER_MODULES = {
    "shell",
    "shell.cli",
    "shell.cli._args",
    "shell.cli._entry",
    "shell.cli._exit_codes",
    "shell.cli._main",
}
"""The project's modules ``--help`` imports."""


def imported_by(program: str) -> list[str]:
    """The modules a fresh interpreter holds after ``program``, which prints them as its last line."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(program)],
        cwd=REPO,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1].split()


def within(name: str, packages: tuple[str, ...]) -> bool:
    return any(name == package or name.startswith(f"{package}.") for package in packages)


def test_the_fault_profiles_the_parser_offers_are_the_embedded_providers() -> None:
    assert FAULT_PROFILES == PROFILES
    demo = build_parser().parse_args(["demo", "--faults", PROFILES[-1]])
    assert demo.faults == PROFILES[-1]


@pytest.mark.parametrize("arguments", [["--help"], ["run", "--help"], ["sessions", "list", "--help"]])
def test_help_imports_the_parser_alone(arguments: list[str]) -> None:
    modules = imported_by(
        f"""
        import contextlib, io, sys
        from shell.cli import main
        with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
            main({arguments!r})
        print(*sorted(sys.modules))
        """
    )

    assert [name for name in modules if within(name, HEAVY)] == []
    assert {name for name in modules if within(name, ("shell",))} == PARSER_MODULES


def test_a_usage_error_imports_the_parser_alone() -> None:
    modules = imported_by(
        """
        import contextlib, io, sys
        from shell.cli import main
        with contextlib.redirect_stderr(io.StringIO()), contextlib.suppress(SystemExit):
            main(["run", "--max-steps", "many", "hello"])
        print(*sorted(sys.modules))
        """
    )

    assert [name for name in modules if within(name, HEAVY)] == []


def test_run_imports_neither_the_embedded_provider_nor_the_servers_nor_the_extras(options: Options) -> None:
    with serving() as provider:
        modules = imported_by(
            f"""
            import contextlib, io, sys
            from shell.cli import main
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                code = main(["run", *{options(provider)!r}, "hello"])
            assert code == 0, code
            print(*sorted(sys.modules))
            """
        )

    assert "shell.host" in modules
    assert [name for name in modules if within(name, UNUSED_BY_RUN)] == []
