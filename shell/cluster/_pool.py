"""The pool, on the driver's side: placing sessions on replicas, routing their mailbox messages, streaming
their events back, and moving the sessions of a replica that died.

It stays one module because it is one invariant: which replica holds which session, which turns are
acknowledged and not yet ended, and which events were delivered all live under one condition variable, and
placement, routing, recovery and delivery each read and change all of them. Split by job, every part would
need the others' private state."""

from __future__ import annotations

import logging
import threading
import time
import uuid
import zlib
from collections import Counter
from collections.abc import Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from sampler import Message
from tool_bridge.permissions import PermissionDecision

from .. import events as ev
from ..config import ClusterSettings, Settings
from ..host import HostError
from ..messages import Cancel, Subscribe, Unsubscribe, UserPrompt
from ..session import publish
from ..store import SessionClosed, SessionExists, SessionNotFound, SessionRecord, StoreBusy, StoreError
from . import _wire as wire
from ._errors import ClusterUnavailable, PoolError, ReplicaError, ReplicaUnavailable
from ._handle import ReplicaGone, ReplicaHandle, ReplicaUnreachable

__all__ = ["HostPool", "PoolAddress", "ReplicaStatus"]

logger = logging.getLogger("turnkeep.pool")

_T = TypeVar("_T")

_POLL_WAIT = 1.0
"""Seconds one poll waits on a replica for its next event."""
_PAUSE = 0.2
"""Seconds between two tries to reach a replica that does not answer."""
_DRAIN = 2.0
"""Seconds a shutdown waits for the turns it aborted to report their end."""

_LOCAL_ERRORS: dict[str, type[Exception]] = {
    "HostError": HostError,
    "SessionExists": SessionExists,
    "SessionNotFound": SessionNotFound,
    "SessionClosed": SessionClosed,
    "StoreBusy": StoreBusy,
    "StoreError": StoreError,
}
"""Errors a replica raises that are raised here as themselves."""


class _NotHere(Exception):
    """The replica does not run the session (it restarted since the session was placed on it)."""


class ReplicaStatus(msgspec.Struct, frozen=True):
    """A replica as the pool last saw it: ``up`` when it takes sessions; ``incarnation`` changes each
    time its process starts; ``sessions`` are those placed on it."""

    name: str
    up: bool
    incarnation: str | None
    pid: int | None
    sessions: tuple[str, ...]


@dataclass(eq=False)
class _Slot:
    """One replica and what the pool knows of it."""

    index: int
    handle: ReplicaHandle
    incarnation: str | None = None
    pid: int | None = None
    cursor: int = 0
    up: bool = False
    gone: bool = False
    starting: bool = False
    """The pool restarted it and has not seen it since: it is given ``cluster.start_timeout`` to come back,
    not ``cluster.restart_wait``."""


@dataclass(eq=False)
class _Placed:
    """One session and where it runs."""

    id: str
    slot: _Slot | None = None
    incarnation: str | None = None
    generation: int = 0
    moving: bool = False
    subscribers: list[Any] = field(default_factory=list)
    pending: dict[int, UserPrompt] = field(default_factory=dict)
    """Turns acknowledged whose end has not been reported yet, with their prompts."""
    ended: set[int] = field(default_factory=set)


class PoolAddress:
    """A session's mailbox in a pool: it takes what a local session's Address takes (``UserPrompt``,
    ``Cancel``, ``PermissionDecision``, ``Subscribe``, ``Unsubscribe``) and answers the same."""

    def __init__(self, pool: HostPool, session_id: str) -> None:
        self.pool = pool
        self.session_id = session_id
        self.name = f"pool/{session_id}"

    def ask(self, message: Any, timeout: float | None = None) -> Any:
        """Send ``message`` and return the session's answer; see :meth:`HostPool.ask`."""
        return self.pool.ask(self.session_id, message, timeout=timeout)

    def tell(self, message: Any) -> None:
        """Send ``message`` without waiting; see :meth:`HostPool.tell`."""
        self.pool.tell(self.session_id, message)

    def __repr__(self) -> str:
        return f"PoolAddress({self.session_id!r})"


class HostPool:
    """Sessions on host replicas, each replica an :class:`AgentHost` in a process of its own.

    A new session goes to the replica with the fewest sessions (ties broken by the session id). Its
    mailbox messages go to that replica and its events come back to the subscribers here, in order. A
    replica whose process dies is restarted by Ray; its sessions are resumed from the store, on it or on
    another replica: a turn that was running goes on from its stored steps there (or ends
    ``TurnCancelled(reason="interrupted")`` when it may not be resumed, or with its stored end if it ended
    before the replica died), prompts that were waiting behind it run, and each acknowledged turn reports
    exactly one end. Every call waits at most ``cluster.call_timeout`` seconds
    (:class:`ReplicaUnavailable` after that); a replica silent for longer than ``cluster.restart_wait`` is
    restarted and its sessions move to the others.

    ``replicas`` runs the pool on replicas that are already started (through any transport); by default
    the pool starts ``cluster.replicas`` of them as Ray actors. Raises :class:`ClusterUnavailable` when
    they cannot be started.
    """

    def __init__(
        self,
        settings: Settings,
        cluster: ClusterSettings | None = None,
        *,
        replicas: Sequence[ReplicaHandle] | None = None,
    ) -> None:
        self.settings = settings
        self.cluster = cluster or ClusterSettings(backend="ray")
        self._owns_ray = False
        self._lock = threading.Condition()
        self._closed = threading.Event()
        self._stopping = False
        self._placed: dict[str, _Placed] = {}
        handles = list(replicas) if replicas is not None else self._start_on_ray()
        self._slots = [_Slot(index, handle) for index, handle in enumerate(handles)]
        try:
            self._first_contact()
        except BaseException:
            self._release(handles)
            raise
        self._sender = ThreadPoolExecutor(max_workers=1, thread_name_prefix="turnkeep-pool-tell")
        self._pollers = [
            threading.Thread(
                target=self._poll_loop, args=(slot,), name=f"turnkeep-pool-{slot.index}", daemon=True
            )
            for slot in self._slots
        ]
        for poller in self._pollers:
            poller.start()

    # -- sessions ------------------------------------------------------------------------------------

    def open(self, workspace: str | Path, *, session_id: str | None = None) -> PoolAddress:
        """Start a new session in ``workspace`` (a path the replicas can reach) on the least loaded
        replica, and return its address. Raises :class:`SessionExists` for an id already stored."""
        session_id = session_id or uuid.uuid4().hex[:12]
        placed = _Placed(session_id)
        with self._lock:
            self._check_open()
            if session_id in self._placed:
                raise SessionExists(f"session {session_id!r} already exists")
            self._placed[session_id] = placed
        try:
            self._place(placed, self._deadline(), fresh=str(Path(workspace).resolve()))
        except BaseException:
            with self._lock:
                self._placed.pop(session_id, None)
            raise
        return PoolAddress(self, session_id)

    def resume(self, session_id: str) -> PoolAddress:
        """The address of a stored session, resumed on the least loaded replica unless it already runs.
        Raises :class:`HostError` when the store has no such session."""
        with self._lock:
            self._check_open()
            placed = self._placed.get(session_id)
            if placed is None:
                placed = self._placed[session_id] = _Placed(session_id)
        try:
            self._place(placed, self._deadline())
        except BaseException:
            with self._lock:
                if placed.slot is None and not placed.pending and not placed.subscribers:
                    self._placed.pop(session_id, None)
            raise
        return PoolAddress(self, session_id)

    def list_sessions(self) -> list[SessionRecord]:
        """Every session the store holds."""
        raw = self._any_replica(wire.ListSessions())
        return msgspec.msgpack.decode(raw, type=list[SessionRecord])

    def close(self, session_id: str) -> None:
        """Stop the session (a running turn ends ``aborted``) and mark it closed in the store."""
        with self._lock:
            placed = self._placed.get(session_id)
        if placed is not None and placed.slot is not None:
            self._on_session(placed, wire.CloseSession(session_id), self._deadline(), idempotent=True)
        else:
            self._any_replica(wire.CloseSession(session_id))
        if placed is not None:
            self._end_pending(placed, "aborted")
            with self._lock:
                self._placed.pop(session_id, None)
                self._lock.notify_all()

    def history(self, session_id: str, *, include_replaced: bool = False) -> tuple[Message, ...]:
        """The session's history as its model sees it (or every stored message)."""
        placed = self._known(session_id)
        request = wire.History(session_id, include_replaced)
        raw = self._on_session(placed, request, self._deadline(), idempotent=True)
        return msgspec.msgpack.decode(raw, type=tuple[Message, ...])

    # -- the mailbox ---------------------------------------------------------------------------------

    def ask(self, session_id: str, message: Any, *, timeout: float | None = None) -> Any:
        """Send a mailbox message to the session and return its answer: a turn number for
        ``UserPrompt``, whether a turn was running for ``Cancel``, None otherwise. ``Subscribe`` and
        ``Unsubscribe`` take effect here. Waits at most ``timeout`` (default ``cluster.call_timeout``)
        seconds, then raises :class:`ReplicaUnavailable`."""
        if isinstance(message, Subscribe):
            self.subscribe(session_id, message.subscriber)
            return None
        if isinstance(message, Unsubscribe):
            self.unsubscribe(session_id, message.subscriber)
            return None
        if not isinstance(message, UserPrompt | Cancel | PermissionDecision):
            raise PoolError(f"a session's mailbox does not take {type(message).__name__}")
        placed = self._known(session_id)
        answer = msgspec.msgpack.decode(
            self._on_session(placed, wire.Deliver(session_id, message), self._deadline(timeout))
        )
        if isinstance(message, UserPrompt) and isinstance(answer, int):
            with self._lock:
                if answer not in placed.ended:
                    placed.pending[answer] = message
        return answer

    def tell(self, session_id: str, message: Any) -> None:
        """Send a mailbox message without waiting for it; tells are sent in the order they are made. A
        failure to deliver one is logged."""
        if isinstance(message, Subscribe | Unsubscribe):
            self.ask(session_id, message)
            return
        self._sender.submit(self._tell_now, session_id, message)

    def subscribe(self, session_id: str, subscriber: Any) -> None:
        """Send every event of the session from now on to ``subscriber``: an Address (told), a callable
        (called on the pool's thread: keep it quick) or a queue (put into)."""
        placed = self._known(session_id)
        with self._lock:
            placed.subscribers.append(subscriber)

    def unsubscribe(self, session_id: str, subscriber: Any) -> None:
        """Stop :meth:`subscribe`."""
        placed = self._known(session_id)
        with self._lock:
            if subscriber in placed.subscribers:
                placed.subscribers.remove(subscriber)

    # -- the replicas --------------------------------------------------------------------------------

    def replicas(self) -> list[ReplicaStatus]:
        """Every replica as the pool last saw it."""
        with self._lock:
            return [
                ReplicaStatus(
                    slot.handle.name,
                    slot.up and not slot.gone,
                    slot.incarnation,
                    slot.pid,
                    tuple(sorted(p.id for p in self._placed.values() if p.slot is slot)),
                )
                for slot in self._slots
            ]

    def placement(self, session_id: str) -> str | None:
        """The name of the replica the session runs on, or None while it has none."""
        with self._lock:
            placed = self._placed.get(session_id)
            return None if placed is None or placed.slot is None else placed.slot.handle.name

    def restart_replica(self, name: str) -> None:
        """Have Ray end the replica's process and start it again; its sessions move as after a crash."""
        slot = next((s for s in self._slots if s.handle.name == name), None)
        if slot is None:
            raise PoolError(f"no replica {name!r} in this pool")
        slot.handle.restart()

    def shutdown(self, timeout: float = 30.0) -> None:
        """End every running turn as ``aborted``, shut every replica's host down and stop the replicas
        (and Ray, if the pool started it). Idempotent."""
        with self._lock:
            if self._stopping:
                return
            self._stopping = True
            self._lock.notify_all()
        stoppers = [
            threading.Thread(target=self._stop_host, args=(slot, timeout), daemon=True)
            for slot in self._slots
        ]
        for stopper in stoppers:
            stopper.start()
        for stopper in stoppers:
            stopper.join(timeout + self.cluster.call_timeout)
        with self._lock:
            self._lock.wait_for(lambda: not any(p.pending for p in self._placed.values()), _DRAIN)
            placed = list(self._placed.values())
        self._closed.set()
        for session in placed:
            self._end_pending(session, "aborted")
        self._sender.shutdown(wait=False, cancel_futures=True)
        self._release([slot.handle for slot in self._slots])
        for poller in self._pollers:
            poller.join(_POLL_WAIT + 5.0)

    def __enter__(self) -> HostPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    # -- starting and stopping -----------------------------------------------------------------------

    def _start_on_ray(self) -> list[ReplicaHandle]:
        try:
            from . import _ray as ray_cluster
        except ImportError as exc:
            raise ClusterUnavailable(
                f"a host pool runs on Ray, which cannot be imported ({exc}): pip install 'turnkeep[ray]'"
            ) from exc
        try:
            self._owns_ray = ray_cluster.join(self.cluster)
            return list(ray_cluster.start_replicas(msgspec.msgpack.encode(self.settings), self.cluster))
        except Exception as exc:
            if self._owns_ray:
                ray_cluster.leave()
            raise ClusterUnavailable(f"could not start the replicas on Ray: {exc}") from exc

    def _first_contact(self) -> None:
        deadline = time.monotonic() + self.cluster.start_timeout
        for slot in self._slots:
            try:
                info = msgspec.msgpack.decode(
                    self._request(slot, wire.Ping(), max(deadline - time.monotonic(), 0.1)),
                    type=wire.ReplicaInfo,
                )
            except (ReplicaUnreachable, ReplicaGone) as exc:
                raise ClusterUnavailable(f"replica {slot.handle.name} did not start: {exc}") from exc
            slot.incarnation, slot.pid, slot.up = info.incarnation, info.pid, True

    def _stop_host(self, slot: _Slot, timeout: float) -> None:
        if slot.gone or not slot.up:
            return
        try:
            self._request(slot, wire.Shutdown(timeout), timeout + self.cluster.call_timeout)
        except Exception:
            logger.warning("replica %s did not shut its host down", slot.handle.name, exc_info=True)

    def _release(self, handles: Sequence[ReplicaHandle]) -> None:
        for handle in handles:
            handle.stop()
        if self._owns_ray:
            from . import _ray as ray_cluster

            self._owns_ray = False
            ray_cluster.leave()

    # -- requests ------------------------------------------------------------------------------------

    def _deadline(self, timeout: float | None = None) -> float:
        return time.monotonic() + (self.cluster.call_timeout if timeout is None else timeout)

    def _check_open(self) -> None:
        if self._stopping:
            raise PoolError("the pool has shut down")

    def _known(self, session_id: str) -> _Placed:
        with self._lock:
            self._check_open()
            placed = self._placed.get(session_id)
        if placed is None:
            raise HostError(f"session {session_id!r} is not open in this pool: open or resume it first")
        return placed

    def _request(self, slot: _Slot, request: wire.Request, timeout: float) -> msgspec.Raw:
        """The value of the replica's reply; its failure raised as the local error it names."""
        reply = wire.decode_reply(slot.handle.call(wire.encode(request), timeout))
        failure = reply.failure
        if failure is None:
            return reply.value
        if failure.kind == "NotHere":
            raise _NotHere(failure.message)
        local = _LOCAL_ERRORS.get(failure.kind)
        if local is not None:
            raise local(failure.message)
        raise ReplicaError(f"{slot.handle.name}: {failure.kind}: {failure.message}", kind=failure.kind)

    def _any_replica(self, request: wire.Request) -> msgspec.Raw:
        deadline = self._deadline()
        while True:
            with self._lock:
                self._check_open()
                slots = [slot for slot in self._slots if slot.up and not slot.gone]
            for slot in slots:
                try:
                    return self._request(slot, request, max(deadline - time.monotonic(), 0.1))
                except (ReplicaUnreachable, ReplicaGone):
                    continue
            if not self._pause(deadline):
                raise ReplicaUnavailable("no replica answered", delivered=None)

    def _on_session(
        self, placed: _Placed, request: wire.Request, deadline: float, *, idempotent: bool = False
    ) -> msgspec.Raw:
        """Send ``request`` to the replica the session runs on (placing it first if it has none); an
        ``idempotent`` one is sent again, once the session has moved, when its replica is lost."""
        while True:
            slot, generation = self._ready_slot(placed, deadline)
            try:
                return self._request(slot, request, max(deadline - time.monotonic(), 0.1))
            except _NotHere:
                # The replica restarted under the session: wait for it to be placed again, then retry.
                if not self._wait_moved(placed, generation, deadline):
                    raise ReplicaUnavailable(
                        f"session {placed.id!r} is between replicas", delivered=False
                    ) from None
            except (ReplicaUnreachable, ReplicaGone) as exc:
                if idempotent and self._wait_moved(placed, generation, deadline):
                    continue
                raise ReplicaUnavailable(
                    f"replica {slot.handle.name} stopped answering: {exc}", delivered=None
                ) from exc

    def _wait_moved(self, placed: _Placed, generation: int, deadline: float) -> bool:
        with self._lock:
            return self._lock.wait_for(
                lambda: placed.generation != generation or self._stopping,
                max(deadline - time.monotonic(), 0.0),
            )

    def _ready_slot(self, placed: _Placed, deadline: float) -> tuple[_Slot, int]:
        while True:
            with self._lock:
                while True:
                    self._check_open()
                    slot = placed.slot
                    if slot is not None and slot.up and not placed.moving:
                        return slot, placed.generation
                    if slot is None and not placed.moving:
                        break
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise ReplicaUnavailable(f"session {placed.id!r} has no replica", delivered=False)
                    self._lock.wait(remaining)
            self._place(placed, deadline)

    def _tell_now(self, session_id: str, message: Any) -> None:
        try:
            self.ask(session_id, message)
        except Exception:
            logger.warning(
                "could not deliver %s to session %s", type(message).__name__, session_id, exc_info=True
            )

    def _pause(self, deadline: float) -> bool:
        """Wait a moment before trying again; False when the deadline is (or would be) past."""
        remaining = deadline - time.monotonic()
        if remaining <= 0 or self._closed.is_set():
            return False
        self._closed.wait(min(_PAUSE, remaining))
        return True

    # -- placement -----------------------------------------------------------------------------------

    def _choose(self, session_id: str) -> _Slot | None:
        """The replica with the fewest sessions; among equals, the session id picks."""
        candidates = [slot for slot in self._slots if slot.up and not slot.gone]
        if not candidates:
            return None
        load = Counter(p.slot.index for p in self._placed.values() if p.slot is not None)
        start = zlib.crc32(session_id.encode()) % len(self._slots)
        return min(candidates, key=lambda s: (load[s.index], (s.index - start) % len(self._slots)))

    def _place(self, placed: _Placed, deadline: float, *, fresh: str | None = None) -> None:
        """Make sure the session runs on a replica that is up: open it (``fresh`` is its workspace) or
        resume it there, then settle the turns it had acknowledged."""
        with self._lock:
            while placed.moving:
                if not self._lock.wait(max(deadline - time.monotonic(), 0.0)):
                    raise ReplicaUnavailable(f"session {placed.id!r} is between replicas", delivered=False)
            if placed.slot is not None and placed.slot.up and placed.incarnation == placed.slot.incarnation:
                return
            placed.moving = True
            placed.slot = None
        try:
            while True:
                with self._lock:
                    target = self._choose(placed.id)
                    while target is None:
                        self._check_open()
                        remaining = deadline - time.monotonic()
                        if remaining <= 0:
                            raise ReplicaUnavailable("no replica is up to take the session", delivered=False)
                        self._lock.wait(remaining)
                        target = self._choose(placed.id)
                    placed.slot = target
                    # Events the session publishes as it starts there (a resumed turn's) come from the
                    # target's incarnation before its answer does: they are the session's from now on.
                    placed.incarnation = target.incarnation
                    placed.generation += 1
                request: wire.Request = (
                    wire.ResumeSession(placed.id) if fresh is None else wire.OpenSession(placed.id, fresh)
                )
                try:
                    raw = self._request(target, request, max(deadline - time.monotonic(), 0.1))
                    incarnation = msgspec.msgpack.decode(raw, type=str)
                    with self._lock:
                        placed.incarnation = incarnation
                    if placed.pending:
                        self._settle(placed, target, deadline)
                    return
                except (ReplicaUnreachable, ReplicaGone, _NotHere):
                    logger.info(
                        "replica %s could not take session %s; trying again", target.handle.name, placed.id
                    )
                    with self._lock:
                        placed.slot = None
                    # The open may have reached the store before the replica stopped: resume from now on.
                    fresh = None
                    if not self._pause(deadline):
                        raise ReplicaUnavailable(
                            f"no replica took session {placed.id!r} in time", delivered=False
                        ) from None
                except BaseException:
                    with self._lock:
                        placed.slot = None
                    raise
        finally:
            with self._lock:
                placed.moving = False
                self._lock.notify_all()

    def _settle(self, placed: _Placed, slot: _Slot, deadline: float) -> None:
        """After a move: report the stored end of each acknowledged turn that ended elsewhere; leave the
        turns that run or ran on ``slot`` (the one resumed there) to report their own ends, after their
        other events; send again the prompts that were waiting (they never began, so they take
        the same numbers); end the rest as interrupted."""
        with self._lock:
            turns = tuple(sorted(placed.pending))
        raw = self._request(slot, wire.Settle(placed.id, turns), max(deadline - time.monotonic(), 0.1))
        settled = msgspec.msgpack.decode(raw, type=wire.Settled)
        for outcome in settled.outcomes:
            self._deliver(placed, outcome)
        with self._lock:
            waiting = sorted(placed.pending.items())
        # Turns that run there, or wait there stored, report their own ends.
        awaited = {
            *settled.queued,
            *settled.ended_here,
            *([settled.current_turn] if settled.running else []),
        }
        waiting = [(number, prompt) for number, prompt in waiting if number not in awaited]
        first = max([settled.current_turn, *settled.queued]) + 1
        if [number for number, _ in waiting] != list(range(first, first + len(waiting))):
            self._end_pending(placed, "interrupted", keep=awaited)
            return
        for number, prompt in waiting:
            request = wire.Deliver(placed.id, prompt)
            answer = msgspec.msgpack.decode(
                self._request(slot, request, max(deadline - time.monotonic(), 0.1))
            )
            if answer != number:
                logger.warning(
                    "session %s: prompt of turn %s came back as turn %s", placed.id, number, answer
                )
                self._deliver(placed, ev.TurnCancelled(placed.id, number, "interrupted"))

    def _end_pending(self, placed: _Placed, reason: str, *, keep: Collection[int] = ()) -> None:
        """End every acknowledged turn without an end (but those of ``keep``, which end on their own)
        ``reason``."""
        with self._lock:
            numbers = sorted(number for number in placed.pending if number not in keep)
        for number in numbers:
            self._deliver(placed, ev.TurnCancelled(placed.id, number, reason))

    # -- events --------------------------------------------------------------------------------------

    def _deliver(self, placed: _Placed, event: Any) -> None:
        """Hand one event to the session's subscribers; a turn's end only once."""
        with self._lock:
            if isinstance(event, ev.TERMINAL_EVENTS):
                if event.turn in placed.ended:
                    return
                placed.ended.add(event.turn)
                placed.pending.pop(event.turn, None)
                self._lock.notify_all()
            subscribers = list(placed.subscribers)
        publish(subscribers, event, session_id=placed.id)

    def _poll_loop(self, slot: _Slot) -> None:
        while not self._closed.is_set() and not slot.gone:
            request = wire.Poll(slot.incarnation, slot.cursor, _POLL_WAIT)
            try:
                raw = self._request(slot, request, _POLL_WAIT + self.cluster.call_timeout)
                batch = msgspec.msgpack.decode(raw, type=wire.Batch)
            except (ReplicaGone, ReplicaUnreachable) as exc:
                if self._stopping:
                    return
                if isinstance(exc, ReplicaGone):
                    self._lost(slot)
                    return
                self._recover(slot)
                continue
            except Exception:
                logger.exception("polling replica %s failed", slot.handle.name)
                self._closed.wait(_PAUSE)
                continue
            if batch.incarnation != slot.incarnation:
                self._restarted(slot, batch.incarnation, batch.pid)
                continue
            with self._lock:
                owners = {item.session_id: self._placed.get(item.session_id) for item in batch.items}
            for item in batch.items:
                placed = owners[item.session_id]
                if placed is not None and placed.slot is slot and placed.incarnation == batch.incarnation:
                    self._deliver(placed, wire.decode_event(item.event))
            if batch.items:
                slot.cursor = batch.items[-1].seq

    def _recover(self, slot: _Slot) -> None:
        """The replica stopped answering: wait for it to come back (a new incarnation, or the same one
        after a pause, unless the pool has restarted it), else restart it; either way its sessions are
        placed again. A replica the pool restarted is waited for as long as a replica may take to start."""
        with self._lock:
            slot.up = False
            self._lock.notify_all()
            deadline = time.monotonic() + _patience(self.cluster, starting=slot.starting)
        while not self._stopping:
            info: wire.ReplicaInfo | None = None
            try:
                raw = self._request(slot, wire.Ping(), min(2.0, max(deadline - time.monotonic(), 0.1)))
                info = msgspec.msgpack.decode(raw, type=wire.ReplicaInfo)
            except ReplicaGone:
                self._lost(slot)
                return
            except (ReplicaUnreachable, ReplicaError):
                pass
            if info is not None and info.incarnation != slot.incarnation:
                self._restarted(slot, info.incarnation, info.pid)
                return
            if info is not None and not slot.starting:
                with self._lock:
                    slot.up = True
                    self._lock.notify_all()
                return
            # Silent, or still the incarnation whose restart is under way.
            if self._pause(deadline):
                continue
            logger.warning("replica %s is silent; restarting it", slot.handle.name)
            with self._lock:
                slot.starting = True
            slot.handle.restart()
            self._evacuate(slot)
            return

    def _restarted(self, slot: _Slot, incarnation: str, pid: int | None = None) -> None:
        """The replica answers as a new ``incarnation``: it is up again, with the pid of that incarnation
        (None when it cannot be asked), and its sessions of the old one are placed again."""
        logger.info("replica %s restarted; placing its sessions again", slot.handle.name)
        if pid is None:
            pid = self._pid_of(slot, incarnation)
        with self._lock:
            slot.incarnation, slot.cursor, slot.pid = incarnation, 0, pid
            slot.up, slot.starting = True, False
            self._lock.notify_all()
        self._evacuate(slot, keep=incarnation)

    def _pid_of(self, slot: _Slot, incarnation: str) -> int | None:
        """The process id of the replica's ``incarnation``; None when it does not say so in time."""
        try:
            raw = self._request(slot, wire.Ping(), self.cluster.call_timeout)
            info = msgspec.msgpack.decode(raw, type=wire.ReplicaInfo)
        except Exception:
            return None
        return info.pid if info.incarnation == incarnation else None

    def _lost(self, slot: _Slot) -> None:
        logger.warning("replica %s is gone for good; moving its sessions", slot.handle.name)
        with self._lock:
            slot.up, slot.gone = False, True
            self._lock.notify_all()
        self._evacuate(slot)

    def _evacuate(self, slot: _Slot, *, keep: str | None = None) -> None:
        """Place again every session of ``slot`` except those already on incarnation ``keep``."""
        with self._lock:
            if self._stopping:
                return
            stale = [
                p
                for p in self._placed.values()
                if p.slot is slot and not p.moving and (keep is None or p.incarnation != keep)
            ]
            for placed in stale:
                placed.slot = None
            self._lock.notify_all()
        for placed in stale:
            try:
                self._place(placed, time.monotonic() + self.cluster.restart_wait + self.cluster.call_timeout)
            except Exception as exc:
                logger.warning("session %s could not be placed again: %s", placed.id, exc)
                self._end_pending(placed, "interrupted")


def _patience(cluster: ClusterSettings, *, starting: bool) -> float:
    """Seconds a replica that does not answer is waited for before the pool restarts it: a replica the pool
    has just restarted is given the time a replica may take to start, any other ``cluster.restart_wait``."""
    return max(cluster.start_timeout, cluster.restart_wait) if starting else cluster.restart_wait
