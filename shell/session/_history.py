"""The session's line to its ChatStateActor: asks that ride out its restarts, writes that are never lost."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from actors import ActorError, Address, AskTimeout
from sampler import ToolSpec, UserMessage

from .. import turn as tm
from .._protocol import (
    Append,
    AppendAll,
    ApplyCompaction,
    BeginTurn,
    BuildRequest,
    EndTurn,
    FinishTurn,
    LearnWindow,
    LogEvent,
    PlanCompaction,
    StartTurn,
    StubToolOutputs,
)
from ..store import StaleOwner

__all__ = ["History", "HistoryError"]

logger = logging.getLogger("turnkeep.shell")

_TRIES = 5
_FENCED = (
    "Another host took this session over (its owner epoch is {current}; this host took it at {epoch}): this "
    "host stopped its copy of the session and writes nothing more to it. The turn goes on in that host."
)
_STOPPING_ASK_TIMEOUT = 2.0
"""Seconds an ask may take while the session stops (its own stop has a deadline too)."""


class HistoryError(Exception):
    """The history did not answer: ``kind`` is ``aborted`` (the session is stopping), ``internal`` (the
    chat state is unavailable or silent), ``store`` (the store failed) or ``fenced`` (another host took
    the session: this one may not write to it again)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class History:
    """Asks to the chat state at ``address()``, tried again while it restarts (a crash before the handler
    leaves nothing done); ``kept`` holds writes that could not be made yet, in order.

    Once the store refuses a write because another host took the session (``fenced``), every later ask
    fails at once with kind ``fenced``, and writes that were kept or are recorded later are dropped: a
    host that no longer owns the session writes nothing more to it. ``on_fenced`` is called that once."""

    def __init__(
        self,
        address: Callable[[], Address],
        stopping: Callable[[], bool],
        kept: list[Any],
        on_fenced: Callable[[StaleOwner], None] = lambda _: None,
    ) -> None:
        self._address = address
        self._stopping = stopping
        self.kept = kept
        self._on_fenced = on_fenced
        self.fenced: StaleOwner | None = None

    def _fence(self, exc: StaleOwner) -> HistoryError:
        if self.fenced is None:
            self.fenced = exc
            self.kept.clear()
            self._on_fenced(exc)
        return HistoryError("fenced", self.fenced_message())

    def fenced_message(self) -> str:
        """What a turn cut off by the fence is told (empty while not fenced)."""
        exc = self.fenced
        return "" if exc is None else _FENCED.format(current=exc.current, epoch=exc.epoch)

    def ask(self, message: Any) -> Any:
        """The chat state's answer to ``message``. Raises :class:`HistoryError`."""
        if self.fenced is not None:
            raise HistoryError("fenced", self.fenced_message())
        for attempt in range(_TRIES):
            stopping = self._stopping()
            if attempt and stopping:
                raise HistoryError("aborted", "the session is stopping")
            try:
                return self._address().ask(message, timeout=_STOPPING_ASK_TIMEOUT if stopping else None)
            except AskTimeout as exc:
                if exc.delivered or attempt == _TRIES - 1:
                    raise HistoryError("internal", f"the session's history did not answer: {exc}") from exc
            except ActorError as exc:
                if attempt == _TRIES - 1:
                    raise HistoryError("internal", f"the session's history is unavailable: {exc}") from exc
            except StaleOwner as exc:
                raise self._fence(exc) from exc
            except Exception as exc:
                raise HistoryError("store", f"the session store failed: {exc}") from exc
        raise AssertionError("unreachable")

    def begin_turn(
        self, number: int, prompt: UserMessage, started: Any = None, *, keep_on_failure: bool
    ) -> None:
        """Store turn ``number`` as started, with its prompt and the event ``started`` that announces it
        (unless None), in one transaction, after every write already kept. Raises :class:`HistoryError` —
        unless ``keep_on_failure`` and the session is not stopping: then what could not be written is kept
        for :meth:`flush`."""
        announced = () if started is None else (started,)
        try:
            if self.kept:
                raise HistoryError("store", "earlier writes wait to be recorded")
            self.ask(StartTurn(number, prompt, announced))
        except HistoryError as exc:
            if not keep_on_failure or exc.kind in ("aborted", "fenced"):
                raise
            self.kept += [
                BeginTurn(number),
                Append(number, prompt),
                *(LogEvent(number, e) for e in announced),
            ]

    def answer(
        self,
        ask: tm.TurnAction,
        *,
        turn: int,
        model: str,
        tools: tuple[ToolSpec, ...],
        max_tokens: int | None,
    ) -> tm.TurnInput:
        """The history's answer to one of the turn's asks. Raises :class:`HistoryError`."""
        match ask:
            case tm.AskBuild():
                return tm.RequestBuilt(self.ask(BuildRequest(model, tools, max_tokens)))
            case tm.AskPlan(chunk_tokens):
                return tm.CompactionPlanned(self.ask(PlanCompaction(model, chunk_tokens)))
            case tm.AskApply(replaced, summary):
                return tm.CompactionApplied(*self.ask(ApplyCompaction(turn, replaced, summary)))
            case tm.AskStub():
                return tm.OutputsStubbed(self.ask(StubToolOutputs(turn)))
            case tm.AskLearnWindow(tokens):
                return tm.WindowLearned(self.ask(LearnWindow(tokens)))
        raise TypeError(f"not a question for the history: {ask!r}")

    def tell(self, message: Any) -> None:
        """Tell the chat state ``message`` (a hint it may lose, such as a calibration)."""
        self._address().tell(message)

    def write(self, write: Any) -> None:
        """Make ``write`` now, after every write already kept. Raises :class:`HistoryError` when it cannot
        be made now; it is then kept, to be made by :meth:`flush`."""
        try:
            self.flush()
            self.ask(write)
        except HistoryError:
            if self.fenced is None:
                self.kept.append(write)
            raise

    def record(self, write: Any) -> None:
        """Make ``write`` now, or keep it, after every write already kept, to be made by :meth:`flush`."""
        if self.fenced is not None:
            return
        if not self.kept:
            try:
                self.ask(write)
                return
            except HistoryError:
                logger.warning("a write to the history waits to be made: %s", type(write).__name__)
        if self.fenced is None:
            self.kept.append(write)

    def write_all(self, turn: int, writes: tuple[Append | LogEvent, ...]) -> bool:
        """Make ``writes`` (of turn ``turn``, in order) now, in one transaction: all or none. False, with
        nothing made, when writes are kept or the history is fenced: they are then to be made one by one.
        Raises :class:`HistoryError`, having made none of them and kept none."""
        if self.kept or self.fenced is not None:
            return False
        self.ask(AppendAll(turn, writes))
        return True

    def finish_turn(self, number: int, event: Any, before: tuple[Append | LogEvent, ...] = ()) -> None:
        """Record ``before`` (writes of turn ``number``, in order) and turn ``number`` as ended with the
        ``event`` that ended it, now and in one transaction, or keep all of these writes, after every write
        already kept, to be made by :meth:`flush`."""
        if self.fenced is not None:
            return
        if not self.kept:
            try:
                self.ask(FinishTurn(number, event, before))
                return
            except HistoryError:
                logger.warning("the end of turn %d waits to be recorded", number)
        if self.fenced is None:
            self.kept += [*before, EndTurn(), LogEvent(number, event)]

    def flush(self) -> None:
        """Make the kept writes, in order. Raises :class:`HistoryError` (what is left stays kept)."""
        while self.kept:
            self.ask(self.kept[0])
            self.kept.pop(0)
