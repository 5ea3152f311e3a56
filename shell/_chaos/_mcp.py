"""MCP under chaos: the server every session gets, its script, and the killer that SIGKILLs servers at
random while the run goes on."""

from __future__ import annotations

import random
import signal
import sys
import threading
from collections.abc import Callable, Iterable

from sampler.fake import FinalAnswer, Script, ToolStep
from tool_bridge import kill_process_group
from tool_bridge.mcp import McpServerHandle, McpServerSettings

__all__ = ["MCP_NAME", "MCP_SCRIPT", "McpKiller", "mcp_settings"]

MCP_NAME = "chaos"
MCP_SCRIPT = Script.task(
    [
        ToolStep([("chaos__echo", {"text": "one"}), ("chaos__echo", {"text": "two"})], text="Asking MCP."),
        ToolStep([("chaos__slow", {"seconds": 0.3})]),
        FinalAnswer("The MCP server answered."),
    ]
)
"""Two tool rounds and a final answer, as the other scripts."""

_KILL_PERIOD = 0.25


def mcp_settings(mark_variable: str, mark: str, tool_timeout: float) -> McpServerSettings:
    """A session-scope stdio server whose processes carry the run's mark (so an orphan is found)."""
    return McpServerSettings(
        command=sys.executable,
        args=["-m", "shell._chaos._mcp_server"],
        env={mark_variable: mark},
        scope="session",
        startup_timeout=20.0,
        tool_timeout=tool_timeout,
        ping_interval=5.0,
        ping_timeout=2.0,
        kill_after=2.0,
        retry_every=2.0,
    )


class McpKiller:
    """A thread that, every quarter second, SIGKILLs the process group of each running server of
    ``handles()`` with probability ``rate`` (seeded); ``kills`` counts them."""

    def __init__(self, handles: Callable[[], Iterable[McpServerHandle]], rate: float, seed: int) -> None:
        self._handles = handles
        self._rate = rate
        self._rng = random.Random(f"turnkeep-chaos-mcp-kill/{seed}")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chaos-mcp-killer", daemon=True)
        self.kills = 0

    def __enter__(self) -> McpKiller:
        if self._rate > 0:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5.0)

    def _run(self) -> None:
        while not self._stop.wait(_KILL_PERIOD):
            for handle in list(self._handles()):
                pid = handle.server_pid()
                chosen = pid is not None and self._rng.random() < self._rate
                if chosen and pid is not None and kill_process_group(pid, signal.SIGKILL):
                    self.kills += 1
