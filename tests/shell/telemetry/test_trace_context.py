"""The trace context travels in the messages that do a turn's work: the sampler's Sample carries the model
call's span (and sends it to the provider as the traceparent header), the tool bridge's RunTools and the
stored TurnStarted event carry the turn's span, and the spans telemetry opens for that work hang from it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import msgspec
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext, TraceFlags

from sampler import Sample
from sampler.actor import SamplerActor
from sampler.fake import FakeProvider
from shell import events as ev
from shell.store import SessionStore
from shell.telemetry._context import format_traceparent, parse_traceparent
from tests._loopback import QuietHandler, serving_http
from tests.shell._harness import Harness
from tests.shell.telemetry.conftest import Recorded
from tests.shell.telemetry.test_traces import SCRIPT
from tool_bridge import RunTools
from tool_bridge.supervisor import ToolSupervisor


def traceparent_of(span: ReadableSpan) -> str:
    context = span.context
    assert context is not None
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"


@contextmanager
def told(actor: type[Any], message_type: type[Any]) -> Iterator[list[Any]]:
    """Every ``message_type`` message the actors of class ``actor`` handle, in order."""
    seen: list[Any] = []
    table = actor._handler_table
    original = table[message_type]

    def spy(self: Any, message: Any) -> Any:
        seen.append(message)
        return original(self, message)

    table[message_type] = spy
    try:
        yield seen
    finally:
        table[message_type] = original


# -- traceparent -------------------------------------------------------------------------------------------


def test_a_span_context_and_its_traceparent_translate_both_ways() -> None:
    context = SpanContext(0x4BF92F3577B34DA6A3CE929D0E0E4736, 0x00F067AA0BA902B7, False, TraceFlags(1))
    text = format_traceparent(context)
    assert text == "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    parsed = parse_traceparent(text)
    assert parsed is not None and parsed.is_remote
    assert (parsed.trace_id, parsed.span_id, parsed.trace_flags) == (
        context.trace_id,
        context.span_id,
        context.trace_flags,
    )
    assert format_traceparent(SpanContext(0, 0, False)) is None


@pytest.mark.parametrize(
    "text",
    [
        "",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",  # no flags
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",  # zero trace id
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",  # zero span id
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",  # upper case
        "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",  # short trace id
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  # the forbidden version
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-00",  # version 00 has four fields
        "0x-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    ],
)
def test_what_is_not_a_traceparent_names_no_span(text: str) -> None:
    assert parse_traceparent(text) is None


def test_a_later_version_may_add_fields_after_the_fourth() -> None:
    parsed = parse_traceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-future")
    assert parsed is not None and parsed.span_id == 0x00F067AA0BA902B7


# -- the messages ------------------------------------------------------------------------------------------


def test_the_messages_of_a_turn_carry_the_spans_its_work_hangs_from(
    tmp_path: Path, recorded: Recorded
) -> None:
    with (
        told(SamplerActor, Sample) as samples,
        told(ToolSupervisor, RunTools) as batches,
        FakeProvider(SCRIPT) as provider,
    ):
        harness = Harness(tmp_path, provider, context_window=1_500, telemetry=recorded.telemetry)
        session = harness.open()
        harness.turn(session, "first " + "x" * 2_500)
        events = harness.turn(session, "use the tool " + "y" * 2_500)
        stored = harness.stored_events()
        harness.close()
    assert isinstance(events[-1], ev.TurnCompleted), events[-1]
    turn = next(span for span in recorded.named("invoke_agent") if span.attributes["turnkeep.turn"] == 2)
    assert turn.context is not None
    in_turn = [span for span in recorded.spans() if span.context.trace_id == turn.context.trace_id]

    # Sample: the model call's own span, a child of the turn (or of its compaction for a summary).
    chats = {traceparent_of(span): span for span in in_turn if span.name.startswith("chat ")}
    carried = [sample.traceparent for sample in samples if sample.request_id.startswith("s1:2:")]
    assert len(carried) == len(chats) == 3
    assert set(carried) == set(chats)
    compaction = next(span for span in in_turn if span.name == "compaction")
    for chat in chats.values():
        parent = compaction if chat.attributes["turnkeep.compaction"] else turn
        assert chat.parent is not None and chat.parent.span_id == parent.context.span_id

    # RunTools: the turn's span, the parent of every tool call's span.
    (batch,) = batches  # the first turn ran no tool
    assert batch.traceparent == traceparent_of(turn)
    carried_context = parse_traceparent(batch.traceparent)
    assert carried_context is not None
    tools = [span for span in in_turn if span.name.startswith("execute_tool ")]
    assert tools and all(
        span.parent is not None
        and (span.parent.trace_id, span.parent.span_id) == (carried_context.trace_id, carried_context.span_id)
        for span in tools
    )
    assert compaction.parent is not None and compaction.parent.span_id == turn.context.span_id

    # TurnStarted: the turn's span, stored with the turn.
    started = [body for kind, body in stored if kind == "TurnStarted" and body["turn"] == 2]
    assert [body["traceparent"] for body in started] == [traceparent_of(turn)]


def test_without_telemetry_the_messages_carry_no_context_and_the_event_no_field(tmp_path: Path) -> None:
    with (
        told(SamplerActor, Sample) as samples,
        FakeProvider(SCRIPT) as provider,
    ):
        harness = Harness(tmp_path, provider)
        session = harness.open()
        events = harness.turn(session, "use the tool now")
        stored = harness.stored_events()
        harness.close()
    assert isinstance(events[-1], ev.TurnCompleted)
    assert samples and all(sample.traceparent is None for sample in samples)
    started = next(event for event in events if isinstance(event, ev.TurnStarted))
    assert started.traceparent is None
    assert "traceparent" not in ev.event_to_json_dict(started)
    assert all("traceparent" not in body for kind, body in stored if kind == "TurnStarted")


# -- the provider ------------------------------------------------------------------------------------------

_ANSWER = [
    {"id": "c1", "object": "chat.completion.chunk", "model": "m", "choices": [
        {"index": 0, "delta": {"role": "assistant", "content": "hello"}, "finish_reason": None}
    ]},
    {"id": "c1", "object": "chat.completion.chunk", "model": "m", "choices": [
        {"index": 0, "delta": {}, "finish_reason": "stop"}
    ], "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}},
]  # fmt: skip


class _Provider(QuietHandler):
    """A chat completions endpoint that answers every call with "hello" and keeps the request headers."""

    protocol_version = "HTTP/1.1"
    seen: list[dict[str, str]] = []

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", "0")))
        type(self).seen.append({key.lower(): value for key, value in self.headers.items()})
        body = b"".join(f"data: {json.dumps(chunk)}\n\n".encode() for chunk in _ANSWER) + b"data: [DONE]\n\n"
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@contextmanager
def recording_provider() -> Iterator[tuple[str, list[dict[str, str]]]]:
    seen: list[dict[str, str]] = []
    handler = type("Provider", (_Provider,), {"seen": seen})
    with serving_http(handler) as base:
        yield base + "/v1", seen


def test_the_provider_is_sent_the_model_calls_span_as_traceparent(tmp_path: Path, recorded: Recorded) -> None:
    with recording_provider() as (base_url, seen):
        harness = Harness(tmp_path, SimpleNamespace(base_url=base_url), telemetry=recorded.telemetry)
        session = harness.open()
        events = harness.turn(session, "hi")
        harness.close()
    assert isinstance(events[-1], ev.TurnCompleted), events[-1]
    (chat,) = recorded.named("chat ")
    (turn,) = recorded.named("invoke_agent")
    assert [headers.get("traceparent") for headers in seen] == [traceparent_of(chat)]
    assert chat.parent is not None and chat.parent.span_id == turn.context.span_id


def test_without_telemetry_no_traceparent_is_sent(tmp_path: Path) -> None:
    with recording_provider() as (base_url, seen):
        harness = Harness(tmp_path, SimpleNamespace(base_url=base_url))
        session = harness.open()
        harness.turn(session, "hi")
        harness.close()
    assert len(seen) == 1 and "traceparent" not in seen[0]


# -- the stored event --------------------------------------------------------------------------------------


def test_the_store_keeps_a_turns_trace_context_and_reads_events_stored_before_it_existed(
    tmp_path: Path,
) -> None:
    traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    decoder = msgspec.json.Decoder(ev.SessionEvent)
    with SessionStore.open(tmp_path / "store.db") as store:
        store.create_session("s", workspace=str(tmp_path), model="m")
        store.append_event("s", 1, ev.TurnStarted("s", 1, "with", traceparent))
        store.append_event("s", 2, ev.TurnStarted("s", 2, "without"))
        old = b'{"type":"TurnStarted","session":"s","turn":3,"prompt":"from before"}'
        events = store.load_events("s")
    decoded = [decoder.decode(stored.body) for stored in events]
    assert decoded == [ev.TurnStarted("s", 1, "with", traceparent), ev.TurnStarted("s", 2, "without")]
    assert b"traceparent" not in events[1].body
    assert decoder.decode(old) == ev.TurnStarted("s", 3, "from before", None)
