"""The errors the runtime raises. Every failure to deliver or handle a message has a name."""

from __future__ import annotations

__all__ = [
    "ActorError",
    "ActorUnavailable",
    "AskTimeout",
    "ChaosCrash",
    "ChildStartError",
    "MessageDropped",
    "Refuse",
    "StuckHandler",
    "SupervisorEscalation",
    "UnhandledMessage",
]


class ActorError(Exception):
    """Base class of every error raised by the runtime itself."""


class ActorUnavailable(ActorError):
    """The message could not be delivered: the target is stopped, was never started, or did not come back
    from a restart within the bound. The message was not handled, and is recorded as a dead letter."""


class AskTimeout(ActorError):
    """An ask's deadline passed before a reply arrived.

    When ``delivered`` is false the message was withdrawn before any handler saw it: it was not handled
    and never will be. When ``delivered`` is true a handler had already started on it, so its outcome is
    unknown to the asker.
    """

    def __init__(self, message: str, *, delivered: bool) -> None:
        super().__init__(message)
        self.delivered = delivered


class MessageDropped(ActorError):
    """A chaos policy dropped the message before it was handled; the drop is recorded as a dead letter."""


class UnhandledMessage(ActorError):
    """The target has no handler for the message's type; the message is recorded as a dead letter and the
    actor keeps running."""


class ChaosCrash(ActorError):
    """A crash injected by a :class:`~actors.ChaosPolicy` while handling a message."""


class ChildStartError(ActorError):
    """A child could not be started: its factory or its ``on_start`` raised, or ``on_start`` did not finish
    within the start timeout. The original exception, if any, is the ``__cause__``."""


class StuckHandler(ActorError):
    """A handler ran past the system's ``stuck_after`` without returning or waiting inside
    :func:`~actors.blocking`: its incarnation ended as a crash with this reason (an asker gets it raised),
    its worker thread was replaced, and whatever the handler returns later is dropped."""


class SupervisorEscalation(ActorError):
    """A supervisor exceeded its restart intensity, stopped its children and failed itself; its parent
    receives this as the crash reason."""


class Refuse(Exception):
    """Raised by a handler to answer with ``error`` without crashing: an asker gets ``error`` raised, the
    actor keeps its state and goes on. A refused tell is recorded as a dead letter with the reason."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error
