"""Driving the sessions: each on a thread of its own, its prompts, cancels and the events it sees."""

from __future__ import annotations

import collections
import math
import queue
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from actors import (
    ActorError,
    Address,
    AskTimeout,
)

from .. import events as ev
from ..host import AgentHost
from ..messages import Cancel, Subscribe, UserPrompt
from ..session._history import HistoryError
from ._bound import TurnBound
from ._workload import _ASK_TRIES, _PROMPT_BACKOFF, _PROMPT_TRIES, _SessionPlan, _TurnPlan


@dataclass(eq=False)
class _TurnLog:
    plan: _TurnPlan
    text: str = ""
    number: int | None = None
    refusals: list[str] = field(default_factory=list)
    outcome: str = "not sent"
    detail: str = ""
    began: float | None = None
    elapsed: float = 0.0
    events: collections.Counter[type] = field(default_factory=collections.Counter)
    tool_status: collections.Counter[str] = field(default_factory=collections.Counter)
    compactions_ok: int = 0
    cancel: str = ""
    last_event: str = ""


@dataclass(eq=False)
class _SessionLog:
    plan: _SessionPlan
    turns: list[_TurnLog] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _Limits:
    bound: TurnBound
    start_wait: float
    ask_timeout: float
    gate: Callable[[], str] = lambda: "no turn gate"
    describe: Callable[[str], str] = lambda session_id: "no account of the session"


_OPEN_TRIES = 10
"""Asks for a session's subscription before its opening counts as failed."""


def _ask(address: Address, message: Any, timeout: float, *, tries: int = _ASK_TRIES) -> Any:
    """Ask, again when the message was surely not handled (an injected crash, a restart in progress)."""
    for attempt in range(tries):
        try:
            return address.ask(message, timeout=timeout)
        except AskTimeout as exc:
            if exc.delivered or attempt == tries - 1:
                raise
        except ActorError:
            if attempt == tries - 1:
                raise
    raise AssertionError("unreachable")


def _drive(host: AgentHost, root: Path, plan: _SessionPlan, log: _SessionLog, limits: _Limits) -> None:
    try:
        address = host.open(root / plan.session_id, session_id=plan.session_id)
        events: queue.Queue[Any] = queue.Queue()
        # The first message starts the session's actors; an injected crash may end a few incarnations in
        # a row on it (each ask that meets one fails, as it should), so opening asks more often.
        _ask(address, Subscribe(events), limits.ask_timeout, tries=_OPEN_TRIES)
    except Exception as exc:
        log.problems.append(f"{plan.label}: the session could not be opened: {exc!r}")
        log.turns = [_TurnLog(turn) for turn in plan.turns]
        return
    hung = False
    for turn in plan.turns:
        entry = _TurnLog(turn)
        log.turns.append(entry)
        if hung:
            entry.outcome = "skipped"
            continue
        _run_turn(address, events, entry, limits)
        hung = entry.outcome == "hung"


def _run_turn(address: Address, events: queue.Queue[Any], entry: _TurnLog, limits: _Limits) -> None:
    plan = entry.plan
    for attempt in range(_PROMPT_TRIES):
        if attempt:
            time.sleep(_PROMPT_BACKOFF * 2 ** (attempt - 1))
        text = plan.text if attempt == 0 else f"{plan.text} (sent again, {attempt})"
        try:
            entry.number = address.ask(UserPrompt(text, plan.images), timeout=limits.ask_timeout)
            entry.text = text
            break
        except (ActorError, HistoryError) as exc:  # a HistoryError: the session refused the prompt
            entry.refusals.append(text)
            entry.detail = f"{type(exc).__name__}: {exc}"
    if entry.number is None:
        entry.outcome = "refused"
        return
    acked = time.monotonic()
    deadline = acked + limits.start_wait + limits.bound.seconds
    cancel = plan.cancel
    cancel_at = acked + cancel.after_seconds if cancel and cancel.after_seconds is not None else None
    seen = 0
    while True:
        now = time.monotonic()
        if cancel_at is not None and now >= cancel_at:
            entry.cancel = _cancel(address, limits.ask_timeout)
            cancel_at = None
        wake = min(deadline, cancel_at if cancel_at is not None else math.inf)
        try:
            event = events.get(timeout=max(0.0, wake - now))
        except queue.Empty:
            if time.monotonic() >= deadline:
                entry.outcome = "hung"
                entry.elapsed = time.monotonic() - (entry.began or acked)
                if entry.began is None:
                    entry.detail = f"it never started; {limits.gate()}"
                else:
                    entry.detail = (
                        f"no end within the bound; the last event was {entry.last_event}; "
                        f"now: {limits.describe(address.name.rsplit('/', 1)[-1])}"
                    )
                return
            continue
        if getattr(event, "turn", None) != entry.number:
            continue
        seen += 1
        entry.events[type(event)] += 1
        entry.last_event = type(event).__name__
        if isinstance(event, ev.TurnStarted):
            entry.began = time.monotonic()
            deadline = entry.began + limits.bound.seconds
        elif isinstance(event, ev.ToolCallFinished):
            entry.tool_status[event.status] += 1
        elif isinstance(event, ev.CompactionFinished) and event.ok:
            entry.compactions_ok += 1
        elif isinstance(event, ev.TERMINAL_EVENTS):
            entry.elapsed = time.monotonic() - (entry.began or acked)
            if isinstance(event, ev.TurnCompleted):
                entry.outcome = "completed"
            elif isinstance(event, ev.TurnFailed):
                entry.outcome, entry.detail = "failed", event.kind
            else:
                entry.outcome, entry.detail = "cancelled", event.reason
            return
        if cancel is not None and cancel.after_events is not None and seen == cancel.after_events:
            entry.cancel = _cancel(address, limits.ask_timeout)


def _cancel(address: Address, timeout: float) -> str:
    try:
        return "requested" if _ask(address, Cancel(), timeout) else "no turn running"
    except ActorError as exc:
        return f"refused ({type(exc).__name__})"
