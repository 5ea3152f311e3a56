"""The ways into a host besides the mailbox: a blocking façade for scripts and threads, and a trio one.

Both serve any :class:`HostBackend`: an :class:`AgentHost` in this process, or a pool of replicas
(:class:`shell.cluster.HostPool`). A session's events, cancel, history and close look the same either way.
"""

from __future__ import annotations

import math
import queue
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import trio

from sampler import Message

from . import events as ev
from .config import Settings, load_settings
from .host import AgentHost, HostError
from .messages import Cancel, Subscribe, Unsubscribe, UserPrompt
from .store import SessionNotFound, SessionRecord

__all__ = ["AsyncHost", "AsyncSession", "Host", "HostBackend", "Mailbox", "Session", "open_host"]

_EVENT_TIMEOUT = 900.0


@runtime_checkable
class Mailbox(Protocol):
    """A session's mailbox: takes ``UserPrompt``, ``Cancel``, ``PermissionDecision``, ``Subscribe`` and
    ``Unsubscribe`` and answers as a session's :class:`actors.Address` does."""

    def ask(self, message: Any, timeout: float | None = None) -> Any:
        """Send ``message`` and return the answer."""
        ...

    def tell(self, message: Any) -> None:
        """Send ``message`` without waiting."""
        ...


@runtime_checkable
class HostBackend(Protocol):
    """What every host offers the façades: :class:`AgentHost` and :class:`shell.cluster.HostPool` alike.

    Unknown sessions raise :class:`HostError`; ``shutdown`` is idempotent and ends running turns as
    ``aborted``.
    """

    def open(self, workspace: str | Path, *, session_id: str | None = None) -> Mailbox:
        """Start a new session in ``workspace`` and return its mailbox."""
        ...

    def resume(self, session_id: str) -> Mailbox:
        """The mailbox of a stored session, started from the store if it is not running."""
        ...

    def list_sessions(self) -> list[SessionRecord]:
        """Every session the store holds."""
        ...

    def history(self, session_id: str, *, include_replaced: bool = False) -> tuple[Message, ...]:
        """The session's history as its model sees it now."""
        ...

    def close(self, session_id: str) -> None:
        """Stop the session (a running turn ends ``aborted``) and mark it closed in the store."""
        ...

    def shutdown(self, timeout: float = 30.0) -> None:
        """End every running turn as ``aborted`` and stop every session."""
        ...


def _agent_host(backend: HostBackend) -> AgentHost:
    """``backend`` when it is an :class:`AgentHost` (forks are made in its store), else :class:`HostError`."""
    if not isinstance(backend, AgentHost):
        raise HostError(f"forks are made by a turnkeep.AgentHost; this host runs on {type(backend).__name__}")
    return backend


def _settings(config: Settings | str | Path | None) -> Settings:
    return config if isinstance(config, Settings) else load_settings(config)


class Session:
    """One session seen from a script: ``for event in session.prompt("…")`` yields the turn's events,
    the last one terminal; :meth:`cancel` ends the running turn (from any thread)."""

    def __init__(self, host: HostBackend, session_id: str, address: Mailbox) -> None:
        self.id = session_id
        self.address = address
        self._host = host
        self._events: queue.Queue[Any] = queue.Queue()
        address.ask(Subscribe(self._events))

    def __repr__(self) -> str:
        return f"<turnkeep.Session id={self.id!r}>"

    def prompt(self, text: str, *, event_timeout: float = _EVENT_TIMEOUT) -> Iterator[Any]:
        """Send ``text`` and yield this turn's events up to its end. Raises :class:`HostError` when no
        event arrives within ``event_timeout`` seconds (a pool may also raise
        :class:`shell.cluster.ReplicaUnavailable` when no replica took the prompt)."""
        number = self.address.ask(UserPrompt(text))
        while True:
            try:
                event = self._events.get(timeout=event_timeout)
            except queue.Empty:
                raise HostError(f"no event from session {self.id!r} for {event_timeout:g} s") from None
            if getattr(event, "turn", number) != number:
                continue
            yield event
            if isinstance(event, ev.TERMINAL_EVENTS):
                return

    def run(self, text: str) -> Any:
        """Send ``text`` and return the turn's terminal event."""
        events = list(self.prompt(text))
        return events[-1]

    def cancel(self) -> bool:
        """Cancel the running turn; False when none was running."""
        result: bool = self.address.ask(Cancel())
        return result

    def history(self) -> tuple[Message, ...]:
        """The history as the model sees it now."""
        return self._host.history(self.id)

    def detach(self) -> None:
        """Stop receiving this session's events here."""
        self.address.ask(Unsubscribe(self._events))

    def fork(
        self,
        at_turn: int | None = None,
        *,
        workspace: str | Path | None = None,
        session_id: str | None = None,
    ) -> Session:
        """A new session whose history is this one's at the end of turn ``at_turn`` (the last turn that
        ended when None; a turn running is left out), in the same workspace or ``workspace``; its next
        turn is ``at_turn + 1``, and this session is not changed. Files in the workspace are not copied
        or rolled back. Raises as :meth:`AgentHost.fork` does (:class:`~shell.store.ForkRejected` for a
        turn out of range); :class:`HostError` when the host is not an :class:`AgentHost`."""
        host = _agent_host(self._host)
        record = host.fork(self.id, at_turn=at_turn, workspace=workspace, session_id=session_id)
        return Session(host, record.id, host.resume(record.id))

    def rewind(
        self, to_turn: int, *, workspace: str | Path | None = None, session_id: str | None = None
    ) -> Session:
        """:meth:`fork` at ``to_turn`` and this session archived (see :meth:`AgentHost.rewind`): the
        returned session continues from there, this one is stopped and takes no more prompts (resuming it
        needs ``archived=True``). Refused with :class:`~shell.store.TurnRunning` while a turn runs."""
        host = _agent_host(self._host)
        with suppress(HostError):
            self.detach()
        try:
            record = host.rewind(self.id, to_turn=to_turn, workspace=workspace, session_id=session_id)
        except BaseException:
            with suppress(HostError):
                self.address.ask(Subscribe(self._events))
            raise
        return Session(host, record.id, host.resume(record.id))

    def close(self) -> None:
        """Stop the session (a running turn ends ``aborted``) and mark it closed in the store: it takes
        no more prompts (resuming it raises :class:`HostError`), and its history stays in the store."""
        with suppress(HostError):
            self.detach()
        self._host.close(self.id)


class Host:
    """A host for scripts and threaded apps: ``with Host(config) as host: s = host.open(workspace)``.

    ``config`` is a :class:`Settings`, a TOML file path, or None (defaults and ``TURNKEEP_*``); keyword
    arguments go to :class:`AgentHost`. ``Host(backend=…)`` serves a host built elsewhere instead (a pool,
    say; the façade then owns it and shuts it down on :meth:`close`).
    """

    def __init__(
        self,
        config: Settings | str | Path | None = None,
        *,
        backend: HostBackend | None = None,
        **options: Any,
    ) -> None:
        if backend is not None and (config is not None or options):
            raise TypeError("turnkeep.Host(backend=…) takes no configuration: the backend has its own")
        self.backend: HostBackend = backend or AgentHost(_settings(config), **options)

    @property
    def agent_host(self) -> AgentHost:
        """The :class:`AgentHost` behind this façade; :class:`HostError` when the backend is not one."""
        if not isinstance(self.backend, AgentHost):
            raise HostError(f"this host runs on {type(self.backend).__name__}, not on a turnkeep.AgentHost")
        return self.backend

    def open(self, workspace: str | Path, *, session_id: str | None = None) -> Session:
        """A new session working in ``workspace``."""
        session_id = session_id or uuid.uuid4().hex[:12]
        return Session(self.backend, session_id, self.backend.open(workspace, session_id=session_id))

    def resume(self, session_id: str, *, archived: bool = False) -> Session:
        """A stored session, continued; an archived one (a rewind replaced it) only with ``archived``,
        which takes it out of the archive (:meth:`AgentHost.resume`)."""
        if archived:
            host = _agent_host(self.backend)
            return Session(host, session_id, host.resume(session_id, archived=True))
        return Session(self.backend, session_id, self.backend.resume(session_id))

    def fork(
        self,
        session_id: str,
        at_turn: int | None = None,
        *,
        workspace: str | Path | None = None,
        new_id: str | None = None,
    ) -> Session:
        """A fork of the stored session ``session_id`` (running, closed or archived) at the end of turn
        ``at_turn``, continued (see :meth:`Session.fork`)."""
        host = _agent_host(self.backend)
        record = host.fork(session_id, at_turn=at_turn, workspace=workspace, session_id=new_id)
        return Session(host, record.id, host.resume(record.id))

    def sessions(self) -> list[SessionRecord]:
        """Every stored session."""
        return self.backend.list_sessions()

    def session(self, session_id: str) -> SessionRecord:
        """The stored record of the session ``session_id``, running or not. Raises
        :class:`SessionNotFound` when the store has no such session."""
        if isinstance(self.backend, AgentHost):
            return self.backend.session(session_id)
        found = next((record for record in self.backend.list_sessions() if record.id == session_id), None)
        if found is None:
            raise SessionNotFound(f"there is no session {session_id!r}")
        return found

    def close(self) -> None:
        """Shut the host down cooperatively (running turns end as ``aborted``)."""
        self.backend.shutdown()

    def __enter__(self) -> Host:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncSession:
    """One session seen from trio: ``async for event in session.prompt("…")``."""

    def __init__(self, session: Session) -> None:
        self._session = session
        self.id = session.id

    def __repr__(self) -> str:
        return f"<turnkeep.AsyncSession id={self.id!r}>"

    async def prompt(self, text: str, *, event_timeout: float = _EVENT_TIMEOUT) -> AsyncIterator[Any]:
        """Send ``text`` and yield this turn's events up to its end; :class:`trio.TooSlowError` when no
        event arrives within ``event_timeout`` seconds."""
        token = trio.lowlevel.current_trio_token()
        send, receive = trio.open_memory_channel[Any](math.inf)

        def deliver(event: Any) -> None:
            # Runs on the trio thread; it must never raise there.
            with suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                send.send_nowait(event)

        def forward(event: Any) -> None:
            with suppress(trio.RunFinishedError):
                token.run_sync_soon(deliver, event)

        address = self._session.address
        await trio.to_thread.run_sync(address.ask, Subscribe(forward))
        try:
            number = await trio.to_thread.run_sync(address.ask, UserPrompt(text))
            while True:
                with trio.fail_after(event_timeout):
                    event = await receive.receive()
                if getattr(event, "turn", number) != number:
                    continue
                yield event
                if isinstance(event, ev.TERMINAL_EVENTS):
                    return
        finally:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(address.ask, Unsubscribe(forward))

    async def cancel(self) -> bool:
        """Cancel the running turn; False when none was running."""
        return await trio.to_thread.run_sync(self._session.cancel)

    async def history(self) -> tuple[Message, ...]:
        """The history as the model sees it now."""
        return await trio.to_thread.run_sync(self._session.history)

    async def close(self) -> None:
        """Stop the session and mark it closed in the store (see :meth:`Session.close`)."""
        await trio.to_thread.run_sync(self._session.close)

    async def fork(
        self,
        at_turn: int | None = None,
        *,
        workspace: str | Path | None = None,
        session_id: str | None = None,
    ) -> AsyncSession:
        """A new session with this one's history at the end of turn ``at_turn`` (see :meth:`Session.fork`)."""
        forked = await trio.to_thread.run_sync(
            lambda: self._session.fork(at_turn, workspace=workspace, session_id=session_id)
        )
        return AsyncSession(forked)

    async def rewind(
        self, to_turn: int, *, workspace: str | Path | None = None, session_id: str | None = None
    ) -> AsyncSession:
        """:meth:`fork` at ``to_turn`` and this session archived (see :meth:`Session.rewind`)."""
        rewound = await trio.to_thread.run_sync(
            lambda: self._session.rewind(to_turn, workspace=workspace, session_id=session_id)
        )
        return AsyncSession(rewound)


class AsyncHost:
    """The trio face of a :class:`Host`; made by :func:`open_host` or :meth:`running`."""

    def __init__(self, host: Host) -> None:
        self.host = host

    @classmethod
    @asynccontextmanager
    async def running(cls, make: Callable[[], Host]) -> AsyncIterator[AsyncHost]:
        """``async with AsyncHost.running(make) as host:`` — the host ``make`` builds (on a worker
        thread), shut down cooperatively on the way out, even when cancelled."""
        host = await trio.to_thread.run_sync(make)
        try:
            yield cls(host)
        finally:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(host.close)

    async def open(self, workspace: str | Path, *, session_id: str | None = None) -> AsyncSession:
        """A new session working in ``workspace``."""
        session = await trio.to_thread.run_sync(lambda: self.host.open(workspace, session_id=session_id))
        return AsyncSession(session)

    async def resume(self, session_id: str) -> AsyncSession:
        """A stored session, continued."""
        return AsyncSession(await trio.to_thread.run_sync(self.host.resume, session_id))

    async def sessions(self) -> list[SessionRecord]:
        """Every stored session."""
        return await trio.to_thread.run_sync(self.host.sessions)


@asynccontextmanager
async def open_host(config: Settings | str | Path | None = None, **options: Any) -> AsyncIterator[AsyncHost]:
    """``async with open_host(config) as host:`` — a host in this process whose sessions are driven
    from trio (:func:`shell.cluster.open_pool_host` for a pool)."""
    async with AsyncHost.running(lambda: Host(config, **options)) as host:
        yield host
