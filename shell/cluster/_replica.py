"""One host replica: an :class:`AgentHost` in a process of its own, answering the pool's requests.

Ray runs this class as an actor (see :mod:`shell.cluster._ray`), but nothing here knows Ray: a request
comes in as msgpack bytes and its reply goes out as msgpack bytes.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import msgspec

from actors import Address

from .. import events as ev
from ..config import Settings
from ..host import AgentHost
from ..store import StoreBusy, StoreUnavailable
from . import _wire as wire
from ._outbox import Outbox

__all__ = ["NotHere", "ReplicaCore"]

logger = logging.getLogger("turnkeep.pool")

_MAX_POLL_WAIT = 5.0
_START_PATIENCE = 30.0
_START_PAUSE = 0.5
_TERMINAL_TAGS = frozenset(cls.__name__ for cls in ev.TERMINAL_EVENTS)
_terminal_decoder = msgspec.json.Decoder(ev.TurnCompleted | ev.TurnFailed | ev.TurnCancelled)


class NotHere(Exception):
    """The session does not run on this replica (this incarnation never opened or resumed it)."""


class ReplicaCore:
    """A host and the outbox of its sessions' events.

    Every request is answered with a :class:`wire.Reply`, never an exception: a failure is sent back as
    its class name and message. Each session's events go to the outbox from the moment it is opened or
    resumed here, until it is closed or the process ends.
    """

    def __init__(self, settings: bytes) -> None:
        self.incarnation = uuid.uuid4().hex
        self._host = _start_host(msgspec.msgpack.decode(settings, type=Settings))
        self._outbox = Outbox()
        self._lock = threading.Lock()
        self._addresses: dict[str, Address] = {}
        self._forwarders: dict[str, Any] = {}
        self._first_turns: dict[str, int] = {}

    def call(self, request: bytes) -> bytes:
        """Answer one encoded :data:`wire.Request` with an encoded :class:`wire.Reply`."""
        try:
            value = self._answer(wire.decode_request(request))
        except Exception as exc:
            if not isinstance(exc, NotHere):
                logger.debug("request failed", exc_info=True)
            return wire.encode(wire.Reply(failure=wire.Failure(type(exc).__name__, str(exc))))
        return wire.encode(wire.Reply(value=msgspec.Raw(wire.encode(value))))

    # -- requests ------------------------------------------------------------------------------------

    def _answer(self, request: wire.Request) -> Any:
        match request:
            case wire.Poll(incarnation, after, wait):
                # A cursor from another incarnation means nothing here: acknowledge nothing.
                start = after if incarnation == self.incarnation else 0
                taken = self._outbox.take(start, min(wait, _MAX_POLL_WAIT))
                items = [wire.Item(seq, sid, msgspec.Raw(body)) for seq, sid, body in taken]
                return wire.Batch(self.incarnation, items, os.getpid())
            case wire.Deliver(session_id, message):
                return self._address(session_id).ask(message)
            case wire.OpenSession(session_id, workspace):
                address = self._host.open(workspace, session_id=session_id)
                self._attach(session_id, lambda forward: self._subscribed(session_id, address, forward))
                return self.incarnation
            case wire.ResumeSession(session_id):
                self._attach(session_id, lambda forward: self._resumed(session_id, forward))
                return self.incarnation
            case wire.History(session_id, include_replaced):
                self._address(session_id)
                return self._host.history(session_id, include_replaced=include_replaced)
            case wire.Settle(session_id, turns):
                return self._settle(session_id, set(turns))
            case wire.CloseSession(session_id):
                with self._lock:
                    self._addresses.pop(session_id, None)
                    self._forwarders.pop(session_id, None)
                    self._first_turns.pop(session_id, None)
                self._host.close(session_id)
                return None
            case wire.ListSessions():
                return self._host.list_sessions()
            case wire.Ping():
                with self._lock:
                    sessions = sorted(self._addresses)
                return wire.ReplicaInfo(self.incarnation, os.getpid(), sessions)
            case wire.Shutdown(timeout):
                self._host.shutdown(timeout)
                return None
        raise AssertionError(f"unhandled request {request!r}")  # pragma: no cover

    def _address(self, session_id: str) -> Address:
        with self._lock:
            address = self._addresses.get(session_id)
        if address is None:
            raise NotHere(f"session {session_id!r} does not run on this replica")
        return address

    def _attach(self, session_id: str, start: Callable[[Any], Address]) -> None:
        """Start the session with ``start``, given the forwarder that sends its events to the outbox to
        subscribe (once, however often it is opened or resumed: later, ``start`` is given None)."""
        with self._lock:
            forwarder = None if session_id in self._forwarders else self._forwarder(session_id)
            if forwarder is not None:
                self._forwarders[session_id] = forwarder
        try:
            address = start(forwarder)
        except BaseException:
            if forwarder is not None:
                with self._lock:
                    self._forwarders.pop(session_id, None)
            raise
        with self._lock:
            self._addresses[session_id] = address

    def _resumed(self, session_id: str, forward: Any) -> Address:
        # Subscribed before it starts: a turn it resumes (or ends interrupted) is heard from its start.
        return self._host.resume(session_id, subscribers=[] if forward is None else [forward])

    def _subscribed(self, session_id: str, address: Address, forward: Any) -> Address:
        if forward is not None:
            self._host.subscribe(session_id, forward)
        return address

    def _forwarder(self, session_id: str) -> Any:
        outbox = self._outbox
        first_turns = self._first_turns
        lock = self._lock

        def forward(event: Any) -> None:
            # Called on the session's thread, with every event it publishes.
            if isinstance(event, wire.FORWARDED):
                turn = getattr(event, "turn", None)
                if turn is not None and session_id not in first_turns:
                    with lock:
                        first_turns.setdefault(session_id, turn)
                outbox.put(session_id, wire.encode(event))

        return forward

    def _settle(self, session_id: str, turns: set[int]) -> wire.Settled:
        store = self._host.store
        # The record first: a turn it shows running that ends meanwhile has its end among the events.
        record = store.get_session(session_id)
        outcomes: dict[int, ev.TurnCompleted | ev.TurnFailed | ev.TurnCancelled] = {}
        for stored in store.load_events(session_id):
            if stored.turn in turns and stored.type in _TERMINAL_TAGS:
                outcomes[stored.turn] = _terminal_decoder.decode(stored.body)
        # Read after the store: a turn whose end is stored has published its first event by then. Such a
        # turn, and every later one, ends in the outbox after its other events, not here ahead of them.
        with self._lock:
            first_here = self._first_turns.get(session_id)
        current = record.current_turn
        running = record.status == "in_turn" and current not in outcomes
        ended_here = [] if first_here is None else sorted(turn for turn in outcomes if turn >= first_here)
        for turn in ended_here:
            del outcomes[turn]
        queued = sorted({stored.turn for stored in store.load_queued_prompts(session_id)})
        return wire.Settled(
            [outcomes[turn] for turn in sorted(outcomes)], current, running, queued, ended_here
        )


def _start_host(settings: Settings) -> AgentHost:
    """A host on the store of ``settings``, waiting out a store that is briefly busy or unreachable (a
    replica restarted while the database restarts too): an error here would end the replica for good."""
    deadline = time.monotonic() + _START_PATIENCE
    while True:
        try:
            return AgentHost(settings)
        except (StoreBusy, StoreUnavailable):
            if time.monotonic() > deadline:
                raise
            logger.warning("the store is not ready; trying again", exc_info=True)
            time.sleep(_START_PAUSE)
