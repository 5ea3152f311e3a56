"""The stdio transport: a server's stderr goes to the log and into a tail, both bounded, and its end is
its exit code."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest
import trio

from tool_bridge.mcp._stdio import open_stdio

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
