"""A turn's sampling, decided once when it begins, before any span is made.

The configured sampler (``ParentBased(TraceIdRatioBased(sampling))``) is asked the question the SDK's
``Tracer.start_span`` would ask it for the turn's ``invoke_agent`` span: with the turn's parent context
(a resumed turn's stored span, remote; none for a new turn) and a trace id drawn as the SDK draws it (the
parent's when there is one). A turn the sampler declines gets no span object at all: the recorder keeps
the ids and flags the SDK would have given its non-recording span, so the ``traceparent`` its work
carries (not sampled) is the one the SDK would have made. A turn the sampler takes has its span started
by the SDK with that same trace id (:meth:`TurnIds.starting`), which asks the sampler again and, the
sampler being a function of the parent and the trace id, gets the same answer. The children of a turn
(its model calls, tool calls and compaction) follow its decision, as ``ParentBased`` makes them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.sdk.trace.sampling import Decision, Sampler
from opentelemetry.trace import SpanContext, SpanKind, TraceFlags

from ._context import traceparent_of

__all__ = ["TurnDecision", "TurnIds", "decide_turn", "parent_span_context", "span_flags"]


class TurnIds(RandomIdGenerator):
    """The SDK's random ids, but for the next trace id drawn on a thread inside :meth:`starting`, which
    is the one given there. Thread-safe: what is given holds for the calling thread only."""

    def __init__(self) -> None:
        self._next = threading.local()

    def generate_trace_id(self) -> int:
        """The trace id given to :meth:`starting` on this thread, once; else a random one (never 0)."""
        given: int | None = getattr(self._next, "trace_id", None)
        if given is not None:
            self._next.trace_id = None
            return given
        return super().generate_trace_id()

    @contextmanager
    def starting(self, trace_id: int) -> Iterator[None]:
        """Within this block the next trace id drawn on this thread is ``trace_id``; on leaving it, a
        ``trace_id`` not drawn is forgotten (a span with a parent takes the parent's and draws none)."""
        self._next.trace_id = trace_id
        try:
            yield
        finally:
            self._next.trace_id = None


@dataclass(frozen=True, slots=True)
class TurnDecision:
    """What sampling decided for a turn: its trace id and flags, and, for a turn not ``sampled``, the
    span id of the non-recording span the SDK would have made (the span the SDK makes for a sampled turn
    draws its own)."""

    trace_id: int
    span_id: int
    flags: TraceFlags
    sampled: bool
    """Whether the turn's spans are made (the sampler's decision is to record)."""

    @property
    def traceparent(self) -> str:
        """The ``traceparent`` of the turn's span."""
        return traceparent_of(self.trace_id, self.span_id, self.flags)


def parent_span_context(context: Context | None) -> SpanContext | None:
    """The span context of the span current in ``context`` when it names one (valid), else None: the
    parent the SDK gives a span started in ``context``; None makes a root."""
    if context is None:
        return None
    parent = trace.get_current_span(context).get_span_context()
    return parent if parent.is_valid else None


def span_flags(sampled: bool, parent: SpanContext | None, random_ids: bool) -> TraceFlags:
    """The trace flags the SDK gives a new span: sampled or not as decided, and the random-trace-id flag
    as its parent has it, or, for a root, as the id generator says (``random_ids``)."""
    flags = TraceFlags.SAMPLED if sampled else TraceFlags.DEFAULT
    random = parent.trace_flags.random_trace_id if parent is not None else random_ids
    return TraceFlags(flags | TraceFlags.RANDOM_TRACE_ID) if random else TraceFlags(flags)


def decide_turn(
    sampler: Sampler,
    ids: TurnIds,
    context: Context | None,
    name: str,
    kind: SpanKind,
    attributes: Mapping[str, Any] | None,
) -> TurnDecision:
    """Ask ``sampler`` whether a span ``name`` started in ``context`` is recorded, as the SDK's
    ``Tracer.start_span`` asks it: the parent's trace id when ``context`` names a span, else one drawn
    from ``ids``; a new span id from ``ids``; the flags of :func:`span_flags`. A remote parent's sampled
    flag decides for a ``ParentBased`` sampler, whatever its ratio."""
    parent = parent_span_context(context)
    trace_id = parent.trace_id if parent is not None else ids.generate_trace_id()
    result = sampler.should_sample(context, trace_id, name, kind, attributes)
    sampled = result.decision is Decision.RECORD_AND_SAMPLE
    flags = span_flags(sampled, parent, ids.is_trace_id_random())
    recording = result.decision is not Decision.DROP
    return TurnDecision(trace_id, ids.generate_span_id(), flags, recording)
