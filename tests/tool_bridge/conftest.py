"""A ToolSupervisor in a real actor system, with a host actor collecting everything it is told."""

from __future__ import annotations

import json
import os
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import msgspec
import pytest
import trio

from actors import Actor, ActorSystem, Address, ChaosPolicy, ChildSpec, handles
from tests._waiting import wait_until
from tool_bridge import (
    AbortTools,
    PermissionDecision,
    PermissionPolicy,
    ProcessSpec,
    RunTools,
    Tool,
    ToolBridgeSettings,
    ToolContext,
    ToolInvocation,
    ToolKind,
    ToolRegistry,
    ToolsFinished,
    ToolSupervisor,
    shell_tool,
)

T = TypeVar("T")


def system_threads() -> set[str]:
    return {t.name for t in threading.enumerate() if t.name.startswith(("actor:", "turnkeep-"))}


@pytest.fixture
def system() -> Iterator[ActorSystem]:
    """A system whose shutdown must be clean and leave no thread behind."""
    before = system_threads()
    sys = ActorSystem(ask_timeout=5.0, restart_wait=1.0)
    try:
        yield sys
    finally:
        report = sys.shutdown(timeout=10.0)
    assert report.clean, report
    assert system_threads() - before == set()


# -- tools used across the tests ---------------------------------------------------------------------


class Nap(msgspec.Struct, frozen=True):
    seconds: float = 0.0
    text: str = "done"


class Hold(msgspec.Struct, frozen=True):
    pidfile: str


async def _nap(args: Nap, context: ToolContext) -> str:
    await trio.sleep(args.seconds)
    return args.text


async def _stubborn(args: Nap, context: ToolContext) -> str:
    with trio.CancelScope(shield=True):
        await trio.sleep(args.seconds)
    return args.text


def _hold(args: Hold, context: ToolContext) -> ProcessSpec:
    script = f"trap '' TERM; echo $$ > {args.pidfile}; exec sleep 600"
    return ProcessSpec(argv=("bash", "-c", script), timeout=120)


NAP = Tool(name="nap", description="Sleep, then answer.", args_type=Nap, fn=_nap, timeout=30)
PNAP = Tool(
    name="pnap", description="Sleep, then answer.", args_type=Nap, fn=_nap, parallel_safe=True, timeout=30
)
STUBBORN = Tool(
    name="stubborn",
    description="Sleep, shielded from any stop, then answer.",
    args_type=Nap,
    fn=_stubborn,
    parallel_safe=True,
    timeout=30,
)
HOLD = Tool(
    name="hold",
    description="Run `sleep 600` ignoring SIGTERM; write the process group id to a file first.",
    args_type=Hold,
    fn=_hold,
    kind=ToolKind.PROCESS,
    parallel_safe=True,
)
COMMON_TOOLS = (NAP, PNAP, STUBBORN, HOLD)


def call(call_id: str, name: str, **arguments: Any) -> ToolInvocation:
    """One invocation of ``name`` with ``arguments`` as JSON text."""
    return ToolInvocation(call_id, name, json.dumps(arguments))


async def wait_for_output(path: Path, timeout: float = 5.0) -> str:
    """What a process under test wrote to ``path``, once it wrote a whole line; fails the test after
    ``timeout`` seconds (of real time: processes do not follow a virtual clock)."""
    with trio.fail_after(timeout):
        while not (path.exists() and path.read_text().endswith("\n")):
            await trio.sleep(0.005)
    return path.read_text()


def read_pid(path: Path, timeout: float = 5.0) -> int:
    """The process group id a `hold` or shell call wrote to ``path``, once it is there."""
    assert wait_until(lambda: path.exists() and path.read_text().strip().isdigit(), timeout), path
    return int(path.read_text())


# -- the rig -----------------------------------------------------------------------------------------


class Collector(Actor):
    """Stands in for the session: everything told to it goes into a queue."""

    def __init__(self, inbox: queue.Queue[Any]) -> None:
        super().__init__()
        self._inbox = inbox

    @handles(object)
    def _collect(self, message: Any) -> None:
        self._inbox.put(message)


class Rig:
    """A ToolSupervisor at ``tools`` whose batches reply to a collector at ``host``."""

    def __init__(
        self, system: ActorSystem, tools: Address, inbox: queue.Queue[Any], policy: PermissionPolicy
    ):
        self.system = system
        self.tools = tools
        self.policy = policy
        self._inbox = inbox
        self._unread: list[Any] = []
        self.heard: list[Any] = []

    def run(self, *calls: ToolInvocation, batch: str = "b1") -> None:
        self.tools.tell(RunTools(batch, tuple(calls), "host"))

    def abort(self, batch: str = "b1") -> float:
        """Abort ``batch``; returns when (``time.monotonic()``)."""
        self.tools.tell(AbortTools(batch))
        return time.monotonic()

    def answer(self, call_id: str, decision: str, **extra: Any) -> None:
        self.tools.tell(PermissionDecision(call_id, decision, **extra))  # type: ignore[arg-type]

    def expect(self, kind: type[T], where: Callable[[T], bool] = lambda _: True, timeout: float = 5.0) -> T:
        """The next message of type ``kind`` matching ``where``; other messages stay readable."""
        for index, message in enumerate(self._unread):
            if isinstance(message, kind) and where(message):
                return self._unread.pop(index)  # type: ignore[no-any-return]
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            try:
                message = self._inbox.get(timeout=max(0.0, remaining))
            except queue.Empty:
                raise AssertionError(f"no {kind.__name__} within {timeout} s; heard {self.heard}") from None
            self.heard.append(message)
            if isinstance(message, kind) and where(message):
                return message
            self._unread.append(message)

    def finished(self, batch: str = "b1", timeout: float = 5.0) -> ToolsFinished:
        return self.expect(ToolsFinished, lambda m: m.batch_id == batch, timeout)

    def all_heard(self, kind: type[T]) -> list[T]:
        """Every message of type ``kind`` heard so far, including those not read yet."""
        while True:
            try:
                message = self._inbox.get_nowait()
            except queue.Empty:
                break
            self.heard.append(message)
            self._unread.append(message)
        return [m for m in self.heard if isinstance(m, kind)]


MakeRig = Callable[..., Rig]


@pytest.fixture
def make_rig(system: ActorSystem, tmp_path: Path) -> MakeRig:
    """``make_rig(extra_tools=(), policy=None, settings=None, chaos=None, registry_type=ToolRegistry,
    redact=None)``: a
    started rig. The default policy allows everything; the registry has the common tools, the built-in
    shell and ``extra_tools``."""

    def make(
        extra_tools: Iterable[Tool[Any]] = (),
        *,
        policy: PermissionPolicy | None = None,
        settings: ToolBridgeSettings | None = None,
        chaos: ChaosPolicy | None = None,
        registry_type: type[ToolRegistry] = ToolRegistry,
        redact: Callable[[str], str] | None = None,
    ) -> Rig:
        inbox: queue.Queue[Any] = queue.Queue()
        chosen = policy or PermissionPolicy(default="allow", use_default_rules=False)
        registry = registry_type([*COMMON_TOOLS, shell_tool(), *extra_tools])
        workspace = tmp_path / "workspace"
        os.makedirs(workspace, exist_ok=True)
        # The host starts first, so it stops last and still hears what the tools report as they stop.
        system.spawn(ChildSpec("host", lambda: Collector(inbox)))
        tools = system.spawn(
            ChildSpec(
                "tools",
                lambda: ToolSupervisor(
                    registry, chosen, workspace, settings=settings, chaos_for_tools=chaos, redact=redact
                ),
                shutdown_timeout=15.0,
            )
        )
        return Rig(system, tools, inbox, chosen)

    return make
