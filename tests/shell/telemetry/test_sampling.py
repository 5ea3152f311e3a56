"""A turn's sampling decision is the one the OpenTelemetry SDK makes for its span: the same trace id, the
same sampled flag and, for a turn not sampled, the traceparent the SDK's non-recording span would carry."""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, TraceFlags

from shell.telemetry._context import traceparent_of
from shell.telemetry._sampling import TurnIds, decide_turn, span_flags

NAME = "invoke_agent turnkeep"


def sdk_span(ratio: float, trace_id: int, parent: Context | None = None) -> SpanContext:
    """The span context the SDK gives a turn's span whose root trace id is ``trace_id``."""
    ids = TurnIds()
    provider = TracerProvider(sampler=ParentBased(TraceIdRatioBased(ratio)), id_generator=ids)
    with ids.starting(trace_id):
        span = provider.get_tracer("t").start_span(NAME, context=parent, kind=SpanKind.INTERNAL)
    context = span.get_span_context()
    span.end()
    return context


def test_a_root_turn_is_sampled_exactly_when_the_sdk_samples_its_span() -> None:
    sampler = ParentBased(TraceIdRatioBased(0.1))
    decisions = []
    for seed in range(400):
        ids = TurnIds()
        trace_id = (seed * 0x9E3779B97F4A7C15_9E3779B97F4A7C15) % (1 << 128) or 1
        with ids.starting(trace_id):
            decision = decide_turn(sampler, ids, None, NAME, SpanKind.INTERNAL, None)
        sdk = sdk_span(0.1, trace_id)
        assert decision.trace_id == sdk.trace_id == trace_id
        assert decision.sampled == sdk.trace_flags.sampled
        assert decision.flags == sdk.trace_flags
        decisions.append(decision.sampled)
    assert 0 < sum(decisions) < len(decisions)  # both answers were met


def test_a_remote_parents_flag_decides_whatever_the_ratio() -> None:
    for ratio, parent_sampled in ((0.0, True), (1.0, False)):
        flags = TraceFlags(TraceFlags.SAMPLED if parent_sampled else TraceFlags.DEFAULT)
        remote = SpanContext(0xABC, 0xDEF, is_remote=True, trace_flags=flags)
        context = trace.set_span_in_context(NonRecordingSpan(remote))
        sampler = ParentBased(TraceIdRatioBased(ratio))
        decision = decide_turn(sampler, TurnIds(), context, NAME, SpanKind.INTERNAL, None)
        sdk = sdk_span(ratio, 0x123, context)
        assert decision.trace_id == sdk.trace_id == 0xABC
        assert decision.sampled is sdk.trace_flags.sampled is parent_sampled


def test_an_unsampled_turn_carries_the_traceparent_of_a_non_recording_span() -> None:
    ids = TurnIds()
    with ids.starting(0x1234):
        decision = decide_turn(ParentBased(TraceIdRatioBased(0.0)), ids, None, NAME, SpanKind.INTERNAL, None)
    assert not decision.sampled
    assert decision.traceparent == traceparent_of(0x1234, decision.span_id, decision.flags)
    assert decision.traceparent.startswith(f"00-{0x1234:032x}-{decision.span_id:016x}-")
    assert decision.flags == span_flags(False, None, ids.is_trace_id_random())
    assert not decision.flags.sampled


def test_a_trace_id_given_but_not_drawn_is_forgotten() -> None:
    ids = TurnIds()
    with ids.starting(0x42):
        pass
    assert ids.generate_trace_id() != 0x42


def test_the_random_flag_follows_the_parent_or_the_id_generator() -> None:
    parent = SpanContext(1, 2, is_remote=True, trace_flags=TraceFlags(TraceFlags.RANDOM_TRACE_ID))
    assert span_flags(True, parent, random_ids=False).random_trace_id
    assert not span_flags(False, None, random_ids=False).random_trace_id
    assert span_flags(False, None, random_ids=True) == TraceFlags(TraceFlags.RANDOM_TRACE_ID)
    assert span_flags(True, None, random_ids=False) == TraceFlags(TraceFlags.SAMPLED)
