"""Two ways into a host besides the mailbox: a blocking façade for scripts and threads, and a trio one."""

from __future__ import annotations

import math
import queue
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import trio

from actors import Address
from sampler import Message

from . import events as ev
from ._protocol import GetHistory
from .config import Settings, load_settings
from .host import AgentHost, HostError
from .messages import Cancel, Subscribe, Unsubscribe, UserPrompt
from .store import SessionRecord

__all__ = ["AsyncHost", "AsyncSession", "Host", "Session", "open_host"]

_EVENT_TIMEOUT = 900.0


def _settings(config: Settings | str | Path | None) -> Settings:
    return config if isinstance(config, Settings) else load_settings(config)


def turn_events(
    address: Any, events: queue.Queue[Any], session_id: str, text: str, timeout: float
) -> Iterator[Any]:
    """Send ``text`` as a prompt to ``address`` and yield, from ``events`` (the session's subscribed
    queue), that turn's events up to its terminal one; :class:`HostError` when none comes for ``timeout``
    seconds."""
    number = address.ask(UserPrompt(text))
    while True:
        try:
            event = events.get(timeout=timeout)
        except queue.Empty:
            raise HostError(f"no event from session {session_id!r} for {timeout:g} s") from None
        if getattr(event, "turn", number) != number:
            continue
        yield event
        if isinstance(event, ev.TERMINAL_EVENTS):
            return


class Session:
    """One session seen from a script: ``for event in session.prompt("…")`` yields the turn's events,
    the last one terminal; :meth:`cancel` ends the running turn (from any thread)."""

    def __init__(self, host: AgentHost, session_id: str, address: Address) -> None:
        self.id = session_id
        self.address = address
        self._host = host
        self._events: queue.Queue[Any] = queue.Queue()
        address.ask(Subscribe(self._events))

    def prompt(self, text: str, *, event_timeout: float = _EVENT_TIMEOUT) -> Iterator[Any]:
        """Send ``text`` and yield this turn's events up to its end. Raises :class:`HostError` when no
        event arrives within ``event_timeout`` seconds."""
        yield from turn_events(self.address, self._events, self.id, text, event_timeout)

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
        chat = self._host.system.address(self.address.name.rsplit("/", 1)[0] + "/chat_state")
        result: tuple[Message, ...] = chat.ask(GetHistory())
        return result

    def detach(self) -> None:
        """Stop receiving this session's events here."""
        self.address.ask(Unsubscribe(self._events))


class Host:
    """A host for scripts and threaded apps: ``with Host(config) as host: s = host.open(workspace)``.

    ``config`` is a :class:`Settings`, a TOML file path, or None (defaults and ``TURNKEEP_*``).
    Keyword arguments go to :class:`AgentHost`.
    """

    def __init__(self, config: Settings | str | Path | None = None, **options: Any) -> None:
        self.agent_host = AgentHost(_settings(config), **options)

    def open(self, workspace: str | Path, *, session_id: str | None = None) -> Session:
        """A new session working in ``workspace``."""
        address = self.agent_host.open(workspace, session_id=session_id)
        return Session(self.agent_host, address.name.split("/")[2], address)

    def resume(self, session_id: str) -> Session:
        """A stored session, continued."""
        return Session(self.agent_host, session_id, self.agent_host.resume(session_id))

    def sessions(self) -> list[SessionRecord]:
        """Every stored session."""
        return self.agent_host.list_sessions()

    def close(self) -> None:
        """Shut the host down cooperatively (running turns end as ``aborted``)."""
        self.agent_host.shutdown()

    def __enter__(self) -> Host:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncSession:
    """One session seen from trio: ``async for event in session.prompt("…")``."""

    def __init__(self, session: Session) -> None:
        self._session = session
        self.id = session.id

    async def prompt(self, text: str, *, event_timeout: float = _EVENT_TIMEOUT) -> AsyncIterator[Any]:
        """Send ``text`` and yield this turn's events up to its end."""
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
        """Cancel the running turn."""
        return await trio.to_thread.run_sync(self._session.cancel)


class AsyncHost:
    """The trio face of a host; made by :func:`open_host`."""

    def __init__(self, host: Host) -> None:
        self._host = host

    async def open(self, workspace: str | Path, *, session_id: str | None = None) -> AsyncSession:
        """A new session working in ``workspace``."""
        session = await trio.to_thread.run_sync(lambda: self._host.open(workspace, session_id=session_id))
        return AsyncSession(session)

    async def resume(self, session_id: str) -> AsyncSession:
        """A stored session, continued."""
        return AsyncSession(await trio.to_thread.run_sync(self._host.resume, session_id))


@asynccontextmanager
async def open_host(config: Settings | str | Path | None = None, **options: Any) -> AsyncIterator[AsyncHost]:
    """``async with open_host(config) as host:`` — a host whose sessions are driven from trio."""
    host = await trio.to_thread.run_sync(lambda: Host(config, **options))
    try:
        yield AsyncHost(host)
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(host.close)
