"""The stdio transport: a server's stderr goes to the log and into a tail, both bounded, and its end is
its exit code, whichever of its pipes broke first."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import mcp_types
import pytest
import trio
from mcp.shared.message import SessionMessage

from tool_bridge.mcp._stdio import ServerProcess, open_stdio

NOISY = "import sys\nfor n in range(5000): print(f'line {n} ' + 'x' * 50, file=sys.stderr)\nsys.exit(4)"


def test_stderr_is_logged_and_kept_within_bounds_and_the_exit_code_is_the_reason(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    logger = logging.getLogger("tests.mcp.noisy")

    async def main() -> tuple[str, str]:
        with trio.fail_after(20):
            async with open_stdio(
                "noisy", [sys.executable, "-c", NOISY], env={}, cwd=tmp_path, tail_chars=1000, logger=logger
            ) as (_, server):
                await server.ended.wait()
                return server.reason, server.stderr_tail()

    with caplog.at_level(logging.INFO, logger="tests.mcp.noisy"):
        reason, tail = trio.run(main)
    assert reason == "exited (code 4)"
    assert len(tail) <= 1000 and tail.endswith("line 4999 " + "x" * 50 + "\n")
    logged = [record.getMessage() for record in caplog.records if record.name == "tests.mcp.noisy"]
    assert len(logged) == 201 and logged[0].startswith("noisy: line 0 ")
    assert "more stderr not logged" in logged[-1]


def test_what_a_server_wrote_to_stderr_and_nobody_read_yet_is_kept_on_demand(tmp_path: Path) -> None:
    """An error composed at a deadline carries the server's last words even if no reader got to them."""

    async def main() -> tuple[str, str]:
        with trio.fail_after(20):
            process = await trio.lowlevel.open_process(
                [sys.executable, "-c", "import sys; sys.stderr.write('said before the deadline\\n')"],
                stderr=subprocess.PIPE,
            )
            server = ServerProcess("quiet", process, tail_chars=1000)
            await process.wait()
            before = server.stderr_tail()
            server.keep_unread_stderr()
            after = server.stderr_tail()
            assert process.stderr is not None
            await process.stderr.aclose()
            return before, after

    before, after = trio.run(main)
    assert (before, after) == ("", "said before the deadline\n")


CLOSES_STDIN = (
    "import os, sys, time\n"
    "os.close(0)\n"
    "sys.stderr.write('stdin closed\\n'); sys.stderr.flush()\n"
    "time.sleep({linger})\n"
    "sys.exit(5)\n"
)
PING = b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}'


async def _write_to_a_server_that_closed_its_stdin(tmp_path: Path, linger: float) -> str:
    """The reason a server's conversation ended when a message is written after it closed its stdin and
    before it exits (``linger`` seconds later)."""
    argv = [sys.executable, "-c", CLOSES_STDIN.format(linger=linger)]
    logger = logging.getLogger("tests.mcp.closes_stdin")
    with trio.fail_after(20):
        async with open_stdio("deaf", argv, env={}, cwd=tmp_path, tail_chars=1000, logger=logger) as (
            (_, write_stream),
            server,
        ):
            while "stdin closed" not in server.stderr_tail():
                await trio.sleep(0.01)
            message = mcp_types.jsonrpc_message_adapter.validate_json(PING, by_name=False)
            await write_stream.send(SessionMessage(message))
            await server.ended.wait()
            return server.reason


def test_a_server_whose_stdin_breaks_as_it_dies_is_reported_by_its_exit(tmp_path: Path) -> None:
    """A killed server breaks its stdin before its exit is seen, often: the exit still is the reason."""
    reason = trio.run(_write_to_a_server_that_closed_its_stdin, tmp_path, 0.3)
    assert reason == "exited (code 5)"


def test_a_server_that_stops_reading_its_stdin_and_lives_on_is_reported_so(tmp_path: Path) -> None:
    reason = trio.run(_write_to_a_server_that_closed_its_stdin, tmp_path, 30.0)
    assert reason == "stopped reading its stdin"
