"""Real MCP servers for the tests: the SDK fixture server as a subprocess, its actor under a supervisor,
and ToolSupervisors (standing in for sessions) whose registries offer its tools."""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from actors import ActorSystem, Address, ChaosPolicy, ChildSpec
from tests._waiting import wait_until
from tests.tool_bridge.conftest import Collector, Rig
from tool_bridge import (
    PermissionPolicy,
    RunTools,
    ToolBridgeSettings,
    ToolInvocation,
    ToolRegistry,
    ToolSupervisor,
)
from tool_bridge.mcp import (
    McpServerHandle,
    McpServerSettings,
    McpToolRegistry,
    ServerStatus,
    mcp_supervisor_spec,
)

FIXTURE = Path(__file__).with_name("fixture_server.py")

QUICK = McpServerSettings(
    command=sys.executable,
    args=[str(FIXTURE)],
    startup_timeout=15.0,
    tool_timeout=15.0,
    ping_interval=30.0,
    ping_timeout=1.0,
    kill_after=10.0,
)


def fixture_settings(pidfile: Path | None = None, *extra: str, **changes: Any) -> McpServerSettings:
    """The fixture server over stdio with short timeouts; ``pidfile`` receives its pid at each start."""
    args = [str(FIXTURE), *extra] + (["--pidfile", str(pidfile)] if pidfile else [])
    return msgspec.structs.replace(QUICK, args=args, **changes)


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not count)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def read_pid(path: Path, *, other_than: int | None = None, timeout: float = 15.0) -> int:
    """The pid written to ``path`` (a new one when ``other_than`` is given)."""

    def ready() -> bool:
        text = path.read_text().strip() if path.exists() else ""
        return text.isdigit() and int(text) != other_than

    assert wait_until(ready, timeout), f"no new pid in {path}"
    return int(path.read_text())


def kill_group(pid: int) -> None:
    """SIGKILL the process group of ``pid`` (the server and its children)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


class SessionRig(Rig):
    """A rig whose batches reply to the collector at ``host``."""

    def __init__(self, *args: Any, host: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.host = host

    def run(self, *calls: ToolInvocation, batch: str = "b1") -> None:
        self.tools.tell(RunTools(batch, tuple(calls), self.host))


class McpRig:
    """One MCP server (``handle``) under a supervisor, and ``sessions`` tool supervisors offering it
    (each through its own entry of ``registries``)."""

    def __init__(
        self,
        system: ActorSystem,
        handle: McpServerHandle,
        rigs: list[SessionRig],
        registries: list[McpToolRegistry],
    ) -> None:
        self.system = system
        self.handle = handle
        self.rigs = rigs
        self.registries = registries

    @property
    def rig(self) -> SessionRig:
        return self.rigs[0]

    def status(self) -> ServerStatus:
        return self.handle.state().status

    def wait_status(self, status: ServerStatus, timeout: float = 20.0) -> None:
        assert wait_until(lambda: self.status() is status, timeout), self.handle.state()

    def actor(self) -> Address:
        return self.system.address(f"mcp/{self.handle.name}")


MakeMcpRig = Callable[..., McpRig]


@pytest.fixture
def make_mcp_rig(system: ActorSystem, tmp_path: Path) -> MakeMcpRig:
    """``make_mcp_rig(settings, name="fx", sessions=1, bridge=None, ready=True)``: the server started
    (and ready, unless ``ready`` is false) and ``sessions`` tool supervisors offering its tools."""

    def make(
        settings: McpServerSettings,
        *,
        name: str = "fx",
        sessions: int = 1,
        bridge: ToolBridgeSettings | None = None,
        ready: bool = True,
        chaos: ChaosPolicy | None = None,
        policy: PermissionPolicy | None = None,
    ) -> McpRig:
        handle = McpServerHandle(name, settings)
        workspace = tmp_path / "workspace"
        workspace.mkdir(exist_ok=True)
        inboxes: list[queue.Queue[Any]] = []
        for index in range(sessions):
            inbox: queue.Queue[Any] = queue.Queue()
            inboxes.append(inbox)
            system.spawn(ChildSpec(f"host{index}", _collector(inbox)))
        system.spawn(mcp_supervisor_spec("mcp", [handle], workspace=workspace, chaos=chaos))
        rigs = []
        registries = []
        for index in range(sessions):
            registry = McpToolRegistry(ToolRegistry(), [handle])
            registries.append(registry)
            chosen = policy or PermissionPolicy(default="allow", use_default_rules=False)
            tools = system.spawn(
                ChildSpec(
                    f"tools{index}", _supervisor(registry, chosen, workspace, bridge), shutdown_timeout=15.0
                )
            )
            rigs.append(SessionRig(system, tools, inboxes[index], chosen, host=f"host{index}"))
        made = McpRig(system, handle, rigs, registries)
        if ready:
            made.wait_status(ServerStatus.READY)
        return made

    return make


def _collector(inbox: queue.Queue[Any]) -> Callable[[], Collector]:
    return lambda: Collector(inbox)


def _supervisor(
    registry: ToolRegistry, policy: PermissionPolicy, workspace: Path, bridge: ToolBridgeSettings | None
) -> Callable[[], ToolSupervisor]:
    return lambda: ToolSupervisor(registry, policy, workspace, settings=bridge)
