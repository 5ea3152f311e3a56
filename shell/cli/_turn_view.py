"""One turn driven from a terminal: its events shown as they come, Ctrl-C as a cooperative cancel."""

from __future__ import annotations

import queue
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any, Protocol, TextIO, get_args

import msgspec

from tool_bridge import PermissionDecision, PermissionRequested, ToolAbandoned

from .. import events as ev
from ..facade import Session
from ..usage import TurnUsage
from ._exit_codes import EXIT_CANCELLED, EXIT_FAILED, EXIT_OK, EXIT_USAGE
from ._usage import turn_line

__all__ = [
    "EXIT_CANCELLED",
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_USAGE",
    "Interrupts",
    "JsonView",
    "TextView",
    "View",
    "deny",
    "drive_turn",
    "exit_code",
    "fold",
]

_SESSION_EVENTS: tuple[type, ...] = get_args(ev.SessionEvent)
_POLL = 0.1
_CLIP = 100
_FOLD_LINES = 2


class Interrupts:
    """Ctrl-C presses counted instead of raised, while :meth:`counting` is in effect (on the main thread)."""

    def __init__(self) -> None:
        self.count = 0

    @contextmanager
    def counting(self) -> Iterator[None]:
        """Within: each SIGINT adds one to :attr:`count`."""
        with self._handler(self._caught):
            yield

    @contextmanager
    def raising(self) -> Iterator[None]:
        """Within (inside :meth:`counting`): SIGINT raises KeyboardInterrupt again, for a blocking read."""
        with self._handler(signal.default_int_handler):
            yield

    @contextmanager
    def _handler(self, handler: Callable[[int, FrameType | None], Any]) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = signal.signal(signal.SIGINT, handler)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)

    def _caught(self, signum: int, frame: FrameType | None) -> None:
        self.count += 1


class View(Protocol):
    """Where a turn's events and the command's notices are shown."""

    def show(self, event: Any) -> None:
        """Show one session event."""

    def notice(self, text: str) -> None:
        """Show a short line about what is happening (not part of the answer)."""


class JsonView:
    """One JSON object per line on ``out`` for every session event; notices on ``err``."""

    def __init__(self, out: TextIO | None = None, err: TextIO | None = None) -> None:
        self._out = out or sys.stdout
        self._err = err or sys.stderr

    def show(self, event: Any) -> None:
        """Write the event as ``event_to_json_dict`` gives it; other messages are not session events."""
        if isinstance(event, msgspec.Struct) and isinstance(event, _SESSION_EVENTS):
            self._out.write(msgspec.json.encode(ev.event_to_json_dict(event)).decode() + "\n")
            self._out.flush()

    def notice(self, text: str) -> None:
        """Write ``text`` on its own line."""
        self._err.write(f"turnkeep: {text}\n")
        self._err.flush()


class TextView:
    """The answer streamed on ``out``; on ``err``, as they happen, one bracketed line per retry (its kind
    and wait), wait at the provider gate, credential refresh, compaction and tool call (its arguments on
    one line, then its outcome and the first lines of its result, folded), and at the turn's end how it
    ended and its usage (tokens in and out, cost when the model is priced). ``run`` and ``chat`` share it.
    """

    def __init__(self, out: TextIO | None = None, err: TextIO | None = None) -> None:
        self._out = out or sys.stdout
        self._err = err or sys.stderr
        self._mid_line = False
        self._streamed = False
        self._shared_screen = _isatty(self._out) and _isatty(self._err)

    def show(self, event: Any) -> None:
        """Stream text deltas; a terminal event ends the answer's line and, unless completed, says why."""
        if isinstance(event, ev.TurnStarted):
            self._streamed = False
        elif isinstance(event, ev.TextDelta):
            self._write(event.text)
            self._streamed = True
        elif isinstance(event, ev.TurnCompleted):
            if not self._streamed and event.text:
                self._write(event.text)
            self.end_line()
            steps = "1 step" if event.steps == 1 else f"{event.steps} steps"
            self._end(f"turn {event.turn} completed in {steps}", event.usage)
        elif isinstance(event, ev.TurnFailed):
            self.end_line()
            self._end(f"the turn failed ({event.kind}): {event.message}", event.usage)
        elif isinstance(event, ev.TurnCancelled):
            self.end_line()
            self._end(f"the turn was cancelled ({event.reason})", event.usage)
        elif isinstance(event, ev.ToolCallFinished):
            self.notice(_describe(event, streamed=self._streamed) or "")
            self._fold(event)
        else:
            line = _describe(event, streamed=self._streamed)
            if line is not None:
                self.notice(line)

    def notice(self, text: str) -> None:
        """Write ``text`` on a line of its own on ``err``."""
        if self._shared_screen:
            self.end_line()
        self._err.write(f"[{text}]\n")
        self._err.flush()

    def _end(self, outcome: str, usage: TurnUsage) -> None:
        self.notice(outcome)
        self.notice(f"usage: {turn_line(usage)}")

    def _fold(self, event: ev.ToolCallFinished) -> None:
        """The first lines of a successful call's result, indented, under its notice."""
        if event.is_error or not event.preview.strip():
            return
        self._err.write("".join(f"  {line}\n" for line in fold(event.preview)))
        self._err.flush()

    def _write(self, text: str) -> None:
        self._out.write(text)
        self._out.flush()
        self._mid_line = not text.endswith("\n") if text else self._mid_line

    def end_line(self) -> None:
        """Finish the answer's line, if one is open, before something else is written on the terminal."""
        if self._mid_line:
            self._out.write("\n")
            self._out.flush()
            self._mid_line = False


def _describe(event: Any, *, streamed: bool) -> str | None:
    """The notice for an event that is neither text nor the end of the turn."""
    if isinstance(event, ev.Retrying):
        http = f"HTTP {event.status}" if event.status is not None else ""
        cause = http if event.kind == "status" and http else f"{event.kind} ({http})" if http else event.kind
        void = "; the text above is void" if event.discard_partial and streamed else ""
        return (
            f"retrying after {cause}: attempt {event.attempt + 1} of {event.max_attempts}"
            f" in {event.delay:.1f} s{void}"
        )
    if isinstance(event, ev.Queued):
        wait = "" if event.expected_wait is None else f", about {event.expected_wait:.0f} s"
        return (
            f"waiting at the provider gate ({event.reason.replace('_', '-')}; place {event.place + 1}{wait})"
        )
    if isinstance(event, ev.AuthRefreshed):
        return "credentials refreshed; resubmitting"
    if isinstance(event, ev.ProjectionFallback):
        return f"the provider refused the request ({event.kind}); re-sending it as {event.projection}"
    if isinstance(event, ev.CompactionStarted):
        size = f"about {event.estimated_tokens} of {event.window} tokens"
        return f"compacting the history ({event.reason}): {size}"
    if isinstance(event, ev.CompactionFinished):
        if event.ok:
            return f"compacted: {event.tokens_before} -> {event.tokens_after} tokens"
        return f"compaction did not help: {event.message}"
    if isinstance(event, ev.ToolCallStarted):
        return f"tool {event.tool} {_clip(event.arguments)}"
    if isinstance(event, ev.ToolCallFinished):
        outcome = "error" if event.is_error else event.status
        preview = f": {_clip(event.preview)}" if event.is_error and event.preview else ""
        return f"tool {event.tool} {outcome}{preview}"
    if isinstance(event, ev.DoomLoopWarning):
        return f"the model repeats itself: {event.reason}"
    if isinstance(event, ev.TurnResumed):
        again = f"; {len(event.rerun)} tool calls run again" if event.rerun else ""
        unsure = (
            f"; {len(event.interrupted)} interrupted (may have taken effect)" if event.interrupted else ""
        )
        return f"resumed after step {event.steps_done} (its host had stopped){again}{unsure}"
    if isinstance(event, ev.PromptQueued):
        return f"prompt waits as turn {event.turn}"
    if isinstance(event, ToolAbandoned):
        return f"tool {event.tool} left to finish in the background: {event.reason}"
    return None


def fold(text: str, *, lines: int = _FOLD_LINES, width: int = _CLIP) -> list[str]:
    """The first ``lines`` non-blank lines of ``text``, each clipped to ``width`` characters, then
    ``(N more lines)`` when more follow; a text cut off mid-line ends its last line with ``...``."""
    rows = [row.rstrip() for row in text.strip("\n").splitlines()]
    shown = [row if len(row) <= width else row[: width - 3] + "..." for row in rows[:lines]]
    hidden = len(rows) - len(shown)
    if hidden:
        shown.append(f"({hidden} more line{'s' if hidden != 1 else ''})")
    return shown


def deny(request: PermissionRequested) -> PermissionDecision:
    """The answer of a command that cannot ask: no."""
    return PermissionDecision(
        request.call_id,
        "deny",
        reason=f"`{request.tool}` needs permission; rerun with --allow {request.tool}",
    )


def drive_turn(
    session: Session,
    text: str,
    view: View,
    interrupts: Interrupts,
    answer: Callable[[PermissionRequested], PermissionDecision] = deny,
) -> Any | None:
    """Run one turn of ``session`` with ``text``, showing each event on ``view``; return the terminal event.

    Permission requests are answered with ``answer`` and told to the session. While the turn runs, a
    Ctrl-C (counted by ``interrupts``, already :meth:`~Interrupts.counting`) cancels it cooperatively and
    the events go on to the end; a second one stops waiting: None is returned, the turn still running.
    Raises what the session raises (:class:`~shell.host.HostError` when it falls silent).
    """
    inbox: queue.Queue[Any] = queue.Queue()
    pump = threading.Thread(target=_pump, args=(session, text, inbox), name="turnkeep-cli-turn", daemon=True)
    pump.start()
    cancelled = announced = False
    while True:
        try:
            item = inbox.get(timeout=_POLL)
        except queue.Empty:
            item = None
        if interrupts.count >= 2:
            view.notice("stopped waiting for the turn to end")
            return None
        if interrupts.count and not cancelled:
            if not announced:
                view.notice("cancelling the turn (Ctrl-C again to stop waiting)")
                announced = True
            cancelled = _cancel(session)
        if item is None:
            continue
        if isinstance(item, _Broken):
            raise item.error
        if isinstance(item, PermissionRequested):
            session.address.tell(answer(item))
            continue
        view.show(item)
        if isinstance(item, ev.TERMINAL_EVENTS):
            return item


def exit_code(terminal: Any | None) -> int:
    """0 for a completed turn, 1 for a failed one, 130 for a cancelled one or one not waited for."""
    if isinstance(terminal, ev.TurnCompleted):
        return EXIT_OK
    if isinstance(terminal, ev.TurnFailed):
        return EXIT_FAILED
    return EXIT_CANCELLED


class _Broken(msgspec.Struct, frozen=True):
    error: Exception


def _pump(session: Session, text: str, inbox: queue.Queue[Any]) -> None:
    try:
        for event in session.prompt(text):
            inbox.put(event)
    except Exception as error:
        inbox.put(_Broken(error))


def _cancel(session: Session) -> bool:
    """Whether a running turn took the cancel; False (to try again) before it started or on a hiccup."""
    try:
        return session.cancel()
    except Exception:
        return False


def _clip(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _CLIP else flat[: _CLIP - 3] + "..."


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
