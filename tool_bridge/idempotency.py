"""What running a tool's call again does: the idempotency class every tool declares.

The class says what may be done with a call that was started but never finished, as when the host process
died in the middle of a turn: a ``read_only`` or ``idempotent`` call may be run again; a ``side_effecting``
one may not, and the model is to be told the call was interrupted and may or may not have taken effect.
(Such a turn still ends ``interrupted`` today; the classes are what resuming it will go by.) The class
changes nothing of what the model is offered.
"""

from __future__ import annotations

import enum

__all__ = ["Idempotency"]


class Idempotency(enum.Enum):
    """The idempotency class of a tool: what the tool promises about running a call more than once.

    A tool that makes no promise is ``SIDE_EFFECTING``, the safe default.
    """

    READ_ONLY = "read_only"
    """It has no effect outside reading: running a call again changes nothing."""
    IDEMPOTENT = "idempotent"
    """Running a call again with the same arguments leaves the same state as running it once."""
    SIDE_EFFECTING = "side_effecting"
    """Anything else: running a call again may do it twice (append, send, start, edit in place)."""

    @property
    def runs_again_after_interruption(self) -> bool:
        """Whether a call of this class, started but never finished, is run again when its turn is
        resumed: true for ``READ_ONLY`` and ``IDEMPOTENT``, false for ``SIDE_EFFECTING``."""
        return self is not Idempotency.SIDE_EFFECTING
