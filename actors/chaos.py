"""Seeded fault injection into actors: crash, delay or drop while handling matching messages."""

from __future__ import annotations

import enum
import random
from dataclasses import dataclass
from typing import Any

__all__ = ["ChaosPolicy", "ChaosVerdict"]


class ChaosVerdict(enum.Enum):
    """What the policy decided for one message."""

    HANDLE = "handle"
    CRASH = "crash"
    DROP = "drop"


@dataclass(frozen=True, slots=True)
class ChaosPolicy:
    """Injects faults into the actors it is attached to (a child spec, or a whole supervisor subtree).

    For each message an actor is about to handle, the policy may crash the actor (``crash_probability``,
    only for message types in ``crash_on`` when given), drop the message (``drop_probability``; the drop is
    recorded as a dead letter and an asker gets :class:`~actors.MessageDropped`), or delay handling by up
    to ``delay`` seconds (``delay_probability``). Decisions come from a generator seeded by ``seed``, the
    actor's address and its incarnation number, so a run with the same message order replays exactly; a
    fault whose probability is 0 draws nothing, so the decisions of the others depend only on the messages
    they apply to.
    """

    seed: int = 0
    crash_probability: float = 0.0
    crash_on: tuple[type[Any], ...] | None = None
    drop_probability: float = 0.0
    drop_on: tuple[type[Any], ...] | None = None
    delay: float = 0.0
    delay_probability: float = 1.0

    def __post_init__(self) -> None:
        for field in ("crash_probability", "drop_probability", "delay_probability"):
            value = getattr(self, field)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"ChaosPolicy.{field} must be within [0, 1], got {value!r}")
        if self.delay < 0:
            raise ValueError(f"ChaosPolicy.delay must be >= 0, got {self.delay!r}")

    def for_incarnation(self, address: str, incarnation: int) -> _ChaosDice:
        """The decision sequence for one incarnation of the actor at ``address``."""
        return _ChaosDice(self, random.Random(f"{self.seed}/{address}/{incarnation}"))


class _ChaosDice:
    __slots__ = ("_policy", "_rng")

    def __init__(self, policy: ChaosPolicy, rng: random.Random) -> None:
        self._policy = policy
        self._rng = rng

    def roll(self, message: Any) -> tuple[ChaosVerdict, float]:
        """The verdict for ``message`` and how long to delay it first."""
        policy, rng = self._policy, self._rng
        delay = 0.0
        if policy.delay > 0 and rng.random() < policy.delay_probability:
            delay = rng.uniform(0.0, policy.delay)
        # A fault that cannot happen draws nothing: the draws of one that can depend only on its messages.
        drop, crash = policy.drop_probability, policy.crash_probability
        if drop and _matches(policy.drop_on, message) and rng.random() < drop:
            return ChaosVerdict.DROP, delay
        if crash and _matches(policy.crash_on, message) and rng.random() < crash:
            return ChaosVerdict.CRASH, delay
        return ChaosVerdict.HANDLE, delay


def _matches(types: tuple[type[Any], ...] | None, message: Any) -> bool:
    return types is None or isinstance(message, types)
