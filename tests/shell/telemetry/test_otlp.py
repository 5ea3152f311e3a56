"""Spans are sent over OTLP/HTTP as the same bytes OpenTelemetry's encoder makes, written without building a
protobuf object per span and attribute."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans as sdk_encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.trace.span import TraceState

from shell import telemetry as telemetry_package
from shell._telemetry_settings import TelemetrySettings
from shell.telemetry import _otlp
from shell.telemetry._otlp import encode_spans
from tests.shell.telemetry.test_resume import otlp_collector

REMOTE = SpanContext(
    0x0AF7651916CD43DD8448EB211C80319C,
    0xB7AD6B7169203331,
    is_remote=True,
    trace_flags=TraceFlags(1),
    trace_state=TraceState([("vendor", "value"), ("other", "x")]),
)


def every_kind_of_span() -> Sequence[ReadableSpan]:
    """Spans of two scopes with every value type, events, links, statuses, kinds and dropped counts."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(
        resource=Resource.create({"service.name": "turnkeep", "deployment": "test"}),
        span_limits=SpanLimits(max_span_attributes=12, max_events=2, max_links=1),
    )
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    plain = provider.get_tracer("turnkeep")
    versioned = provider.get_tracer("other", "1.2.3", schema_url="https://example.com/s", attributes={"x": 1})
    values = {
        "text": "hello",
        "long": "é" * 300,  # a length that takes two varint bytes, and not ASCII
        "empty": "",
        "yes": True,
        "no": False,
        "zero": 0,
        "negative": -42,
        "big": 2**62,
        "ratio": 0.25,
        "texts": ("a", "b"),
        "numbers": (1, -2, 3),
        "flags": (True, False),
    }
    remote = trace.set_span_in_context(NonRecordingSpan(REMOTE))
    root = plain.start_span("invoke_agent", attributes=values)
    root.add_event("plain")
    root.add_event("retry", {"attempt": 2, "error.type": "rate_limit", "delay": 0.5})
    root.add_event("third", {"dropped": True})  # over max_events
    root.set_attribute("over", "the limit")  # over max_span_attributes
    child = plain.start_span("chat m", context=trace.set_span_in_context(root), kind=SpanKind.CLIENT)
    child.set_status(Status(StatusCode.ERROR, "boom"))
    child.end()
    root.set_status(Status(StatusCode.OK))
    root.end()
    linked = versioned.start_span(
        "linked",
        context=remote,
        kind=SpanKind.SERVER,
        links=[Link(REMOTE, {"why": "resumed"}), Link(REMOTE)],  # the second is over max_links
    )
    linked.end()
    for kind in (SpanKind.PRODUCER, SpanKind.CONSUMER, SpanKind.INTERNAL):
        plain.start_span(f"kind {kind.name}", kind=kind).end()
    spans = exporter.get_finished_spans()
    assert spans[1].dropped_attributes and spans[1].dropped_events and spans[2].dropped_links
    return spans


def test_the_bytes_are_those_of_opentelemetrys_encoder() -> None:
    spans = every_kind_of_span()
    assert encode_spans(spans) == sdk_encode_spans(spans).SerializeToString()
    assert encode_spans(spans[:1]) == sdk_encode_spans(spans[:1]).SerializeToString()
    assert encode_spans([]) == sdk_encode_spans([]).SerializeToString() == b""


def test_a_value_an_attribute_cannot_hold_is_left_out_as_opentelemetrys_encoder_does() -> None:
    spans = every_kind_of_span()
    span = spans[0]
    odd = ReadableSpan(
        name=span.name,
        context=span.context,
        attributes={"fine": 1, "too big": 2**70, "also fine": "x"},
        resource=span.resource,
        instrumentation_scope=span.instrumentation_scope,
        start_time=span.start_time,
        end_time=span.end_time,
    )
    decoded = ExportTraceServiceRequest.FromString(encode_spans([odd]))
    (sent,) = decoded.resource_spans[0].scope_spans[0].spans
    assert [attribute.key for attribute in sent.attributes] == ["fine", "also fine"]


def test_the_host_exports_its_spans_through_this_encoder(monkeypatch: pytest.MonkeyPatch) -> None:
    batches: list[int] = []

    def counting(spans: Sequence[ReadableSpan]) -> bytes:
        batches.append(len(spans))
        return encode_spans(spans)

    monkeypatch.setattr(_otlp, "encode_spans", counting)
    with otlp_collector() as (endpoint, collector):
        settings = TelemetrySettings(enabled=True, otlp_endpoint=endpoint)
        telemetry = telemetry_package.start_telemetry(settings, provider="openai", environ={})
        tracer = telemetry.tracer_provider.get_tracer("turnkeep")
        with tracer.start_as_current_span("invoke_agent"):
            tracer.start_span("chat m").end()
        telemetry.shutdown()
        sent = sorted(name for _, _, name in collector.spans)
    assert sent == ["chat m", "invoke_agent"]
    assert sum(batches) == 2
