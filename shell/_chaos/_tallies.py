"""What the actors did during a run: crashes, kills, escalations and dead letters, counted, and which
of them are explained."""

from __future__ import annotations

import collections
import re
import threading
from dataclasses import dataclass, field

from actors import (
    Actor,
    ChaosCrash,
    DeadLetter,
    Down,
    ExitReason,
    SupervisorEscalation,
    handles,
)

from ..session import SessionPath


@dataclass(eq=False)
class _Tally:
    """Every incarnation that ended, by actor kind; written by the watcher, read after the run."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    injected: collections.Counter[str] = field(default_factory=collections.Counter)
    other: collections.Counter[str] = field(default_factory=collections.Counter)
    other_errors: list[str] = field(default_factory=list)
    killed: collections.Counter[str] = field(default_factory=collections.Counter)
    escalated: collections.Counter[str] = field(default_factory=collections.Counter)
    dead: collections.Counter[tuple[str, str, str]] = field(default_factory=collections.Counter)
    crashed_on: collections.defaultdict[str, list[str]] = field(
        default_factory=lambda: collections.defaultdict(list)
    )

    def down(self, message: Down) -> None:
        kind = _actor_kind(message.address)
        with self.lock:
            if message.reason is ExitReason.CRASHED:
                if isinstance(message.error, ChaosCrash):
                    self.injected[kind] += 1
                    member = _member(message.address)
                    if member is not None:
                        # The runtime's text for it ends with "on <message type>".
                        on = str(message.error).rsplit(" on ", 1)[-1]
                        self.crashed_on[member].append(f"{kind} on {on}")
                elif isinstance(message.error, SupervisorEscalation):
                    self.escalated[kind] += 1
                else:
                    self.other[kind] += 1
                    self.other_errors.append(f"{message.address}: {message.error!r}")
            elif message.reason is ExitReason.KILLED:
                self.killed[kind] += 1

    def dead_letter(self, letter: DeadLetter) -> None:
        key = (_actor_kind(letter.address), type(letter.message).__name__, _reason_class(letter.reason))
        with self.lock:
            self.dead[key] += 1
            member = _member(letter.address)
            if key[2].startswith("crashed on it") and member is not None:
                self.crashed_on[member].append(f"{key[0]} gave up on {key[1]}")


class _Watcher(Actor):
    """Counts the ``Down`` notices of the actors it watches."""

    def __init__(self, tally: _Tally) -> None:
        super().__init__()
        self._tally = tally

    @handles(Down)
    def _on_down(self, message: Down) -> None:
        self._tally.down(message)


def _actor_kind(address: str) -> str:
    """``session``, ``chat_state``, ``sampler``, ``tools``, ``tool actor`` or ``session_supervisor`` for an
    address inside a session subtree (``host/session/<id>/...``), ``provider_gate`` for the host's gate; the
    first component otherwise."""
    found = SessionPath.parse(address)
    if found is None:
        parts = address.split("/")
        return "provider_gate" if parts[-1] == "provider_gate" else parts[0]
    below = found[1]
    if not below:
        return "session_supervisor"
    if below[0] == "tools" and len(below) > 1:
        return "tool actor"
    return below[0]


def _member(address: str) -> str | None:
    """The session id of an address below a session's supervisor; None for any other address."""
    found = SessionPath.parse(address)
    return found[0].session_id if found is not None and found[1] else None


_REASONS: tuple[tuple[str, str], ...] = (
    ("the actor crashed twice while handling it", "crashed on it twice"),
    ("injected crashes ended", "crashed on it in a row"),
    ("the actor crashed while handling it", "crashed on it"),
    ("the asker gave up before delivery", "asker gave up"),
    ("did not come back within", "restart too slow"),
    ("the system has shut down", "after shutdown"),
    ("the actor has stopped", "after stop"),
    ("the actor is stopping", "while stopping"),
    ("actor ended and is not restarted", "after the actor ended"),
    ("queued while it was stopping", "queued behind a stop"),
    ("its supervisor stopped before restarting it", "supervisor stopping"),
    ("dropped by the chaos policy", "dropped"),
    ("refused:", "refused"),
    ("has no handler for", "unhandled"),
)
"""How a dead letter's reason is classified: the first needle found in it names its class."""

_EXPLANATIONS: dict[tuple[str, str], str] = {
    ("*", "crashed on it"): (
        "a told message on which an injected crash fell: the runtime records it instead of handling it "
        "(whether its turn recovered is what the convergence check says)"
    ),
    ("*", "crashed on it twice"): (
        "a told message whose handler crashed twice (it is handed to the next incarnation once): "
        "the runtime gives up on it (whether its turn recovered is what the convergence check says)"
    ),
    ("*", "crashed on it in a row"): (
        "a told message on which injected crashes fell four times in a row (an injected crash happens "
        "before the handler, so the message survives three): the runtime gives up on it (whether its "
        "turn recovered is what the convergence check says)"
    ),
    ("*", "while stopping"): "sent to an actor while it was being stopped for good (at shutdown)",
    ("Down", "after stop"): (
        "the session watches its sampler and tool runner; at shutdown they stop after it, so their last "
        "Down notices find it stopped"
    ),
    ("*", "after stop"): "sent to an actor already stopped for good by the shutdown",
    ("*", "after shutdown"): "sent after the system shut down (late notices of cancelled jobs)",
    ("*", "after the actor ended"): "sent to a tool actor that had already ended (a late abort or kill)",
    ("*", "asker gave up"): "an ask withdrawn at its deadline while its actor was restarting",
    ("*", "restart too slow"): "its actor did not come back within restart_wait",
    ("*", "queued behind a stop"): "queued behind the stop of an incarnation that was not restarted",
    ("*", "supervisor stopping"): (
        "sent to an actor that crashed while its session subtree was stopping (it gave up after too many "
        "restarts, or the session was closed): the subtree is started again whole, and the turn in "
        "flight ends as recorded"
    ),
}
"""What explains each kind of dead letter a run can produce: (message type or "*", reason class)."""


def _reason_class(reason: str) -> str:
    for needle, name in _REASONS:
        if needle in reason:
            return name
    return re.sub(r"'[^']*'|\"[^\"]*\"|\d+", "…", reason)[:80]


def _explain(message: str, reason_class: str) -> str | None:
    return _EXPLANATIONS.get((message, reason_class)) or _EXPLANATIONS.get(("*", reason_class))
