"""Running the child session of an ``agent`` call to its one result, within the host's limits."""

from __future__ import annotations

import collections
import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import trio

from actors import Address
from tool_bridge import ToolContext, ToolError

from .. import events as ev
from ..config import AgentProfile, AgentsSettings
from ..messages import Cancel
from ..store import ParentLink, SessionNotFound, SessionRecord, SessionStore
from ._ids import child_session_id
from ._limits import ChildCounts, refusal
from ._outcome import ChildResult, result_of
from ._tool import AgentArgs, ParentSide

__all__ = ["ChildStart", "OpenChild", "Subagents"]

logger = logging.getLogger("turnkeep.shell")

_TERMINAL_TYPES = frozenset(cls.__name__ for cls in ev.TERMINAL_EVENTS)
_end_decoder = msgspec.json.Decoder(ev.TurnCompleted | ev.TurnFailed | ev.TurnCancelled)

_TEXT_KEPT = 8_000
"""Characters of a running child's streamed text kept, for the partial answer of a child cut off."""


@dataclass(frozen=True, slots=True)
class ChildStart:
    """What the host needs to start (or take up again) the child session of one call."""

    child_id: str
    workspace: Path
    link: ParentLink
    profile: AgentProfile
    prompt: str
    subscriber: Any
    """Subscribed before the child runs anything, so it hears the child's whole turn."""


OpenChild = Callable[[ChildStart], Address]
"""Starts the child (creating it, or resuming it as stored) with its subscriber, prompts it unless its
prompt was acknowledged before, and returns its address."""


class Subagents:
    """The children of a host's sessions: runs each ``agent`` call's child to exactly one result.

    Guarantees, for each call:

    * it is refused with an ``is_error`` result when a limit of ``[agents]`` would be passed (depth,
      children at once per turn, children per turn, children at once in the host), naming the limit;
    * its child session is ``child_session_id(parent, turn, call)``: a call run again (its parent's turn
      resumed) takes up the same child; a child that had ended is not run again, its stored end is the
      result;
    * the parent is told ``SubagentStarted`` then ``SubagentFinished`` (its turn records them, and
      itemises the child's usage);
    * the result is the child's final answer when its turn completes, else one ``is_error`` result
      saying why: failed (with its kind), cancelled, or past the profile's ``deadline`` (then the child is
      cancelled and its partial answer is given);
    * a call cancelled (its parent's turn cancelled, its session closed or stopped) cancels its child and
      waits for its end at most ``grace`` seconds;
    * once the call has its result its child is closed: nothing of it keeps running.
    """

    def __init__(
        self,
        settings: AgentsSettings,
        store: SessionStore,
        open_child: OpenChild,
        close_child: Callable[[str], None],
        *,
        grace: float,
    ) -> None:
        self._settings = settings
        self._store = store
        self._open_child = open_child
        self._close_child = close_child
        self._grace = grace
        self._lock = threading.Lock()
        self._in_turn: collections.Counter[tuple[str, int]] = collections.Counter()
        self._started: collections.Counter[tuple[str, int]] = collections.Counter()
        """Children started per parent turn by this host (the store counts those of hosts before it)."""
        self._in_host = 0

    @property
    def running(self) -> int:
        """Children running in the host now."""
        with self._lock:
            return self._in_host

    async def run(self, parent: ParentSide, args: AgentArgs, context: ToolContext) -> str:
        """Run the call (see the class's description): its result, or :class:`ToolError` with the
        ``is_error`` result."""
        profile = self._settings.profile(args.agent)
        if profile is None:
            names = ", ".join(self._settings.profile_names())
            raise ToolError(
                f"subagent refused: there is no agent profile {args.agent!r}; the profiles are {names}"
            )
        turn = parent.turn()
        child_id = child_session_id(parent.session_id, turn, context.call_id)
        existing, started = await trio.to_thread.run_sync(self._look_up, parent.session_id, turn, child_id)
        with self._admitted(parent, turn, started, new=existing is None):
            link = ParentLink(parent.session_id, turn, context.call_id, args.agent)
            result = await self._run_child(parent, args, context, profile, link, child_id, existing)
        if result.is_error:
            raise ToolError(result.content)
        return result.content

    def _look_up(self, parent_id: str, turn: int, child_id: str) -> tuple[SessionRecord | None, int]:
        """The call's child if it exists, and how many children the parent's turn has started."""
        try:
            existing: SessionRecord | None = self._store.get_session(child_id)
        except SessionNotFound:
            existing = None
        children = self._store.children(parent_id)
        return existing, sum(
            1 for child in children if child.parent is not None and child.parent.turn == turn
        )

    @contextlib.contextmanager
    def _admitted(self, parent: ParentSide, turn: int, started: int, *, new: bool) -> Iterator[None]:
        key = (parent.session_id, turn)
        with self._lock:
            started = max(started, self._started[key])
            counts = ChildCounts(parent.depth, self._in_turn[key], started, self._in_host)
            refused = refusal(counts, self._settings, new=new)
            if refused is not None:
                raise ToolError(refused)
            if new:
                self._started[key] = started + 1
            self._in_turn[key] += 1
            self._in_host += 1
        try:
            yield
        finally:
            with self._lock:
                self._in_turn[key] -= 1
                if self._in_turn[key] <= 0:
                    del self._in_turn[key]
                    self._started.pop(key, None)  # the store has them all now
                self._in_host -= 1

    async def _run_child(
        self,
        parent: ParentSide,
        args: AgentArgs,
        context: ToolContext,
        profile: AgentProfile,
        link: ParentLink,
        child_id: str,
        existing: SessionRecord | None,
    ) -> ChildResult:
        def relay(event: Any) -> None:
            body = ev.event_to_json_dict(event)
            parent.tell(ev.SubagentEvent(parent.session_id, link.turn, link.call, child_id, body))

        watch = _Watch(trio.lowlevel.current_trio_token(), relay)
        began = ev.SubagentStarted(
            parent.session_id,
            link.turn,
            link.call,
            child_id,
            args.agent,
            args.description,
            existing is not None,
        )
        start = ChildStart(child_id, context.workspace, link, profile, args.prompt, watch)
        opened: list[Address] = []
        address: Address | None = None
        deadline: float | None = None
        parent.tell(began)
        try:
            if existing is not None:
                stored = await trio.to_thread.run_sync(self._stored_end, child_id)
                if stored is not None:  # it ended before: that end is the result, it is not run again
                    return self._ended(parent, began, stored, None, "", context)

            def open_child() -> None:
                opened.append(self._open_child(start))  # kept even when the call is cancelled meanwhile

            try:
                await trio.to_thread.run_sync(open_child)
            except Exception as exc:
                logger.warning("subagent %s: it could not be started", child_id, exc_info=True)
                failure = ev.TurnFailed(child_id, 1, "internal", f"it could not be started: {exc}")
                return self._ended(parent, began, failure, None, "", context)
            address = opened[0]
            if existing is not None:  # it may have ended between the look and the subscription
                stored = await trio.to_thread.run_sync(self._stored_end, child_id)
                if stored is not None:
                    watch.heard(stored)
            with trio.move_on_after(profile.deadline):
                await watch.ended.wait()
            if watch.end is None:
                deadline = profile.deadline
                address.tell(Cancel("aborted"))
                with trio.move_on_after(self._grace + 1.0):
                    await watch.ended.wait()
            return self._ended(parent, began, watch.end, deadline, watch.text(), context)
        except trio.Cancelled:
            address = opened[0] if opened else None
            if address is not None:
                address.tell(Cancel("aborted"))
                with trio.CancelScope(shield=True), trio.move_on_after(self._grace + 1.0):
                    await watch.ended.wait()
            end = watch.end or ev.TurnCancelled(child_id, 1, "aborted")  # closed next, if it did not end
            self._ended(parent, began, end, None, watch.text(), context)
            raise
        finally:
            if opened or existing is None or existing.status != "closed":  # nothing of it is left open
                self._close_later(child_id)

    def _ended(
        self,
        parent: ParentSide,
        began: ev.SubagentStarted,
        end: ev.TurnCompleted | ev.TurnFailed | ev.TurnCancelled | None,
        deadline: float | None,
        partial: str,
        context: ToolContext,
    ) -> ChildResult:
        """The call's result; its parent is told the child ended."""
        result = result_of(
            began.profile, end, deadline=deadline, partial=partial, output_cap=context.limits.output_cap
        )
        parent.tell(
            ev.SubagentFinished(
                began.session,
                began.turn,
                began.call_id,
                began.child,
                began.profile,
                result.outcome,
                result.message,
                result.usage,
            )
        )
        return result

    def _stored_end(self, child_id: str) -> ev.TurnCompleted | ev.TurnFailed | ev.TurnCancelled | None:
        """The stored end of the child's turn, if it has one."""
        for stored in reversed(self._store.load_turn_events(child_id, 1)):
            if stored.type in _TERMINAL_TYPES:
                end: ev.TurnCompleted | ev.TurnFailed | ev.TurnCancelled = _end_decoder.decode(stored.body)
                return end
        return None

    def _close_later(self, child_id: str) -> None:
        """Close the child on a thread of its own: stopping its subtree may wait for its tools."""

        def close() -> None:
            try:
                self._close_child(child_id)
            except SessionNotFound:
                pass  # it was never created
            except Exception:
                logger.warning("subagent %s: it could not be closed", child_id, exc_info=True)

        threading.Thread(target=close, name=f"turnkeep-close-{child_id}", daemon=True).start()


class _Watch:
    """A child's subscriber: keeps the end of its turn and the end of the text it streamed, and relays its
    other events to its parent. Called on the child's thread; :attr:`ended` is set on the loop's."""

    def __init__(self, token: trio.lowlevel.TrioToken, relay: Callable[[Any], None]) -> None:
        self._token = token
        self._relay = relay
        self._lock = threading.Lock()
        self._text: collections.deque[str] = collections.deque()
        self._kept = 0
        self.end: ev.TurnCompleted | ev.TurnFailed | ev.TurnCancelled | None = None
        self.ended = trio.Event()

    def __call__(self, event: Any) -> None:
        if not isinstance(event, ev.TextDelta):
            self._relay(event)
        if isinstance(event, ev.TextDelta):
            with self._lock:
                self._text.append(event.text)
                self._kept += len(event.text)
                while self._kept > _TEXT_KEPT and len(self._text) > 1:
                    self._kept -= len(self._text.popleft())
        elif isinstance(event, ev.TERMINAL_EVENTS):
            self.heard(event)

    def heard(self, end: ev.TurnCompleted | ev.TurnFailed | ev.TurnCancelled) -> None:
        """The child's turn ended with ``end`` (the first end heard counts)."""
        with self._lock:
            if self.end is not None:
                return
            self.end = end
        with contextlib.suppress(trio.RunFinishedError):
            self._token.run_sync_soon(self.ended.set)

    def text(self) -> str:
        """The end of the text the child streamed."""
        with self._lock:
            return "".join(self._text)
