"""Whole sessions on real actors, a real SQLite store and the embedded provider on a real socket."""

from __future__ import annotations

import queue
from pathlib import Path
from typing import Any

import msgspec

from actors import ActorSystem, Address
from sampler import RetryPolicy, SamplerSettings
from sampler.fake import FakeProvider
from shell import events as ev
from shell.credentials import CredentialProvider, StaticKey
from shell.messages import Subscribe, UserPrompt
from shell.session import (
    ChatStateOptions,
    SessionChaos,
    SessionOptions,
    SessionParts,
    SessionPath,
    session_runtime,
    session_spec,
)
from shell.store import SessionStore
from tool_bridge import PermissionPolicy, PermissionRule, ToolBridgeSettings, builtin_registry

FAST_RETRIES = RetryPolicy(base_delay=0.01, max_delay=0.05)

OPEN: list[Harness] = []
"""Harnesses not closed yet: the shell tests' conftest closes what a failing test left open."""


class Harness:
    """One system, one store, one provider; sessions opened on demand."""

    def __init__(
        self,
        tmp_path: Path,
        provider: FakeProvider,
        *,
        credentials: CredentialProvider | None = None,
        context_window: int = 100_000,
        max_steps: int = 100,
        compaction_threshold: float = 0.85,
        chaos: SessionChaos | None = None,
        tools: ToolBridgeSettings | None = None,
        idle_timeout: float = 10.0,
        step_probe_after: float = 30.0,
        telemetry: Any = None,
        policy: PermissionPolicy | None = None,
    ) -> None:
        self.tmp_path = tmp_path
        self.provider = provider
        self.store_path = tmp_path / "sessions.db"
        self.store = SessionStore.open(self.store_path)
        self.system = ActorSystem()
        self.credentials = credentials or StaticKey(env_var="TEST_KEY", environ={"TEST_KEY": "sk-test-0000"})
        self.context_window = context_window
        self.max_steps = max_steps
        self.compaction_threshold = compaction_threshold
        self.chaos = chaos or SessionChaos()
        self.tools = tools or ToolBridgeSettings(abort_grace=0.5, kill_after=2.0)
        self.idle_timeout = idle_timeout
        self.step_probe_after = step_probe_after
        self.inboxes: dict[str, queue.Queue[Any]] = {}
        self.report: Any = None
        self.telemetry = telemetry
        """A :class:`shell.telemetry.Telemetry` told of every turn and supervision fact, or None."""
        self.policy = policy or PermissionPolicy([PermissionRule("*", "allow")])
        """The permission policy of every session (default: every tool allowed)."""
        if telemetry is not None:
            self.system.observe(telemetry.supervision)
            self.system.dead_letters.subscribe(telemetry.dead_letter)
        OPEN.append(self)

    def open(self, session_id: str = "s1") -> Address:
        workspace = self.tmp_path / f"ws-{session_id}"
        workspace.mkdir(exist_ok=True)
        try:
            self.store.get_session(session_id)
        except Exception:
            self.store.create_session(session_id, workspace=str(workspace), model="fake-model")
        parts = SessionParts(
            options=SessionOptions(
                session_id,
                "fake-model",
                max_steps_per_turn=self.max_steps,
                compaction_threshold=self.compaction_threshold,
                step_probe_after=self.step_probe_after,
            ),
            chat=ChatStateOptions(session_id, context_window=self.context_window, keep_recent_turns=1),
            sampler=SamplerSettings(
                base_url=self.provider.base_url, policy=FAST_RETRIES, idle_timeout=self.idle_timeout
            ),
            store=self.store,
            workspace=workspace,
            credentials=self.credentials,
            registry=builtin_registry(),
            policy=self.policy,
            tools=self.tools,
            chaos=self.chaos,
        )
        path = SessionPath(session_id)
        runtime = session_runtime(parts)
        if self.telemetry is not None:
            runtime.observer = self.telemetry.observe
            runtime.traceparent = self.telemetry.traceparent
            runtime.prepare_trace = self.telemetry.prepare
        self.system.spawn(session_spec(path.child_name, parts, runtime))
        session = self.system.address(path.member("session"))
        inbox: queue.Queue[Any] = queue.Queue()
        session.ask(Subscribe(inbox))
        self.inboxes[session_id] = inbox
        return session

    def prompt(self, session: Address, text: str) -> int:
        number: int = session.ask(UserPrompt(text))
        return number

    def until_end(self, session_id: str = "s1", timeout: float = 30.0) -> list[Any]:
        """Events of the session up to and including the next terminal event."""
        events = []
        inbox = self.inboxes[session_id]
        while True:
            event = inbox.get(timeout=timeout)
            events.append(event)
            if isinstance(event, ev.TERMINAL_EVENTS):
                return events

    def turn(self, session: Address, text: str, session_id: str = "s1") -> list[Any]:
        self.prompt(session, text)
        return self.until_end(session_id)

    def stored_events(self, session_id: str = "s1") -> list[tuple[str, dict[str, Any]]]:
        """The event log as a fresh reader of the database file sees it."""
        with SessionStore.open(self.store_path) as store:
            return [(e.type, msgspec.json.decode(e.body)) for e in store.load_events(session_id)]

    def stored_history(self, session_id: str = "s1", include_replaced: bool = False) -> list[Any]:
        """The history as a fresh reader of the database file sees it."""
        with SessionStore.open(self.store_path) as store:
            return [m.message for m in store.load_messages(session_id, include_replaced=include_replaced)]

    def close(self) -> Any:
        """Shut the system down and close the store (once; later calls return the same report)."""
        if self in OPEN:
            OPEN.remove(self)
            try:
                self.report = self.system.shutdown(timeout=20)
            finally:
                self.store.close()
        return self.report


def of(events: list[Any], kind: type) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]
