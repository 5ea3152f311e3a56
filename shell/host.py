"""AgentHost: many sessions in one process, each a supervised subtree, passivated when idle.

It stays one module because it is one owner: the sessions' table, its lock and the host's supervisor are
shared by opening, activation, passivation, closing and shutdown alike; what it builds from the settings
is in :mod:`shell._from_settings`, the MCP servers' life in :mod:`tool_bridge.mcp`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from actors import ActorError, ActorSystem, Address, ChildSpec, RestartIntensity, Supervisor, blocking
from sampler import Message, ToolSpec
from sampler.gate import GateClient, GateShortcut, GetGateStatus, ProviderGate
from tool_bridge import PermissionPolicy, ToolRegistry, builtin_registry
from tool_bridge.mcp import (
    MCP_CHILD,
    McpServerHandle,
    McpServers,
    McpServerSettings,
    McpServerState,
    ReconnectMcp,
    ServerStatus,
    status_notice,
)

from . import _collector
from ._from_settings import (
    chat_options,
    credentials_from_settings,
    policy_from_settings,
    sampler_settings,
    session_options,
    tool_bridge_settings,
)
from ._protocol import GetHistory, Passivate, ToolServerChanged
from ._tool_isolation import tool_isolation, watch_host_secrets
from .config import PRIORITIES, Priority, Settings
from .credentials import CredentialProvider
from .doom_loop import DoomLoopDetector
from .messages import Subscribe, Unsubscribe, UserPrompt
from .session import (
    Built,
    OpenSession,
    SessionChaos,
    SessionParts,
    SessionPath,
    SessionRuntime,
    TurnGate,
    session_runtime,
    session_spec,
    tool_specs,
    write_to_store,
)
from .store import SessionNotFound, SessionRecord, StoredMessage, TurnRunning, TurnUsageRecord, open_store
from .subagents import (
    ChildStart,
    Lineage,
    ParentSide,
    Subagents,
    agent_tool,
    child_chat,
    child_options,
    child_tools,
    lineage_of,
)

if TYPE_CHECKING:
    from .telemetry import Telemetry

__all__ = ["AgentHost", "HostError"]

_PASSIVATE_ASK = 5.0  # seconds a session has to say whether it may be passivated

logger = logging.getLogger("turnkeep.shell")

HOST_INTENSITY = RestartIntensity(1000, 5.0)
"""The host's restart intensity. Its children are independent sessions, each with its own intensity: a
session subtree that gives up is restarted by the host (its turn fails ``internal``, its waiting prompts
run), and only restarts at a rate no set of sessions produces on its own make the host give up."""


_CHILD_PROMPT_BACKOFF = (0.25, 0.5, 1.0, None)
_SUBSCRIBE_TRIES = 5
"""Waits between tries to prompt a child whose session actor crashed (None: the last try)."""


class HostError(Exception):
    """A host operation cannot be done: an unknown session, a closed host."""


class AgentHost:
    """Opens, resumes, lists and closes sessions; each session is a subtree under the host supervisor.

    A session idle longer than ``settings.host.passivate_after`` seconds has its subtree stopped (its
    state is in the store) and is started again, transparently, by the next message to its address. At
    most ``settings.host.max_concurrent_turns`` turns run at once; prompts beyond that wait in order.
    :meth:`shutdown` cancels every running turn as ``aborted``, flushes and closes the store.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        credentials: CredentialProvider | None = None,
        registry: Callable[[], ToolRegistry] | None = None,
        permissions: Callable[[], PermissionPolicy] | None = None,
        chaos: SessionChaos | None = None,
        system: ActorSystem | None = None,
        telemetry: Telemetry | None = None,
    ) -> None:
        self.settings = settings
        self._holds_collector = False
        self._credentials = credentials or credentials_from_settings(settings)
        self._registry = registry or (
            lambda: builtin_registry(
                shell_default_timeout=settings.tools.shell_timeout,
                shell_max_timeout=settings.tools.shell_max_timeout,
                shell_env=self.tool_isolation.env,
                shell_sandbox=self.tool_isolation.sandbox,
            )
        )
        self._permissions = permissions or (lambda: policy_from_settings(settings))
        self._chaos = chaos or SessionChaos()
        # The same for every session (all frozen): made once, not per open.
        self._sampler_settings = sampler_settings(settings)
        self._tool_settings = tool_bridge_settings(settings)
        self.mcp = McpServers(settings.mcp_servers, chaos=self._chaos.mcp)
        self._owns_system = system is None
        self.system = system or ActorSystem(ask_timeout=settings.timeouts.ask)
        self.store = open_store(
            settings.store.path,
            synchronous=settings.store.synchronous,
            group_commit=settings.store.group_commit,
        )
        self.tool_isolation = tool_isolation(
            settings, os.environ, store_path=self.store.path, workspaces=self._workspaces
        )
        """The environment and sandbox of the built-in ``shell`` tool's commands."""
        self.mcp.use_session_environment(self.tool_isolation.env)
        self._secret_watches = watch_host_secrets(settings, self._credentials, os.environ)
        self.gate = TurnGate(settings.host.max_concurrent_turns)
        self.subagents = Subagents(
            settings.agents, self.store, self._open_child, self._close_child, grace=settings.tools.abort_grace
        )
        """The children the sessions' ``agent`` calls run, within the limits of ``[agents]``."""
        self._sessions: dict[str, OpenSession] = {}
        self._specs: dict[bytes, tuple[ToolSpec, ...]] = {}
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self.supervisor = self.system.spawn(
            ChildSpec("host", lambda: Supervisor(intensity=HOST_INTENSITY), shutdown_timeout=60.0)
        )
        limits = settings.provider.limits
        self._gate_shortcut = GateShortcut()
        self.provider_gate: Address | None = (
            self.system.spawn(
                ChildSpec(
                    "provider_gate",
                    lambda: ProviderGate(limits.gate_limits(), shortcut=self._gate_shortcut),
                    chaos=self._chaos.provider_gate,
                ),
                parent=self.supervisor,
            )
            if limits.enabled
            else None
        )
        """The gate every session's model requests pass through (None when ``provider.limits.enabled`` is
        false)."""
        self.telemetry = telemetry
        """Traces and metrics of the host's turns and actors (None when ``telemetry.enabled`` is false)."""
        if self.telemetry is None and settings.telemetry.enabled:
            from .telemetry import start_host_telemetry  # only then: no cost without telemetry

            self.telemetry = start_host_telemetry(settings, self._session_counts, self.provider_gate)
        if self.telemetry is not None:
            self.system.observe(self.telemetry.supervision)
            self.system.dead_letters.subscribe(self.telemetry.dead_letter)
        self.mcp.start(self.system, self.supervisor, Path.cwd())
        for handle in self.mcp.host_handles:
            handle.on_status_changed(lambda before, state: self._announce(before, state, None))
        self._janitor = threading.Thread(target=self._passivate_idle, name="turnkeep-janitor", daemon=True)
        self._janitor.start()
        if settings.host.collector:
            _collector.hold()
            self._holds_collector = True

    # -- sessions ------------------------------------------------------------------------------------

    def open(
        self,
        workspace: str | Path,
        *,
        session_id: str | None = None,
        priority: Priority = "interactive",
        mcp_servers: Mapping[str, McpServerSettings] | None = None,
        subscribers: Iterable[Any] = (),
    ) -> Address:
        """Start a new session in ``workspace`` and return its address (the session's mailbox).
        ``subscribers`` hear its events from the first on, subscribed before it starts.
        ``priority`` is its place at the provider gate: ``interactive`` requests go before
        ``background`` ones, which still progress as they wait. ``mcp_servers`` are MCP servers of this
        session alone, run as session-scope ones (an editor's own servers, say); they are not stored, so a
        later :meth:`resume` in another process is given them again. Raises
        :class:`~tool_bridge.mcp.McpSettingsError` (before anything is stored) for a server name taken by a
        configured server or not fit to name one, and :class:`~tool_bridge.mcp.McpNotInstalled` without
        the ``mcp`` extra."""
        self._check_open()
        session_id = session_id or uuid.uuid4().hex[:12]
        self._path(session_id)
        self._check_servers(mcp_servers)
        path = Path(workspace).resolve()
        path.mkdir(parents=True, exist_ok=True)
        self.store.create_session(session_id, workspace=str(path), model=self.settings.provider.model)
        self.store.take_session(session_id)
        address = self._activate(session_id, path, priority, Lineage(session_id), mcp_servers)
        with self._lock:
            session = self._sessions[session_id]
        self._subscribe_early(session, subscribers)
        return address

    def _subscribe_early(self, session: OpenSession, subscribers: Iterable[Any]) -> None:
        """Subscribe ``subscribers`` before the session's subtree starts (one started meanwhile by a
        message takes them by mail, as :meth:`subscribe`)."""
        subscribers = list(subscribers)
        if not subscribers:
            return
        with session.lock:
            started = session.active
            if not started:
                session.runtime.subscribers.extend(subscribers)
        if started:
            for subscriber in subscribers:
                self.subscribe(session.record_id, subscriber)

    def _check_servers(self, servers: Mapping[str, McpServerSettings] | None) -> None:
        if servers:
            self.mcp.session_handles(servers)

    def resume(
        self,
        session_id: str,
        *,
        priority: Priority = "interactive",
        archived: bool = False,
        subscribers: Iterable[Any] = (),
        mcp_servers: Mapping[str, McpServerSettings] | None = None,
    ) -> Address:
        """The address of a stored session, started from the store if it is not running. Raises
        :class:`HostError` for a session the store does not have, one that was closed, and one that is
        archived (a rewind replaced it) unless ``archived`` is true: then it is taken out of the archive
        first and takes prompts again.

        A turn its process did not live to end goes on from its stored steps (``TurnResumed``), or ends
        ``interrupted`` when it may not be resumed (``host.resume_interrupted_turns``,
        ``host.max_resumes_per_turn``). ``subscribers`` are subscribed before the session starts, so they
        hear that too (for a session already running they are subscribed as by :meth:`subscribe`).
        ``mcp_servers`` are as for :meth:`open`; they are taken only by a session not open in this host
        yet (one that is keeps the servers it was opened with)."""
        self._check_open()
        self._path(session_id)
        self._check_servers(mcp_servers)
        with self._lock:
            known = self._sessions.get(session_id)
        if known is not None and self.store.owns(session_id):
            for subscriber in subscribers:
                self.subscribe(session_id, subscriber)
            return self._address(session_id)
        if known is not None:  # another host took it since: this copy is stale, the store has the truth
            self._let_go(session_id, wait=True)
        try:
            record = self.store.get_session(session_id)
        except SessionNotFound as exc:
            raise HostError(f"there is no session {session_id!r} in {self.store.location}") from exc
        if record.status == "closed":
            raise HostError(f"session {session_id!r} is closed: it takes no more prompts")
        if record.status == "archived":
            if not archived:
                raise HostError(
                    f"session {session_id!r} is archived (a rewind replaced it): resume it with"
                    " archived=True to take it out of the archive and continue it"
                )
            record = self.store.unarchive_session(session_id)
        # From now on a host that had the session (one presumed dead, say) writes nothing more to it.
        self.store.take_session(session_id)
        address = self._activate(session_id, Path(record.workspace), priority, mcp_servers=mcp_servers)
        with self._lock:
            session = self._sessions[session_id]
        self._subscribe_early(session, subscribers)
        if record.status == "in_turn" or self.store.load_queued_prompts(session_id):
            # Its process ended mid-turn, or with prompts waiting: started now, the session goes on with
            # that turn (or ends it as interrupted, when it may not be resumed) and runs them.
            self._start_subtree(session)
        return address

    def _open_child(self, start: ChildStart) -> Address:
        """Start the child of an ``agent`` call with its subscriber (see :data:`shell.subagents.OpenChild`):
        created and prompted the first time, resumed as stored after that."""
        self._check_open()
        child_id = start.child_id
        try:
            record: SessionRecord | None = self.store.get_session(child_id)
        except SessionNotFound:
            record = None
        if record is None:
            model = start.profile.model or self.settings.provider.model
            workspace = str(start.workspace)
            self.store.create_session(child_id, workspace=workspace, model=model, parent=start.link)
            self.store.take_session(child_id)
            address = self._activate(child_id, start.workspace, "interactive")
            self.subscribe(child_id, start.subscriber)
        else:
            address = self.resume(child_id, subscribers=[start.subscriber])
        self._prompt_child(address, child_id, start.prompt)
        return address

    def _close_child(self, child_id: str) -> None:
        """Close a child once its call has its result; a host shutting down stops it itself (its turn is
        cancelled ``aborted``), and it is taken up again, as stored, by the next host."""
        if not self._closed.is_set():
            self.close(child_id)

    def _prompt_child(self, address: Address, child_id: str, prompt: str) -> None:
        """Prompt the child unless its prompt was acknowledged before (its turn begun or stored as waiting),
        trying again past a crash of its session actor; ActorError after the last try."""
        for delay in _CHILD_PROMPT_BACKOFF:
            record = self.store.get_session(child_id)
            if record.current_turn > 0 or self.store.load_queued_prompts(child_id):
                return
            try:
                address.ask(UserPrompt(prompt))
                return
            except ActorError:
                if delay is None:
                    raise
                with blocking():
                    time.sleep(delay)

    def fork(
        self,
        source_id: str,
        /,
        *,
        at_turn: int | None = None,
        workspace: str | Path | None = None,
        session_id: str | None = None,
    ) -> SessionRecord:
        """A new session whose history is the stored session ``source_id``'s as it stood at the end of
        turn ``at_turn`` (its last converged turn when None: a turn running is left out); returns its
        record. It is stored, not started: resume it (or prompt it through a façade) to continue it.

        The fork has its own id (``session_id``, or a new one), the source's workspace or ``workspace``
        (created when missing), and its next turn is ``at_turn + 1``; the source is not changed, and may
        be running, closed or archived. What is copied is said in :meth:`SessionStore.fork_session`; files
        in the workspace are not. Raises :class:`HostError` for an unknown source or an invalid id,
        :class:`~shell.store.SessionExists` for a taken ``session_id`` and
        :class:`~shell.store.ForkRejected` for a turn below 0 or past the last converged one.
        """
        self._check_open()
        new_id, path = self._fork_target(workspace, session_id)
        try:
            return self.store.fork_session(
                source_id, new_id, at_turn=at_turn, workspace=None if path is None else str(path)
            )
        except SessionNotFound as exc:
            raise HostError(f"there is no session {source_id!r} in {self.store.location}") from exc

    def rewind(
        self,
        source_id: str,
        /,
        *,
        to_turn: int,
        workspace: str | Path | None = None,
        session_id: str | None = None,
    ) -> SessionRecord:
        """:meth:`fork` at ``to_turn``, then the source archived, in one store transaction; returns the
        fork's record. The source's actors are stopped; it stays stored and listed (status ``archived``)
        and :meth:`resume` refuses it unless asked with ``archived=True``.

        A rewind cancels nothing: it is refused with :class:`~shell.store.TurnRunning` while the source
        has a turn running or prompts waiting, and with :class:`~shell.store.SessionClosed` or
        :class:`~shell.store.SessionArchived` for a closed or archived source; otherwise it raises as
        :meth:`fork` does.
        """
        self._check_open()
        new_id, path = self._fork_target(workspace, session_id)
        with self._lock:
            session = self._sessions.get(source_id)
        # Stopped only once it agrees, in its own mailbox, that it is idle: it starts no turn after that.
        if session is not None and session.active and not self._passivate(session, idle_for=-1.0):
            turn = session.runtime.turn
            number = turn.number if turn is not None else session.runtime.next_turn or 0
            raise TurnRunning(
                f"session {source_id!r} has a turn running or prompts waiting: it can be rewound once"
                " they have ended (cancel the turn to end it now)",
                session_id=source_id,
                turn=number,
            )
        try:
            record = self.store.rewind_session(
                source_id, new_id, to_turn=to_turn, workspace=None if path is None else str(path)
            )
        except SessionNotFound as exc:
            raise HostError(f"there is no session {source_id!r} in {self.store.location}") from exc
        with self._lock:
            session = self._sessions.pop(source_id, None)
        if session is not None:
            self._address(source_id).set_activator(None)
            self._stop_subtree(session)
        return record

    def _fork_target(self, workspace: str | Path | None, session_id: str | None) -> tuple[str, Path | None]:
        """The id of a new fork (checked) and its workspace, resolved and created (None: the source's)."""
        new_id = session_id or uuid.uuid4().hex[:12]
        self._path(new_id)
        if workspace is None:
            return new_id, None
        path = Path(workspace).resolve()
        path.mkdir(parents=True, exist_ok=True)
        return new_id, path

    def list_sessions(self) -> list[SessionRecord]:
        """Every session the store holds."""
        return self.store.list_sessions()

    def session(self, session_id: str) -> SessionRecord:
        """The stored record of the session, running or not. Raises :class:`SessionNotFound` when the
        store has no such session."""
        return self.store.get_session(session_id)

    def turn_usage(self, session_id: str) -> list[TurnUsageRecord]:
        """The usage of every ended turn of the session, by turn. Raises nothing for an unknown session:
        it has no turns."""
        return self.store.turn_usage(session_id)

    def usage_by_session(self) -> dict[str, list[TurnUsageRecord]]:
        """:meth:`turn_usage` of every stored session that has any, by session id."""
        return self.store.usage_by_session()

    def stored_messages(self, session_id: str) -> list[StoredMessage]:
        """Every message the store holds for the session, those a compaction replaced included, with
        their seq, turn and what replaced them; the session need not be running."""
        return self.store.load_messages(session_id, include_replaced=True)

    def last_event_seq(self, session_id: str) -> int:
        """The seq of the session's last stored event (0 when it has none). Raises
        :class:`SessionNotFound` when the store has no such session."""
        known = self.store.load_events(session_id)
        return known[-1].seq if known else 0

    def active(self) -> list[str]:
        """The ids of sessions whose subtree is running now (not passivated)."""
        with self._lock:
            return [sid for sid, s in self._sessions.items() if s.active]

    def history(self, session_id: str, *, include_replaced: bool = False) -> tuple[Message, ...]:
        """The session's history as its model sees it now (with ``include_replaced``, every stored
        message, those a compaction replaced included); the session is started if it was passivated.
        Raises :class:`HostError` for a session the host does not have open."""
        self._check_open()
        with self._lock:
            session = self._sessions.get(session_id)
        if session is None:
            raise HostError(f"session {session_id!r} is not open in this host")
        self._start_subtree(session)
        chat = self.system.address(self._path(session_id).member("chat_state"))
        history: tuple[Message, ...] = chat.ask(GetHistory(include_replaced))
        return history

    def describe(self, session_id: str) -> str:
        """A one-line account of what the session is doing now (its turn's phase, the sampler's steps),
        for diagnostics; says so when the host does not have the session open."""
        with self._lock:
            session = self._sessions.get(session_id)
        if session is None:
            return f"session {session_id!r} is not open in this host"
        servers = self.mcp.describe(session.mcp)
        return (
            ("active; " if session.active else "passivated; ")
            + session.runtime.describe()
            + (f"; {servers}" if servers else "")
        )

    def describe_gate(self) -> str:
        """A one-line account of the provider gate: requests in flight, waiting by priority, cool-down and
        budgets left."""
        if self.provider_gate is None:
            return "provider gate: disabled"
        snapshot = self.provider_gate.ask(GetGateStatus())
        return str(snapshot.describe())

    def mcp_servers(self) -> list[McpServerHandle]:
        """Every MCP server of the host: its own, then each open session's."""
        with self._lock:
            sessions = list(self._sessions.values())
        return [*self.mcp.host_handles, *(handle for session in sessions for handle in session.mcp)]

    def reconnect_mcp(self, name: str, session_id: str | None = None) -> bool:
        """Start the MCP server ``name`` again now (the session's own when ``session_id`` has one by that
        name, else the host's), an unavailable one included; False when there is no such server."""
        with self._lock:
            session = self._sessions.get(session_id) if session_id is not None else None
        if session is not None and any(handle.name == name for handle in session.mcp):
            target = self._path(session.record_id).member(f"{MCP_CHILD}/{name}")
        elif any(handle.name == name for handle in self.mcp.host_handles):
            target = f"{self.supervisor.name}/{MCP_CHILD}/{name}"
        else:
            return False
        self.system.address(target).tell(ReconnectMcp())
        return True

    def close(self, session_id: str) -> None:
        """Stop the session's subtree (cancelling its turn as aborted) and mark it closed in the store."""
        with self._lock:
            session = self._sessions.pop(session_id, None)
        if session is not None:
            self._address(session_id).set_activator(None)
            self._stop_subtree(session)
            # A closed session's actors never come back: the system keeps none of their addresses.
            self.system.forget(self._path(session_id).subtree)
        self.store.close_session(session_id)

    def subscribe(self, session_id: str, subscriber: Any) -> None:
        """Send every event of the session to ``subscriber`` (an Address, a callable or a queue), once
        however often it (or an equal one) is subscribed; tried again past a restart of the session
        actor. Raises :class:`~actors.ActorError` when the session actor did not take it after a few
        tries."""
        for attempt in range(_SUBSCRIBE_TRIES):
            try:
                self._address(session_id).ask(Subscribe(subscriber))
                return
            except ActorError:
                if attempt == _SUBSCRIBE_TRIES - 1:
                    raise

    def unsubscribe(self, session_id: str, subscriber: Any) -> None:
        """Stop :meth:`subscribe`."""
        self._address(session_id).ask(Unsubscribe(subscriber))

    def passivate(self, session_id: str) -> bool:
        """Stop an idle session's subtree now; False when it is busy or not running. A prompt that reaches
        the session while it stops is answered by its next incarnation, started at once."""
        with self._lock:
            session = self._sessions.get(session_id)
        return session is not None and self._passivate(session, idle_for=-1.0)

    def shutdown(self, timeout: float = 30.0) -> None:
        """Cancel every running turn as ``aborted``, stop every session, close the store. Idempotent."""
        if self._closed.is_set():
            return
        self._closed.set()
        with self._lock:
            for session in self._sessions.values():
                if session.built:
                    session.runtime.closing = True
        self._janitor.join(5.0)
        if self._owns_system:
            self.system.shutdown(timeout=timeout, reason="host shutdown")
        else:
            self.system.stop("host", timeout=timeout)
        with self._lock:
            sessions = list(self._sessions.values())
        for session in sessions:
            self._after_stop(session)
        self.store.close()
        for watch in self._secret_watches:
            watch.close()
        if self.telemetry is not None:
            self.telemetry.shutdown()
        if self._holds_collector:
            self._holds_collector = False
            _collector.release()

    def __enter__(self) -> AgentHost:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    # -- inside --------------------------------------------------------------------------------------

    def _workspaces(self) -> list[Path]:
        return [session.workspace for session in list(self._sessions.values())]

    def _check_open(self) -> None:
        if self._closed.is_set():
            raise HostError("the host has shut down")

    def _path(self, session_id: str) -> SessionPath:
        try:
            return SessionPath(session_id, self.supervisor.name)
        except ValueError as exc:
            raise HostError(str(exc)) from None

    def _address(self, session_id: str) -> Address:
        return self.system.address(self._path(session_id).member("session"))

    def _activate(
        self,
        session_id: str,
        workspace: Path,
        priority: Priority,
        lineage: Lineage | None = None,
        mcp_servers: Mapping[str, McpServerSettings] | None = None,
    ) -> Address:
        """The session's address, its subtree to start with its first message; its ``lineage`` is read from
        the store when it is built, unless given."""
        with self._lock:
            session = self._sessions.get(session_id)
            if session is None:
                session = self._sessions[session_id] = OpenSession(
                    session_id,
                    workspace,
                    lambda: self._build(session_id, workspace, priority, lineage, mcp_servers),
                )
        # The subtree starts with the first message to the session, as after a passivation: opening
        # thousands of sessions starts no thread.
        address = self._address(session_id)
        address.set_activator(lambda _: self._reactivate(session_id))
        return address

    def _build(
        self,
        session_id: str,
        workspace: Path,
        priority: Priority,
        lineage: Lineage | None,
        mcp_servers: Mapping[str, McpServerSettings] | None,
    ) -> Built:
        s = self.settings
        if lineage is None:
            lineage = lineage_of(self.store, session_id, s)
        gate = None
        if self.provider_gate is not None:
            # A family takes its turns at the gate together, a parent's requests before its children's.
            gate = GateClient(
                self.provider_gate,
                session=lineage.family,
                priority=PRIORITIES[priority],
                rank=lineage.depth,
                max_wait=s.provider.limits.max_wait,
                queued_after=s.provider.limits.queued_after,
                shortcut=self._gate_shortcut,
            )
        servers = self.mcp.session_handles(mcp_servers)
        runtime: SessionRuntime | None = None

        def turn_in_flight() -> int:
            machine = None if runtime is None else runtime.turn
            return 0 if machine is None else machine.number

        agent = None
        if s.agents.may_spawn(lineage.depth):
            parent = ParentSide(session_id, lineage.depth, turn_in_flight, self._address(session_id).tell)
            agent = agent_tool(self.subagents, parent, s.agents, s.tools.abort_grace)
        own, only = child_tools(self._registry(), lineage, agent)
        registry = self.mcp.registry(own, servers, only=only)
        registry.override_idempotency(s.tools.idempotency_classes())
        parts = SessionParts(
            options=child_options(session_options(s, session_id), lineage, s),
            chat=child_chat(chat_options(s, session_id), lineage),
            sampler=self._sampler_settings,
            store=self.store,
            workspace=workspace,
            credentials=self._credentials,
            registry=registry,
            policy=self._permissions(),
            tools=self._tool_settings,
            doom_loop=DoomLoopDetector.from_settings(s.doom_loop),
            chaos=self._chaos.children.get(lineage.profile_name, self._chaos)
            if lineage.depth
            else self._chaos,
            gate=gate,
            mcp=self.mcp.session_spec(servers, workspace),
        )
        # A child's turn runs in its parent's turn slot: waiting for one of its own could wait forever.
        runtime = session_runtime(parts, None if lineage.depth else self.gate, self._shared(registry))
        held = weakref.ref(runtime)

        def offer(current: ToolRegistry) -> None:
            alive = held()
            if alive is not None:
                alive.tool_specs = tool_specs(current)

        self.mcp.follow_tools(servers, registry, offer)
        for handle in servers:
            handle.on_status_changed(lambda before, state: self._announce(before, state, session_id))
        if self.telemetry is not None:
            telemetry, store = self.telemetry, self.store
            runtime.observer = telemetry.observe
            runtime.traceparent = telemetry.traceparent
            runtime.prepare_trace = telemetry.prepare
            runtime.interrupted = lambda session, number: telemetry.interrupted(store, session, number)
        runtime.on_fenced = lambda: self._let_go(session_id)
        return Built(runtime, parts, servers)

    def _let_go(self, session_id: str, *, wait: bool = False) -> None:
        """Another host took the session over: stop this copy of it and forget it; resuming it here takes
        it back. Unless ``wait``, on a thread of its own (the session asks for it from its own handler)."""
        with self._lock:
            session = self._sessions.pop(session_id, None)
        if session is None:
            return

        def stop() -> None:
            try:
                self._address(session_id).set_activator(None)
                self._stop_subtree(session)
            except Exception:  # the host is shutting down too: its own stop ends the subtree
                logger.warning("session %s: its stale copy could not be stopped", session_id, exc_info=True)

        if wait:
            stop()
        else:
            threading.Thread(target=stop, name=f"turnkeep-let-go-{session_id}", daemon=True).start()

    def _announce(self, before: ServerStatus, state: McpServerState, session_id: str | None) -> None:
        """Tell the running sessions that use the server (all of them for a host-scope one) what
        :func:`status_notice` says of its change. Called by the server's job: it only tells."""
        message = status_notice(before, state)
        if message is None:
            return
        with self._lock:
            targets = [
                sid
                for sid, session in self._sessions.items()
                if session.active and (session_id is None or sid == session_id)
            ]
        notice = ToolServerChanged(state.name, state.status.value, state.restarts, message)
        for target in targets:
            self._address(target).tell(notice)

    def _session_counts(self) -> tuple[int, int]:
        """(active, passivated) sessions open in the host."""
        with self._lock:
            active = sum(1 for session in self._sessions.values() if session.active)
            return active, len(self._sessions) - active

    def _shared(self, registry: ToolRegistry) -> tuple[ToolSpec, ...]:
        """The registry's tool specs, one copy for every session whose tools are the same (called with
        ``self._lock`` held)."""
        specs = tool_specs(registry)
        return self._specs.setdefault(msgspec.json.encode(specs), specs)

    def _start_subtree(self, session: OpenSession) -> None:
        with session.lock:
            if session.active:
                return
            session.runtime.closing = False
            session.runtime.passivating = False
            spec = session_spec(self._path(session.record_id).child_name, session.parts, session.runtime)
            # Active from now on: what is told to it while it starts (an MCP server's news) waits at its
            # address for it, instead of being left out.
            session.active = True
            try:
                self.system.spawn(spec, parent=self.supervisor)
            except BaseException:
                session.active = False
                raise
        if self._holds_collector:
            _collector.session_started()

    def _stop_subtree(self, session: OpenSession) -> None:
        with session.lock:
            if not session.active:
                return
            session.runtime.closing = True
            try:
                self.system.stop(self._path(session.record_id).child_name, parent=self.supervisor)
            finally:
                session.active = False
            self._after_stop(session)
        if self._holds_collector:
            _collector.session_stopped()

    def _after_stop(self, session: OpenSession) -> None:
        """What a stopped subtree may have left undone: its kept writes, and its sampler's connections
        (left open when the sampler's last incarnation crashed)."""
        if not session.built:
            return
        self._write_kept(session)
        if session.runtime.sampler is not None:
            session.runtime.sampler.discard()

    def _write_kept(self, session: OpenSession) -> None:
        """Make the writes its stopped subtree could not make (its chat state was down), in order."""
        kept = session.runtime.unrecorded
        try:
            while kept:
                write_to_store(self.store, session.record_id, kept[0])
                kept.pop(0)
        except Exception:
            logger.exception("session %s: %d writes could not be stored", session.record_id, len(kept))

    def _reactivate(self, session_id: str) -> None:
        """Called on the sender's thread: start the subtree on a thread of its own."""

        def start() -> None:
            with self._lock:
                session = self._sessions.get(session_id)
            if session is None or self._closed.is_set():
                return
            try:
                self._start_subtree(session)
            except Exception:
                logger.exception("could not reactivate session %s", session_id)

        threading.Thread(target=start, name=f"turnkeep-activate-{session_id}", daemon=True).start()

    def _passivate_idle(self) -> None:
        limit = self.settings.host.passivate_after
        while not self._closed.wait(min(limit / 4, 5.0)):
            now = time.monotonic()
            with self._lock:
                sessions = list(self._sessions.values())
            for session in sessions:
                if not session.active:
                    continue
                runtime = session.runtime
                if runtime.settled and now - runtime.last_active > limit:
                    try:
                        self._passivate(session, idle_for=limit)
                    except Exception:
                        logger.exception("could not passivate session %s", session.record_id)

    def _passivate(self, session: OpenSession, *, idle_for: float) -> bool:
        """Stop the subtree of a session that agrees it has been idle for ``idle_for`` seconds. The session
        decides in its own mailbox, so a prompt that reaches it first keeps it running, and one that comes
        after it agreed waits for the next incarnation, which is started at once."""
        if not session.active or not session.built:
            return False
        runtime = session.runtime
        if not runtime.passivating:
            if not runtime.settled:
                return False
            question = Passivate(idle_for, deadline=time.monotonic() + _PASSIVATE_ASK)
            with contextlib.suppress(ActorError):  # what it answered in time, if anything, is in its runtime
                self._address(session.record_id).ask(question, timeout=_PASSIVATE_ASK)
            if not runtime.passivating:
                return False
        self._stop_subtree(session)
        if runtime.prompts and not self._closed.is_set():
            self._reactivate(session.record_id)
        return True
