"""Sandbox: what the bubblewrap sandbox adds to one call of the ``shell`` tool.

A call is ``run_tool`` of the real ``shell`` tool (``bash -c``, its own process group, output captured)
in a workspace of its own; sandboxed and unsandboxed calls alternate in rounds in the same process, so
both see the same machine. Two commands: ``true`` (the fixed cost of a call) and a small real command
(``ls -la /usr/bin | wc -l``, reading a directory and piping). The sandbox's nominal hiding is in force:
a home and a store directory are hidden, as a host hides them.

Run: ``.venv/bin/python bench/sandbox_bench.py [--calls N] [--json]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from pathlib import Path

import msgspec
import trio
from run_all import Figure, format_table

from tool_bridge import Sandbox, ShellArgs, ToolContext, probe_sandbox, run_tool, shell_tool

_COMMANDS = {"true": "true", "ls -la /usr/bin | wc -l": "ls -la /usr/bin | wc -l"}
_ROUND = 10


class Timings(msgspec.Struct, frozen=True):
    """Seconds per call of each command, sandboxed and not."""

    sandboxed: dict[str, list[float]]
    unsandboxed: dict[str, list[float]]


async def _call(tool: object, workspace: Path, command: str) -> float:
    context = ToolContext(workspace=workspace, call_id="bench")
    started = trio.current_time()
    outcome = await run_tool(tool, ShellArgs(command=command), context)  # type: ignore[arg-type]
    if outcome.is_error:
        raise RuntimeError(f"{command!r} failed: {outcome.content}")
    return trio.current_time() - started


async def measure(calls: int, sandbox: Sandbox) -> Timings:
    """``calls`` calls of each command with and without ``sandbox``, alternating every few calls."""
    boxed, plain = shell_tool(sandbox=sandbox), shell_tool()
    sandboxed: dict[str, list[float]] = {name: [] for name in _COMMANDS}
    unsandboxed: dict[str, list[float]] = {name: [] for name in _COMMANDS}
    with tempfile.TemporaryDirectory(prefix="turnkeep-sandbox-bench-") as tmp:
        workspace = Path(tmp, "ws")
        workspace.mkdir()
        for name, command in _COMMANDS.items():
            await _call(boxed, workspace, command)  # warm both paths once
            await _call(plain, workspace, command)
            while len(sandboxed[name]) < calls:
                for _ in range(_ROUND):
                    sandboxed[name].append(await _call(boxed, workspace, command))
                    unsandboxed[name].append(await _call(plain, workspace, command))
    return Timings(sandboxed, unsandboxed)


def figures(timings: Timings) -> list[Figure]:
    """Median milliseconds per call, sandboxed against unsandboxed, and the milliseconds added."""
    rows = []
    for name in _COMMANDS:
        boxed = statistics.median(timings.sandboxed[name]) * 1000
        plain = statistics.median(timings.unsandboxed[name]) * 1000
        rows.append(
            Figure(
                benchmark="sandbox",
                figure=f"shell call `{name}` (median)",
                value=f"{boxed:.1f} ms",
                baseline=f"{plain:.1f} ms unsandboxed",
                ratio=boxed / plain,
            )
        )
        rows.append(
            Figure(
                benchmark="sandbox",
                figure=f"  added by the sandbox, `{name}`",
                value=f"{boxed - plain:.1f} ms",
                baseline=f"{len(timings.sandboxed[name])} calls each",
                target="< 50 ms",
                met=boxed - plain < 50,
            )
        )
    return rows


def main() -> None:
    """Measure and print the table, or the figures as JSON (one line) with ``--json``."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=100, help="calls of each command on each side")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    probe = probe_sandbox()
    if not probe.usable:
        rows = [Figure(benchmark="sandbox", figure="(sandbox unavailable)", value=probe.reason, met=None)]
    else:
        with tempfile.TemporaryDirectory(prefix="turnkeep-sandbox-hidden-") as hidden:
            home, store = os.path.join(hidden, "home"), os.path.join(hidden, "store")
            os.mkdir(home)
            os.mkdir(store)
            sandbox = Sandbox(mode="required", probe=probe, hidden=lambda: [home, store])
            rows = figures(trio.run(measure, args.calls, sandbox))
    print(msgspec.json.encode(rows).decode() if args.json else format_table(rows))


if __name__ == "__main__":
    main()
