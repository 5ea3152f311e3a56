"""Sessions on a Ray cluster: a pool of host replicas behind the same ways in as a local host.

``connect(config)`` returns a local :class:`shell.Host` or a :class:`PoolHost`, as the ``[cluster]``
settings say; both have the same ``open``/``resume``/``sessions``/``close``, and their sessions the same
``prompt``/``run``/``cancel``/``history``. :func:`open_pool_host` is the trio face. Underneath,
:class:`HostPool` places sessions on replicas (each an :class:`shell.AgentHost` in a Ray actor that Ray
restarts when its process dies) and moves them when a replica is lost; its :class:`PoolAddress` takes the
mailbox messages a local session's address takes.

Importing this module does not need Ray; starting a pool does (``pip install 'turnkeep[ray]'``).
"""

from __future__ import annotations

import math
import queue
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import msgspec
import trio

from sampler import Message

from . import events as ev
from ._ray.errors import ClusterUnavailable, PoolError, ReplicaError, ReplicaUnavailable
from ._ray.pool import HostPool, PoolAddress, ReplicaStatus
from ._ray.settings import ClusterSettings, load_cluster_settings
from .config import Settings, load_settings
from .facade import Host, turn_events
from .messages import Cancel, Subscribe, Unsubscribe, UserPrompt
from .store import SessionRecord

__all__ = [
    "AsyncPoolHost",
    "AsyncPoolSession",
    "ClusterSettings",
    "ClusterUnavailable",
    "HostPool",
    "PoolAddress",
    "PoolError",
    "PoolHost",
    "PoolSession",
    "ReplicaError",
    "ReplicaStatus",
    "ReplicaUnavailable",
    "cluster_settings",
    "connect",
    "load_cluster_settings",
    "open_pool_host",
]

_EVENT_TIMEOUT = 900.0


def _settings(config: Settings | str | Path | None) -> Settings:
    return config if isinstance(config, Settings) else load_settings(config)


def cluster_settings(
    settings: Settings, cluster: ClusterSettings | str | Path | None = None
) -> ClusterSettings:
    """The cluster settings in force: ``cluster`` if given (settings, or a TOML file with a ``[cluster]``
    table), else the ``cluster`` section of ``settings`` when the configuration has one, else the
    defaults (``backend = "local"``)."""
    if isinstance(cluster, ClusterSettings):
        return cluster
    if cluster is not None:
        return load_cluster_settings(cluster)
    section = getattr(settings, "cluster", None)
    return section if isinstance(section, ClusterSettings) else ClusterSettings()


class PoolSession:
    """One session of a pool, seen from a script: the same surface as :class:`shell.Session`.

    ``for event in session.prompt("…")`` yields the turn's events, the last one terminal (a turn cut
    short by a lost replica ends ``TurnCancelled(reason="interrupted")``); :meth:`cancel` ends the
    running turn, from any thread.
    """

    def __init__(self, pool: HostPool, address: PoolAddress) -> None:
        self.id = address.session_id
        self.address = address
        self._pool = pool
        self._events: queue.Queue[Any] = queue.Queue()
        address.ask(Subscribe(self._events))

    def prompt(self, text: str, *, event_timeout: float = _EVENT_TIMEOUT) -> Iterator[Any]:
        """Send ``text`` and yield this turn's events up to its end. Raises :class:`HostError` when no
        event arrives within ``event_timeout`` seconds, :class:`ReplicaUnavailable` when no replica
        took the prompt."""
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
        return self._pool.history(self.id)

    def detach(self) -> None:
        """Stop receiving this session's events here."""
        self.address.ask(Unsubscribe(self._events))


class PoolHost:
    """A host whose sessions run on a pool of replicas: the same surface as :class:`shell.Host`.

    ``config`` is a :class:`Settings`, a TOML file path, or None (defaults and ``TURNKEEP_*``);
    ``cluster`` is as for :func:`cluster_settings`, its backend taken to be ``ray``. Raises
    :class:`ClusterUnavailable` when the replicas cannot be started.
    """

    def __init__(
        self,
        config: Settings | str | Path | None = None,
        *,
        cluster: ClusterSettings | str | Path | None = None,
    ) -> None:
        settings = _settings(config)
        chosen = cluster_settings(settings, cluster)
        if chosen.backend != "ray":
            chosen = msgspec.structs.replace(chosen, backend="ray")
        self.pool = HostPool(settings, chosen)

    def open(self, workspace: str | Path, *, session_id: str | None = None) -> PoolSession:
        """A new session working in ``workspace`` (a path the replicas can reach)."""
        return PoolSession(self.pool, self.pool.open(workspace, session_id=session_id))

    def resume(self, session_id: str) -> PoolSession:
        """A stored session, continued."""
        return PoolSession(self.pool, self.pool.resume(session_id))

    def sessions(self) -> list[SessionRecord]:
        """Every stored session."""
        return self.pool.list_sessions()

    def close(self) -> None:
        """Shut the pool down cooperatively (running turns end as ``aborted``)."""
        self.pool.shutdown()

    def __enter__(self) -> PoolHost:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def connect(
    config: Settings | str | Path | None = None,
    *,
    cluster: ClusterSettings | str | Path | None = None,
    **options: Any,
) -> Host | PoolHost:
    """A local :class:`Host` or a :class:`PoolHost`, as the cluster settings (see
    :func:`cluster_settings`) say: the same code runs against either. ``options`` go to the local
    :class:`shell.AgentHost`; a pool refuses them (:class:`PoolError`), as they cannot cross processes."""
    settings = _settings(config)
    chosen = cluster_settings(settings, cluster)
    if chosen.backend == "local":
        return Host(settings, **options)
    if options:
        raise PoolError(f"a pool's replicas are built from the settings alone; drop {sorted(options)}")
    return PoolHost(settings, cluster=chosen)


# -- the trio face -------------------------------------------------------------------------------------------


class AsyncPoolSession:
    """One session of a pool, seen from trio: ``async for event in session.prompt("…")``."""

    def __init__(self, session: PoolSession) -> None:
        self._session = session
        self.id = session.id

    async def prompt(self, text: str, *, event_timeout: float = _EVENT_TIMEOUT) -> AsyncIterator[Any]:
        """Send ``text`` and yield this turn's events up to its end."""
        token = trio.lowlevel.current_trio_token()
        send, receive = trio.open_memory_channel[Any](math.inf)

        def deliver(event: Any) -> None:
            with suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                send.send_nowait(event)

        def forward(event: Any) -> None:
            with suppress(trio.RunFinishedError):
                token.run_sync_soon(deliver, event)

        address = self._session.address
        address.ask(Subscribe(forward))
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
            address.ask(Unsubscribe(forward))

    async def cancel(self) -> bool:
        """Cancel the running turn."""
        return await trio.to_thread.run_sync(self._session.cancel)

    async def history(self) -> tuple[Message, ...]:
        """The history as the model sees it now."""
        return await trio.to_thread.run_sync(self._session.history)


class AsyncPoolHost:
    """The trio face of a pool; made by :func:`open_pool_host`."""

    def __init__(self, host: PoolHost) -> None:
        self._host = host
        self.pool = host.pool

    async def open(self, workspace: str | Path, *, session_id: str | None = None) -> AsyncPoolSession:
        """A new session working in ``workspace``."""
        session = await trio.to_thread.run_sync(lambda: self._host.open(workspace, session_id=session_id))
        return AsyncPoolSession(session)

    async def resume(self, session_id: str) -> AsyncPoolSession:
        """A stored session, continued."""
        return AsyncPoolSession(await trio.to_thread.run_sync(self._host.resume, session_id))


@asynccontextmanager
async def open_pool_host(
    config: Settings | str | Path | None = None, *, cluster: ClusterSettings | str | Path | None = None
) -> AsyncIterator[AsyncPoolHost]:
    """``async with open_pool_host(config) as host:`` — a pool whose sessions are driven from trio."""
    host = await trio.to_thread.run_sync(lambda: PoolHost(config, cluster=cluster))
    try:
        yield AsyncPoolHost(host)
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(host.close)
