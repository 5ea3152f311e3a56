"""Spans and measurements of turns, made from what each turn is told and decides.

The SessionActor hands every input it feeds its turn machine, with the actions the machine returned, to
:meth:`TurnRecorder.observe`. The recorder keeps the open spans of each turn keyed by session, turn and
request id, in the host rather than in any actor, so they outlive a crashed sampler or a restarted
SessionActor: the model call in flight is ended with an error status, and the call the turn sends again
opens a new child of the same turn span — one trace per turn whatever was restarted.

Threads do not carry context variables, so the trace context travels in the messages: the session asks
:meth:`TurnRecorder.traceparent` for the W3C ``traceparent`` of the work it is about to ask for and puts
it in the message — the model call's own span in the sampler's ``Sample`` (sent on to the provider as
a header), the turn's span in the tool bridge's ``RunTools`` (the parent of every ``execute_tool`` span)
and in the stored ``TurnStarted`` event. A host that takes up a turn interrupted by the end of its process
continues that turn's stored trace: the resumed turn's ``invoke_agent`` span (``turnkeep.resumed`` set) is
a child of the stored turn span, and a turn ended ``interrupted`` instead is recorded there by
:meth:`TurnRecorder.interrupted`.

Sampling is decided once, when a turn begins (:func:`~shell.telemetry._sampling.decide_turn`): a turn the
sampler declines is kept without a span object, its metrics recorded as for any turn, and the trace
context its work carries is the one the SDK's non-recording span would have had (flags: not sampled). A
resumed turn follows the sampled flag of the stored span it continues.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

import msgspec
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import Tracer as SdkTracer
from opentelemetry.sdk.trace.sampling import Sampler
from opentelemetry.trace import NonRecordingSpan, Span, SpanKind, Status, StatusCode, Tracer

from sampler import Cancelled, Completed, Failed, StepProjectionFallback, StepQueued, StepRetrying, StepText

from .. import events as ev
from .. import turn as tm
from .._secrets import redact
from ..usage import TokenUsage
from ._context import format_traceparent, parse_traceparent, traceparent_of
from ._metrics import Instruments
from ._sampling import TurnDecision, TurnIds, decide_turn

__all__ = ["TurnRecorder"]

_CONTENT_LIMIT = 16_384
"""The most characters of prompt or completion text put on a span (with ``record_content``)."""


_INTERRUPTED = "interrupted"
"""The cancel reason of a turn its process did not live to end."""


@dataclass(slots=True)
class _Call:
    request_id: str
    span: Span | None
    """None in a turn not sampled."""
    started: float
    model: str
    traceparent: str | None
    first_token: float | None = None


@dataclass(slots=True)
class _Tool:
    span: Span | None
    started: float


@dataclass(slots=True)
class _Turn:
    span: Span | None
    """The ``invoke_agent`` span; None when the turn is not sampled (nor then any of its children)."""
    started: float
    parent: Context | None
    """The context whose span is the turn's, the parent of its children (None when not sampled)."""
    traceparent: str | None
    """What ``RunTools`` and ``TurnStarted`` carry: the turn's span, or the span it would have had."""
    decision: TurnDecision
    calls: dict[str, _Call] = field(default_factory=dict)
    tools: dict[str, _Tool] = field(default_factory=dict)
    compaction: Span | None = None
    compaction_parent: Context | None = None


class TurnRecorder:
    """Turns observed turns into spans on ``tracer`` and measurements on ``instruments``. Thread-safe:
    sessions call it from their own threads. ``tracer`` is an SDK tracer whose provider draws its ids
    with a :class:`~shell.telemetry._sampling.TurnIds` (as :func:`~shell.telemetry.start_telemetry`
    makes it); its sampler decides each turn once, when the turn begins."""

    def __init__(
        self, tracer: Tracer, instruments: Instruments, *, provider: str, record_content: bool = False
    ) -> None:
        if not isinstance(tracer, SdkTracer) or not isinstance(tracer.id_generator, TurnIds):
            raise TypeError("a TurnRecorder needs an SDK tracer whose provider draws its ids with TurnIds")
        self._tracer = tracer
        self._sampler: Sampler = tracer.sampler
        self._ids: TurnIds = tracer.id_generator
        self._metrics = instruments
        self._provider = provider
        self._content = record_content
        self._lock = threading.Lock()
        self._turns: dict[tuple[str, int], _Turn] = {}
        self._streaming: set[str] = set()
        """The request ids of the open model calls whose first token was measured: their further deltas
        tell nothing new, and are passed over without taking the lock."""

    def observe(self, session_id: str, number: int, message: object, actions: list[Any]) -> None:
        """Record what ``message`` told turn ``number`` of the session and what it decided."""
        if (
            message.__class__ is StepText
            and message.request_id in self._streaming
            and all(action.__class__ is tm.Publish for action in actions)
        ):
            return
        key = (session_id, number)
        with self._lock:
            turn = self._turns.get(key)
            if turn is None:
                if not isinstance(message, tm.Begin | tm.Resume):
                    return  # a turn begun before telemetry was on, or already ended
                turn = self._turns[key] = self._begin(session_id, number, message)
            self._told(turn, message)
            for action in actions:
                self._decided(turn, message, action)
                if isinstance(action, tm.Finish):
                    del self._turns[key]
                    self._end(turn, action.event)

    def prepare(self, session_id: str, number: int, begin: tm.Begin) -> str | None:
        """Begin the span of turn ``number`` now, as ``begin`` fed to it would (nothing when it is begun
        already), and return its ``traceparent``: a session stores it with the turn's start, before the
        turn is fed ``begin`` (which then finds its span begun). A turn prepared that never begins (its
        session stopped first) keeps its span open until telemetry stops, which ends it with an error
        status."""
        with self._lock:
            turn = self._turns.get((session_id, number))
            if turn is None:
                turn = self._turns[(session_id, number)] = self._begin(session_id, number, begin)
            return turn.traceparent

    def traceparent(self, session_id: str, number: int, request_id: str | None = None) -> str | None:
        """The W3C ``traceparent`` the work of turn ``number`` is asked for with: the span of the model
        call ``request_id`` when one is given and open, else the turn's own span; None for a turn without
        a span (begun before telemetry was on, or ended)."""
        with self._lock:
            turn = self._turns.get((session_id, number))
            if turn is None:
                return None
            call = turn.calls.get(request_id) if request_id is not None else None
            return call.traceparent if call is not None else turn.traceparent

    def interrupted(self, session_id: str, number: int, traceparent: str | None) -> None:
        """Record that turn ``number``, which a process ended while it ran, is now ended as interrupted by a
        host that took the session over: an ``invoke_agent`` span with ``turnkeep.resumed`` set, child of
        the span ``traceparent`` names (the turn's span, as stored when it began) and so in its trace, ended
        at once with an error status. Without a usable ``traceparent`` the span starts a trace of its own."""
        parent = _stored_parent(traceparent)
        attributes = self._turn_attributes(session_id, number) | {
            "turnkeep.resumed": True,
            "turnkeep.outcome": "cancelled",
            "turnkeep.cancel_reason": _INTERRUPTED,
            "error.type": _INTERRUPTED,
        }
        span = self._tracer.start_span("invoke_agent", context=parent, attributes=attributes)
        span.set_status(Status(StatusCode.ERROR, "the process ended while the turn ran"))
        span.end()
        self._metrics.turns.add(1, "cancelled", _INTERRUPTED)

    def sampled(self, session_id: str, number: int) -> bool | None:
        """Whether open turn ``number`` of the session is traced (its spans are made); None when the
        turn is not open."""
        with self._lock:
            turn = self._turns.get((session_id, number))
            return None if turn is None else turn.span is not None

    def open_turns(self) -> int:
        """Turns with a span still open."""
        with self._lock:
            return len(self._turns)

    def close(self, why: str) -> None:
        """End every open span with an error status saying ``why`` (the host is stopping)."""
        with self._lock:
            turns, self._turns = list(self._turns.values()), {}
        for turn in turns:
            self._abandon(turn, why)
            if turn.span is not None:
                turn.span.set_attribute("error.type", "abandoned")
                turn.span.set_status(Status(StatusCode.ERROR, why))
                turn.span.end()

    # -- what the turn was told ------------------------------------------------------------------------

    def _turn_attributes(self, session_id: str, number: int) -> dict[str, Any]:
        """What every ``invoke_agent`` span says of its turn from the start."""
        return {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "turnkeep",
            "gen_ai.conversation.id": session_id,
            "gen_ai.provider.name": self._provider,
            "turnkeep.turn": number,
        }

    def _begin(self, session_id: str, number: int, message: tm.Begin | tm.Resume) -> _Turn:
        attributes = self._turn_attributes(session_id, number)
        parent: Context | None = None
        if isinstance(message, tm.Resume):
            # The same turn, taken up by another process: a child of its stored span, in its trace.
            parent = _stored_parent(message.plan.traceparent)
            attributes["turnkeep.resumed"] = True
            attributes["turnkeep.resumed_after_step"] = message.plan.steps_done
        decision = decide_turn(
            self._sampler, self._ids, parent, "invoke_agent", SpanKind.INTERNAL, attributes
        )
        if not decision.sampled:
            return _Turn(None, time.perf_counter(), None, decision.traceparent, decision)
        if self._content and isinstance(message, tm.Begin):
            attributes["turnkeep.prompt"] = _content(message.prompt.text)
        with self._ids.starting(decision.trace_id):
            span = self._tracer.start_span(
                "invoke_agent", context=parent, kind=SpanKind.INTERNAL, attributes=attributes
            )
        context = trace.set_span_in_context(span)
        return _Turn(
            span, time.perf_counter(), context, format_traceparent(span.get_span_context()), decision
        )

    def _told(self, turn: _Turn, message: object) -> None:
        match message:
            case StepText(request_id=request_id):
                call = turn.calls.get(request_id)
                if call is not None and call.first_token is None:
                    call.first_token = time.perf_counter()
                    self._streaming.add(request_id)
                    self._metrics.record_first_token(call.first_token - call.started, call.model)
            case StepQueued(request_id=request_id, place=place, reason=reason, expected_wait=wait):
                if turn.span is not None:
                    attributes = {"place": place, "reason": reason, "expected_wait": wait}
                    self._event(turn, request_id, "gate.queued", attributes)
                self._metrics.gate_waits.add(1, reason)
            case StepRetrying() as retry:
                if turn.span is not None:
                    attributes = {
                        "attempt": retry.attempt,
                        "max_attempts": retry.max_attempts,
                        "delay": retry.delay,
                        "error.type": str(retry.kind),
                        "status": retry.status,
                        "discard_partial": retry.discard_partial,
                    }
                    self._event(turn, retry.request_id, "retry", attributes)
                self._metrics.retries.add(1, str(retry.kind))
                self._count_usage(turn, retry.request_id, retry.usage)
            case StepProjectionFallback() as fallback:
                if turn.span is not None:
                    attributes = {"projection": str(fallback.projection), "error.type": str(fallback.kind)}
                    self._event(turn, fallback.request_id, "projection_fallback", attributes)
                self._count_usage(turn, fallback.request_id, fallback.usage)
            case Completed() | Failed() | Cancelled():
                self._call_ended(turn, message)
            case tm.SiblingDown(sibling=sibling, error=error) if turn.span is not None:
                turn.span.add_event("sibling_down", {"sibling": str(sibling), "error": _content(error)})
            case tm.Restarted() if turn.span is not None:
                turn.span.add_event("session_restarted")

    def _event(self, turn: _Turn, request_id: str, name: str, attributes: dict[str, Any]) -> None:
        call = turn.calls.get(request_id)
        target = call.span if call is not None else turn.span
        if target is not None:
            target.add_event(name, {key: value for key, value in attributes.items() if value is not None})

    def _count_usage(self, turn: _Turn, request_id: str, usage: Any) -> None:
        call = turn.calls.get(request_id)
        if usage is not None and call is not None:
            self._metrics.count_tokens(TokenUsage().add(usage), call.model)

    def _call_ended(self, turn: _Turn, outcome: Completed | Failed | Cancelled) -> None:
        call = turn.calls.pop(outcome.request_id, None)
        if call is None:
            return
        usage = outcome.usage
        if call.span is None:  # not sampled: the metrics alone
            if usage is not None:
                self._metrics.count_tokens(TokenUsage().add(usage), call.model)
            if isinstance(outcome, Completed):
                self._end_call(call, "completed", None)
            elif isinstance(outcome, Failed):
                self._end_call(call, "failed", str(outcome.error.kind))
            else:
                self._end_call(call, "cancelled", "cancelled")
            return
        attributes: dict[str, Any] = {"turnkeep.attempts": outcome.attempts}
        if usage is not None:
            attributes["gen_ai.usage.input_tokens"] = usage.input_tokens
            attributes["gen_ai.usage.output_tokens"] = usage.output_tokens
            attributes["gen_ai.usage.cache_read.input_tokens"] = usage.cached_tokens
            if usage.reasoning_tokens:
                attributes["gen_ai.usage.reasoning.output_tokens"] = usage.reasoning_tokens
            self._metrics.count_tokens(TokenUsage().add(usage), call.model)
        if isinstance(outcome, Completed):
            attributes["gen_ai.response.finish_reasons"] = (str(outcome.finish_reason),)
            if outcome.response_model:
                attributes["gen_ai.response.model"] = outcome.response_model
            if outcome.projections:
                attributes["turnkeep.projections"] = tuple(str(p) for p in outcome.projections)
            if self._content:
                attributes["turnkeep.completion"] = _content(outcome.message.text)
        call.span.set_attributes(attributes)
        if isinstance(outcome, Completed):
            self._end_call(call, "completed", None)
        elif isinstance(outcome, Failed):
            self._end_call(call, "failed", str(outcome.error.kind), outcome.error.message)
        else:
            self._end_call(call, "cancelled", "cancelled")

    def _end_call(self, call: _Call, outcome: str, error: str | None, message: str = "") -> None:
        self._streaming.discard(call.request_id)
        seconds = time.perf_counter() - call.started
        span = call.span
        if span is not None and error is not None:
            span.set_attribute("error.type", error)
            span.set_status(Status(StatusCode.ERROR, _content(message or error)))
        self._metrics.record_model_call(seconds, call.model, error)
        self._metrics.model_calls.add(1, call.model, outcome)
        if span is not None:
            span.end()

    # -- what the turn decided -------------------------------------------------------------------------

    def _decided(self, turn: _Turn, message: object, action: object) -> None:
        match action:
            case tm.SendSample(request_id=request_id, memory_key=memory_key, request=request):
                self._send(turn, request_id, memory_key.endswith(":compaction"), request)
            case tm.StopSample(request_id=request_id):
                call = turn.calls.pop(request_id, None)
                if call is not None:  # no outcome will come: the sampler lost it, or the turn gave up
                    lost = isinstance(message, tm.SiblingDown | tm.Restarted | tm.StepChecked)
                    error = "step_lost" if lost else "cancelled"
                    self._end_call(
                        call, "lost" if lost else "cancelled", error, f"the model call was {error}"
                    )
            case tm.Emit(event=event):
                self._emitted(turn, event)

    def _send(self, turn: _Turn, request_id: str, compaction: bool, request: Any) -> None:
        model = str(request.model)
        if turn.span is None:  # not sampled: the call's span would be a non-recording child of the turn's
            decision = turn.decision
            traceparent = traceparent_of(decision.trace_id, self._ids.generate_span_id(), decision.flags)
            turn.calls[request_id] = _Call(request_id, None, time.perf_counter(), model, traceparent)
            return
        parent = turn.compaction_parent if compaction and turn.compaction_parent is not None else turn.parent
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": self._provider,
            "gen_ai.request.model": model,
            "turnkeep.request_id": request_id,
            "turnkeep.compaction": compaction,
        }
        for name, value in (
            ("gen_ai.request.max_tokens", request.max_tokens),
            ("gen_ai.request.temperature", request.temperature),
            ("gen_ai.request.top_p", request.top_p),
        ):
            if value is not None:
                attributes[name] = value
        if self._content:
            attributes["gen_ai.input.messages"] = _content(msgspec.json.encode(request.messages).decode())
        span = self._tracer.start_span(
            f"chat {model}", context=parent, kind=SpanKind.CLIENT, attributes=attributes
        )
        turn.calls[request_id] = _Call(
            request_id, span, time.perf_counter(), model, format_traceparent(span.get_span_context())
        )

    def _emitted(self, turn: _Turn, event: object) -> None:
        match event:
            case ev.ToolCallStarted(call_id=call_id) if turn.span is None:
                turn.tools[call_id] = _Tool(None, time.perf_counter())
            case ev.ToolCallStarted(call_id=call_id, tool=tool, arguments=arguments):
                attributes: dict[str, Any] = {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": tool,
                    "gen_ai.tool.call.id": call_id,
                }
                if self._content:
                    attributes["gen_ai.tool.call.arguments"] = _content(arguments)
                span = self._tracer.start_span(
                    f"execute_tool {tool}", context=turn.parent, attributes=attributes
                )
                turn.tools[call_id] = _Tool(span, time.perf_counter())
            case ev.ToolCallFinished(call_id=call_id, tool=tool, is_error=is_error, status=status):
                running = turn.tools.pop(call_id, None)
                if running is None:
                    return
                tool_span = running.span
                if tool_span is not None:
                    if is_error:
                        tool_span.set_attributes({"turnkeep.tool.status": status, "error.type": status})
                        tool_span.set_status(Status(StatusCode.ERROR, status))
                    else:
                        tool_span.set_attribute("turnkeep.tool.status", status)
                    tool_span.end()
                self._metrics.tool_calls.add(1, tool, status)
                self._metrics.record_tool(time.perf_counter() - running.started, tool)
            case ev.CompactionStarted() if turn.span is None:
                pass  # not sampled: a compaction is counted when it finishes
            case ev.CompactionStarted(reason=reason, estimated_tokens=estimated, window=window):
                attributes = {"turnkeep.compaction.reason": reason, "turnkeep.estimated_tokens": estimated}
                attributes["turnkeep.window"] = window
                turn.compaction = self._tracer.start_span(
                    "compaction", context=turn.parent, attributes=attributes
                )
                turn.compaction_parent = trace.set_span_in_context(turn.compaction)
            case ev.CompactionFinished() as finished:
                compaction, turn.compaction, turn.compaction_parent = turn.compaction, None, None
                self._metrics.compactions.add(1, str(finished.ok).lower())
                if compaction is None:
                    return
                compaction.set_attributes(
                    {
                        "turnkeep.compaction.replaced": finished.replaced,
                        "turnkeep.tokens_before": finished.tokens_before,
                        "turnkeep.tokens_after": finished.tokens_after,
                    }
                )
                if not finished.ok:
                    compaction.set_status(Status(StatusCode.ERROR, _content(finished.message)))
                compaction.end()
            case ev.AuthRefreshed(attempt=attempt) if turn.span is not None:
                turn.span.add_event("auth_refreshed", {"attempt": attempt})
            case ev.DoomLoopWarning(reason=reason) if turn.span is not None:
                turn.span.add_event("doom_loop_warning", {"reason": _content(reason)})

    def _end(self, turn: _Turn, event: tm.TurnEnd) -> None:
        outcome, kind = _outcome(event)
        if turn.calls or turn.tools or turn.compaction is not None:
            self._abandon(turn, f"the turn ended ({outcome})")
        span = turn.span
        if span is None:  # not sampled: the metrics alone
            self._metrics.turns.add(1, outcome, kind)
            self._metrics.record_turn(time.perf_counter() - turn.started, outcome)
            return
        usage = event.usage
        total = usage.total
        attributes: dict[str, Any] = {
            "turnkeep.outcome": outcome,
            "gen_ai.usage.input_tokens": total.input_tokens,
            "gen_ai.usage.output_tokens": total.output_tokens,
            "gen_ai.usage.cache_read.input_tokens": total.cached_tokens,
            "turnkeep.usage.compaction.input_tokens": usage.compaction.input_tokens,
        }
        if usage.cost is not None:
            attributes["turnkeep.cost"] = usage.cost
        if isinstance(event, ev.TurnFailed):
            attributes["error.type"] = event.kind
            span.set_status(Status(StatusCode.ERROR, _content(event.message)))
        elif isinstance(event, ev.TurnCancelled):
            attributes["turnkeep.cancel_reason"] = event.reason
            if event.reason != "user_cancelled":
                attributes["error.type"] = event.reason
                span.set_status(Status(StatusCode.ERROR, f"the turn was cancelled ({event.reason})"))
        elif self._content:
            attributes["turnkeep.completion"] = _content(event.text)
        span.set_attributes(attributes)
        span.end()
        self._metrics.turns.add(1, outcome, kind)
        self._metrics.record_turn(time.perf_counter() - turn.started, outcome)

    def _abandon(self, turn: _Turn, why: str) -> None:
        """End the turn's children still open (their end will never be seen) with an error status."""
        for call in turn.calls.values():
            self._end_call(call, "abandoned", "abandoned", why)
        turn.calls.clear()
        for running in turn.tools.values():
            if running.span is not None:
                running.span.set_attribute("error.type", "abandoned")
                running.span.set_status(Status(StatusCode.ERROR, why))
                running.span.end()
        turn.tools.clear()
        if turn.compaction is not None:
            turn.compaction.set_status(Status(StatusCode.ERROR, why))
            turn.compaction.end()
            turn.compaction = turn.compaction_parent = None


def _outcome(event: tm.TurnEnd) -> tuple[str, str]:
    if isinstance(event, ev.TurnCompleted):
        return "completed", "completed"
    if isinstance(event, ev.TurnFailed):
        return "failed", event.kind
    return "cancelled", event.reason


def _content(text: str) -> str:
    """``text`` as it may go on a span: secrets redacted, cut to a bounded length."""
    return redact(text[:_CONTENT_LIMIT])


def _stored_parent(traceparent: str | None) -> Context:
    """The context whose span is the one ``traceparent`` names (a turn's span as stored when it began);
    an empty context, which starts a trace of its own, when there is no usable ``traceparent``."""
    stored = parse_traceparent(traceparent) if traceparent else None
    return trace.set_span_in_context(NonRecordingSpan(stored)) if stored is not None else Context()
