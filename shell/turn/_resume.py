"""Whether and how a turn that its process did not live to end goes on: a pure decision over its journal.

The journal of a turn is what the store holds of it: its messages in order (the prompt, each finished
model step's answer, each tool result, as they were stored) and the tool calls its events say were
started. :func:`plan_resume` reads it and decides:

- a step whose answer is stored is never requested again; the next step is requested afresh (a request
  that was in flight is sent again, and whatever it had streamed is gone: it was never stored);
- a last answer without tool calls means the turn had its answer: it completes with it;
- a tool call of the last answer without a stored result runs again when its tool is read-only or
  idempotent; a side-effecting one does not (it may have taken effect, whether or not it was journaled as
  started) and gets an error result saying so, for the model to check;
- a turn that was being cancelled (a salvaged, interrupted answer is stored), one resumed
  ``max_resumes`` times already, or any when resuming is off, ends ``interrupted`` instead.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sampler import AssistantMessage, Message, TextPart, ToolCall, ToolMessage, UserMessage
from tool_bridge.idempotency import Idempotency

__all__ = ["INTERRUPTED_CALL", "EndInterrupted", "ResumePlan", "TurnJournal", "plan_resume"]

INTERRUPTED_CALL = (
    "This call was interrupted: the process running it ended before its result was stored. It may or may "
    "not have taken effect, and it was not run again because it is not known to be safe to repeat. Check "
    "its effect before calling it again."
)
"""The error result a side-effecting call without a stored result gets when its turn is resumed."""


@dataclass(frozen=True, slots=True)
class TurnJournal:
    """What the store holds of turn ``turn``: its ``messages`` in the order they were stored, the ids of
    the tool calls journaled as started, how many times it was resumed already, and the trace context it
    was begun with (None when it was not traced)."""

    turn: int
    messages: tuple[Message, ...]
    started_calls: frozenset[str] = frozenset()
    resumes: int = 0
    traceparent: str | None = None
    announced: bool = True
    """Whether the turn's ``TurnStarted`` event is stored (the process may have ended between storing
    the prompt and storing that event)."""


@dataclass(frozen=True, slots=True)
class ResumePlan:
    """How a turn goes on: ``steps_done`` steps are stored; ``answer`` is the stored final answer when the
    turn had one (it completes at once); ``open_calls`` are the last step's calls without a result, in call
    order, of which ``rerun`` run again and the rest get :data:`INTERRUPTED_CALL`; ``started`` are the calls
    already reported started; ``attempt`` counts this resume (1 for the first); ``announce`` is the prompt
    of a turn whose ``TurnStarted`` was never stored, to be stored first (None when it was)."""

    steps_done: int
    attempt: int
    announce: str | None = None
    answer: str | None = None
    open_calls: tuple[ToolCall, ...] = ()
    rerun: frozenset[str] = frozenset()
    started: frozenset[str] = frozenset()
    traceparent: str | None = None

    @property
    def interrupted(self) -> tuple[str, ...]:
        """The open calls that are not run again, in call order."""
        return tuple(call.id for call in self.open_calls if call.id not in self.rerun)


@dataclass(frozen=True, slots=True)
class EndInterrupted:
    """The turn ends ``interrupted``; ``why`` says why it is not resumed."""

    why: str


def plan_resume(
    journal: TurnJournal,
    *,
    enabled: bool,
    max_resumes: int,
    idempotency_of: Callable[[str], Idempotency],
) -> ResumePlan | EndInterrupted:
    """Decide how turn ``journal.turn`` goes on (see the module's description). Pure: reads nothing else."""
    if not enabled:
        return EndInterrupted("resuming interrupted turns is switched off (host.resume_interrupted_turns)")
    if journal.resumes >= max_resumes:
        times = f"{journal.resumes} times already"
        return EndInterrupted(f"the turn was resumed {times} (host.max_resumes_per_turn = {max_resumes})")
    if not any(isinstance(m, UserMessage) for m in journal.messages):
        return EndInterrupted("nothing of the turn was stored, not even its prompt")
    answers = [(i, m) for i, m in enumerate(journal.messages) if isinstance(m, AssistantMessage)]
    attempt = journal.resumes + 1
    prompt = next(m for m in journal.messages if isinstance(m, UserMessage))
    announce = None if journal.announced else "".join(p.text for p in prompt.parts if isinstance(p, TextPart))
    if not answers:
        return ResumePlan(0, attempt, announce, traceparent=journal.traceparent)
    index, last = answers[-1]
    if last.interrupted:
        return EndInterrupted("the turn was being cancelled: its answer was cut short")
    steps_done = len(answers)
    if not last.tool_calls:
        return ResumePlan(steps_done, attempt, announce, answer=last.text, traceparent=journal.traceparent)
    answered = {m.result.call_id for m in journal.messages[index + 1 :] if isinstance(m, ToolMessage)}
    open_calls = tuple(call for call in last.tool_calls if call.id not in answered)
    rerun = frozenset(
        call.id for call in open_calls if idempotency_of(call.name).runs_again_after_interruption
    )
    return ResumePlan(
        steps_done,
        attempt,
        announce,
        open_calls=open_calls,
        rerun=rerun,
        started=journal.started_calls & {call.id for call in open_calls},
        traceparent=journal.traceparent,
    )
