"""A turn whose process is killed mid-turn keeps its trace: the host that takes the session over records the
interrupted turn's end in the trace stored with the turn, which the killed process's spans carry too."""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.trace import StatusCode

from sampler.fake import Conversation, FakeProvider, Fault, FaultPlan, FinalAnswer, Script, Step, ToolStep
from shell import Host, TurnCompleted, load_settings
from shell.store import SessionStore
from shell.telemetry._context import parse_traceparent
from tests._loopback import QuietHandler, serving_http
from tests._waiting import wait_until
from tests.shell.cli.test_cli import KEY_VAR, REPO, TIMEOUT, command, environment
from tests.shell.telemetry.conftest import Recorded


def write_then_answer(conversation: Conversation) -> Step:
    """A tool call for the first prompt, then answers (the later prompts get an answer at once)."""
    if conversation.user_texts == ("write the note",) and conversation.tool_rounds == 0:
        return ToolStep([("write_file", {"path": "note.txt", "content": "hi"})])
    return FinalAnswer("Written.")


WRITE_THEN_ANSWER = Script(write_then_answer, name="write_then_answer")


class _Collector:
    """What an OTLP/HTTP endpoint was sent: (trace id, span id, name) of every span."""

    def __init__(self) -> None:
        self.spans: list[tuple[int, int, str]] = []
        self.changed = threading.Condition()

    def add(self, body: bytes) -> None:
        request = ExportTraceServiceRequest.FromString(body)
        spans = [
            (int.from_bytes(span.trace_id, "big"), int.from_bytes(span.span_id, "big"), span.name)
            for resource in request.resource_spans
            for scope in resource.scope_spans
            for span in scope.spans
        ]
        with self.changed:
            self.spans += spans
            self.changed.notify_all()

    def wait_for(self, name: str) -> tuple[int, int, str]:
        with self.changed:
            found = self.changed.wait_for(lambda: [s for s in self.spans if s[2] == name], timeout=TIMEOUT)
        assert found, f"no {name!r} span was exported: {self.spans}"
        return found[0]


@contextmanager
def otlp_collector() -> Iterator[tuple[str, _Collector]]:
    collector = _Collector()

    class Handler(QuietHandler):
        def do_POST(self) -> None:
            collector.add(self.rfile.read(int(self.headers.get("content-length", "0"))))
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

    with serving_http(Handler) as endpoint:
        yield endpoint, collector


def run_until_the_tool_ran_then_kill(
    provider: FakeProvider, store: Path, workspace: Path, endpoint: str, collector: _Collector
) -> tuple[dict[str, Any], tuple[int, int, str]]:
    """Run ``turnkeep run`` with telemetry on; kill it once its tool call has finished, its span was
    exported and its next model call (the one that hangs) has reached the provider. Return its
    TurnStarted event and the tool call's span."""
    env = environment(
        TURNKEEP_TELEMETRY__ENABLED="true",
        TURNKEEP_TELEMETRY__OTLP_ENDPOINT=endpoint,
        OTEL_BSP_SCHEDULE_DELAY="20",  # export each finished span at once, before the kill
    )
    args = ["--base-url", provider.base_url, "--api-key-env", KEY_VAR, "--store", str(store)]
    args += ["--workspace", str(workspace), "--json", "--allow-all", "write the note"]
    process = subprocess.Popen(command("run", *args), cwd=REPO, env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        events: list[dict[str, Any]] = []
        for line in process.stdout:
            events.append(json.loads(line))
            if events[-1]["type"] == "tool_call_finished":
                break
        assert events and events[-1]["type"] == "tool_call_finished", events
        tool = collector.wait_for("execute_tool write_file")
        assert wait_until(lambda: provider.stats.requests >= 2, TIMEOUT), provider.stats
        return next(event for event in events if event["type"] == "turn_started"), tool
    finally:
        process.kill()
        process.wait(TIMEOUT)


@pytest.mark.parametrize("resuming", [True, False], ids=["resumed", "ended-interrupted"])
def test_a_host_taking_over_a_turn_its_process_did_not_end_continues_the_turns_trace(
    tmp_path: Path, recorded: Recorded, resuming: bool
) -> None:
    store = tmp_path / "sessions.db"
    hang = FaultPlan.scripted([None, Fault.stall(after_chunks=1, hang=True)])
    with otlp_collector() as (endpoint, collector), FakeProvider(WRITE_THEN_ANSWER, faults=hang) as provider:
        started, tool = run_until_the_tool_ran_then_kill(
            provider, store, tmp_path / "ws", endpoint, collector
        )
        session_id = started["session"]
        with SessionStore.open(store) as reader:
            assert reader.get_session(session_id).status == "in_turn"

        environ = {
            "TURNKEEP_STORE__PATH": str(store),
            "TURNKEEP_PROVIDER__BASE_URL": provider.base_url,
            "TURNKEEP_HOST__RESUME_INTERRUPTED_TURNS": str(resuming).lower(),
        }
        with Host(load_settings(environ=environ), telemetry=recorded.telemetry) as host:
            session = host.resume(session_id)
            after = session.run("and now?")
            with SessionStore.open(store) as reader:
                ends = [
                    e.type
                    for e in reader.load_events(session_id)
                    if e.turn == 1 and e.type.startswith("Turn")
                ]
    assert isinstance(after, TurnCompleted), after

    stored = parse_traceparent(started["traceparent"])
    assert stored is not None
    assert tool[0] == stored.trace_id  # what the killed process exported is in the stored trace
    (resumed,) = [span for span in recorded.named("invoke_agent") if span.attributes.get("turnkeep.resumed")]
    assert resumed.context is not None and resumed.context.trace_id == stored.trace_id
    assert resumed.parent is not None and resumed.parent.span_id == stored.span_id
    assert resumed.attributes["turnkeep.turn"] == started["turn"] == 1
    if resuming:
        # The same turn goes on from its stored step: its model call is a child of the resumed span.
        assert ends == ["TurnStarted", "TurnResumed", "TurnCompleted"]
        assert resumed.attributes["turnkeep.resumed_after_step"] == 1
        assert resumed.attributes["turnkeep.outcome"] == "completed"
        assert resumed.status.status_code is not StatusCode.ERROR
        resumed_id = resumed.context.span_id
        calls = [span for span in recorded.spans() if span.parent and span.parent.span_id == resumed_id]
        assert calls, "the resumed turn's model call is not in its span"
        assert recorded.total("turnkeep.turns", outcome="completed") == 2  # turn 1, resumed, and turn 2
    else:
        assert ends == ["TurnStarted", "TurnCancelled"]
        assert resumed.attributes["turnkeep.cancel_reason"] == "interrupted"
        assert resumed.status.status_code is StatusCode.ERROR
        assert recorded.total("turnkeep.turns", outcome="cancelled", kind="interrupted") == 1

    later = [span for span in recorded.named("invoke_agent") if span.attributes["turnkeep.turn"] == 2]
    assert len(later) == 1 and later[0].context.trace_id != stored.trace_id  # a new turn, a new trace
