"""A session's prompts in flight: which request each turn answers, and whether a cancel was read for it.
A small state machine, pure (no I/O, no clock), so that "each prompt gets exactly one answer" is decided
in one place.

A prompt's life: :meth:`PromptLedger.submit` when its request is read; :meth:`~PromptLedger.acknowledge`
when the session gave it a turn number (or :meth:`~PromptLedger.refuse` when it could not); the turn's end
(:meth:`~PromptLedger.turn_ended`) answers it. The session's events and the acknowledgement reach the agent
by different paths, so either may come first: an end that arrives before its turn's acknowledgement is
kept until then. Every method that answers returns the answers to write; a request is answered at most
once, since it leaves the ledger when it is answered.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import events as ev
from ._outcome import Outcome, Stop, outcome_of
from ._schema import RequestId

__all__ = ["Answer", "PromptLedger"]

Terminal = ev.TurnCompleted | ev.TurnFailed | ev.TurnCancelled


@dataclass(frozen=True, slots=True)
class Answer:
    """The answer owed to the ``session/prompt`` request ``request_id``."""

    request_id: RequestId
    outcome: Outcome


@dataclass(slots=True)
class _Prompt:
    request_id: RequestId
    turn: int | None = None
    cancel_read: bool = False


@dataclass(slots=True)
class PromptLedger:
    """The prompts of one session that are owed an answer, in the order they were read."""

    _prompts: list[_Prompt] = field(default_factory=list)
    _ended: dict[int, Terminal] = field(default_factory=dict)
    """Ends of turns no acknowledged prompt had yet (kept while some prompt waits for its number)."""

    def submit(self, request_id: RequestId) -> None:
        """A prompt was read (its turn number is not known yet)."""
        self._prompts.append(_Prompt(request_id))

    def acknowledge(self, request_id: RequestId, turn: int) -> list[Answer]:
        """The session took the prompt as turn ``turn``; answers it at once if that turn already ended."""
        prompt = self._find(request_id)
        if prompt is None:
            return []
        prompt.turn = turn
        ended = self._ended.pop(turn, None)
        answers = [] if ended is None else self._answer(prompt, ended)
        if all(p.turn is not None for p in self._prompts):
            self._ended.clear()  # no prompt can claim them any more
        return answers

    def refuse(self, request_id: RequestId) -> bool:
        """The session did not take the prompt (the caller answers it with an error); False when it was
        not owed (answered already)."""
        prompt = self._find(request_id)
        if prompt is None:
            return False
        self._prompts.remove(prompt)
        return True

    def turn_ended(self, event: Terminal) -> list[Answer]:
        """Turn ``event.turn`` ended: the answer of its prompt, if one is owed."""
        for prompt in self._prompts:
            if prompt.turn == event.turn:
                return self._answer(prompt, event)
        if any(p.turn is None for p in self._prompts):
            self._ended[event.turn] = event
        return []

    def cancel(self, request_id: RequestId | None = None) -> list[int]:
        """A cancel was read: of every owed prompt (None), or of the one ``request_id``. Each ends
        ``cancelled`` whatever its turn does. Returns the turn numbers known of the prompts cancelled."""
        turns = []
        for prompt in self._prompts:
            if request_id is None or prompt.request_id == request_id:
                prompt.cancel_read = True
                if prompt.turn is not None:
                    turns.append(prompt.turn)
        return turns

    def cancelled_turn(self, turn: int) -> bool:
        """Whether ``turn`` is owed to a prompt whose cancel was read (a queued one that just started must
        be cancelled in its turn)."""
        return any(p.turn == turn and p.cancel_read for p in self._prompts)

    def owes(self, request_id: RequestId) -> bool:
        """Whether the prompt ``request_id`` still waits for its answer."""
        return self._find(request_id) is not None

    @property
    def owed(self) -> int:
        """How many prompts wait for their answer."""
        return len(self._prompts)

    def running_turns(self) -> list[int]:
        """The turn numbers of the prompts owed an answer."""
        return [p.turn for p in self._prompts if p.turn is not None]

    def drain(self) -> list[Answer]:
        """Every owed prompt answered ``cancelled`` (the session or the agent is going away)."""
        answers = [Answer(p.request_id, Stop("cancelled")) for p in self._prompts]
        self._prompts.clear()
        self._ended.clear()
        return answers

    def _find(self, request_id: RequestId) -> _Prompt | None:
        return next((p for p in self._prompts if p.request_id == request_id), None)

    def _answer(self, prompt: _Prompt, event: Terminal) -> list[Answer]:
        self._prompts.remove(prompt)
        return [Answer(prompt.request_id, outcome_of(event, cancel_read=prompt.cancel_read))]
