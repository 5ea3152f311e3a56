"""Detect a model that repeats itself within one turn instead of making progress.

:class:`DoomLoopDetector` watches the tool calls of one turn and their results. Four rules:

* **identical calls** — the same tool with the same arguments (compared after :func:`normalise_arguments`)
  ``identical_calls`` times in a row;
* **cycle** — a sequence of 2 to ``max_cycle_length`` calls, not all the same, that appears
  ``identical_calls`` times back to back (``A, B, A, B, A, B`` is the cycle ``A → B`` repeated 3 times);
* **repeated errors** — ``repeated_errors`` error results in a row with the same content, whatever tools
  and arguments produced them;
* **hard limit** — ``hard_limit`` identical calls in a row, for every tool, exempt or not.

The first detection of the first three rules in a turn is a :attr:`DoomLoopVerdict.WARN`: the caller
reminds the model with :data:`DOOM_LOOP_REMINDER`, and the detector forgets what it has seen so the model
gets a fair chance. A later detection in the same turn is a :attr:`DoomLoopVerdict.FAIL`. Reaching the hard
limit is a ``FAIL`` at once.
"""

from __future__ import annotations

import enum
import json
from collections import deque
from collections.abc import Collection, Sequence
from typing import Protocol

import msgspec

from sampler.messages import ToolCall, ToolResult

from ._secrets import redact

__all__ = [
    "DOOM_LOOP_REMINDER",
    "DoomLoopDetector",
    "DoomLoopLimits",
    "DoomLoopOutcome",
    "DoomLoopRule",
    "DoomLoopVerdict",
    "normalise_arguments",
]

DOOM_LOOP_REMINDER = (
    "You are repeating the same tool calls without making progress. Stop and reconsider: the approach "
    "you are taking is not working. Try a different approach, use a different tool, or, if you are "
    "blocked, explain to the user what is blocking you and ask how to proceed. If the repetition goes on, "
    "the turn will be stopped."
)
"""The system reminder the caller gives the model after a :attr:`DoomLoopVerdict.WARN`."""

_DEFAULT_CYCLE_REPEATS = 3
_ERROR_EXCERPT = 160


class DoomLoopVerdict(enum.StrEnum):
    """What the caller should do after a tool call. The values are stable."""

    OK = "ok"
    """Nothing detected: go on."""
    WARN = "warn"
    """A first detection in this turn: remind the model (:data:`DOOM_LOOP_REMINDER`) and warn the user."""
    FAIL = "fail"
    """A detection after a warning, or the hard limit: end the turn as failed."""


class DoomLoopRule(enum.StrEnum):
    """Which rule detected the loop. The values are stable."""

    IDENTICAL_CALLS = "identical_calls"
    CYCLE = "cycle"
    REPEATED_ERRORS = "repeated_errors"
    HARD_LIMIT = "hard_limit"


class DoomLoopOutcome(msgspec.Struct, frozen=True):
    """What the detector concluded from one observed tool call.

    ``reason`` says in plain words what was detected (empty for ``OK``); ``rule`` is the rule that
    detected it (``None`` for ``OK``).
    """

    verdict: DoomLoopVerdict
    reason: str = ""
    rule: DoomLoopRule | None = None


_OK = DoomLoopOutcome(DoomLoopVerdict.OK)


class DoomLoopLimits(Protocol):
    """The detector's settings, by the field names of the configuration's doom-loop section."""

    @property
    def identical_calls(self) -> int:
        """Identical calls in a row that are a loop; 0 turns the rule off."""
        ...

    @property
    def max_cycle_length(self) -> int:
        """The longest cycle detected; below 2 turns the rule off."""
        ...

    @property
    def repeated_errors(self) -> int:
        """Equal errors in a row that are a loop; 0 turns the rule off."""
        ...

    @property
    def exempt_tools(self) -> Collection[str]:
        """Tools the identical-calls and cycle rules ignore."""
        ...

    @property
    def hard_limit(self) -> int:
        """Identical calls in a row that fail the turn, for every tool; at least 1."""
        ...


def normalise_arguments(arguments: str) -> str:
    """A canonical form of a tool call's JSON arguments, for comparing two calls.

    Valid JSON is re-encoded with sorted keys and no insignificant whitespace, so ``{"b": 1, "a": 2}``
    and ``{"a":2,"b":1}`` compare equal; the values themselves, strings included, are kept exactly.
    Anything that is not valid JSON is compared as its text with surrounding whitespace stripped. The two
    forms never collide, since a canonical form is always valid JSON.
    """
    try:
        value = json.loads(arguments)
    except (ValueError, RecursionError):
        return arguments.strip()
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except (ValueError, RecursionError):
        return arguments.strip()


_Signature = tuple[str, str]


class DoomLoopDetector:
    """Watches the tool calls of one turn and tells when the model is caught in a loop.

    Deterministic and without I/O; not thread-safe (one owner, the session's turn loop). Call
    :meth:`observe` once per finished tool call, in the order the results go back to the model, and
    :meth:`reset` when a new turn starts.

    ``identical_calls``, ``max_cycle_length`` and ``repeated_errors`` turn their rule off when 0 (a cycle
    needs a length of at least 2, so ``max_cycle_length`` 1 turns it off too). A cycle must appear
    ``identical_calls`` times back to back, or 3 times when ``identical_calls`` is below 2. Calls to
    ``exempt_tools`` are not counted by the identical-calls and cycle rules, and one such call breaks a
    streak of the others; their error results still count. ``hard_limit`` applies to every tool and
    cannot be turned off. Raises ``ValueError`` for a negative setting or a ``hard_limit`` below 1.
    """

    def __init__(
        self,
        *,
        identical_calls: int = 3,
        max_cycle_length: int = 3,
        repeated_errors: int = 3,
        exempt_tools: Collection[str] = (),
        hard_limit: int = 12,
    ) -> None:
        for name, value in (
            ("identical_calls", identical_calls),
            ("max_cycle_length", max_cycle_length),
            ("repeated_errors", repeated_errors),
        ):
            if value < 0:
                raise ValueError(f"{name} must be >= 0 (0 turns the rule off), got {value}")
        if hard_limit < 1:
            raise ValueError(f"hard_limit must be >= 1 (it cannot be turned off), got {hard_limit}")
        self._identical_calls = identical_calls
        self._max_cycle_length = max_cycle_length
        self._cycle_repeats = identical_calls if identical_calls >= 2 else _DEFAULT_CYCLE_REPEATS
        self._repeated_errors = repeated_errors
        self._exempt = frozenset(exempt_tools)
        self._hard_limit = hard_limit
        window = max(identical_calls, max_cycle_length * self._cycle_repeats, 1)
        self._window: deque[_Signature] = deque(maxlen=window)
        self._last_call: _Signature | None = None
        self._run = 0
        self._last_error: str | None = None
        self._errors = 0
        self._warned = False

    @classmethod
    def from_settings(cls, settings: DoomLoopLimits) -> DoomLoopDetector:
        """A detector with the given settings (any object with the :class:`DoomLoopLimits` fields)."""
        return cls(
            identical_calls=settings.identical_calls,
            max_cycle_length=settings.max_cycle_length,
            repeated_errors=settings.repeated_errors,
            exempt_tools=settings.exempt_tools,
            hard_limit=settings.hard_limit,
        )

    @property
    def warned(self) -> bool:
        """Whether a warning was given in this turn (so the next detection fails it)."""
        return self._warned

    def reset(self) -> None:
        """Forget everything: a new turn starts with no history and no warning."""
        self._window.clear()
        self._last_call = None
        self._run = 0
        self._clear_errors()
        self._warned = False

    def observe(self, call: ToolCall, result: ToolResult) -> DoomLoopOutcome:
        """Record one finished tool call and its result; the outcome says whether the turn may go on."""
        signature = (call.name, normalise_arguments(call.arguments))
        if signature == self._last_call:
            self._run += 1
        else:
            self._last_call, self._run = signature, 1
        if self._run >= self._hard_limit:
            return DoomLoopOutcome(
                DoomLoopVerdict.FAIL,
                f"{call.name} called {self._run} times in a row with the same arguments (the hard limit)",
                DoomLoopRule.HARD_LIMIT,
            )

        if result.is_error:
            content = result.content.strip()
            if content == self._last_error:
                self._errors += 1
            else:
                self._last_error, self._errors = content, 1
        else:
            self._clear_errors()

        if call.name in self._exempt:
            self._window.clear()
        else:
            self._window.append(signature)

        detected = self._identical() or self._cycle() or self._repeated_error()
        if detected is None:
            return _OK
        rule, reason = detected
        verdict = DoomLoopVerdict.FAIL if self._warned else DoomLoopVerdict.WARN
        self._warned = True
        self._window.clear()
        self._clear_errors()
        return DoomLoopOutcome(verdict, reason, rule)

    def _clear_errors(self) -> None:
        self._last_error = None
        self._errors = 0

    def _identical(self) -> tuple[DoomLoopRule, str] | None:
        n = self._identical_calls
        if n == 0 or len(self._window) < n:
            return None
        last = self._window[-1]
        if all(self._window[-i] == last for i in range(2, n + 1)):
            return (
                DoomLoopRule.IDENTICAL_CALLS,
                f"{last[0]} called {n} times in a row with the same arguments",
            )
        return None

    def _cycle(self) -> tuple[DoomLoopRule, str] | None:
        repeats = self._cycle_repeats
        for length in range(2, self._max_cycle_length + 1):
            needed = length * repeats
            if len(self._window) < needed:
                break
            tail = list(self._window)[-needed:]
            cycle = tail[:length]
            if len(set(cycle)) > 1 and all(tail[i] == cycle[i % length] for i in range(needed)):
                return DoomLoopRule.CYCLE, f"cycle {_names(cycle)} repeated {repeats} times"
        return None

    def _repeated_error(self) -> tuple[DoomLoopRule, str] | None:
        n = self._repeated_errors
        if n == 0 or self._errors < n or self._last_error is None:
            return None
        return DoomLoopRule.REPEATED_ERRORS, f"the same error {n} times: {_excerpt(self._last_error)}"


def _names(cycle: Sequence[_Signature]) -> str:
    return " → ".join(name for name, _arguments in cycle)


def _excerpt(text: str) -> str:
    flat = " ".join(text.split())
    if len(flat) > _ERROR_EXCERPT:
        flat = flat[: _ERROR_EXCERPT - 1] + "…"
    return redact(flat) or "(empty error)"
